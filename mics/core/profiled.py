"""The joint stage of the MIC fit by variable projection (baseline and targets profiled out).

Where the source has about as many coordinates as there are samples (``p >=
T``: the source is then fitted in its ``T`` sample coordinates), the rank-r
baseline can absorb any channel term whose target pattern lies in its span.
Only the ridge penalties separate the two, so the loss is nearly flat along
that direction, and the alternation of (baseline | channels) and (channels |
baseline) crawls along it: at T = 2000, p = 3000 it took 68 sweeps after the
start was chosen (``results/joint_step/``).

Variable projection (Golub & Pereyra 1973, 2003) removes the direction from
the search. Given the source and modulator patterns ``(A, C)``, the
channels' activity ``h = Phi (A kr C)`` (T, K) is fixed and everything else
enters linearly: the baseline ``(B, D)`` and the target patterns ``Bm``
minimise a ridge reduced-rank regression with ``h`` as ``K`` more (ridge
penalised) regressors, in closed form. With ``Z`` profiled out (it is
unpenalised) and ``~`` marking residuals on ``Z``, ``Bm`` given ``B`` is the
ridge regression of ``~Y - ~X B`` on ``~h``, which leaves

    tr((~Y - ~X B)^T Q (~Y - ~X B)) + alpha_B ||B||^2,
    Q = I - ~h G^-1 ~h^T,   G = ~h^T ~h + alpha_W I,

the baseline's ridge reduced-rank regression with the source scatter
lowered by the rank-K term ``u G^-1 u^T`` (``u = ~X^T ~h``): a Woodbury
update of the channel-free factorisation the alternation already caches.
The profiled loss ``f(A, C)`` is its minimum plus ``alpha_W (||A||^2 +
||C||^2)``; its gradient is the full loss's gradient in ``A`` and ``C`` at
the profiled minimiser (the envelope theorem), one pass over the
interaction moments (or ``O(T (p + m) K)`` on the data).

``f`` is minimised by L-BFGS (Nocedal 1980) whose initial inverse Hessian
is the inverse of the alternation's own block Grams of ``A`` and ``C``
(``BlockPreconditioner``), refactorised every ``_REFRESH`` iterations, with
a backtracking line search that accepts a point only where the loss is
lower (so the loss never increases). It stops on a first-order measure: the
decrease a block-Newton step predicts from the gradient, ``g^T P^-1 g / 2``,
at most ``tol`` times the loss.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy import linalg

from mics.core.linalg import cho_solve, solve_psd

__all__ = ["BlockPreconditioner", "ProfiledLoss", "ProfiledPoint", "profiled_joint_stage"]

# Iterations between refactorisations of the preconditioner. It drifts as
# the target patterns and the modulator patterns change: a preconditioner
# kept from the start needed up to twice the evaluations of none, one
# refreshed every 2, 5 or 10 iterations about as few as each other
# (T = 2000, p = 3000: 28, 31 and 33 evaluations to the alternation's loss).
_REFRESH = 10
# Pairs of the L-BFGS memory.
_MEMORY = 10
# Sufficient decrease (Armijo) of the line search, and its trial steps.
_ARMIJO = 1e-4
_MAX_TRIALS = 20
# Relative change of the loss below which two evaluations are not told apart
# (measured: 1e-15 of the loss at T = 500, p = 800). Smaller changes are
# taken from the gradients instead (trapezoid rule, exact to third order in
# the step), so the search goes on where the loss no longer resolves it.
_RESOLUTION = 1e-14


@dataclass
class ProfiledPoint:
    """The profiled loss at ``(A, C)``, its minimiser over the rest and its gradient.

    Attributes
    ----------
    loss : float
        Penalised loss with ``(B, D, Bm)`` at their minimiser.
    A, C : ndarray of shape (p, K), (m, K)
    B, D, Bm : ndarray of shape (p, q), (m, q), (q, K)
    basis : ndarray of shape (q, r)
        Orthonormal, ``B = B basis basis^T``.
    H : ndarray of shape (K, K)
        The channels' activity Gram ``h^T h`` (the target block's Gram).
    gA, gC : ndarray of shape (p, K), (m, K) or None
        Gradient of ``loss`` in ``A`` and ``C``.
    """

    loss: float
    A: np.ndarray
    C: np.ndarray
    B: np.ndarray
    D: np.ndarray
    Bm: np.ndarray
    basis: np.ndarray
    H: np.ndarray
    gA: np.ndarray | None = None
    gC: np.ndarray | None = None


class ProfiledLoss:
    """The MIC loss as a function of the source and modulator patterns only.

    Parameters
    ----------
    op : MomentOperator or DataOperator
    rank : int
        Baseline rank ``r``.
    alpha_B, alpha_W : float
        Absolute ridge penalties.
    profile : mics.core.als.BaselineProfile
        The channel-free baseline solve's constants of ``op`` and
        ``alpha_B`` (its factorisation must exist: ``profile.factorised``).

    Attributes
    ----------
    n_evaluations : int
        Calls so far (each one pass over the interaction moments).
    """

    def __init__(self, op, rank, alpha_B, alpha_W, profile):
        self.op, self.rank, self.alpha_W = op, int(rank), alpha_W
        self.profile = profile
        self.tr_yy = op.tr_yy - float((op.Szy * profile.Szz_inv_Szy).sum())  # ||~Y||^2
        self.n_evaluations = 0

    def __call__(self, A, C, gradient=True):
        """The profiled loss (and its gradient) at ``(A, C)``.

        Returns
        -------
        ProfiledPoint
        """
        self.n_evaluations += 1
        op, prof, alpha_W = self.op, self.profile, self.alpha_W
        K, q = A.shape[1], op.q
        mom = op.channel_moments(A, C)
        Szz_inv_uz = solve_psd(op.Szz, mom.uz)
        u = mom.ux - op.Sxz @ Szz_inv_uz  # ~X^T ~h (p, K)
        uy = mom.uy - op.Szy.T @ Szz_inv_uz  # ~Y^T ~h (q, K)
        G = mom.H - mom.uz.T @ Szz_inv_uz + alpha_W * np.eye(K)
        G_inv_uy = solve_psd(G, uy.T)  # (K, q)
        S_inv_u = prof.solve(u)  # (S + alpha_B I)^-1 u, S the profiled source scatter
        b = prof.Sxy_t - u @ G_inv_uy  # ~X^T Q ~Y
        # (S + alpha_B I - u G^-1 u^T)^-1 b by Woodbury, from the cached factor
        B_full = (prof.P0 - S_inv_u @ G_inv_uy) + S_inv_u @ solve_psd(
            G - u.T @ S_inv_u, S_inv_u.T @ b
        )
        top = min(self.rank, q)
        if top:
            F = B_full.T @ b
            evals, V = linalg.eigh((F + F.T) / 2, subset_by_index=[q - top, q - 1])
            evals, V = evals[::-1], V[:, ::-1]
        else:
            evals, V = np.zeros(0), np.zeros((q, 0))
        BV = B_full @ V
        # Bm^T = G^-1 ~h^T (~Y - ~X B), and D the unpenalised fit of the rest on Z
        Bm = solve_psd(G, uy.T - (u.T @ BV) @ V.T).T
        D = prof.Szz_inv_Szy - (prof.Szz_inv_Szx @ BV) @ V.T - Szz_inv_uz @ Bm.T
        loss = (
            self.tr_yy
            - float((uy.T * G_inv_uy).sum())
            - float(evals.sum())
            + alpha_W * float((A**2).sum() + (C**2).sum())
        )
        point = ProfiledPoint(loss, A, C, BV @ V.T, D, Bm, V, mom.H)
        if gradient:
            gA, gC = op.channel_gradient(mom, A, C, Bm, BV @ (V.T @ Bm), D @ Bm)
            point.gA, point.gC = gA + 2 * alpha_W * A, gC + 2 * alpha_W * C
        return point


def _factor(N, BtB, alpha, joint):
    """Cholesky factors of twice the ALS block Gram(s) of one factor matrix.

    Joint: one factor of the (K d, K d) Gram ``BtB[k, l] N[k, l] + alpha I``;
    otherwise one per channel of its diagonal block (the channel-by-channel
    solve's systems).
    """
    K = BtB.shape[0]
    if joint:
        N = np.asarray(N)
        d = N.shape[2]
        H = (BtB[:, :, None, None] * N).transpose(0, 2, 1, 3).reshape(K * d, K * d)
        return [_cholesky(2 * H, alpha)]
    return [_cholesky(2 * BtB[k, k] * N[k, k], alpha) for k in range(K)]


def _cholesky(H, alpha):
    H = np.array(H)  # a copy: the ridge goes on the diagonal in place
    H.flat[:: H.shape[0] + 1] += 2 * alpha
    try:
        return linalg.cho_factor(H, check_finite=False)
    except linalg.LinAlgError:
        # singular (no ridge, a channel carrying nothing): a relative jitter
        jitter = 1e-10 * max(np.trace(H) / H.shape[0], np.finfo(float).tiny)
        H.flat[:: H.shape[0] + 1] += jitter
        return linalg.cho_factor(H, check_finite=False)


class BlockPreconditioner:
    """The alternation's block Grams of ``A`` and ``C`` as an inverse-Hessian estimate.

    Twice the ridge Gram of each block given the others (the Hessian of the
    loss in that block alone), factorised once: ``solve`` applies its
    inverse to a gradient. Channel by channel where the alternation solves
    so (``K d`` large), else all channels jointly.

    Parameters
    ----------
    op : MomentOperator or DataOperator
    A, Bm, C : ndarray of shape (p, K), (q, K), (m, K)
    alpha_W : float
    joint_a, joint_c : bool
        Factorise the source (modulator) Gram jointly over channels.
    """

    def __init__(self, op, A, Bm, C, alpha_W, joint_a, joint_c):
        BtB = Bm.T @ Bm
        self._a = _factor(op.gram_source(C), BtB, alpha_W, joint_a)
        self._c = _factor(op.gram_modulator(A), BtB, alpha_W, joint_c)

    @staticmethod
    def _apply(factors, G):
        if len(factors) == 1 and G.shape[1] > 1:  # joint: channel-major unknowns
            return cho_solve(factors[0], G.T.reshape(-1)).reshape(G.shape[1], -1).T
        return np.column_stack([cho_solve(f, G[:, k]) for k, f in enumerate(factors)])

    def solve(self, gA, gC):
        """``P^-1`` applied to a gradient ``(gA, gC)``."""
        return self._apply(self._a, gA), self._apply(self._c, gC)


def _two_loop(gA, gC, memory, precondition):
    """The L-BFGS direction ``-H g`` with ``precondition`` as the initial inverse Hessian."""
    qA, qC = gA.copy(), gC.copy()
    alphas = []
    for sA, sC, yA, yC, rho in reversed(memory):
        a = rho * ((sA * qA).sum() + (sC * qC).sum())
        qA -= a * yA
        qC -= a * yC
        alphas.append(a)
    rA, rC = precondition(qA, qC)
    for (sA, sC, yA, yC, rho), a in zip(memory, reversed(alphas), strict=True):
        beta = rho * ((yA * rA).sum() + (yC * rC).sum())
        rA += (a - beta) * sA
        rC += (a - beta) * sC
    return -rA, -rC


def _line_search(loss, point, dA, dC, slope):
    """A lower point along ``(dA, dC)`` by backtracking from the unit step, or None.

    Accepts the first trial with sufficient decrease (Armijo); each
    backtrack goes to the minimiser of the quadratic through the loss and
    slope at 0 and the loss at the last trial, kept within [0.1, 0.5] of it.
    Where the change of the loss is below its rounding, the change is
    estimated from the two gradients instead.
    """
    t = 1.0
    for _ in range(_MAX_TRIALS):
        trial = loss(point.A + t * dA, point.C + t * dC)
        change = trial.loss - point.loss
        if abs(change) <= _RESOLUTION * abs(point.loss):
            change = t * (((point.gA + trial.gA) * dA).sum() + ((point.gC + trial.gC) * dC).sum())
            change /= 2
        if change < 0 and change <= _ARMIJO * t * slope:
            return trial
        curvature = 2 * (change - slope * t)
        t_new = -slope * t * t / curvature if curvature > 0 else 0.5 * t
        t = min(max(t_new, 0.1 * t), 0.5 * t)
    return None


def profiled_joint_stage(loss, A, C, max_iter, tol, joint_a, joint_c):
    """Minimise the profiled loss from ``(A, C)`` by preconditioned L-BFGS.

    Parameters
    ----------
    loss : ProfiledLoss
    A, C : ndarray of shape (p, K), (m, K)
        Start (the source and modulator patterns of the modulation stage).
    max_iter : int
        Iterations at most (each one or more evaluations of ``loss``).
    tol : float
        Converged when the decrease a block-Newton step predicts,
        ``g^T P^-1 g / 2``, is at most ``tol`` times the loss.
    joint_a, joint_c : bool
        See :class:`BlockPreconditioner`.

    Returns
    -------
    point : ProfiledPoint
        The last accepted point (the lowest loss).
    history : list of float
        The loss at the start and after every iteration (decreasing).
    converged : bool
    """
    op, alpha_W = loss.op, loss.alpha_W
    point = loss(A, C)
    history = [point.loss]
    memory = []
    precond, age = None, 0
    converged = False
    for _ in range(max_iter):
        if precond is None or age >= _REFRESH:
            precond, age = BlockPreconditioner(op, point.A, point.Bm, point.C, alpha_W,
                                               joint_a, joint_c), 0  # fmt: skip
        pA, pC = precond.solve(point.gA, point.gC)
        decrement = ((point.gA * pA).sum() + (point.gC * pC).sum()) / 2
        if decrement <= tol**2 * abs(point.loss):
            converged = True
            break
        dA, dC = _two_loop(point.gA, point.gC, memory, precond.solve)
        slope = (point.gA * dA).sum() + (point.gC * dC).sum()
        if not slope < 0:  # not a descent direction: the preconditioned gradient
            memory.clear()
            dA, dC, slope = -pA, -pC, -2 * decrement
        new = _line_search(loss, point, dA, dC, slope)
        if new is None:
            if memory or age:
                # start afresh (new preconditioner, no memory) before giving up
                memory.clear()
                precond = None
                continue
            # no lower point even along the preconditioned gradient: the
            # gradient itself is rounding (converged) or the search failed
            converged = decrement <= _RESOLUTION * abs(point.loss)
            break
        sA, sC = new.A - point.A, new.C - point.C
        yA, yC = new.gA - point.gA, new.gC - point.gC
        sy = (sA * yA).sum() + (sC * yC).sum()
        if sy > 0:  # curvature along the step (skipped otherwise: the update stays positive)
            memory.append((sA, sC, yA, yC, 1.0 / sy))
            del memory[:-_MEMORY]
        point = new
        history.append(point.loss)
        age += 1
    return point, history, converged
