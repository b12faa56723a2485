"""Analyses built on the estimators: the modulation test, bootstrap, members, lags, sessions."""

from mics.workflows.inference import (
    ModulationTest,
    bootstrap_channels,
    format_p_value,
    test_modulation,
)
from mics.workflows.lags import lag_scan
from mics.workflows.members import MemberNeurons, member_neurons
from mics.workflows.power import PowerAnalysis, power_analysis
from mics.workflows.reconfiguration import Reconfiguration, asymmetry, test_reconfiguration
from mics.workflows.sessions import fit_each_session
from mics.workflows.stability import choose_sparsity, member_table, stability_selection

__all__ = [
    "MemberNeurons",
    "ModulationTest",
    "PowerAnalysis",
    "Reconfiguration",
    "asymmetry",
    "bootstrap_channels",
    "choose_sparsity",
    "fit_each_session",
    "format_p_value",
    "lag_scan",
    "member_neurons",
    "member_table",
    "power_analysis",
    "stability_selection",
    "test_modulation",
    "test_reconfiguration",
]
