"""Prediction loss and the model-selection rule of the communication-subspace literature."""

from __future__ import annotations

import numpy as np

__all__ = [
    "FOLD_OUTLIER_RATIO",
    "fold_outliers",
    "fold_mean_sem",
    "normalized_squared_error",
    "one_sem_rule",
    "heldout_loss",
    "data_heldout_loss",
    "sums_heldout_loss",
]


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


#: A fold whose held-out loss exceeds this multiple of the median fold's (for
#: some candidate) is an outlier: an order of magnitude, where the folds of
#: clean data differ by tens of percent (results/artifacts/).
FOLD_OUTLIER_RATIO = 10.0


def fold_outliers(fold_loss, ratio=FOLD_OUTLIER_RATIO):
    """Folds whose held-out loss is an order of magnitude above the other folds'.

    One bad sample (an artifact frame, a glitch) in a held-out block can make
    that fold's loss thousands of times the others'; the mean and SEM over
    folds then measure that sample. A fold is an outlier when, for some
    candidate, its loss exceeds ``ratio`` times the median of that
    candidate's fold losses and exceeds 1 (worse than predicting the
    held-out block by its own mean). At least three folds are needed, and
    fewer than half of them can be outliers (otherwise none is).

    Parameters
    ----------
    fold_loss : array-like of shape (n_candidates, n_folds)
        Held-out losses (NaN rows, candidates not scored, are ignored).
    ratio : float

    Returns
    -------
    outliers : ndarray of bool of shape (n_folds,)
    """
    fold_loss = np.asarray(fold_loss, dtype=float)
    n_folds = fold_loss.shape[1] if fold_loss.ndim == 2 else 0
    out = np.zeros(n_folds, dtype=bool)
    if n_folds < 3 or fold_loss.shape[0] == 0:
        return out
    scored = ~np.all(np.isnan(fold_loss), axis=1)
    if not scored.any():
        return out
    table = fold_loss[scored]
    median = np.nanmedian(table, axis=1, keepdims=True)
    with np.errstate(invalid="ignore"):
        high = (table > ratio * median) & (table > 1.0) & np.isfinite(median)
    out = np.any(high, axis=0)
    return out if 2 * out.sum() < n_folds else np.zeros(n_folds, dtype=bool)


def fold_mean_sem(fold_loss, outliers=None):
    """Mean and SEM over folds of each candidate, outlier folds left out.

    Parameters
    ----------
    fold_loss : array-like of shape (n_candidates, n_folds)
    outliers : ndarray of bool of shape (n_folds,), optional
        Default :func:`fold_outliers`. With none, the plain mean and SEM of
        every fold (the same bits as without this rule).

    Returns
    -------
    mean, sem : ndarray of shape (n_candidates,)
    outliers : ndarray of bool of shape (n_folds,)
    """
    fold_loss = np.asarray(fold_loss, dtype=float)
    if outliers is None:
        outliers = fold_outliers(fold_loss)
    used = fold_loss[:, ~outliers] if outliers.any() else fold_loss
    n_folds = used.shape[1]
    mean = used.mean(axis=1)
    sem = used.std(axis=1, ddof=1) / np.sqrt(n_folds) if n_folds > 1 else np.zeros_like(mean)
    return mean, sem, outliers


