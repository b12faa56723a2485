"""Prediction loss and the model-selection rule of the communication-subspace literature."""

from __future__ import annotations

import numpy as np

__all__ = ["normalized_squared_error", "one_sem_rule"]


def normalized_squared_error(Y_true, Y_pred):
    """Normalised squared error pooled over target neurons (Semedo et al. 2019).

    NSE = sum of squared residuals / total sum of squares, where the total
    sum of squares uses the *test* data's own column means. 1 - NSE is the
    fraction of target variance predicted.

    Parameters
    ----------
    Y_true, Y_pred : array-like of shape (n_samples, n_targets) or (n_samples,)

    Returns
    -------
    nse : float
    """
    Y_true = np.asarray(Y_true, dtype=float)
    Y_pred = np.asarray(Y_pred, dtype=float)
    if Y_true.shape != Y_pred.shape:
        raise ValueError(f"shapes differ: {Y_true.shape} vs {Y_pred.shape}")
    rss = np.sum((Y_true - Y_pred) ** 2)
    tss = np.sum((Y_true - Y_true.mean(axis=0)) ** 2)
    if tss == 0:
        # A constant test target has nothing to predict; report the raw error
        # scale rather than dividing by zero.
        return np.inf if rss > 0 else 0.0
    return float(rss / tss)


def one_sem_rule(mean_loss, sem_loss):
    """Index of the simplest model within one SEM of the best (Semedo's ``ModelSelect``).

    Parameters
    ----------
    mean_loss, sem_loss : array-like of shape (n_candidates,)
        Candidates ordered from simplest to most complex.

    Returns
    -------
    index : int
    """
    mean_loss = np.asarray(mean_loss, dtype=float)
    sem_loss = np.asarray(sem_loss, dtype=float)
    if not np.any(np.isfinite(mean_loss)):
        # Every candidate failed to predict (e.g. constant held-out targets):
        # nothing favours complexity, so keep the simplest.
        return 0
    best = int(np.nanargmin(np.where(np.isfinite(mean_loss), mean_loss, np.nan)))
    sem = sem_loss[best] if np.isfinite(sem_loss[best]) else 0.0
    return int(np.flatnonzero(mean_loss <= mean_loss[best] + sem)[0])
