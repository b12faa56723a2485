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
  current factor (:func:`solve_group_factor`);
- the scale of each channel: the three factors of a channel can be scaled
  by any amounts whose product is one without changing the model, and
  after every sweep they are moved to the scales that minimise the ridge
  and group penalties (:func:`optimal_scales`, a small convex problem).
  The sweeps alone would drift there only slowly.

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
# rule (relative change of the factor). Each block solve only has to lower
# the penalised loss (it never raises it, whatever the tolerance), and the
# outer sweeps stop at a relative loss change of 1e-7 (1e-6 in the folds):
# 1e-7 here leaves every selection and member list of the sparse validations
# unchanged and the moment, data and Dask paths agreeing to 1e-6 with the
# same zero pattern (tests/test_sparse.py), in less time than 1e-10
# (benchmarks/README.md, "Sparse fits: the cost").
_FISTA_MAX_ITER = 2000
_FISTA_TOL = 1e-7
# Iterations of the exact row solver's safeguarded Newton root (a handful
# suffice; bisection steps, taken only where rounding throws Newton out of
# its bracket, halve the bracket each).
_ROW_ITERATIONS = 100
_ROW_RTOL = 1e-14
# Largest K * d whose joint Gram is formed (as the dense ALS block does).
_JOINT_MAX = 256
# Lanczos steps estimating the step size of the proximal gradient, and the
# largest K * d whose Gram is small enough for an exact eigenvalue instead.
_LANCZOS_STEPS = 6
_EXACT_MAX = 64
# (looked up once: np.finfo is slow for an inner loop)
_TINY = np.finfo(float).tiny


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


# Newton iterations of the optimal rebalancing (:func:`optimal_scales`); it
# converges quadratically from the current scales, a few steps in practice.
_SCALE_ITERATIONS = 50
_SCALE_GTOL = 1e-10


def optimal_scales(A, Bm, C, alpha, lam):
    """Per-channel scales of (A, Bm, C) minimising the penalty at a fixed product.

    Scaling channel ``k`` of the three factors by ``sa_k, sb_k, sc_k`` with
    ``sa_k sb_k sc_k = 1`` leaves the model (and its squared error)
    unchanged. Without a group penalty equal norms minimise the ridge; with
    one, each factor's group norm pulls differently (a source pattern over
    300 neurons pays more for its norm than a modulator pattern over 3), the
    optimum is elsewhere, and the ALS drifts there only slowly: one sweep
    moves the scales a little, so a fit could take hundreds of sweeps to
    converge along this one direction. Here the optimum is found directly.

    In log-scales ``u`` the penalty ``sum_r alpha ||F_r diag(e^u_r)||^2 +
    lam_r sum_i ||F_r[i, :] e^u_r||`` is convex (each row norm is the
    exponential of half a log-sum-exp), and the constraint is linear; it is
    minimised by Newton's method with backtracking over ``(u_A, u_C)``
    (``u_B = -u_A - u_C``), from ``u = 0``, so the result is never worse
    than the current scales.

    Parameters
    ----------
    A : ndarray of shape (p, K)
    Bm : ndarray of shape (q, K)
    C : ndarray of shape (m, K)
    alpha : float
        Ridge weight on every factor.
    lam : tuple of float
        Group-lasso weights ``(lam_A, lam_B, lam_C)``.

    Returns
    -------
    sa, sb, sc : ndarray of shape (K,)
        Channels with a zero factor get zero scales (the channel is empty:
        its product is zero and so are its penalties).
    """
    factors = (A, Bm, C)
    norms2 = np.array([np.einsum("ik,ik->k", F, F) for F in factors])  # (3, K)
    K = A.shape[1]
    live = np.all(norms2 > 0, axis=0)
    scales = np.zeros((3, K))
    if not np.any(live):
        return tuple(scales)
    n2 = norms2[:, live]
    k = int(live.sum())
    # the group terms: squared entries of the rows that are not zero (zero
    # rows cost nothing at any scale)
    groups = []
    for r, F in enumerate(factors):
        if lam[r] > 0:
            sq = F[:, live] ** 2
            groups.append((r, lam[r], sq[np.any(sq > 0, axis=1)]))

    v = np.zeros(2 * k)
    f, g, H = _scale_penalty(v, n2, groups, alpha)
    for _ in range(_SCALE_ITERATIONS):
        if np.sqrt(g @ g) <= _SCALE_GTOL * max(f, _TINY):
            break
        try:
            step = -np.linalg.solve(H, g)
        except np.linalg.LinAlgError:
            step = -g
        t, slope = 1.0, float(g @ step)
        while True:
            f_new = _scale_penalty(v + t * step, n2, groups, alpha, derivatives=False)[0]
            if f_new <= f + 1e-4 * t * slope or t < 1e-12:
                break
            t *= 0.5
        if not f_new < f:
            break
        v = v + t * step
        f, g, H = _scale_penalty(v, n2, groups, alpha)
    ua, uc = v[:k], v[k:]
    scales[:, live] = np.exp(np.stack([ua, -ua - uc, uc]))
    return tuple(scales)


