"""What every estimator of ``mics`` shares: communication-subspace readouts, input checks."""

from __future__ import annotations

import numpy as np
from sklearn.base import MultiOutputMixin, RegressorMixin
from sklearn.utils.validation import check_is_fitted, validate_data

from mics.core.heldout import normalized_squared_error
from mics.core.linalg import orthonormal_svd
from mics.data.validation import check_not_constant, check_population

__all__ = ["CommunicationSubspaceMixin", "validate_xy", "validate_x", "check_score_target"]


class CommunicationSubspaceMixin(MultiOutputMixin, RegressorMixin):
    """Prediction and scoring shared by the reduced-rank estimators."""

    def _validate_xy(self, X, y):
        """The estimator's check of source and target (for :func:`mics.data.make_problem`)."""
        return validate_xy(self, X, y)

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
        X = validate_x(self, X)
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
        return 1.0 - normalized_squared_error(check_score_target(y, Y_pred), Y_pred)

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.target_tags.multi_output = True
        tags.target_tags.single_output = True
        return tags


def validate_xy(estimator, X, y):
    """Validate source and target, record ``n_features_in_``, keep 1-D-ness of y.

    The arrays are checked by :func:`mics.data.validation.check_population`,
    whose messages name the argument ("source X", "target y"); scikit-learn's
    ``validate_data`` then only records ``n_features_in_`` and
    ``feature_names_in_`` (``skip_check_array``), so its generic messages
    never reach the user.
    """
    if y is None:
        raise ValueError(
            f"{type(estimator).__name__} requires y to be passed, but the target y is None "
            "(y is the target population)."
        )
    Xv, _ = check_population(X, "source X")
    Y, y_1d = check_population(y, "target y", allow_1d=True)
    if Y.shape[0] != Xv.shape[0]:
        raise ValueError(
            f"source X has {Xv.shape[0]} samples but target y has {Y.shape[0]}: "
            "both must share the time axis."
        )
    check_not_constant(Xv, "source X")
    validate_data(estimator, X, reset=True, skip_check_array=True)
    return Xv, Y, y_1d


def validate_x(estimator, X):
    """The source at predict time: checked as a population, then against the fit.

    The number of neurons and the feature names must match the fit
    (scikit-learn's ``validate_data``, whose message names X).
    """
    Xv, _ = check_population(X, "source X", ensure_min_samples=1)
    validate_data(estimator, X, reset=False, skip_check_array=True)
    return Xv


def check_score_target(y, Y_pred):
    """The target passed to ``score``, checked and shaped like the predictions."""
    Y, _ = check_population(y, "target y", allow_1d=True, ensure_min_samples=1)
    pred = np.asarray(Y_pred)
    if Y.shape[0] != pred.shape[0]:
        raise ValueError(
            f"target y has {Y.shape[0]} samples but source X has {pred.shape[0]}: "
            "both must share the time axis."
        )
    n_pred = 1 if pred.ndim == 1 else pred.shape[1]
    if Y.shape[1] != n_pred:
        raise ValueError(f"target y has {Y.shape[1]} neuron(s); the model predicts {n_pred}.")
    return Y.reshape(pred.shape)
