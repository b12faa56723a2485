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
  update is the exact group soft-threshold) in a compiled kernel
  (:func:`mics.core.kernels.group_lasso_rows`), on a working set of
  neurons until they settle; then the optimality condition of every neuron
  left out is checked at once, and those that violate it enter
  (:func:`_group_lasso_rows`).

Everything is computed from the centred moments ``Sxx``, ``Sxy`` and
``tr(Syy)``: folds, sessions and chunked or Dask inputs (whose moments
are summed) all get the same fit, and its cost does not grow with the
number of samples. With fewer samples than source neurons and the data
at hand (:class:`SparseRRRPaths`), the same fit is computed from the data
instead: the (p, p) scatter is never formed, a block of the working set
costs ``n m^2`` and the dense start is solved in the samples' space.

**Paths.** Fits at several sparsities (cross-validation) all start from
the dense solution, and so all take the same first step: their first W
block is one convex problem whose weight alone changes, solved once along
a path of weights with warm starts (:func:`_first_blocks`).

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

from dataclasses import dataclass, replace

import numpy as np
from scipy import linalg

from mics.core.linalg import single_blas_thread, solve_psd
from mics.core.rrr import reduced_rank_path
from mics.core.sparse import group_norm_sum

__all__ = [
    "SparseRRRFit",
    "SparseRRRPaths",
    "fit_sparse_rrr",
    "sparse_rrr_path",
    "sparse_rrr_path_from_sums",
    "sparse_rrr_penalty",
]

# Row descent on W (the compiled kernel): sweeps over the working set until
# the largest entry change is below this fraction of the largest entry, then
# the check of every other row (at most _CD_MAX_SWEEPS sweeps per W block).
# Tightening both tolerances 100x changes no selection of the tests
# (tests/test_sparse_rrr.py).
_CD_TOL = 1e-10
# The alternation's tolerance in the fits of a path (fit_sparse_rrr's default).
_PATH_TOL = 1e-8
_CD_MAX_SWEEPS = 2000
# Anderson extrapolation of the sweeps (2-3x fewer sweeps at Patch-seq scale).
_ACCELERATE = True
# Far from the optimum, the W block of an alternation is solved to this
# fraction of the alternation's last relative step (no looser than
# _INNER_LOOSEST); the last block always to _CD_TOL. A third of the sweeps.
_INNER_FRACTION = 1e-2
_INNER_LOOSEST = 1e-4
# A start with more rows than this in the model (a dense start) gets one
# sweep first, after which its zero rows leave the working set.
_PRUNE_FROM = 256
# Smallest ratio of two neighbouring weights on the path of first blocks
# (_first_blocks): a warm start from far above enters too many rows at once.
_LADDER = 2 / 3


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
    return _absolute_penalty(
        float(np.trace(Sxx)), Sxx.shape[0], tr_yy, n_samples, n_target, sparsity
    )


def _absolute_penalty(tr_xx, p, tr_yy, n_samples, n_target, sparsity):
    """:func:`sparse_rrr_penalty` from the trace of ``Sxx``."""
    _check_sparsity(sparsity)
    if sparsity == 0:
        return 0.0
    return float(sparsity * 2 * np.sqrt(tr_xx * tr_yy / (p * n_target * n_samples)))


def _check_sparsity(sparsity):
    ok = np.isscalar(sparsity) and not isinstance(sparsity, (str, bool, np.bool_))
    if not ok or not np.isfinite(sparsity) or sparsity < 0:
        raise ValueError(
            f"sparsity must be a non-negative finite number (0 keeps every neuron), "
            f"got {sparsity!r}."
        )


def _penalised_loss(W, V, gram, Sxy, tr_yy, lam):
    """``||Y - X W V^T||^2 + alpha ||W||^2 + lam sum_i ||W[i]||`` from moments (V^T V = I)."""
    on = np.flatnonzero(np.any(W != 0, axis=1))
    # the rows left out add nothing: a sparse W costs its support
    Wo = W[on]
    sq_err = tr_yy - 2 * float(np.sum(Wo * (Sxy[on] @ V))) + gram.quad(W)
    return sq_err + gram.alpha * float(np.sum(Wo * Wo)) + lam * group_norm_sum(Wo)