def _scale_penalty(v, n2, groups, alpha, *, derivatives=True):
    """Penalty of :func:`optimal_scales` at log-scales ``v``, its gradient and its Hessian.

    ``n2`` (3, k) holds the squared norms of the live channels, ``groups``
    the ``(role, weight, squared non-zero rows)`` of the group terms.
    Gradient and Hessian are None without ``derivatives``.
    """
    k = n2.shape[1]
    # log-scales per role, v = (u_A, u_C) and u_B = -u_A - u_C
    ua, uc = v[:k], v[k:]
    w = np.exp(2 * np.stack([ua, -ua - uc, uc]))
    ridge = alpha * w * n2  # (3, k)
    f = float(ridge.sum())
    if derivatives:
        grad = 2 * ridge
        hess = np.zeros((3, k, k))
        hess[:, np.arange(k), np.arange(k)] = 4 * ridge
    for r, weight, sq in groups:
        s = sq * w[r]  # (d, k)
        rho = np.sqrt(s.sum(axis=1))
        f += weight * float(rho.sum())
        if derivatives:
            sr = s / rho[:, None]
            col = weight * sr.sum(axis=0)
            grad[r] += col
            hess[r][np.diag_indices(k)] += 2 * col
            hess[r] -= weight * (sr.T @ (sr / rho[:, None]))
    if not derivatives:
        return f, None, None
    # chain rule through u = M v
    g = np.concatenate([grad[0] - grad[1], grad[2] - grad[1]])
    H = np.empty((2 * k, 2 * k))
    H[:k, :k] = hess[0] + hess[1]
    H[k:, k:] = hess[2] + hess[1]
    H[:k, k:] = H[k:, :k] = hess[1]
    return f, g, H


def group_norm_sum(F):
    """``sum_i ||F[i, :]||``: the group-lasso norm over the rows of ``F`` (d, K)."""
    return float(np.sum(np.sqrt(np.einsum("ik,ik->i", F, F))))


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
    return _prox(F, threshold)[0]


def _prox(F, threshold):
    """:func:`group_soft_threshold` and the group norm of its result.

    The row norms of the result are ``max(||F[i, :]|| - threshold, 0)``, so
    the penalty at the new point comes free with the step (the inner loop
    of :func:`solve_group_factor` needs both).
    """
    norms = np.sqrt(np.einsum("ik,ik->i", F, F))
    kept = np.maximum(norms - threshold, 0.0)
    # kept / norms without a division by zero (kept is 0 wherever norms <= threshold)
    scale = kept / np.maximum(norms, _TINY)
    return F * scale[:, None], float(np.sum(kept))


