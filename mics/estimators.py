"""scikit-learn estimators: thin classes over the functional core.

``__init__`` only stores hyperparameters; validation happens in ``fit``;
learned state ends in ``_``. Coefficients follow scikit-learn's
(n_targets, n_features) convention.
"""

from __future__ import annotations

import numpy as np
from sklearn.base import BaseEstimator, MultiOutputMixin, RegressorMixin
from sklearn.utils.validation import check_is_fitted, validate_data

from mics._linalg import orthonormal_svd
from mics._validation import check_folds, check_population, check_rank
from mics.reduced_rank import fit_reduced_rank
from mics.scoring import normalized_squared_error
from mics.selection import cross_validate_reduced_rank

__all__ = ["ReducedRankRegression", "ReducedRankRegressionCV"]


class _CommunicationSubspaceMixin(MultiOutputMixin, RegressorMixin):
    """Prediction and scoring shared by the reduced-rank estimators."""

    def _set_baseline(self, B, intercept, rank):
        self.coef_ = B.T
        self.intercept_ = intercept
        U, s, V = orthonormal_svd(B, rank)
        self.source_subspace_ = U
        self.target_subspace_ = V
        self.singular_values_ = s

    def _finish(self, y_was_1d):
        self._y_1d = y_was_1d
        if y_was_1d:
            self.coef_ = self.coef_[0]
            self.intercept_ = float(self.intercept_[0])
        return self

    def predict(self, X):
        """Predict target activity.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_source)

        Returns
        -------
        Y_pred : ndarray of shape (n_samples, n_target), or (n_samples,) if
            the model was fitted on a 1-D target.
        """
        check_is_fitted(self)
        X = validate_data(self, X, reset=False, dtype=np.float64)
        return X @ np.asarray(self.coef_).T + self.intercept_

    def score(self, X, y, sample_weight=None):
        """1 - NSE, pooled over target neurons (Semedo et al. 2019).

        Parameters
        ----------
        X : array-like of shape (n_samples, n_source)
        y : array-like of shape (n_samples, n_target) or (n_samples,)
        sample_weight : None
            Not supported; present for scikit-learn compatibility.
        """
        if sample_weight is not None:
            raise NotImplementedError("sample_weight is not supported.")
        Y_pred = self.predict(X)
        return 1.0 - normalized_squared_error(np.asarray(y, dtype=float), Y_pred)

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.target_tags.multi_output = True
        tags.target_tags.single_output = True
        return tags


class ReducedRankRegression(_CommunicationSubspaceMixin, BaseEstimator):
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
        :func:`mics.reduced_rank.ridge_lambda_grid`).

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
        X, Y, y_1d = _validate_xy(self, X, y)
        rank = check_rank(self.rank, X.shape[1], Y.shape[1])
        _check_alpha(self.alpha)
        (B,), (b,) = fit_reduced_rank(X, Y, [rank], alpha=self.alpha)
        self._set_baseline(B, b, rank)
        return self._finish(y_1d)


class ReducedRankRegressionCV(_CommunicationSubspaceMixin, BaseEstimator):
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
        from mics.chunked import any_chunked
        from mics.trials import check_groups, trial_coordinate

        if groups is None:
            groups = trial_coordinate(X, y)
        if any_chunked(X, y):
            return self._fit_chunked(X, y, groups)
        X, Y, y_1d = _validate_xy(self, X, y)
        _check_alpha(self.alpha)
        check_folds(self.cv)
        groups = check_groups(groups, X.shape[0])
        ranks = candidate_ranks(self.ranks, X.shape[1], Y.shape[1])
        self.cv_results_ = cross_validate_reduced_rank(
            X, Y, ranks, cv=self.cv, alpha=self.alpha, groups=groups
        )
        self.rank_ = int(ranks[self.cv_results_["best_index"]])
        (B,), (b,) = fit_reduced_rank(X, Y, [self.rank_], alpha=self.alpha)
        self._set_baseline(B, b, self.rank_)
        return self._finish(y_1d)

    def _fit_chunked(self, X, y, groups):
        """Dask inputs: every fold's scatters in one pass where the data live."""
        from mics._labels import unwrap
        from mics.chunked import as_dask, xy_fold_moments
        from mics.selection import _xy_path, cross_validate_reduced_rank_sums
        from mics.trials import check_groups, cv_splits

        if y is None:
            raise ValueError("ReducedRankRegressionCV requires y to be passed, but y is None.")
        y_1d = getattr(y, "ndim", 2) == 1
        X, Y = as_dask(unwrap(X, "X")[0], "X"), as_dask(unwrap(y, "Y")[0], "y")
        if Y.shape[0] != X.shape[0]:
            raise ValueError(
                f"source X has {X.shape[0]} samples but target y has {Y.shape[0]}: "
                "both must share the time axis."
            )
        Y = Y if Y.chunks[0] == X.chunks[0] else Y.rechunk({0: X.chunks[0]})
        _check_alpha(self.alpha)
        check_folds(self.cv)
        n, p, q = X.shape[0], X.shape[1], Y.shape[1]
        if n < 2:
            raise ValueError(f"at least 2 samples are needed, got {n}.")
        groups = check_groups(groups, n)
        ranks = candidate_ranks(self.ranks, p, q)
        splits = cv_splits(self.cv, n, groups=groups)
        total, folds, (x_shift, y_shift) = xy_fold_moments(X, Y, splits)
        self.cv_results_ = cross_validate_reduced_rank_sums(total, folds, ranks, self.alpha)
        self.rank_ = int(ranks[self.cv_results_["best_index"]])
        (B,), (c,) = _xy_path(total, [self.rank_], self.alpha)
        # back from the shifted basis: y - y_shift = (x - x_shift) B + c
        self.n_features_in_ = p
        self._set_baseline(B, y_shift + c - x_shift @ B, self.rank_)
        return self._finish(y_1d)


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


def _check_alpha(alpha):
    if not np.isscalar(alpha) or not np.isfinite(alpha) or alpha < 0:
        raise ValueError(f"alpha must be a non-negative finite number, got {alpha!r}.")


def _validate_xy(estimator, X, y):
    """Validate source and target, record ``n_features_in_``, keep 1-D-ness of y."""
    if y is None:
        raise ValueError(
            f"{type(estimator).__name__} requires y to be passed, but the target y is None "
            "(y is the target population)."
        )
    X = validate_data(estimator, X, reset=True, dtype=np.float64, ensure_min_samples=2)
    Y, y_1d = check_population(y, "target y", allow_1d=True)
    if Y.shape[0] != X.shape[0]:
        raise ValueError(
            f"source X has {X.shape[0]} samples but target y has {Y.shape[0]}: "
            "both must share the time axis."
        )
    return X, Y, y_1d
