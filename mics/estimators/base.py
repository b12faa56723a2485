"""What every estimator of ``mics`` shares: communication-subspace readouts, input checks."""

from __future__ import annotations

import numpy as np
from sklearn.base import MultiOutputMixin, RegressorMixin
from sklearn.utils.validation import check_is_fitted, validate_data

from mics.core.heldout import normalized_squared_error
from mics.core.linalg import orthonormal_svd
from mics.data.validation import check_population

__all__ = ["CommunicationSubspaceMixin", "validate_xy"]


class CommunicationSubspaceMixin(MultiOutputMixin, RegressorMixin):
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


def validate_xy(estimator, X, y):
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
