"""Sparse channel patterns: a group lasso over neurons on top of the ridge.

With sparsity, the channel penalty of the MIC loss (MODEL.md section 3)
becomes an elastic net over *neurons*::

    alpha_W sum_k (||a_k||^2 + ||b_k||^2 + ||c_k||^2)
        + lam_A sum_i ||A[i, :]|| + lam_B sum_j ||B[j, :]|| + lam_C sum_a ||C[a, :]||

Each row of the source patterns ``A`` (p, K) is one source neuron across
all channels, so the group norm sets a neuron to zero in every channel at
once (a neuron is in or out of the interacting subpopulation); likewise
the target rows of ``B`` (q, K) and the modulator rows of ``C`` (m, K).

Every ALS block stays a convex problem on the Gram the dense block
solves:

- target block: the rows of ``B`` decouple (one K x K Gram ``H_int``
  shared by all of them), and each row's group-lasso problem is solved
  exactly through the eigenvectors of ``H_int`` and a scalar root
  (:func:`solve_group_rows`);
- source and modulator blocks: the rows are coupled through the Gram
  ``H[(k, i), (l, j)] = BtB[k, l] N[k, l, i, j]``, so they are solved by
  accelerated proximal gradient (FISTA) with a function-value restart that
  never accepts a step raising the block objective, warm-started from the
  current factor (:func:`solve_group_factor`).

Both operators of :mod:`mics.core.als` (moments, data) supply the same
Grams, so both paths -- and Dask inputs, which are fitted from moments --
get the same penalty. The hooks in :mod:`mics.core.als` call
:meth:`GroupPenalty.sweep` and :meth:`GroupPenalty.finish` in place of the
dense block solves; without a group penalty nothing changes there. This
module does not import :mod:`mics.core.als` (which imports it lazily), so
the few dense helpers it needs are restated here.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy import linalg

from mics.core.linalg import solve_psd

__all__ = [
    "GroupPenalty",
    "group_soft_threshold",
    "group_norm_sum",
    "solve_group_rows",
    "solve_group_factor",
    "sparse_settings",
    "sparse_factors",
]

# Inner proximal-gradient iterations per block update and their stopping
# rule (relative change of the factor). Tight, so that the moment and data
# paths, whose Grams differ by rounding only, stop at the same solution.
_FISTA_MAX_ITER = 2000
_FISTA_TOL = 1e-10
# Bisection steps of the exact row solver (halves the bracket each time).
_ROW_BISECTIONS = 100
# Largest K * d whose joint Gram is formed (as the dense ALS block does).
_JOINT_MAX = 256


def _joint_gram(N, BtB):
    """``H[(k, i), (l, j)] = BtB[k, l] N[k, l, i, j]`` as a (K d, K d) matrix."""
    K, _, d, _ = N.shape
    N = np.asarray(N)  # the data path forms its blocks lazily
    return (BtB[:, :, None, None] * N).transpose(0, 2, 1, 3).reshape(K * d, K * d)


def _contract(N, V):
    """``H[k, l] = V[:, k]^T N[k, l] V[:, l]`` (N of shape (K, K, d, d) or lazy)."""
    if hasattr(N, "contract"):
        return N.contract(V)
    return np.einsum("ak,klab,bl->kl", V, np.asarray(N), V)


def _balance_scales(A, Bm, C):
    """Per-channel scales equalising the three factor norms (same product)."""
    na, nb, nc = (np.linalg.norm(F, axis=0) for F in (A, Bm, C))
    g = np.cbrt(na * nb * nc)
    with np.errstate(divide="ignore", invalid="ignore"):
        return tuple(np.where(x > 0, g / x, 0.0) for x in (na, nb, nc))


def group_norm_sum(F):
    """``sum_i ||F[i, :]||``: the group-lasso norm over the rows of ``F`` (d, K)."""
    return float(np.sum(np.linalg.norm(F, axis=1)))


def group_soft_threshold(F, threshold):
    """Proximal operator of ``threshold * sum_i ||F[i, :]||``.

    Parameters
    ----------
    F : ndarray of shape (d, K)
    threshold : float
        Non-negative.

    Returns
    -------
    ndarray of shape (d, K)
        Each row shrunk towards zero by ``threshold`` in norm; rows with norm
        at most ``threshold`` are exactly zero.
    """
    norms = np.linalg.norm(F, axis=1, keepdims=True)
    with np.errstate(divide="ignore", invalid="ignore"):
        scale = np.where(norms > threshold, 1.0 - threshold / norms, 0.0)
    return F * scale


def solve_group_rows(H, G, alpha, lam):
    """Exact minimiser of ``sum_j b_j^T (H + alpha I) b_j - 2 g_j^T b_j + lam ||b_j||``.

    The rows decouple. A row is zero iff ``||g_j|| <= lam / 2``; otherwise
    its optimality condition ``(H + (alpha + mu) I) b = g`` with
    ``mu = lam / (2 ||b||)`` fixes ``mu`` as the root of the increasing
    function ``mu ||(H + (alpha + mu) I)^-1 g|| = lam / 2``, found by
    bisection in the eigenbasis of ``H`` (all rows at once).

    Parameters
    ----------
    H : ndarray of shape (K, K)
        Symmetric positive semi-definite Gram.
    G : ndarray of shape (d, K)
        Right-hand sides, one row per group.
    alpha, lam : float
        Ridge and group-lasso weights (non-negative).

    Returns
    -------
    ndarray of shape (d, K)
    """
    evals, U = linalg.eigh(H)
    evals = np.maximum(evals, 0.0) + alpha
    Gt = G @ U
    gnorm = np.linalg.norm(G, axis=1)
    half = lam / 2
    active = gnorm > half
    out = np.zeros_like(G)
    if not np.any(active):
        return out
    Ga, na = Gt[active], gnorm[active]
    # psi(mu) >= mu ||g|| / (e_max + mu), so psi(hi) >= lam / 2 at this hi.
    lo = np.zeros(na.size)
    hi = half * (evals[-1] + 1.0) / (na - half) + 1e-300
    # (the +1 keeps the bracket valid when H and alpha vanish)
    for _ in range(_ROW_BISECTIONS):
        mid = 0.5 * (lo + hi)
        psi = mid * np.sqrt(np.sum((Ga / (evals + mid[:, None])) ** 2, axis=1))
        below = psi < half
        lo = np.where(below, mid, lo)
        hi = np.where(below, hi, mid)
    mu = 0.5 * (lo + hi)
    out[active] = (Ga / (evals + mu[:, None])) @ U.T
    return out


def _factor_matvec(N, BtB):
    """``F -> G(F)`` with ``G(F)[:, k] = sum_l BtB[k, l] N[k, l] F[:, l]`` (F of shape (d, K)).

    Small problems form the joint Gram (as the dense solve does); larger
    ones multiply block by block, which a lazy
    :class:`~mics.core.grams.WeightedGrams` answers without forming its
    off-diagonal blocks.
    """
    K, _, d, _ = N.shape
    if K * d <= _JOINT_MAX:
        H = _joint_gram(N, BtB)
        L = float(linalg.eigh(H, eigvals_only=True, subset_by_index=[K * d - 1, K * d - 1])[0])
        return (lambda F: (H @ F.T.reshape(-1)).reshape(K, d).T), max(L, 0.0)

    def matvec(F):
        out = np.zeros_like(F)
        for k in range(K):
            for l in range(K):
                if BtB[k, l] != 0:
                    out[:, k] += BtB[k, l] * (N[k, l] @ F[:, l])
        return out

    # Largest eigenvalue by power iteration, inflated: an underestimate is
    # caught by the step control below (a rejected plain step doubles it).
    rng = np.random.default_rng(0)
    v = rng.standard_normal((d, K))
    L = 0.0
    for _ in range(30):
        w = matvec(v)
        L = float(np.linalg.norm(w))
        if L == 0:
            break
        v = w / L
    return matvec, 1.1 * L


def solve_group_factor(N, BtB, rhs, alpha, lam, current, max_iter=None, tol=None):
    """Minimise ``<F, G(F)> - 2 <rhs, F> + alpha ||F||^2 + lam sum_i ||F[i, :]||``.

    ``G`` is the factor's Gram in the ALS (``G(F)[:, k] = sum_l BtB[k, l]
    N[k, l] F[:, l]``, the quadratic form the dense block solves with a
    ridge only). Accelerated proximal gradient from ``current``; a step
    whose objective is higher than the last accepted one is discarded and
    the momentum restarted (a plain proximal-gradient step at the exact
    Lipschitz constant cannot increase it; where the constant was only
    estimated it is doubled instead). The objective at the returned
    factor is therefore never above that at ``current``.

    Parameters
    ----------
    N : ndarray of shape (K, K, d, d) or WeightedGrams
    BtB : ndarray of shape (K, K)
    rhs : ndarray of shape (d, K)
    alpha, lam : float
        Ridge and group-lasso weights.
    current : ndarray of shape (d, K)
        Warm start.
    max_iter : int, optional
    tol : float, optional
        Relative change of the factor that stops the iterations.

    Returns
    -------
    ndarray of shape (d, K)
    """
    max_iter = _FISTA_MAX_ITER if max_iter is None else max_iter
    tol = _FISTA_TOL if tol is None else tol
    matvec, L_H = _factor_matvec(N, BtB)
    L = 2 * (L_H + alpha)
    step_floor = 1e6 * L  # shortest step tried before giving up
    if L <= 0:
        # no data: the minimiser of a pure penalty is zero
        return np.zeros_like(current)

    def objective(F, GF):
        return float(
            np.sum(F * GF) - 2 * np.sum(rhs * F) + alpha * np.sum(F * F) + lam * group_norm_sum(F)
        )

    x = np.array(current, dtype=float)
    Gx = matvec(x)
    fx = objective(x, Gx)
    y, Gy, t, plain = x, Gx, 1.0, True
    for _ in range(max_iter):
        grad = 2 * (Gy - rhs + alpha * y)
        z = group_soft_threshold(y - grad / L, lam / L)
        Gz = matvec(z)
        fz = objective(z, Gz)
        if fz > fx:
            if plain:
                # A plain step went up: the step was too long (or rounding at
                # the optimum). Shorten it; give up when it no longer helps.
                L *= 2
                if step_floor < L:
                    break
                continue
            y, Gy, t, plain = x, Gx, 1.0, True
            continue
        t_next = (1 + np.sqrt(1 + 4 * t * t)) / 2
        beta = (t - 1) / t_next
        step = np.linalg.norm(z - x)
        # G is linear: G(y) follows from G(z) and G(x) without another product
        y = z + beta * (z - x)
        Gy = Gz + beta * (Gz - Gx)
        x, Gx, fx, t, plain = z, Gz, fz, t_next, False
        if step <= tol * max(np.linalg.norm(x), np.finfo(float).tiny):
            break
    return x


@dataclass(frozen=True)
class GroupPenalty:
    """Absolute group-lasso weights on the rows of the channel factors.

    Attributes
    ----------
    source, target, modulator : float
        ``lam_A``, ``lam_B``, ``lam_C`` in the units of the loss (scatter);
        zero leaves that factor ridge-only. From :func:`mics.core.als.penalties`.
    """

    source: float = 0.0
    target: float = 0.0
    modulator: float = 0.0

    def value(self, A, Bm, C):
        """The group-lasso term of the loss at factors A (p, K), Bm (q, K), C (m, K)."""
        return (
            self.source * group_norm_sum(A)
            + self.target * group_norm_sum(Bm)
            + self.modulator * group_norm_sum(C)
        )

    def _factor(self, N, BtB, rhs, alpha_W, lam, current):
        K, _, d, _ = N.shape
        if lam == 0 and K * d <= _JOINT_MAX:
            # ridge only: the exact joint solve of the dense block
            H = _joint_gram(N, BtB)
            H[np.diag_indices_from(H)] += alpha_W
            return solve_psd(H, rhs.T.reshape(-1)).reshape(K, d).T
        # (a large ridge-only block converges to its solve by the same iterations)
        return solve_group_factor(N, BtB, rhs, alpha_W, lam, current)

    def sweep(self, op, A, Bm, C, alpha_W, base_penalty):
        """One ALS sweep (source, modulator, target) with the group penalty.

        Returns ``A, Bm, C, H_int, loss`` as the dense sweep of
        :func:`mics.core.als._als_sweeps` computes them; ``loss`` is the
        full penalised loss (squared error, ridge, group lasso and
        ``base_penalty``).
        """
        BtB = Bm.T @ Bm
        A = self._factor(op.gram_source(C), BtB, op.rhs_source(C, Bm), alpha_W, self.source, A)
        N_A = op.gram_modulator(A)
        C = self._factor(N_A, BtB, op.rhs_modulator(A, Bm), alpha_W, self.modulator, C)
        return self.finish(op, A, C, alpha_W, base_penalty, N_A)

    def finish(self, op, A, C, alpha_W, base_penalty, N_A=None):
        """Target block given A and C, then the rebalancing if it lowers the loss.

        The dense fit always rebalances the channel norms (equal norms
        minimise the ridge for a fixed product); the row-group norms mix
        channels, so here the rebalanced factors are kept only where their
        penalised loss is lower.
        """
        H_int = op.interaction_gram(A, C) if N_A is None else _contract(N_A, C)
        g = op.rhs_target(A, C)
        if self.target == 0:
            Bm = solve_psd(H_int + alpha_W * np.eye(H_int.shape[0]), g.T).T
        else:
            Bm = solve_group_rows(H_int, g, alpha_W, self.target)
        sq_err = op.rr - 2 * float(np.sum(g * Bm)) + float(np.sum((Bm @ H_int) * Bm))
        loss = self.penalised(sq_err, A, Bm, C, alpha_W, base_penalty)
        sa, sb, sc = _balance_scales(A, Bm, C)
        s = sa * sc
        A_b, Bm_b, C_b = A * sa, Bm * sb, C * sc
        loss_b = self.penalised(sq_err, A_b, Bm_b, C_b, alpha_W, base_penalty)
        if loss_b < loss:
            return A_b, Bm_b, C_b, H_int * np.outer(s, s), loss_b
        return A, Bm, C, H_int, loss

    def penalised(self, sq_err, A, Bm, C, alpha_W, base_penalty):
        """Squared error plus every penalty (ridge, group lasso, baseline)."""
        ridge = alpha_W * (np.sum(A**2) + np.sum(Bm**2) + np.sum(C**2))
        return sq_err + ridge + self.value(A, Bm, C) + base_penalty


def sparse_settings(config):
    """The ``sparsity`` and ``sparse_on`` settings of an estimator's parameters.

    Parameters
    ----------
    config : object
        With the attributes of :class:`mics.MICs` (a ``SimpleNamespace`` of
        ``get_params()``); parameter sets without them (older callers) fit
        dense.

    Returns
    -------
    dict
        Keyword arguments of :func:`mics.core.als.penalties`.
    """
    return {
        "sparsity": getattr(config, "sparsity", 0.0) or 0.0,
        "sparse_on": sparse_factors(getattr(config, "sparse_on", "all")),
    }


def sparse_factors(sparse_on):
    """Factor names from ``sparse_on``: "all", a comma-separated string or a sequence.

    A string keeps the setting a plain scalar (saved with the model by
    :meth:`mics.MICs.to_netcdf`).
    """
    if isinstance(sparse_on, str):
        if sparse_on == "all":
            return ("source", "target", "modulator")
        return tuple(name.strip() for name in sparse_on.split(","))
    return tuple(sparse_on)
