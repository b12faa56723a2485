"""Ground truth: simulated recordings with known channels, and how well a fit recovers them.

:mod:`mics.simulation.artifacts` plants artifacts and glitches, and draws valid heavy
tails (bursty running, sparse calcium transients), for the data-quality checks.
"""

from mics.simulation.artifacts import calcium_events, inject_artifacts, running_speed
from mics.simulation.ground_truth import GEOMETRIES, MODULATOR_KINDS, GroundTruth, simulate
from mics.simulation.null_families import FAMILIES, GATE_KINDS, simulate_null_family
from mics.simulation.recovery import (
    ChannelMatch,
    DetectionRates,
    cp_factors,
    detection_rates,
    factor_match_score,
    match_channels,
    modulation_tensor,
    relative_tensor_error,
    subspace_angles_deg,
)
from mics.simulation.trials import simulate_trials

__all__ = [
    "FAMILIES",
    "GATE_KINDS",
    "GEOMETRIES",
    "MODULATOR_KINDS",
    "ChannelMatch",
    "DetectionRates",
    "GroundTruth",
    "calcium_events",
    "cp_factors",
    "detection_rates",
    "factor_match_score",
    "inject_artifacts",
    "match_channels",
    "modulation_tensor",
    "relative_tensor_error",
    "running_speed",
    "simulate",
    "simulate_null_family",
    "simulate_trials",
    "subspace_angles_deg",
]