def heldout_loss(raw_test, cm_train, B, D, fit=None, basis=None):
    """NSE of a fitted model on a held-out block, from the block's raw moments.

    The prediction is linear in the augmented Khatri-Rao rows
    ``u = kron([1, x], [1, z])``: ``y_hat = Theta^T u``, so its squared error on
    the block is a quadratic form in the block's moments and needs no pass
    over the data. ``Theta`` has low rank (intercept, ``r`` baseline
    dimensions, ``m`` additive terms, ``K`` channels) and is handled as
    ``L R^T``, which makes the quadratic form cost ``d^2 (1 + r + m + K)``
    instead of ``d^2 q`` (``d = (p + 1)(m + 1)``).

    Parameters
    ----------
    raw_test : RawMoments
        Moments of the held-out block (any shifts).
    cm_train : CenteredMoments
        Training moments (their means centre the prediction).
    B : ndarray of shape (p, q)
    D : ndarray of shape (m, q)
    fit : MICFit, optional
        Channels; None for the channel-free model.
    basis : ndarray of shape (q, r), optional
        Orthonormal columns with ``B = B basis basis^T`` (the baseline solve
        returns it; ``fit.coef_basis`` is used when ``fit`` has one). Without
        it, ``B`` is factorised here.

    Returns
    -------
    nse : float
    """
    p, q = B.shape
    m = D.shape[0]
    left, right = [], []

    intercept = cm_train.y_mean.copy()
    # Without a basis: B = (B V) V^T over the eigenvectors V of B^T B with
    # non-negligible eigenvalues (B has rank r, a projection in
    # fit_baseline_path); the q x q eigenproblem is several times cheaper
    # than an SVD of B. Directions below 1e-6 of the largest singular value
    # are rounding, not rank.
    if basis is None and fit is not None:
        basis = getattr(fit, "coef_basis", None)
    if basis is None:
        evals, V = np.linalg.eigh(B.T @ B)
        basis = V[:, evals > evals[-1:].max(initial=0) * 1e-12]
    BV = B @ basis
    for k in range(basis.shape[1]):
        L = np.zeros((p + 1, m + 1))
        L[1:, 0] = BV[:, k]
        left.append(L)
        right.append(basis[:, k])
    for a in range(m):
        L = np.zeros((p + 1, m + 1))
        L[0, a + 1] = 1.0
        left.append(L)
        right.append(D[a])
    if fit is not None and fit.weights.size:
        for k in range(fit.weights.size):
            L = np.zeros((p + 1, m + 1))
            L[1:, 1:] = np.outer(fit.source_patterns[:, k], fit.modulator_patterns[:, k])
            left.append(L)
            right.append(fit.weights[k] * fit.target_patterns[:, k])
            phi_term = fit.source_patterns[:, k] @ cm_train.phi_mean @ fit.modulator_patterns[:, k]
            intercept = intercept - right[-1] * phi_term
    L = np.zeros((p + 1, m + 1))
    L[0, 0] = 1.0
    left.append(L)
    right.append(intercept)
    Lt = np.stack(left, axis=-1)  # (p + 1, m + 1, S)
    # express the training-centred basis in the block's shifted basis
    dx = cm_train.x_mean - raw_test.x_shift
    dz = cm_train.z_mean - raw_test.z_shift
    Lt[0] -= np.einsum("i,ias->as", dx, Lt[1:])
    Lt[:, 0] -= np.einsum("a,ias->is", dz, Lt[:, 1:])
    d = (p + 1) * (m + 1)
    Lm = np.column_stack([Lt.reshape(d, -1), np.eye(d, 1)])  # last: the y shift
    Rm = np.column_stack(right + [-raw_test.y_shift])  # (q, S)
    # Only the rows Theta touches matter (the linear part alone for
    # channel-free candidates): restrict the Gram to them.
    rows = np.flatnonzero(np.any(Lm != 0, axis=1))
    Lr = Lm[rows]
    G = raw_test.G.reshape(d, d)
    GL = (G[np.ix_(rows, rows)] if rows.size < d else G) @ Lr
    rss = (
        np.trace(raw_test.Syy)
        - 2 * np.sum((Lr.T @ raw_test.Gy.reshape(d, q)[rows]) * Rm.T)
        + np.sum((Lr.T @ GL) * (Rm.T @ Rm))
    )
    ysum = raw_test.Gy[0, 0]
    tss = np.trace(raw_test.Syy) - ysum @ ysum / raw_test.n
    return float(rss / tss) if tss > 0 else np.inf


def data_heldout_loss(data, test, cm, B, D, fit):
    """NSE of a fitted model on held-out rows ``test`` of the data ``(X, Y, Z)``
    (the data path's twin of :func:`heldout_loss`)."""
    X, Y, Z = (a[test] for a in data)
    xc, zc = X - cm.x_mean, Z - cm.z_mean
    pred = cm.y_mean + xc @ B + zc @ D
    if fit is not None and fit.weights.size:
        h = (xc @ fit.source_patterns) * (zc @ fit.modulator_patterns) * fit.weights
        hbar = np.einsum(
            "k,ik,ia,ak->k", fit.weights, fit.source_patterns, cm.phi_mean, fit.modulator_patterns
        )
        pred = pred + (h - hbar) @ fit.target_patterns.T
    return normalized_squared_error(Y, pred)


def sums_heldout_loss(sums, B, c):
    """NSE on a block from its linear moments, for ``y_hat - y_shift = (x - x_shift) B + c``."""
    n, sa, sb, Saa, Sab, Sbb = sums.n, sums.sx, sums.sy, sums.Sxx, sums.Sxy, sums.Syy
    rss = (
        np.sum(B * (Saa @ B))
        - 2 * np.sum(B * Sab)
        + np.trace(Sbb)
        + 2 * (sa @ B - sb) @ c
        + n * c @ c
    )
    tss = np.trace(Sbb) - sb @ sb / n
    return float(rss / tss) if tss > 0 else (np.inf if rss > 0 else 0.0)
