"""Sparse reduced-rank regression: which source neurons carry the communication subspace.

Kobak, Bernaerts, Weis, Scala, Tolias & Berens (2021, JRSS C) make
reduced-rank regression select neurons with an elastic net over the rows
of the source loadings::

    minimise  ||Y - X W V^T||^2 + alpha ||W||_F^2 + lam sum_i ||W[i, :]||
    over      W (p, r) and V (q, r) with V^T V = I.

``B = W V^T`` is the rank-``r`` coefficient matrix; a zero row of ``W``
removes that source neuron from every dimension of the subspace at once,
as the group lasso of :mod:`mics.core.sparse` removes a neuron from every
MIC channel. The two blocks are solved in turn, each by steps that cannot
raise the loss, so the penalised loss never increases:

- ``V`` given ``W``: an orthogonal Procrustes problem, ``V = P Q^T`` from
  the thin SVD ``Sxy^T W = P S Q^T``;
- ``W`` given ``V``: a multi-response group lasso of ``Y V`` on ``X``,
  solved by cyclic block-coordinate descent over the rows (each row's
  update is the exact group soft-threshold,
  :func:`mics.core.sparse.group_soft_threshold`) on the neurons in the
  model until they settle; then the optimality condition of every neuron
  left out is checked at once, and those that violate it enter.

Everything is computed from the centred moments ``Sxx``, ``Sxy`` and
``tr(Syy)``: folds, sessions and chunked or Dask inputs (whose moments
are summed) all get the same fit, and its cost does not grow with the
number of samples.

**Units.** ``alpha`` is absolute, in the units of the scatter ``X^T X``
(as :func:`mics.core.fit_reduced_rank`'s). ``sparsity`` is relative, in the
convention of :func:`mics.core.penalties` for the MIC patterns:
``lam = sparsity * 2 sqrt(n v_x v_y)``, with ``v_x`` and ``v_y`` the mean
per-neuron variances of source and target. That is the size of the loss
gradient at a source neuron that carries nothing (per unit-norm column of
``V``), so ``sparsity`` reads as a threshold in standard errors, and
multiplying X or Y by a constant changes neither the members nor
``sparsity``'s meaning. A neuron the subspace has turned towards is held to
a higher standard: ``V`` aligns with its correlations with the targets, so
on pure noise its gradient reaches about ``sqrt(q)`` standard errors, and
a ``sparsity`` below that still keeps about ``r`` noise neurons
(``tests/test_sparse_rrr.py``: 2-3 of 100 at ``sparsity=4``, q = 50, none at 8).

**Zero sparsity.** With ``lam = 0`` the minimiser is the ridge RRR whose
directions are the principal axes of ``Sxy^T (Sxx + alpha I)^-1 Sxy``
(:func:`mics.core.reduced_rank_path` with ``exact_ridge=True``); with
``alpha = 0`` as well it is ordinary RRR (:func:`mics.core.fit_reduced_rank`).
The reference code's ridge RRR (``exact_ridge=False``, the default of
:class:`mics.ReducedRankRegression`) projects the ridge fit on the axes of
its own fitted values instead, which is not the minimiser of the loss
above; the two differ at ``alpha > 0`` only.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy import linalg

from mics.core.linalg import single_blas_thread, solve_psd
from mics.core.rrr import reduced_rank_path
from mics.core.sparse import group_norm_sum, group_soft_threshold

__all__ = [
    "SparseRRRFit",
    "fit_sparse_rrr",
    "sparse_rrr_path",
    "sparse_rrr_path_from_sums",
    "sparse_rrr_penalty",
]

# Block-coordinate descent on the rows of W: sweeps over the active rows
# until the largest row change is below this fraction of the largest row,
# then a sweep over all rows (at most _CD_MAX_SWEEPS sweeps per W block).
_CD_TOL = 1e-10
_CD_MAX_SWEEPS = 2000


@dataclass(frozen=True)
class SparseRRRFit:
    """A sparse reduced-rank regression fitted by :func:`fit_sparse_rrr`.

    Attributes
    ----------
    coef : ndarray of shape (p, q)
        ``B = W V^T``: ``Y_c ~ X_c B``.
    source_loadings : ndarray of shape (p, r)
        ``W``; its zero rows are the neurons left out.
    target_loadings : ndarray of shape (q, r)
        ``V``, orthonormal columns.
    members : ndarray of bool, shape (p,)
        Source neurons with a non-zero row of ``W``.
    loss_history : ndarray of shape (n_iter + 1,)
        Penalised loss at the start and after each alternation (never
        increases, up to rounding).
    n_iter : int
    converged : bool
    penalty : float
        The absolute group-lasso weight ``lam`` used.
    """

    coef: np.ndarray
    source_loadings: np.ndarray
    target_loadings: np.ndarray
    members: np.ndarray
    loss_history: np.ndarray
    n_iter: int
    converged: bool
    penalty: float


def sparse_rrr_penalty(Sxx, tr_yy, n_samples, n_target, sparsity):
    """Absolute group-lasso weight ``lam`` of a relative ``sparsity``.

    Parameters
    ----------
    Sxx : ndarray of shape (p, p)
        Centred source scatter.
    tr_yy : float
        Trace of the centred target scatter.
    n_samples : int
    n_target : int
    sparsity : float
        Non-negative, in standard errors (see the module docstring).

    Returns
    -------
    float
        ``sparsity * 2 sqrt(tr(Sxx) tr_yy / (p q n))`` (= ``2 sqrt(n v_x v_y)``
        per unit of ``sparsity``), in the units of the loss over those of ``W``.
    """
    _check_sparsity(sparsity)
    if sparsity == 0:
        return 0.0
    p = Sxx.shape[0]
    return float(sparsity * 2 * np.sqrt(np.trace(Sxx) * tr_yy / (p * n_target * n_samples)))


def _check_sparsity(sparsity):
    ok = np.isscalar(sparsity) and not isinstance(sparsity, (str, bool, np.bool_))
    if not ok or not np.isfinite(sparsity) or sparsity < 0:
        raise ValueError(
            f"sparsity must be a non-negative finite number (0 keeps every neuron), "
            f"got {sparsity!r}."
        )


def _penalised_loss(W, V, Sxx, Sxy, tr_yy, alpha, lam):
    """``||Y - X W V^T||^2 + alpha ||W||^2 + lam sum_i ||W[i]||`` from moments (V^T V = I)."""
    sq_err = tr_yy - 2 * float(np.sum(W * (Sxy @ V))) + float(np.sum(W * (Sxx @ W)))
    return sq_err + alpha * float(np.sum(W * W)) + lam * group_norm_sum(W)


def _procrustes(M, V_old):
    """``argmax_V tr(V^T M)`` over orthonormal ``V`` (q, r): the polar factor of ``M``."""
    if not np.any(M):
        # W = 0: every V is optimal; keep the current one
        return V_old
    P, _, Qt = linalg.svd(M, full_matrices=False)
    return P @ Qt


def _group_lasso_rows(A, G, lam, W):
    """Minimise ``tr(W^T A W) - 2 tr(W^T G) + lam sum_i ||W[i]||`` by row descent.

    Parameters
    ----------
    A : ndarray of shape (p, p)
        ``Sxx + alpha I`` (positive semi-definite).
    G : ndarray of shape (p, r)
        ``Sxy V``.
    lam : float
    W : ndarray of shape (p, r)
        Warm start (not modified).

    Returns
    -------
    ndarray of shape (p, r)
        Each row update is that row's exact minimiser given the others, so
        the objective never increases from ``W``.
    """
    W = np.array(W, dtype=float)
    A = (A + A.T) / 2  # (a scatter summed in floating point is symmetric to rounding only)
    diag = np.diag(A).copy()
    AW = A @ W
    half = lam / 2
    p = W.shape[0]

    def sweep(rows):
        biggest_change, biggest_row = 0.0, 0.0
        for i in rows:
            h = G[i] - AW[i] + diag[i] * W[i]
            if diag[i] <= 0 or h @ h <= half * half:
                # out (a neuron without variance, and no ridge, explains nothing)
                if not np.any(W[i]):
                    continue
                new = np.zeros_like(W[i])
            else:
                new = group_soft_threshold(h[None, :], half)[0] / diag[i]
                biggest_row = max(biggest_row, float(np.max(np.abs(new))))
            delta = new - W[i]
            AW[...] += np.outer(A[i], delta)  # A is symmetric: its rows are contiguous
            W[i] = new
            biggest_change = max(biggest_change, float(np.max(np.abs(delta))))
        return biggest_change, biggest_row

    active = np.flatnonzero(np.any(W != 0, axis=1))
    sweeps = 0
    while sweeps < _CD_MAX_SWEEPS:
        # the neurons in the model settle (that is where the work is) ...
        while sweeps < _CD_MAX_SWEEPS:
            change, size = sweep(active)
            sweeps += 1
            if change <= _CD_TOL * max(size, np.finfo(float).tiny):
                break
        # ... then every neuron left out is checked at once: a zero row is
        # optimal iff its gradient is within lam / 2 (its h is G - AW)
        out = np.ones(p, dtype=bool)
        out[active] = False
        h = G[out] - AW[out]
        enter = np.flatnonzero(out)[(diag[out] > 0) & (np.sum(h * h, axis=1) > half * half)]
        if enter.size == 0:
            break
        active = np.union1d(active, enter)
    return W


def _dense_start(Sxx, Sxy, rank, alpha):
    """The dense (lam = 0) minimiser ``(W, V)``: exact, and the start for lam > 0."""
    (B_r,), V_all = reduced_rank_path(Sxx, Sxy, [rank], alpha=alpha, exact_ridge=True)
    V = V_all[:, :rank]
    return B_r @ V, V


def fit_sparse_rrr(
    Sxx,
    Sxy,
    tr_yy,
    n_samples,
    rank,
    alpha=0.0,
    sparsity=0.0,
    *,
    max_iter=1000,
    tol=1e-8,
    init=None,
):
    """Sparse reduced-rank regression (Kobak et al. 2021) from centred moments.

    Minimises ``||Y - X W V^T||^2 + alpha ||W||_F^2 + lam sum_i ||W[i, :]||``
    over ``W`` (p, rank) and orthonormal ``V`` (q, rank) by alternating the
    exact ``V`` block (Procrustes) and the ``W`` block (group lasso by row
    descent), from the dense solution (or ``init``). See the module
    docstring for the units of ``alpha`` and ``sparsity``.

    Parameters
    ----------
    Sxx : ndarray of shape (p, p)
        Centred source scatter ``X_c^T X_c``.
    Sxy : ndarray of shape (p, q)
        Centred cross scatter ``X_c^T Y_c``.
    tr_yy : float
        ``trace(Y_c^T Y_c)``.
    n_samples : int
        Number of samples behind the moments (sets the scale of ``sparsity``).
    rank : int
        Dimensionality ``r`` of the communication subspace, ``0 <= r <= min(p, q)``.
    alpha : float, default=0.0
        Ridge weight on ``W``, in the units of ``Sxx``.
    sparsity : float, default=0.0
        Relative group-lasso weight on the source neurons (standard errors);
        0 gives the dense ridge RRR.
    max_iter : int, default=1000
        Alternations at most.
    tol : float, default=1e-8
        Stop when an alternation changes the coefficients ``B = W V^T`` by
        less than this fraction of their norm (Frobenius).
    init : tuple of ndarray (W, V), optional
        Warm start (e.g. the fit at a smaller ``sparsity`` along a path);
        ``V`` must have orthonormal columns.

    Returns
    -------
    SparseRRRFit
    """
    with single_blas_thread():  # many small products: threads only spin (see its docstring)
        return _fit_sparse_rrr(
            Sxx,
            Sxy,
            tr_yy,
            n_samples,
            rank,
            alpha,
            sparsity,
            max_iter=max_iter,
            tol=tol,
            init=init,
        )


def _fit_sparse_rrr(Sxx, Sxy, tr_yy, n_samples, rank, alpha, sparsity, *, max_iter, tol, init):
    Sxx = np.asarray(Sxx, dtype=float)
    Sxy = np.asarray(Sxy, dtype=float)
    p, q = Sxy.shape
    if Sxx.shape != (p, p):
        raise ValueError(f"Sxx has shape {Sxx.shape} but Sxy has {p} source rows.")
    if not (isinstance(rank, (int, np.integer)) and 0 <= rank <= min(p, q)):
        raise ValueError(
            f"rank must be an integer between 0 and min(n_source, n_target) = "
            f"{min(p, q)}, got {rank!r}."
        )
    if not (np.isscalar(alpha) and np.isfinite(alpha) and alpha >= 0):
        raise ValueError(f"alpha must be a non-negative finite number, got {alpha!r}.")
    lam = sparse_rrr_penalty(Sxx, tr_yy, n_samples, q, sparsity)
    A = Sxx + alpha * np.eye(p) if alpha > 0 else Sxx

    if init is None:
        W, V = _dense_start(Sxx, Sxy, rank, alpha)
    else:
        W, V = (np.array(a, dtype=float) for a in init)
        if W.shape != (p, rank) or V.shape != (q, rank):
            raise ValueError(f"init must be (W, V) of shapes {(p, rank)} and {(q, rank)}.")

    losses = [_penalised_loss(W, V, Sxx, Sxy, tr_yy, alpha, lam)]
    B = W @ V.T
    converged = rank == 0
    n_iter = 0
    while not converged and n_iter < max_iter:
        V = _procrustes(Sxy.T @ W, V)
        G = Sxy @ V
        W = solve_psd(A, G) if lam == 0 else _group_lasso_rows(A, G, lam, W)
        losses.append(_penalised_loss(W, V, Sxx, Sxy, tr_yy, alpha, lam))
        n_iter += 1
        # On the coefficients, not the loss: near the optimum the loss is
        # flat (changes like the square of the step), the subspace is not.
        B_old, B = B, W @ V.T
        step = np.linalg.norm(B - B_old)
        converged = step <= tol * max(np.linalg.norm(B), np.finfo(float).tiny) or not np.any(W)
    members = np.any(W != 0, axis=1)
    return SparseRRRFit(
        coef=W @ V.T,
        source_loadings=W,
        target_loadings=V,
        members=members,
        loss_history=np.asarray(losses),
        n_iter=n_iter,
        converged=bool(converged),
        penalty=lam,
    )


def sparse_rrr_path(Sxx, Sxy, tr_yy, n_samples, rank, sparsities, alpha=0.0):
    """:func:`fit_sparse_rrr` at several sparsities, sharing one dense start.

    Every fit starts from the dense solution, as :func:`fit_sparse_rrr`
    does by default, so each equals the fit at its sparsity alone: the
    problem is not convex in ``(W, V)``, and a path warm-started from its
    neighbour could end elsewhere than the refit on all data that follows
    a cross-validation.

    Parameters
    ----------
    Sxx, Sxy, tr_yy, n_samples, rank, alpha
        As :func:`fit_sparse_rrr`.
    sparsities : sequence of float

    Returns
    -------
    list of SparseRRRFit
        One per sparsity, in the order given.
    """
    with single_blas_thread():
        start = _dense_start(np.asarray(Sxx, float), np.asarray(Sxy, float), rank, alpha)
        return [
            fit_sparse_rrr(Sxx, Sxy, tr_yy, n_samples, rank, alpha, s, init=start)
            for s in sparsities
        ]


def sparse_rrr_path_from_sums(sums, rank, sparsities, alpha=0.0):
    """:func:`sparse_rrr_path` from linear moments: coefficients and intercepts.

    Parameters
    ----------
    sums : RawLinearMoments
        Of the training samples (the modulator, if any, is ignored).
    rank : int
    sparsities : sequence of float
    alpha : float

    Returns
    -------
    coefs : list of ndarray of shape (p, q)
        Zero rows for neurons without variance (the reference's rule, as
        :func:`mics.core.rrr.reduced_rank_path_from_sums`) and for the
        neurons the group lasso removed.
    intercepts : list of ndarray of shape (q,)
        In the moments' shifted basis: ``y - y_shift = (x - x_shift) B + c``.
    """
    n, sx, sy = sums.n, sums.sx, sums.sy
    Sxx = sums.Sxx - np.outer(sx, sx) / n
    Sxy = sums.Sxy - np.outer(sx, sy) / n
    tr_yy = float(np.trace(sums.Syy) - sy @ sy / n)
    keep = np.diag(Sxx) / max(n - 1, 1) >= np.finfo(np.float64).eps
    rank = min(rank, int(keep.sum()))
    fits = sparse_rrr_path(Sxx[np.ix_(keep, keep)], Sxy[keep], tr_yy, n, rank, sparsities, alpha)
    coefs = []
    for fit in fits:
        B = np.zeros(Sxy.shape)
        B[keep] = fit.coef
        coefs.append(B)
    return coefs, [sy / n - (sx / n) @ B for B in coefs]
