"""scikit-learn estimators: thin classes over the functional core.

``__init__`` only stores hyperparameters; validation happens in ``fit``;
learned state ends in ``_``. Coefficients follow scikit-learn's
(n_targets, n_features) convention.
"""

from __future__ import annotations

import numpy as np
from sklearn.base import BaseEstimator

from mics.core.rrr import fit_reduced_rank
from mics.data.problem import make_problem
from mics.data.validation import check_alpha, check_folds, check_rank
from mics.estimators.base import CommunicationSubspaceMixin, validate_xy
from mics.model.selection import cross_validate_rank

__all__ = ["ReducedRankRegression", "ReducedRankRegressionCV"]


class ReducedRankRegression(CommunicationSubspaceMixin, BaseEstimator):
    """Reduced-rank regression: the communication subspace of Semedo et al. (2019).

    Least-squares (or ridge) coefficients of target on source, projected
    onto the top ``rank`` principal directions of the fitted values. With
    ``alpha > 0`` this is the reference code's *ridge-initialised* RRR: the
    ridge solution is projected in the same way.

    Parameters
    ----------
    rank : int, default=1
        Dimensionality of the communication subspace (0 predicts the mean).
    alpha : float, default=0.0
        Ridge penalty on the full-rank coefficients, in the units of the
        centred scatter ``X^T X`` (the reference's ``lambda``; see
        :func:`mics.core.ridge_lambda_grid`).

    Attributes
    ----------
    coef_ : ndarray of shape (n_target, n_source)
        ``Y_pred = X @ coef_.T + intercept_``. Zero-variance source neurons
        are dropped from the fit and get zero weight.
    intercept_ : ndarray of shape (n_target,)
    source_subspace_ : ndarray of shape (n_source, rank)
        Orthonormal basis of the source communication subspace.
    target_subspace_ : ndarray of shape (n_target, rank)
        Orthonormal basis of the target communication subspace.
    singular_values_ : ndarray of shape (rank,)
    """

    def __init__(self, rank=1, alpha=0.0):
        self.rank = rank
        self.alpha = alpha

    def fit(self, X, y):
        """Fit the communication subspace.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_source)
            Source population activity.
        y : array-like of shape (n_samples, n_target) or (n_samples,)
            Target population activity.

        Returns
        -------
        self
        """
        X, Y, y_1d = validate_xy(self, X, y)
        rank = check_rank(self.rank, X.shape[1], Y.shape[1])
        check_alpha(self.alpha)
        (B,), (b,) = fit_reduced_rank(X, Y, [rank], alpha=self.alpha)
        self._set_baseline(B, b, rank)
        return self._finish(y_1d)


class ReducedRankRegressionCV(CommunicationSubspaceMixin, BaseEstimator):
    """Reduced-rank regression with the rank chosen by blocked cross-validation.

    The rank is the smallest whose mean cross-validated NSE is within one
    standard error of the best (Semedo's ``ModelSelect``). Folds are
    contiguous blocks of time.

    Parameters
    ----------
    ranks : iterable of int, default=(0, 1, ..., 10)
        Candidate ranks; those above ``min(n_source, n_target)`` are dropped.
    cv : int or cross-validation splitter, default=10
        An int means ``KFold(n_splits=cv, shuffle=False)`` (contiguous blocks),
        or contiguous blocks of whole trials when ``fit`` gets ``groups``.
    alpha : float, default=0.0
        Ridge penalty (see :class:`ReducedRankRegression`).

    Attributes
    ----------
    rank_ : int
        Selected rank.
    cv_results_ : dict
        ``rank``, ``fold_loss`` (n_ranks, n_folds), ``mean_loss``,
        ``sem_loss``, ``mean_score`` (1 - mean NSE), ``best_index``.
    coef_, intercept_, source_subspace_, target_subspace_, singular_values_
        Of the refit on all data at ``rank_`` (see :class:`ReducedRankRegression`).
    """

    def __init__(self, ranks=tuple(range(11)), cv=10, alpha=0.0):
        self.ranks = ranks
        self.cv = cv
        self.alpha = alpha

    def fit(self, X, y, groups=None):
        """Select the rank by cross-validation, then refit on all samples.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_source)
        y : array-like of shape (n_samples, n_target) or (n_samples,)
        groups : array-like of shape (n_samples,), optional
            Trial id of every sample: an int ``cv`` then holds out contiguous
            blocks of whole trials. Taken from a ``trial`` coordinate along
            ``time`` when ``X`` or ``y`` is a labelled DataArray.

        Returns
        -------
        self
        """
        problem = make_problem(X, y, groups=groups, validate=self._validate_xy)
        check_alpha(self.alpha)
        check_folds(self.cv)
        ranks = candidate_ranks(self.ranks, problem.shape[1], problem.shape[2])
        self.cv_results_, self.rank_, B, b = cross_validate_rank(
            problem, ranks, self.cv, self.alpha
        )
        if not problem.in_memory:
            self.n_features_in_ = problem.shape[1]
        self._set_baseline(B, b, self.rank_)
        return self._finish(problem.y_1d)


def candidate_ranks(ranks, n_source, n_target):
    """Sorted unique candidate ranks that the data can identify."""
    ranks = sorted({check_rank(r, np.inf, np.inf, name="each of ranks") for r in ranks})
    if not ranks:
        raise ValueError("ranks is empty: give at least one candidate rank.")
    kept = [r for r in ranks if r <= min(n_source, n_target)]
    if not kept:
        raise ValueError(
            f"No candidate rank is <= min(n_source, n_target) = {min(n_source, n_target)}."
        )
    return kept