def _procrustes(M, V_old):
    """``argmax_V tr(V^T M)`` over orthonormal ``V`` (q, r): the polar factor of ``M``."""
    if not np.any(M):
        # W = 0: every V is optimal; keep the current one
        return V_old
    P, _, Qt = linalg.svd(M, full_matrices=False)
    return P @ Qt


class _Gram:
    """``A = Sxx + alpha I`` as the row descent reads it: blocks, products, diagonal.

    From the scatter ``Sxx`` (the moments), or from the centred source data
    ``Xc`` (n, p) where there are fewer samples than neurons: then no
    (p, p) matrix is formed, a block of the working set costs ``n m^2`` and
    a product with ``W`` costs ``n p r`` (``A W = Xc^T (Xc W) + alpha W``).
    """

    def __init__(self, alpha, Sxx=None, Xc=None):
        self.alpha = float(alpha)
        self.Xc = Xc
        if Xc is not None:
            self.A = None
            self.diag = np.einsum("ti,ti->i", Xc, Xc) + self.alpha
        else:
            # symmetric to the last bit: a scatter summed in floating point
            # is symmetric to rounding only
            A = (Sxx + Sxx.T) / 2
            if alpha > 0:
                A[np.diag_indices_from(A)] += alpha
            self.A = A
            self.diag = np.diag(A).copy()

    def block(self, rows):
        """``A[rows][:, rows]``, C-contiguous."""
        if self.A is not None:
            return np.ascontiguousarray(self.A[np.ix_(rows, rows)])
        X = self.Xc[:, rows]
        B = X.T @ X
        B = (B + B.T) / 2
        B[np.diag_indices_from(B)] += self.alpha
        return B

    def times(self, W):
        """``A @ W`` for every row, from the non-zero rows of ``W`` (p, r)."""
        on = np.flatnonzero(np.any(W != 0, axis=1))
        if on.size == 0:
            return np.zeros_like(W)
        if self.A is not None:
            # A is symmetric: its rows are contiguous, its columns are not
            return (W[on].T @ self.A[on]).T
        return self.Xc.T @ (self.Xc[:, on] @ W[on]) + self.alpha * W

    def quad(self, W):
        """``tr(W^T Sxx W)`` (without the ridge)."""
        on = np.flatnonzero(np.any(W != 0, axis=1))
        if self.A is not None:
            Wo = W[on]
            return float(np.sum(Wo * (self.A[np.ix_(on, on)] @ Wo))) - self.alpha * float(
                np.sum(Wo * Wo)
            )
        F = self.Xc[:, on] @ W[on]
        return float(np.sum(F * F))


