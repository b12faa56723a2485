"""Matplotlib figures of a fitted :class:`mics.MICs` model and its inference results.

Every function takes a fitted model or a result (a decomposition, a
modulation test, bootstrap intervals) and an optional ``ax`` / ``fig`` /
``axes`` to draw into, and returns what it drew on. Modulators and neurons
are named by their labels when the model was fitted on labelled
(``xarray.DataArray``) inputs. Nothing here calls ``plt.show``.

The figures live in small modules by what they show:

- :mod:`mics.plotting.model`: the fitted channels, CV curves, decomposition,
  geometry and training loss;
- :mod:`mics.plotting.inference`: the modulation test's null distribution and
  bootstrap intervals on the decomposition;
- :mod:`mics.plotting.state`: communication at low vs high modulator and
  each channel's gain against each modulator;
- :mod:`mics.plotting.asymmetry`: source- against target-side
  reconfiguration (:func:`mics.asymmetry`);
- :mod:`mics.plotting.lags`: a lag scan's communication and modulation
  against the source's lead;
- :mod:`mics.plotting.power`: a power analysis's detection rates against
  the planted strength;
- :mod:`mics.plotting.members`: which neurons carry each channel (sparse
  fits, stability selection): loadings, the field of view, a bibiplot;
- :mod:`mics.plotting.sparsity`: the cross-validated sparsity path
  (``MICs(sparsity="cv")``);
- :mod:`mics.plotting.artifacts`: where the data-quality detectors flag
  samples (:func:`mics.preprocessing.find_artifacts`).
"""

from mics.plotting import model as _model
from mics.plotting.artifacts import plot_artifacts
from mics.plotting.asymmetry import plot_asymmetry
from mics.plotting.inference import plot_bootstrap_intervals, plot_null_distribution
from mics.plotting.lags import plot_lag_scan
from mics.plotting.members import plot_member_biplot, plot_members, plot_members_fov
from mics.plotting.model import *  # noqa: F403
from mics.plotting.power import plot_power
from mics.plotting.sparsity import plot_sparsity_path
from mics.plotting.state import plot_channel_gain, plot_state_communication, state_angles

__all__ = [
    *_model.__all__,
    "plot_artifacts",
    "plot_asymmetry",
    "plot_bootstrap_intervals",
    "plot_channel_gain",
    "plot_lag_scan",
    "plot_member_biplot",
    "plot_members",
    "plot_members_fov",
    "plot_null_distribution",
    "plot_power",
    "plot_sparsity_path",
    "plot_state_communication",
    "state_angles",
]
