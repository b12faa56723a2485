"""How the data are held: labels, validation, folds and resampling, Dask graphs, the seam.

The layer between the user's inputs and the model. Labelled inputs
(xarray) are unwrapped here and the core sees plain arrays
(:mod:`mics.data.labels`); inputs are checked with messages that name the
argument (:mod:`mics.data.validation`); folds, trial structure and
resampling live in :mod:`mics.data.folds`; every Dask graph is built in
:mod:`mics.data.chunked`. :mod:`mics.data.problem` is the one place that
decides how a data set is held (in memory, Dask, moments) and answers the
model's questions about it; :mod:`mics.data.quality` checks every data set
made there for artifact frames, extreme samples and modulator glitches.
"""

from mics.data.chunked import moments_from_dask, moments_from_sessions, worker_config
from mics.data.folds import BlockedKFold, TrialBlockedKFold, cv_splits
from mics.data.problem import Problem, make_problem
from mics.data.quality import (
    DataQualityWarning,
    QualityReport,
    QualityThresholds,
    quality_checks,
    quality_scope,
)

__all__ = [
    "BlockedKFold",
    "DataQualityWarning",
    "QualityReport",
    "QualityThresholds",
    "Problem",
    "TrialBlockedKFold",
    "cv_splits",
    "make_problem",
    "moments_from_dask",
    "moments_from_sessions",
    "quality_checks",
    "quality_scope",
    "worker_config",
]