def _group_lasso_rows(gram, G, lam, W, tol=_CD_TOL):
    """Minimise ``tr(W^T A W) - 2 tr(W^T G) + lam sum_i ||W[i]||`` by row descent.

    The compiled kernel :func:`mics.core.kernels.group_lasso_rows` sweeps
    the rows of a *working set*: the rows of the start that are not zero
    and the rows whose optimality condition the start violates (a zero row
    is optimal iff ``||G[i] - (A W)[i]|| <= lam / 2``). Rows of a large
    start that the first sweep sets to zero leave it. When the sweeps have
    settled, every row outside is checked at once, by one product with
    ``W``; the rows that violate their condition enter and the sweeps
    resume. The working set changes the work, not the solution.

    It is smaller than the set the sequential strong rule (Tibshirani et
    al. 2012) keeps, which always contains it (a violator at the start
    passes the rule): sweeping the strong set took twice the time at
    Patch-seq scale (80 x 1313 x 80) and 1.1-1.3x at the demo scale
    (1213 x 1000 x 16). The rule saves the gradients of the rows it
    discards; here those cost one product with the rows of ``W`` in the
    model, less than the blocks of ``A`` the larger set needs.

    Parameters
    ----------
    gram : _Gram
        ``A = Sxx + alpha I`` (positive semi-definite).
    G : ndarray of shape (p, r)
        ``Sxy V``.
    lam : float
    W : ndarray of shape (p, r)
        Warm start (not modified).
    tol : float
        The sweeps stop when none moves an entry by more than this fraction
        of the largest entry.

    Returns
    -------
    ndarray of shape (p, r)
        Each row update is that row's exact minimiser given the others, so
        the objective never increases from the start.
    """
    from mics.core.kernels import group_lasso_rows

    half = lam / 2
    can = gram.diag > 0
    W = np.array(W, dtype=float)
    work = np.any(W != 0, axis=1)
    AW = gram.times(W)
    prune = work.sum() > _PRUNE_FROM
    sweeps, settled = 0, False
    while sweeps < _CD_MAX_SWEEPS:
        # rows whose condition is violated enter (at the start too: each
        # would otherwise cost a check and a restart of the sweeps)
        R = G - AW
        enter = can & ~work & (np.einsum("ik,ik->i", R, R) > half * half)
        if settled and not enter.any():
            break
        work |= enter
        rows = np.flatnonzero(work)
        if rows.size == 0:
            break  # (W is zero and no row can enter)
        Wt = np.ascontiguousarray(W[rows].T)
        AWt = np.ascontiguousarray(AW[rows].T)
        done, settled = group_lasso_rows(
            gram.block(rows),
            np.ascontiguousarray(G[rows].T),
            half,
            Wt,
            AWt,
            tol,
            1 if prune else _CD_MAX_SWEEPS - sweeps,
            _ACCELERATE,
        )
        sweeps += done
        W[rows] = Wt.T
        if prune:
            # the rows that a dense start's first sweep set to zero leave
            # the working set (the check brings back any that should not)
            work[rows] = np.any(Wt != 0, axis=0)
            prune = False
        AW = gram.times(W)
    return W


def _dense_start(Sxx, Sxy, rank, alpha):
    """The dense (lam = 0) minimiser ``(W, V)``: exact, and the start for lam > 0."""
    (B_r,), V_all = reduced_rank_path(Sxx, Sxy, [rank], alpha=alpha, exact_ridge=True)
    V = V_all[:, :rank]
    return B_r @ V, V


def _dense_samples(Xc, Yc, alpha):
    """Full-rank coefficients and the fitted values' axes, from data with n < p.

    The minimiser of :func:`_dense_start` in the space of the samples
    (``B = Xc^T (Xc Xc^T + alpha I)^+ Yc``, the push-through identity), at
    ``O(n^2 p)`` instead of the ``O(p^3)`` of a solve with ``Sxx``.
    """
    K = Xc @ Xc.T
    evals, U = linalg.eigh((K + K.T) / 2)
    evals = evals + alpha
    # the minimum-norm solution where the kernel is singular (alpha = 0; the
    # centred rows are dependent), as the moment path's least squares gives
    keep = evals > np.finfo(float).eps * max(Xc.shape) * max(evals[-1], 0.0)
    inv = np.zeros_like(evals)
    inv[keep] = 1.0 / evals[keep]
    B_full = Xc.T @ (U @ (inv[:, None] * (U.T @ Yc)))
    F = Xc @ B_full
    fitted = F.T @ F + alpha * (B_full.T @ B_full)
    _, V_all = linalg.eigh((fitted + fitted.T) / 2)
    return B_full, V_all[:, ::-1]


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
    descent, :func:`mics.core.kernels.group_lasso_rows`), from the dense
    solution (or ``init``). See the module docstring for the units of
    ``alpha`` and ``sparsity``.

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
        Sxx, Sxy = _checked(Sxx, Sxy, rank, alpha)
        lam = sparse_rrr_penalty(Sxx, tr_yy, n_samples, Sxy.shape[1], sparsity)
        if init is None:
            init = _dense_start(Sxx, Sxy, rank, alpha)
        return _fit_sparse_rrr(
            _Gram(alpha, Sxx=Sxx), Sxy, tr_yy, rank, lam, init, max_iter=max_iter, tol=tol
        )


