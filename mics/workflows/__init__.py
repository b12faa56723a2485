"""Analyses built on the estimators: the modulation test, the bootstrap, lag scans, sessions."""

from mics.workflows.inference import (
    ModulationTest,
    bootstrap_channels,
    format_p_value,
    test_modulation,
)
from mics.workflows.lags import lag_scan
from mics.workflows.sessions import fit_each_session

__all__ = [
    "ModulationTest",
    "bootstrap_channels",
    "fit_each_session",
    "format_p_value",
    "lag_scan",
    "test_modulation",
]
