"""Reduced-rank regression (the communication subspace), on moments.

The algorithm is that of Semedo et al. (2019) and of their reference
MATLAB code: ordinary least squares (or ridge) coefficients ``B_full``, then
projection onto the top ``r`` principal directions of the fitted values,
``B_r = B_full V_r V_r^T``. Working on centred scatter matrices instead of
the data lets cross-validation folds and sessions be added and subtracted.
"""

from __future__ import annotations

import numpy as np
from scipy import linalg

from mics.core.linalg import solve_psd

__all__ = [
    "ridge_lambda_grid",
    "constant_columns",
    "reduced_rank_path",
    "fit_reduced_rank",
]


def constant_columns(X):
    """Mask of zero-variance source neurons, with the reference's threshold.

    The reference drops neurons whose sample standard deviation (ddof=1) is
    below ``sqrt(eps)``; they get zero weight in the coefficients.
    """
    n = X.shape[0]
    std = X.std(axis=0, ddof=1) if n > 1 else np.zeros(X.shape[1])
    return std < np.sqrt(np.finfo(np.float64).eps)


def reduced_rank_path(Sxx, Sxy, ranks, alpha=0.0, exact_ridge=False):
    """Reduced-rank coefficients for several ranks from centred scatter matrices.

    Parameters
    ----------
    Sxx : ndarray of shape (p, p)
        Centred source scatter ``X_c^T X_c``.
    Sxy : ndarray of shape (p, q)
        Centred cross scatter ``X_c^T Y_c``.
    ranks : sequence of int
        Ranks to return.
    alpha : float
        Ridge penalty on the full-rank coefficients (same units as the
        scatter: Semedo's ``lambda``).
    exact_ridge : bool
        If False (default), the reference's ridge-initialised RRR: principal
        directions of the fitted values ``X B_ridge``. If True, principal
        directions of ``B^T (Sxx + alpha I) B``, which makes ``B_r`` the exact
        minimiser of the ridge-penalised loss under the rank constraint
        (used inside the MIC fit, whose loss must never increase).

    Returns
    -------
    coefs : list of ndarray of shape (p, q)
        One ``B_r`` per requested rank (rank 0 gives zeros).
    V : ndarray of shape (q, q)
        Principal directions of the fitted values, by decreasing variance.
    """
    p, q = Sxy.shape
    A = Sxx + alpha * np.eye(p) if alpha > 0 else Sxx
    B_full = solve_psd(A, Sxy)
    fitted = B_full.T @ (A if exact_ridge else Sxx) @ B_full
    evals, V = linalg.eigh((fitted + fitted.T) / 2)
    V = V[:, ::-1]
    coefs = []
    for r in ranks:
        if r == 0:
            coefs.append(np.zeros((p, q)))
        else:
            Vr = V[:, :r]
            coefs.append((B_full @ Vr) @ Vr.T)
    return coefs, V


def ridge_lambda_grid(X, shrinkage=None):
    """Ridge penalties spanning a range of shrinkage, as in the reference code.

    ``lambda = d_max (1 - s) / s`` for shrinkage factors ``s`` of the largest
    eigenvalue ``d_max`` of the centred scatter of ``X`` (Hastie et al.);
    the reference uses ``s = 0.5, 0.51, ..., 1``.

    Parameters
    ----------
    X : array-like of shape (n_samples, n_source)
    shrinkage : array-like, optional
        Defaults to ``np.arange(0.5, 1.0001, 0.01)``.

    Returns
    -------
    lambdas : ndarray, decreasing regularisation order matches ``shrinkage``.
    """
    X = np.asarray(X, dtype=float)
    if shrinkage is None:
        shrinkage = np.linspace(0.5, 1.0, 51)
    shrinkage = np.asarray(shrinkage, dtype=float)
    keep = ~constant_columns(X)
    Xc = X[:, keep] - X[:, keep].mean(axis=0)
    d_max = linalg.eigvalsh(Xc.T @ Xc)[-1]
    return d_max * (1 - shrinkage) / shrinkage


def fit_reduced_rank(X, Y, ranks, alpha=0.0):
    """Fit reduced-rank regression of ``Y`` on ``X`` for several ranks.

    Parameters
    ----------
    X : ndarray of shape (n_samples, p)
    Y : ndarray of shape (n_samples, q)
    ranks : sequence of int
    alpha : float

    Returns
    -------
    coefs : list of ndarray of shape (p, q)
        Zero rows for zero-variance source neurons.
    intercepts : list of ndarray of shape (q,)
    """
    keep = ~constant_columns(X)
    x_mean = X.mean(axis=0)
    y_mean = Y.mean(axis=0)
    Xc = X[:, keep] - x_mean[keep]
    Yc = Y - y_mean
    coefs_kept, _ = reduced_rank_path(Xc.T @ Xc, Xc.T @ Yc, ranks, alpha=alpha)
    coefs, intercepts = [], []
    for Bk in coefs_kept:
        B = np.zeros((X.shape[1], Y.shape[1]))
        B[keep] = Bk
        coefs.append(B)
        intercepts.append(y_mean - x_mean @ B)
    return coefs, intercepts


def _centred_xy(sums):
    """Centred scatters ``Sxx, Sxy`` and the means' offsets from the shifts."""
    n, sa, sb = sums.n, sums.sx, sums.sy
    return sums.Sxx - np.outer(sa, sa) / n, sums.Sxy - np.outer(sa, sb) / n, sa / n, sb / n


def reduced_rank_path_from_sums(sums, ranks, alpha):
    """:func:`fit_reduced_rank` from linear moments: coefficients and intercepts.

    Parameters
    ----------
    sums : RawLinearMoments
        Of the training samples (the modulator, if any, is ignored).
    ranks : sequence of int
    alpha : float

    Returns
    -------
    coefs : list of ndarray of shape (p, q)
    intercepts : list of ndarray of shape (q,)
        In the moments' shifted basis: ``y - y_shift = (x - x_shift) B + c``.
    """
    n = sums.n
    Sxx, Sxy, dx, dy = _centred_xy(sums)
    # the reference's rule: drop neurons with sample std below sqrt(eps)
    keep = np.diag(Sxx) / max(n - 1, 1) >= np.finfo(np.float64).eps
    coefs_kept, _ = reduced_rank_path(Sxx[np.ix_(keep, keep)], Sxy[keep], ranks, alpha=alpha)
    coefs = []
    for Bk in coefs_kept:
        B = np.zeros(Sxy.shape)
        B[keep] = Bk
        coefs.append(B)
    return coefs, [dy - dx @ B for B in coefs]