def _checked(Sxx, Sxy, rank, alpha):
    Sxy = np.asarray(Sxy, dtype=float)
    p, q = Sxy.shape
    if Sxx is not None:
        Sxx = np.asarray(Sxx, dtype=float)
        if Sxx.shape != (p, p):
            raise ValueError(f"Sxx has shape {Sxx.shape} but Sxy has {p} source rows.")
    if not (isinstance(rank, (int, np.integer)) and 0 <= rank <= min(p, q)):
        raise ValueError(
            f"rank must be an integer between 0 and min(n_source, n_target) = "
            f"{min(p, q)}, got {rank!r}."
        )
    if not (np.isscalar(alpha) and np.isfinite(alpha) and alpha >= 0):
        raise ValueError(f"alpha must be a non-negative finite number, got {alpha!r}.")
    return Sxx, Sxy


def _fit_sparse_rrr(gram, Sxy, tr_yy, rank, lam, init, *, max_iter, tol, first=None):
    """The alternation of :func:`fit_sparse_rrr` at an absolute weight ``lam``.

    ``first`` is the solution of the first W block (given the V that
    follows ``init``), found along a path by :func:`_first_blocks`.
    """
    p, q = Sxy.shape
    W, V = (np.array(a, dtype=float) for a in init)
    if W.shape != (p, rank) or V.shape != (q, rank):
        raise ValueError(f"init must be (W, V) of shapes {(p, rank)} and {(q, rank)}.")

    losses = [_penalised_loss(W, V, gram, Sxy, tr_yy, lam)]
    B = W @ V.T
    converged = rank == 0
    n_iter = 0
    inner_tol = _CD_TOL
    while not converged and n_iter < max_iter:
        V = _procrustes(Sxy.T @ W, V)
        G = Sxy @ V
        if lam == 0:
            W = solve_psd(gram.A, G)
        elif n_iter == 0 and first is not None:
            W = first
        else:
            W = _group_lasso_rows(gram, G, lam, W, tol=inner_tol)
        losses.append(_penalised_loss(W, V, gram, Sxy, tr_yy, lam))
        n_iter += 1
        # On the coefficients, not the loss: near the optimum the loss is
        # flat (changes like the square of the step), the subspace is not.
        B_old, B = B, W @ V.T
        step, size = np.linalg.norm(B - B_old), np.linalg.norm(B)
        small = step <= tol * max(size, np.finfo(float).tiny)
        # (a small step counts only from a block solved to the full
        # tolerance: a looser one could stop early for its own reasons)
        converged = (small and inner_tol <= _CD_TOL) or not np.any(W)
        # The W block need not be solved much more precisely than the
        # alternation moves: far from the optimum a hundredth of its last
        # step will do; near it, the full tolerance.
        step = step / size if size > 0 else 1.0
        inner_tol = _CD_TOL if small else min(max(_CD_TOL, _INNER_FRACTION * step), _INNER_LOOSEST)
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


def _first_blocks(gram, Sxy, start, lams):
    """The first W block of every fit along a path, by warm starts.

    From the dense start every fit takes the same first step, the V of
    :func:`_procrustes`, so its first W block is one convex group lasso
    whose weight alone changes along the path. That path is solved as
    glmnet solves its own: from the weight at which every row is zero
    down, each weight warm-started from the one before, with weights
    inserted where two neighbours are further apart than ``_LADDER`` (a
    start from far above puts too many rows in the working set at once);
    the inserted ones are solved loosely. The solutions are those of the
    blocks solved alone (a convex problem, each solved to the tolerance),
    found with fewer sweeps.

    Returns
    -------
    dict
        ``lam -> W`` for every positive ``lam``.
    """
    W0, V0 = start
    G = Sxy @ _procrustes(Sxy.T @ W0, V0)
    can = gram.diag > 0
    W = np.zeros_like(W0)
    # at and above this weight the block's solution is zero
    lam_prev = 2 * float(np.sqrt(np.einsum("ik,ik->i", G, G))[can].max()) if can.any() else 0.0
    out = {}
    for lam in sorted({float(v) for v in lams if v > 0}, reverse=True):
        while lam < lam_prev:
            step = max(lam, _LADDER * lam_prev)
            tol = _CD_TOL if step == lam else _INNER_LOOSEST
            W = _group_lasso_rows(gram, G, step, W, tol=tol)
            lam_prev = step
        out[lam] = W
    return out


