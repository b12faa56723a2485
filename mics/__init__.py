"""mics: multiplicative interaction channels between neural populations.

Reduced-rank regression finds the *communication subspace* through which a
source population predicts a target population. ``mics`` adds a modulator
(running, arousal, another population) and finds the channels through which
that modulator gates the interaction.
"""

from mics.estimators import ReducedRankRegression, ReducedRankRegressionCV
from mics.mic_estimator import MICs

__all__ = ["MICs", "ReducedRankRegression", "ReducedRankRegressionCV"]
__version__ = "0.1.0"
