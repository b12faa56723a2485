"""mics: multiplicative interaction channels between neural populations.

Reduced-rank regression finds the *communication subspace* through which a
source population predicts a target population. ``mics`` adds a modulator
(running, arousal, another population) and finds the channels through which
that modulator gates the interaction.
"""

from mics import io, preprocessing
from mics.estimators import ReducedRankRegression, ReducedRankRegressionCV
from mics.inference import bootstrap_channels, test_modulation
from mics.mic_estimator import MICs
from mics.persistence import load
from mics.simulation import GroundTruth, simulate
from mics.trial_simulation import simulate_trials

__all__ = [
    "MICs",
    "ReducedRankRegression",
    "ReducedRankRegressionCV",
    "GroundTruth",
    "simulate",
    "simulate_trials",
    "test_modulation",
    "bootstrap_channels",
    "load",
    "io",
    "preprocessing",
]
__version__ = "0.1.0"

# Submodules loaded on first use, so `import mics` stays light (matplotlib and
# dask are imported only by the modules that need them).
_LAZY = (
    "chunked",
    "datasets",
    "decomposition",
    "lags",
    "parallel",
    "plotting",
    "recovery",
    "selection",
    "trials",
)


def __getattr__(name):
    if name in _LAZY:
        import importlib

        return importlib.import_module(f"mics.{name}")
    raise AttributeError(f"module 'mics' has no attribute {name!r}")


def __dir__():
    return sorted(list(globals()) + list(_LAZY))