def sparse_rrr_path(Sxx, Sxy, tr_yy, n_samples, rank, sparsities, alpha=0.0, *, data=None):
    """:func:`fit_sparse_rrr` at several sparsities, sharing one dense start.

    Every fit starts from the dense solution, as :func:`fit_sparse_rrr`
    does by default, so each equals the fit at its sparsity alone: the
    problem is not convex in ``(W, V)``, and a path warm-started from its
    neighbour could end elsewhere than the refit on all data that follows
    a cross-validation. What the fits share is solved once along the path:
    their first W block, a convex problem that differs between them in its
    weight only, solved from the sparsest fit down with warm starts
    (:func:`_first_blocks`).

    Parameters
    ----------
    Sxx : ndarray of shape (p, p) or None
        As :func:`fit_sparse_rrr`; None with ``data`` of fewer samples than
        source neurons (it is not needed then).
    Sxy, tr_yy, n_samples, rank, alpha
        As :func:`fit_sparse_rrr`.
    sparsities : sequence of float
    data : tuple of ndarray (Xc, Yc), optional
        The centred arrays behind the moments, of shapes (n, p) and (n, q).
        With fewer samples than source neurons the fits work from them
        instead of ``Sxx`` (:class:`_Gram`), and the dense start is computed
        in the space of the samples: the same minimisers, without the
        (p, p) scatter and its ``O(p^3)`` solve.

    Returns
    -------
    list of SparseRRRFit
        One per sparsity, in the order given.
    """
    paths = SparseRRRPaths(Sxx, Sxy, tr_yy, n_samples, alpha, data=data)
    _checked(None, paths.Sxy, rank, alpha)
    return paths.path(rank, sparsities)


