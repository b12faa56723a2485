"""Blocked cross-validation and the one-SEM rule.

Calcium signals are autocorrelated for seconds, so folds are contiguous
blocks of time (scikit-learn's ``KFold(shuffle=False)``), optionally with a
gap of discarded samples on each side of the held-out block.
"""

from __future__ import annotations

import numbers

import numpy as np
from sklearn.model_selection import KFold, check_cv

from mics.reduced_rank import fit_reduced_rank
from mics.scoring import normalized_squared_error, one_sem_rule

__all__ = ["BlockedKFold", "resolve_cv", "cross_validate_reduced_rank"]


class BlockedKFold(KFold):
    """Contiguous K-fold with an optional gap between training and test blocks.

    Parameters
    ----------
    n_splits : int
        Number of contiguous blocks.
    gap : int
        Samples dropped from the training set on each side of the test block,
        so that autocorrelation does not leak test information into training.
    """

    def __init__(self, n_splits=10, *, gap=0):
        super().__init__(n_splits=n_splits, shuffle=False)
        self.gap = gap

    def split(self, X, y=None, groups=None):
        n = len(X) if not hasattr(X, "shape") else X.shape[0]
        for train, test in super().split(X, y, groups):
            if self.gap:
                lo, hi = test[0] - self.gap, test[-1] + self.gap
                train = train[(train < lo) | (train > hi)]
                if train.size == 0:
                    raise ValueError(f"gap={self.gap} leaves no training samples of {n}.")
            yield train, test


def resolve_cv(cv, n_samples, gap=0):
    """Turn ``cv`` into a splitter, refusing more folds than samples.

    An int gives contiguous folds (never shuffled: samples are time bins).
    """
    if cv is None:
        cv = 10
    if isinstance(cv, numbers.Integral):
        if cv < 2:
            raise ValueError(f"cv must be at least 2 folds, got {cv}.")
        if cv > n_samples:
            raise ValueError(
                f"cv={cv} folds need at least {cv} samples, but only {n_samples} were given."
            )
        return BlockedKFold(int(cv), gap=gap)
    return check_cv(cv)


def cross_validate_reduced_rank(X, Y, ranks, cv=10, alpha=0.0):
    """Cross-validated NSE of reduced-rank regression for each candidate rank.

    Parameters
    ----------
    X : ndarray of shape (n_samples, p)
    Y : ndarray of shape (n_samples, q)
    ranks : sequence of int, increasing complexity
    cv : int or splitter
    alpha : float

    Returns
    -------
    results : dict
        ``rank``, ``fold_loss`` (n_ranks, n_folds), ``mean_loss``, ``sem_loss``
        and ``best_index`` (the one-SEM choice).
    """
    splitter = resolve_cv(cv, X.shape[0])
    ranks = list(ranks)
    losses = []
    for train, test in splitter.split(X):
        coefs, intercepts = fit_reduced_rank(X[train], Y[train], ranks, alpha=alpha)
        losses.append(
            [
                normalized_squared_error(Y[test], X[test] @ B + b)
                for B, b in zip(coefs, intercepts, strict=True)
            ]
        )
    fold_loss = np.asarray(losses).T
    return summarize_cv(ranks, fold_loss, key="rank")


def summarize_cv(candidates, fold_loss, key):
    """Mean, SEM across folds and the one-SEM choice for a candidate table."""
    fold_loss = np.asarray(fold_loss, dtype=float)
    n_folds = fold_loss.shape[1]
    mean = fold_loss.mean(axis=1)
    sem = fold_loss.std(axis=1, ddof=1) / np.sqrt(n_folds) if n_folds > 1 else np.zeros_like(mean)
    best = one_sem_rule(mean, sem)
    return {
        key: np.asarray(candidates),
        "fold_loss": fold_loss,
        "mean_loss": mean,
        "sem_loss": sem,
        "mean_score": 1 - mean,
        "best_index": best,
    }
