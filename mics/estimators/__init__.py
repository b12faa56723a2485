"""Thin scikit-learn estimators over the model layer, and their netCDF persistence."""

from mics.estimators.mic import MICs, load
from mics.estimators.rrr import ReducedRankRegression, ReducedRankRegressionCV

__all__ = ["MICs", "ReducedRankRegression", "ReducedRankRegressionCV", "load"]
