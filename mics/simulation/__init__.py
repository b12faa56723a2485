"""Ground truth: simulated recordings with known channels, and how well a fit recovers them."""

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
    "cp_factors",
    "detection_rates",
    "factor_match_score",
    "match_channels",
    "modulation_tensor",
    "relative_tensor_error",
    "simulate",
    "simulate_null_family",
    "simulate_trials",
    "subspace_angles_deg",
]
