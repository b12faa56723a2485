"""From raw calcium traces and behaviour to model-ready time series.

:mod:`mics.preprocessing.calcium`: neuropil subtraction, dF/F, z-scoring,
binning and alignment of behaviour to imaging frames;
:mod:`mics.preprocessing.trials`: condition means and lag embedding of
trial-structured recordings; :mod:`mics.preprocessing.artifacts`: artifact
frames, extreme samples and modulator glitches found, then interpolated or
dropped in X, Y and Z together.
"""

from mics.preprocessing.artifacts import (
    artifact_mask,
    drop_artifacts,
    find_artifacts,
    interpolate_artifacts,
)
from mics.preprocessing.calcium import (
    align_to_frames,
    bin_time,
    delta_f_over_f,
    subtract_neuropil,
    zscore,
)
from mics.preprocessing.trials import lag_embed, subtract_condition_means

__all__ = [
    "align_to_frames",
    "artifact_mask",
    "drop_artifacts",
    "find_artifacts",
    "interpolate_artifacts",
    "bin_time",
    "delta_f_over_f",
    "lag_embed",
    "subtract_condition_means",
    "subtract_neuropil",
    "zscore",
]
