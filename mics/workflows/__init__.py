"""Analyses built on the estimators: the modulation test, the bootstrap, lag scans, sessions."""

from mics.workflows.inference import ModulationTest, bootstrap_channels, test_modulation
from mics.workflows.lags import lag_scan
from mics.workflows.sessions import fit_each_session

__all__ = [
    "ModulationTest",
    "bootstrap_channels",
    "fit_each_session",
    "lag_scan",
    "test_modulation",
]