class SparseRRRPaths:
    """The sparse RRR fits of one training set at any rank, sharing its moments and dense solve.

    The cross-validation of :class:`mics.ReducedRankRegressionCV` fits each
    fold at several ranks, one rank after the other: the fold's scatter,
    its :class:`_Gram` and the dense solve behind every rank's start are
    made once here.

    Parameters
    ----------
    Sxx : ndarray of shape (p, p) or None
        As :func:`sparse_rrr_path` (None with ``data`` of fewer samples
        than source neurons).
    Sxy : ndarray of shape (p, q)
    tr_yy : float
    n_samples : int
    alpha : float, default=0.0
    data : tuple of ndarray (Xc, Yc), optional
        As :func:`sparse_rrr_path`.
    keep : ndarray of bool, shape (p_all,), optional
        The source neurons the moments are of, among ``p_all`` (the others,
        without variance, get zero rows in :meth:`coefficients`).
    means : tuple of ndarray (x_mean, y_mean), optional
        Of shapes (p_all,), (q,): the intercepts of :meth:`coefficients` are
        ``y_mean - x_mean @ B``.
    """

    def __init__(self, Sxx, Sxy, tr_yy, n_samples, alpha=0.0, *, data=None, keep=None, means=None):
        Sxx, Sxy = _checked(Sxx, Sxy, 0, alpha)
        p = Sxy.shape[0]
        self.Sxx, self.Sxy, self.tr_yy, self.n_samples = Sxx, Sxy, float(tr_yy), n_samples
        self.alpha = float(alpha)
        if data is not None and data[0].shape[0] < p:
            self.data = tuple(np.asarray(a, dtype=float) for a in data)
            self.gram = _Gram(alpha, Xc=self.data[0])
            self.tr_xx = float(np.sum(self.gram.diag)) - p * self.alpha
        else:
            if Sxx is None:
                raise ValueError("Sxx is needed unless data has fewer samples than neurons.")
            self.data = None
            self.gram = _Gram(alpha, Sxx=Sxx)
            self.tr_xx = float(np.trace(Sxx))
        self.keep = np.ones(p, dtype=bool) if keep is None else np.asarray(keep)
        self.means = means
        self._dense = None

    @classmethod
    def from_sums(cls, sums, alpha=0.0):
        """From linear moments (:class:`mics.core.RawLinearMoments`).

        Neurons without variance are left out (the reference's rule, as
        :func:`mics.core.rrr.reduced_rank_path_from_sums`); intercepts of
        :meth:`coefficients` are in the moments' shifted basis:
        ``y - y_shift = (x - x_shift) B + c``.
        """
        n, sx, sy = sums.n, sums.sx, sums.sy
        Sxx = sums.Sxx - np.outer(sx, sx) / n
        Sxy = sums.Sxy - np.outer(sx, sy) / n
        tr_yy = float(np.trace(sums.Syy) - sy @ sy / n)
        keep = np.diag(Sxx) / max(n - 1, 1) >= np.finfo(np.float64).eps
        return cls(
            Sxx[np.ix_(keep, keep)], Sxy[keep], tr_yy, n, alpha, keep=keep, means=(sx / n, sy / n)
        )

    def start(self, rank):
        """The dense minimiser ``(W, V)`` at ``rank`` (as :func:`_dense_start`)."""
        if self._dense is None:
            if self.data is not None:
                self._dense = _dense_samples(*self.data, self.alpha)
            else:
                A = self.Sxx + self.alpha * np.eye(len(self.Sxx)) if self.alpha > 0 else self.Sxx
                B_full = solve_psd(A, self.Sxy)
                fitted = B_full.T @ A @ B_full  # (the exact ridge's axes)
                V_all = linalg.eigh((fitted + fitted.T) / 2)[1][:, ::-1]
                self._dense = (B_full, V_all)
        B_full, V_all = self._dense
        V = V_all[:, :rank]
        if self.data is not None:
            return B_full @ V, V
        # (the coefficients as reduced_rank_path forms them)
        return ((B_full @ V) @ V.T) @ V, V

    def path(self, rank, sparsities):
        """Fits at ``rank`` and each sparsity, as :func:`sparse_rrr_path` makes them.

        ``rank`` is lowered to the number of source neurons if above it.
        """
        p, q = self.Sxy.shape
        rank = min(rank, p)
        with single_blas_thread():
            lams = [
                _absolute_penalty(self.tr_xx, p, self.tr_yy, self.n_samples, q, s)
                for s in sparsities
            ]
            return _path(self.gram, self.Sxy, self.tr_yy, rank, lams, self.start(rank))

    def coefficients(self, rank, sparsities):
        """Coefficients (p_all, q), zero rows for the neurons left out, and intercepts (q,).

        Returns
        -------
        coefs, intercepts : list of ndarray
            One per sparsity (intercepts None without ``means``).
        """
        coefs = []
        for fit in self.path(rank, sparsities):
            B = np.zeros((self.keep.size, self.Sxy.shape[1]))
            B[self.keep] = fit.coef
            coefs.append(B)
        if self.means is None:
            return coefs, None
        x_mean, y_mean = self.means
        return coefs, [y_mean - x_mean @ B for B in coefs]


def _path(gram, Sxy, tr_yy, rank, lams, start):
    """The fits of :func:`sparse_rrr_path` at absolute weights ``lams``."""
    firsts = _first_blocks(gram, Sxy, start, lams) if rank > 0 and any(lams) else {}
    fits = []
    for lam in lams:
        if lam == 0:
            # the dense start is the minimiser itself
            fit = _fit_sparse_rrr(gram, Sxy, tr_yy, rank, lam, start, max_iter=0, tol=0)
            fits.append(replace(fit, converged=True))
            continue
        fits.append(
            _fit_sparse_rrr(
                gram,
                Sxy,
                tr_yy,
                rank,
                lam,
                start,
                max_iter=1000,
                tol=_PATH_TOL,
                first=firsts.get(lam),
            )
        )
    return fits


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
    return SparseRRRPaths.from_sums(sums, alpha).coefficients(rank, sparsities)
