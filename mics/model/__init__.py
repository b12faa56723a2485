"""The model: fitting a configuration on a problem, selection over folds, solver choice, and the
closed-form decomposition of a fitted model.

Functions here take a :class:`mics.data.Problem` (or plain moments) and a
configuration; they never look at how the data are held.
"""

from mics.model import accessor  # noqa: F401  (registers the ``.mics`` accessor of Datasets)
from mics.model.decomposition import (
    PARTS,
    communication_matrix,
    decompose,
    decompose_channels,
    delta_communication,
    modulation_split,
    modulator_percentiles,
    pattern_states,
    state_conditioned_subspaces,
)
from mics.model.fit import fit_from_moments
from mics.model.summaries import format_bootstrap, format_decomposition, summarize

__all__ = [
    "PARTS",
    "communication_matrix",
    "decompose",
    "decompose_channels",
    "delta_communication",
    "fit_from_moments",
    "format_bootstrap",
    "format_decomposition",
    "modulation_split",
    "modulator_percentiles",
    "pattern_states",
    "state_conditioned_subspaces",
    "summarize",
]