def solve_group_rows(H, G, alpha, lam):
    """Exact minimiser of ``sum_j b_j^T (H + alpha I) b_j - 2 g_j^T b_j + lam ||b_j||``.

    The rows decouple. A row is zero iff ``||g_j|| <= lam / 2``; otherwise
    its optimality condition ``(H + (alpha + mu) I) b = g`` with
    ``mu = lam / (2 ||b||)`` fixes ``mu`` as the root of the increasing
    function ``mu ||(H + (alpha + mu) I)^-1 g|| = lam / 2``, found by
    safeguarded Newton iterations in the eigenbasis of ``H`` (all rows at
    once).

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
    evals, U = np.linalg.eigh(H)
    evals = np.maximum(evals, 0.0) + alpha
    gnorm = np.sqrt(np.einsum("ik,ik->i", G, G))
    half = lam / 2
    active = gnorm > half
    out = np.zeros_like(G)
    if not np.any(active):
        return out
    Ga, na = G[active] @ U, gnorm[active]
    # The root of f(mu) = 1 / ||(E + mu)^-1 g|| - mu / half, a concave
    # function (More & Sorensen 1983) with f(0) >= 0: Newton's iterates from
    # a point where f <= 0 decrease monotonically to the root, quadratically
    # near it. psi(mu) >= mu ||g|| / (e_max + mu) puts f(hi) <= 0 at this hi
    # (the +1 keeps it valid when H and alpha vanish). A bracket [lo, hi]
    # guards the iterates against rounding; a step leaving it bisects.
    lo = np.zeros(na.size)
    hi = half * (evals[-1] + 1.0) / (na - half) + 1e-300
    mu = hi.copy()
    for _ in range(_ROW_ITERATIONS):
        Q2 = (Ga / (evals + mu[:, None])) ** 2
        r2 = np.sum(Q2, axis=1)
        r = np.sqrt(r2)
        f = 1.0 / r - mu / half
        slope = np.sum(Q2 / (evals + mu[:, None]), axis=1) / (r2 * r) - 1.0 / half
        below = f > 0  # mu below the root
        lo = np.where(below, mu, lo)
        hi = np.where(below, hi, mu)
        with np.errstate(divide="ignore", invalid="ignore"):
            step = mu - f / slope
        # (the bracket is closed: at the root Newton's step stays on an end)
        inside = (step >= lo) & (step <= hi)
        new = np.where(inside, step, 0.5 * (lo + hi))
        # (at the root rounding leaves the iterates a few ulps apart)
        if np.all(np.abs(new - mu) <= _ROW_RTOL * mu):
            mu = new
            break
        mu = new
    out[active] = (Ga / (evals + mu[:, None])) @ U.T
    return out


def _factor_matvec(N, BtB):
    """``F -> G(F)`` with ``G(F)[:, k] = sum_l BtB[k, l] N[k, l] F[:, l]`` (F of shape (d, K)).

    Small problems form the joint Gram (as the dense solve does); larger
    ones multiply block by block: all K^2 blocks in one batched product when
    they are in memory, one block at a time for a lazy
    :class:`~mics.core.grams.WeightedGrams` (never forming its
    off-diagonal blocks).

    Returns the map and its largest eigenvalue: exact for tiny blocks,
    otherwise a Lanczos estimate (:func:`_largest_eigenvalue`) in place of
    an eigendecomposition, which cost more than the whole
    proximal-gradient solve. An underestimate is caught by the step control
    of :func:`solve_group_factor` (a rejected plain step doubles the
    constant).
    """
    K, _, d, _ = N.shape
    if K * d <= _JOINT_MAX:
        H = _joint_gram(N, BtB)

        def matvec(F):
            return (H @ F.T.reshape(-1)).reshape(K, d).T

    elif isinstance(N, np.ndarray):
        W = BtB[:, :, None]

        def matvec(F):
            # NF[k, l] = N[k, l] @ F[:, l], every pair in one batched product
            NF = np.matmul(N, F.T[None, :, :, None])[..., 0]
            return np.sum(W * NF, axis=1).T

    else:

        def matvec(F):
            out = np.zeros_like(F)
            for k in range(K):
                for l in range(K):
                    if BtB[k, l] != 0:
                        out[:, k] += BtB[k, l] * (N[k, l] @ F[:, l])
            return out

    if K * d <= _EXACT_MAX:
        # tiny blocks (modulators): the exact constant costs less than any estimate
        return matvec, max(float(np.linalg.eigvalsh(H)[-1]), 0.0)
    return matvec, _largest_eigenvalue(matvec, (d, K))


def _largest_eigenvalue(matvec, shape):
    """An estimate of the largest eigenvalue of a symmetric PSD operator on arrays of ``shape``.

    A few Lanczos steps (the largest Ritz value converges much faster than
    power iteration), plus the residual norm of its Ritz vector, which
    bounds the distance to an eigenvalue. Not a guaranteed upper bound:
    :func:`solve_group_factor` doubles the constant where a step shows it
    was too small.
    """
    rng = np.random.default_rng(0)
    v = rng.standard_normal(shape)
    v /= np.sqrt(np.vdot(v, v))
    v_prev = np.zeros(shape)
    diag, off = [], []
    beta = 0.0
    for _ in range(_LANCZOS_STEPS):
        w = matvec(v) - beta * v_prev
        a = float(np.vdot(w, v))
        w -= a * v
        diag.append(a)
        beta = float(np.sqrt(np.vdot(w, w)))
        off.append(beta)
        if beta <= 1e-12 * max(abs(a), _TINY):
            break  # an invariant subspace: the Ritz values are exact
        v_prev, v = v, w / beta
    n = len(diag)
    T = np.diag(diag) + np.diag(off[: n - 1], 1) + np.diag(off[: n - 1], -1)
    theta, S = np.linalg.eigh(T)
    # ||A y - theta y|| = beta_n |s_n| for the top Ritz pair (theta, y); the
    # margin covers the rest of a slowly converging estimate (a constant too
    # small halves every step after the first rejected one, too large by 5%
    # costs 5%)
    return max(1.05 * float(theta[-1] + off[n - 1] * abs(S[-1, -1])), 0.0)


def solve_group_factor(N, BtB, rhs, alpha, lam, current, max_iter=None, tol=None):
    """Minimise ``<F, G(F)> - 2 <rhs, F> + alpha ||F||^2 + lam sum_i ||F[i, :]||``.

    ``G`` is the factor's Gram in the ALS (``G(F)[:, k] = sum_l BtB[k, l]
    N[k, l] F[:, l]``, the quadratic form the dense block solves with a
    ridge only). Accelerated proximal gradient from ``current``, its
    momentum restarted where it points against the step; a step
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

    rhs2 = 2 * rhs

    def smooth(F, GF):
        # <F, G(F)> - 2 <rhs, F> + alpha ||F||^2, as inner products (no temporaries)
        return float(np.vdot(F, GF) + alpha * np.vdot(F, F) - np.vdot(rhs2, F))

    x = np.array(current, dtype=float)
    Gx = matvec(x)
    fx = smooth(x, Gx) + lam * group_norm_sum(x)
    y, Gy, t, plain = x, Gx, 1.0, True
    for _ in range(max_iter):
        grad = 2 * (Gy - rhs + alpha * y)
        z, z_norms = _prox(y - grad / L, lam / L)
        Gz = matvec(z)
        fz = smooth(z, Gz) + lam * z_norms
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
        dz = z - x
        if not plain and np.vdot(y - z, dz) > 0:
            # the momentum points against the descent: restart it (the
            # gradient restart of O'Donoghue & Candes 2015; ~20% fewer
            # iterations on the modulator blocks)
            t = 1.0
        t_next = (1 + np.sqrt(1 + 4 * t * t)) / 2
        beta = (t - 1) / t_next
        step2 = float(np.vdot(dz, dz))
        # G is linear: G(y) follows from G(z) and G(x) without another product
        y = z + beta * dz
        Gy = Gz + beta * (Gz - Gx)
        x, Gx, fx, t, plain = z, Gz, fz, t_next, False
        if step2 <= tol * tol * max(float(np.vdot(x, x)), _TINY):
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
        """Target block given A and C, then the factors rebalanced at their best scales.

        The dense fit rebalances to equal channel norms, which minimise the
        ridge for a fixed product; with group norms the best scales are
        elsewhere and are found by :func:`optimal_scales`. The rebalanced
        factors are kept only where their penalised loss is lower (rounding
        aside, always), so the loss never increases.
        """
        H_int = op.interaction_gram(A, C) if N_A is None else _contract(N_A, C)
        g = op.rhs_target(A, C)
        if self.target == 0:
            Bm = solve_psd(H_int + alpha_W * np.eye(H_int.shape[0]), g.T).T
        else:
            Bm = solve_group_rows(H_int, g, alpha_W, self.target)
        sq_err = op.rr - 2 * float(np.sum(g * Bm)) + float(np.sum((Bm @ H_int) * Bm))
        loss = self.penalised(sq_err, A, Bm, C, alpha_W, base_penalty)
        sa, sb, sc = optimal_scales(A, Bm, C, alpha_W, (self.source, self.target, self.modulator))
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
        With the attributes of :class:`mics.MICs` (the model layer's
        ``FitSettings``); parameter sets without them (older callers) fit
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
