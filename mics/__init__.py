"""mics: multiplicative interaction channels between neural populations.

Reduced-rank regression finds the *communication subspace* through which a
source population predicts a target population. ``mics`` adds a modulator
(running, arousal, another population) and finds the channels through which
that modulator gates the interaction.

The package is layered; each layer imports only those below it
(``docs/architecture.md``)::

    cli, report, plotting, datasets, io, preprocessing, simulation   periphery
    workflows     the modulation test, bootstrap, member neurons, lag scans, sessions
    estimators    thin scikit-learn classes (MICs, reduced-rank regression)
    model         fit, selection over folds, solver choice, decomposition
    data          the seam: labels, validation, folds, Dask graphs, Problem
    core          numerics on plain arrays (statistics, ALS, RRR, kernels)
"""

from mics import _compat, io, preprocessing
from mics._version import __version__  # noqa: F401  (mics.__version__)
from mics.data.quality import DataQualityWarning, quality_checks
from mics.estimators import MICs, ReducedRankRegression, ReducedRankRegressionCV, load
from mics.simulation import GroundTruth, simulate, simulate_null_family, simulate_trials
from mics.workflows import (
    asymmetry,
    bootstrap_channels,
    lag_scan,
    member_neurons,
    power_analysis,
    stability_selection,
    test_modulation,
    test_reconfiguration,
)

_compat.install()

__all__ = [
    "MICs",
    "ReducedRankRegression",
    "ReducedRankRegressionCV",
    "GroundTruth",
    "simulate",
    "simulate_trials",
    "simulate_null_family",
    "test_modulation",
    "test_reconfiguration",
    "bootstrap_channels",
    "stability_selection",
    "member_neurons",
    "power_analysis",
    "asymmetry",
    "lag_scan",
    "load",
    "io",
    "preprocessing",
    "quality_checks",
    "DataQualityWarning",
]

# Subpackages loaded on first use, so `import mics` stays light (matplotlib and
# dask are imported only by the modules that need them).
_LAZY = ("core", "data", "datasets", "model", "plotting", "workflows")


def __getattr__(name):
    if name in _LAZY or f"mics.{name}" in _compat.MOVED:
        import importlib

        return importlib.import_module(f"mics.{name}")
    raise AttributeError(f"module 'mics' has no attribute {name!r}")


def __dir__():
    return sorted(list(globals()) + list(_LAZY))
