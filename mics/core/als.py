"""The MIC model fitted by exact block minimisation (alternating least squares).

Loss (MODEL.md section 3)::

    ||Y - X B - Z D - Phi W||^2 + alpha_B ||B||^2
        + alpha_W sum_k (||a_k||^2 + ||b_k||^2 + ||c_k||^2)

with ``rank(B) <= r`` and ``W = sum_k a_k o b_k o c_k`` (weights absorbed in
the factors while fitting). Each block -- the baseline ``(B, D)``, then the
source, modulator and target patterns -- is an exact (ridge) least-squares
solve given the others, so the recorded loss never increases.

The maths is written once, against an *operator* that supplies the Gram
matrices and right-hand sides each block needs. :class:`MomentOperator`
gets them from the sufficient statistics (cost independent of the number of
samples); :class:`DataOperator` from the centred data itself, for problems
whose interaction moments ``(pm)^2`` would not fit in memory. Both give the
same iterates up to rounding.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass, field
from functools import partial

import numpy as np
from scipy import linalg
from sklearn.exceptions import ConvergenceWarning

from mics.core.grams import WeightedGrams
from mics.core.linalg import (
    LazySystem,
    WarmStartedSolves,
    canonical_signs,
    cho_solve,
    single_blas_thread,
    solve_psd,
)
from mics.core.profiled import ProfiledLoss, profiled_joint_stage

__all__ = [
    "MomentOperator",
    "DataOperator",
    "MICFit",
    "fit_mic_model",
    "canonical_channels",
    "cp_tensor",
    "penalties",
    "joint_method",
    "check_joint",
]

# Sweeps each start runs before the best one is continued to convergence.
_PROBE_SWEEPS = 5
# Largest K * d for which a factor's channels are solved jointly.
_JOINT_SOLVE_MAX = 256
# Largest p m q for which the start forms the full interaction estimate;
# above it the unfoldings are sketched (see interaction_init).
_EXACT_INIT_MAX = 1_000_000
_SKETCH_SIZE = 24
_SKETCH_SEED = 20170


# ----------------------------------------------------------------------------- operators
@dataclass
class ChannelMoments:
    """Moments of the channels' activity ``h = Phi (A kr C)`` (T, K), centred.

    Attributes
    ----------
    ux, uz, uy : ndarray of shape (p, K), (m, K), (q, K)
        ``X^T h``, ``Z^T h`` and ``Y^T h``.
    H : ndarray of shape (K, K)
        ``h^T h``.
    held : object
        What the operator keeps for :meth:`MomentOperator.channel_gradient`
        (``Phi^T h`` on the moments, ``h`` on the data).
    """

    ux: np.ndarray
    uz: np.ndarray
    uy: np.ndarray
    H: np.ndarray
    held: object


class _LinearPart:
    """Baseline quantities shared by both operators (from the linear moments)."""

    #: None, or the exact reduction this operator's coordinates come from
    #: (:mod:`mics.model.reduction`): an object with ``sizes``, the ``(p, q,
    #: m)`` of the full problem, and ``draw(mode, F)``, which maps random
    #: draws made in the full space into the operator's coordinates. Every
    #: size-dependent normalisation (penalties, the HOSVD ridge, the joint
    #: solve threshold) and every random draw then is the full problem's,
    #: so the reduced fit is the full fit in other coordinates.
    embedding = None

    @property
    def sizes(self):
        """``(p, q, m)`` of the problem fitted (the full one when reduced)."""
        return (self.p, self.q, self.m) if self.embedding is None else self.embedding.sizes

    @property
    def interaction_scale(self):
        """Mean diagonal of the centred interaction scatter (the relative ridge's scale)."""
        p, _, m = self.sizes
        return self._interaction_trace / (p * m)

    #: Caches of fits on this operator that a later fit of the same fold reuses
    #: (the probed starts, the baseline profile): kept across a sequential
    #: channel search without keeping the operator itself.
    _FIT_CACHES = ("_init_cache", "_profile_cache")

    def fit_caches(self):
        """The caches of earlier fits on this operator, to hand to a rebuilt one."""
        return {k: self.__dict__[k] for k in self._FIT_CACHES if k in self.__dict__}

    def fit_cache(self, name):
        """The named cache of fits on this operator (created empty), one of ``_FIT_CACHES``."""
        if name not in self._FIT_CACHES:
            raise KeyError(f"not a fit cache of an operator: {name!r}")
        return self.__dict__.setdefault(name, {})

    def restore_caches(self, caches):
        """Take over :meth:`fit_caches` of an earlier operator of the same fold."""
        for key, value in (caches or {}).items():
            if key not in self._FIT_CACHES:
                raise KeyError(f"not a fit cache of an operator: {key!r}")
            self.__dict__[key] = value

    def _draw(self, mode, F):
        """A random draw ``F`` of the full problem's ``mode`` in this operator's coordinates."""
        return F if self.embedding is None else self.embedding.draw(mode, F)

    def _init_linear(self, cm, embedding):
        self.embedding = embedding
        self.n = cm.n
        self.Sxx, self.Sxz, self.Szz = cm.Sxx, cm.Sxz, cm.Szz
        self.Sxy, self.Szy = cm.Sxy, cm.Szy
        self.tr_yy = float(np.trace(cm.Syy))
        self.p, self.m = cm.Sxz.shape
        self.q = cm.Sxy.shape[1]

    def residual_norm2(self, B, D, basis=None):
        """``||Y - X B - Z D||^2`` from the linear scatter matrices.

        ``basis`` (q, r), orthonormal with ``B = B basis basis^T`` (see
        :meth:`MomentOperator.set_baseline`), makes ``tr(B^T S_xx B)`` cost
        ``p^2 r`` instead of ``p^2 q``.
        """
        BV = B if basis is None else B @ basis
        return float(
            self.tr_yy
            - 2 * np.sum(B * self.Sxy)
            - 2 * np.sum(D * self.Szy)
            + np.sum(BV * (self.Sxx @ BV))
            + 2 * np.sum(B * (self.Sxz @ D))
            + np.sum(D * (self.Szz @ D))
        )


class MomentOperator(_LinearPart):
    """Block quantities from the centred sufficient statistics.

    Parameters
    ----------
    cm : CenteredMoments
        With the interaction moments (``M``, ``Sphix``, ``Sphiz``, ``Sphiy``).
    embedding : object, optional
        The exact reduction the coordinates come from (see
        :attr:`_LinearPart.embedding`); None for a problem fitted on its neurons.
    """

    #: Smallest order of a channel-by-channel solve done by warm-started
    #: conjugate gradients (:class:`~mics.core.linalg.WarmStartedSolves`),
    #: and the iterations one may take before its system is factorised
    #: afresh. Here the systems are formed from the moments at every sweep
    #: anyway, so a factorisation adds little to a sweep and the iterations
    #: it would save do not pay for their memory: this path factorises
    #: (infinite order; studies/performance/source_solve.py measured both,
    #: results/source_solve/README.md, "Where each wins").
    cg_min_order = np.inf
    cg_iterations = 8

    def __init__(self, cm, *, embedding=None):
        self._init_linear(cm, embedding)
        p, m = self.p, self.m
        # (a, b, i, j) layout: both contractions below are then single BLAS
        # products over contiguous (i, j) planes.
        self.Mab = np.ascontiguousarray(cm.M.transpose(1, 3, 0, 2)).reshape(m * m, p * p)
        self.Sphix, self.Sphiz, self.Sphiy = cm.Sphix, cm.Sphiz, cm.Sphiy
        self._interaction_trace = float(np.einsum("iaia->", cm.M))

    def set_baseline(self, B, D, basis=None):
        """Fix the baseline ``(B, D)`` for the channel blocks.

        ``basis`` (q, r): orthonormal columns with ``B = B basis basis^T``
        (the baseline solve returns it). ``Phi^T X B`` is then formed as
        ``(Phi^T X (B basis)) basis^T``, ``p^2 m r`` instead of ``p^2 m q``:
        at p = 300, q = 100, r = 3 this was the costliest step of a joint
        sweep.
        """
        p, m, q = self.p, self.m, self.q
        Sphix = self.Sphix.reshape(p * m, p)
        SphixB = Sphix @ B if basis is None else (Sphix @ (B @ basis)) @ basis.T
        # Cross-moments of the interaction with the baseline residual R.
        self.Sphir = (
            self.Sphiy
            - SphixB.reshape(p, m, q)
            - (self.Sphiz.reshape(p * m, m) @ D).reshape(p, m, q)
        )
        self.rr = self.residual_norm2(B, D, basis)

    def interaction_cross(self):
        """``Phi^T R`` as a (p, m, q) tensor."""
        return self.Sphir

    def gram_source(self, C):
        # N[k, l, i, j] = sum_ab C[a, k] C[b, l] M[i, a, j, b]: one GEMM of the
        # (m^2, K^2) pair weights against the (m^2, p^2) planes of M.
        m, K, p = self.m, C.shape[1], self.p
        CC = (C[:, None, :, None] * C[None, :, None, :]).reshape(m * m, K * K)
        return (CC.T @ self.Mab).reshape(K, K, p, p)

    def gram_modulator(self, A):
        # N[k, l, a, b] = sum_ij A[i, k] A[j, l] M[i, a, j, b]: two BLAS products.
        p, m, K = self.p, self.m, A.shape[1]
        T1 = (self.Mab.reshape(m * m * p, p) @ A).reshape(m * m, p, K)
        return np.matmul(A.T, T1).reshape(m, m, K, K).transpose(2, 3, 0, 1)

    def interaction_gram(self, A, C):
        """``H[k, l] = (Phi (A kr C))^T (Phi (A kr C))`` (centred), the target block's Gram."""
        return _contract_pair(self.gram_modulator(A), C)

    def _sphir_times(self, Bm):
        """``T[i, a, k] = sum_j Sphir[i, a, j] Bm[j, k]``."""
        p, m = self.p, self.m
        return (self.Sphir.reshape(p * m, self.q) @ Bm).reshape(p, m, -1)

    def rhs_source(self, C, Bm):
        return np.einsum("iak,ak->ik", self._sphir_times(Bm), C)

    def rhs_modulator(self, A, Bm):
        return np.einsum("iak,ik->ak", self._sphir_times(Bm), A)

    def rhs_target(self, A, C):
        return _contract_kr(self.Sphir, A, C)

    def channel_moments(self, A, C):
        """The moments of the channels' activity ``h = Phi (A kr C)`` (T, K) profiling needs.

        One pass over the interaction moments (``Phi^T h``, kept for the
        gradient) and one over each cross-moment of the interaction.
        """
        p, m, K = self.p, self.m, A.shape[1]
        # T1[a, b, i, k] = sum_j M[i, a, j, b] A[j, k]: one BLAS product over the (i, j) planes
        T1 = (self.Mab.reshape(m * m * p, p) @ A).reshape(m, m, p, K)
        phi_h = np.einsum("abik,bk->iak", T1, C)
        KR = (A[:, None, :] * C[None, :, :]).reshape(p * m, K)
        return ChannelMoments(
            ux=_contract_kr(self.Sphix, A, C),
            uz=_contract_kr(self.Sphiz, A, C),
            uy=_contract_kr(self.Sphiy, A, C),
            H=KR.T @ phi_h.reshape(p * m, K),
            held=phi_h,
        )

    def channel_gradient(self, moments, A, C, Bm, BBm, DBm):
        """The squared error's gradient in ``A`` and ``C`` at the full residual.

        ``-2 sum Phi^T (Y - X B - Z D - h Bm^T) Bm`` contracted with the
        other factor, from ``BBm = B Bm`` and ``DBm = D Bm`` (both (., K)).
        """
        p, m, K = self.p, self.m, A.shape[1]
        E = (
            self.Sphiy.reshape(p * m, self.q) @ Bm
            - self.Sphix.reshape(p * m, p) @ BBm
            - self.Sphiz.reshape(p * m, m) @ DBm
        ).reshape(p, m, K) - moments.held @ (Bm.T @ Bm)
        return -2 * np.einsum("iak,ak->ik", E, C), -2 * np.einsum("iak,ik->ak", E, A)

    def channel_crosses(self, A, Bm, C, H_int):
        """Cross-moments of X and Z with the channels' activity ``h`` and ``||Y - Phi W||^2``.

        ``h = Phi (A kr C)`` (T, K); ``Y - Phi W = Y - h Bm^T``, so the
        baseline's cross-moments with it are ``S_xy - ux Bm^T`` and
        ``S_zy - uz Bm^T``.
        """
        ux = _contract_kr(self.Sphix, A, C)
        uz = _contract_kr(self.Sphiz, A, C)
        uy = _contract_kr(self.Sphiy, A, C)
        rw2 = self.tr_yy - 2 * np.sum(uy * Bm) + np.sum(H_int * (Bm.T @ Bm))
        return ux, uz, float(rw2)


def _contract_kr(S, A, C):
    """``U[j, k] = sum_ia S[i, a, j] A[i, k] C[a, k]`` (S against the Khatri-Rao columns)."""
    p, m, n = S.shape
    KR = (A[:, None, :] * C[None, :, :]).reshape(p * m, -1)
    return S.reshape(p * m, n).T @ KR


class DataOperator(_LinearPart):
    """Block quantities computed from the centred data, chunk-free.

    Each sweep costs ``O(T (p^2 + m^2) K)`` (BLAS weighted Grams, see
    :mod:`mics.core.grams`) and the memory is that of the data: the path
    for a third population as modulator, whose ``(p m)^2`` interaction
    moments would neither fit in memory nor pay for their pass over the data
    (:mod:`mics.model.solver`).

    Parameters
    ----------
    cm : CenteredMoments
        Linear moments (interaction moments may be ``None``).
    X, Y, Z : ndarray
        Data, centred here with ``cm``'s means.
    rows : ndarray of int, optional
        Training rows (a cross-validation fold): gathered and centred in one
        copy per array, the only copy of the data the fold makes.
    embedding : object, optional
        As for :class:`MomentOperator`.
    """

    #: As :attr:`MomentOperator.cg_min_order`. Here an iteration costs two
    #: passes over the scaled data (``O(T d)``) and a factorisation must first
    #: form the system (``O(T d^2)``), so from order 1000 the iterations win;
    #: with up to 50 of them a system is rarely factorised afresh
    #: (studies/performance/source_solve.py, results/source_solve/).
    cg_min_order = 1000
    cg_iterations = 50

    def __init__(self, cm, X, Y, Z, rows=None, *, embedding=None):
        self._init_linear(cm, embedding)
        self.Xc, self.Zc, self.Yc = (
            _centred_rows(a, mean, rows)
            for a, mean in ((X, cm.x_mean), (Z, cm.z_mean), (Y, cm.y_mean))
        )
        # mean diagonal of the centred interaction scatter (relative ridge scale)
        sq = np.sum(np.sum(self.Xc**2, axis=1) * np.sum(self.Zc**2, axis=1))
        self._interaction_trace = float(sq - np.sum(self.Sxz**2) / self.n)

    def set_baseline(self, B, D, basis=None):
        # The residual R = Yc - Xc B - Zc D is never formed (T x q per joint
        # sweep): every block needs it only through R @ v or R^T h, which
        # cost O(T (p + m + q) K) term by term, and ||R||^2 comes from the
        # linear moments exactly as on the moment path.
        self.B, self.D = B, D
        self.rr = self.residual_norm2(B, D, basis)
        self.__dict__.get("_memo_cache", {}).pop("residual", None)  # R changed

    def _memo(self, name, V, compute):
        """``compute(V)``, reused while ``V`` is unchanged (one entry per name).

        Within a sweep several blocks multiply the data by the same factor
        (``X A``, ``Z C``, ``R Bm``); each product is a pass over ``T`` rows,
        which at tens of thousands of samples costs as much as a solve. The
        comparison costs ``d K``.
        """
        memo = self.__dict__.setdefault("_memo_cache", {})
        hit = memo.get(name)
        if hit is not None and hit[0].shape == V.shape and np.array_equal(hit[0], V):
            return hit[1]
        out = compute(V)
        memo[name] = (V.copy(), out)
        return out

    def _source_times(self, A):
        """``Xc @ A`` (T, K)."""
        return self._memo("source", A, self.Xc.__matmul__)

    def _modulator_times(self, C):
        """``Zc @ C`` (T, K)."""
        return self._memo("modulator", C, self.Zc.__matmul__)

    def _residual_times(self, V):
        """``R @ V`` for V of shape (q, K)."""
        return self._memo(
            "residual",
            V,
            lambda V: self.Yc @ V - self.Xc @ (self.B @ V) - self.Zc @ (self.D @ V),
        )

    def _residual_transposed_times(self, H):
        """``R^T @ H`` for H of shape (T, K)."""
        return self.Yc.T @ H - self.B.T @ (self.Xc.T @ H) - self.D.T @ (self.Zc.T @ H)

    def interaction_cross(self):
        # R has zero mean, so centring Phi changes nothing here.
        R = self.Yc - self.Xc @ self.B - self.Zc @ self.D
        return np.stack([self.Xc.T @ (self.Zc[:, a : a + 1] * R) for a in range(self.m)], 1)

    def _weighted_grams(self, V, F, which, means):
        # one reused buffer per mode: the source blocks are consumed before the
        # modulator blocks are formed, and each is rebuilt every sweep
        buffers = self.__dict__.setdefault("_gram_buffers", {})
        buf = buffers.get(which)
        if buf is None or buf.shape[0] < V.shape[1]:
            buf = buffers[which] = np.empty((V.shape[1],) + F.shape)
        return WeightedGrams(F, V, buf, means)

    # The scaled rows' means are X^T Z C / T and Z^T X A / T: the cross
    # scatter S_xz gives them in O(p m K) instead of a pass over the data.
    def gram_source(self, C):
        means = self.Sxz @ C / self.n
        return self._weighted_grams(self._modulator_times(C), self.Xc, "source", means)

    def gram_modulator(self, A):
        means = self.Sxz.T @ A / self.n
        return self._weighted_grams(self._source_times(A), self.Zc, "modulator", means)

    def interaction_gram(self, A, C):
        """The target block's Gram from the K interaction columns, ``O(T (p + m) K)``.

        Equal to contracting :meth:`gram_modulator` with ``C`` (which costs
        ``T m^2 K``): the line-search steps need only this.
        """
        P = self._source_times(A) * self._modulator_times(C)
        mu = P.mean(axis=0)
        return P.T @ P - self.n * np.outer(mu, mu)

    def rhs_source(self, C, Bm):
        return self.Xc.T @ (self._modulator_times(C) * self._residual_times(Bm))

    def rhs_modulator(self, A, Bm):
        return self.Zc.T @ (self._source_times(A) * self._residual_times(Bm))

    def rhs_target(self, A, C):
        return self._residual_transposed_times(self._source_times(A) * self._modulator_times(C))

    def channel_moments(self, A, C):
        # through the K columns of h only: O(T (p + m + q) K); h is kept for the gradient
        XA, ZC = self._source_times(A), self._modulator_times(C)
        h = XA * ZC
        h -= h.mean(axis=0)
        return ChannelMoments(
            ux=self.Xc.T @ h, uz=self.Zc.T @ h, uy=self.Yc.T @ h, H=h.T @ h, held=(h, XA, ZC)
        )

    def channel_gradient(self, moments, A, C, Bm, BBm, DBm):
        # Phi^T v for the full residual times Bm, v (T, K) of mean zero: the
        # centred interaction's mean drops out
        h, XA, ZC = moments.held
        v = self.Yc @ Bm - self.Xc @ BBm - self.Zc @ DBm - h @ (Bm.T @ Bm)
        return -2 * (self.Xc.T @ (ZC * v)), -2 * (self.Zc.T @ (XA * v))

    def channel_crosses(self, A, Bm, C, H_int):
        # through the K columns of h only: O(T (p + m + q) K)
        h = self._source_times(A) * self._modulator_times(C)
        h -= h.mean(axis=0)
        hy = self.Yc.T @ h  # (q, K)
        rw2 = self.tr_yy - 2 * np.sum(hy * Bm) + np.sum((h.T @ h) * (Bm.T @ Bm))
        return self.Xc.T @ h, self.Zc.T @ h, float(rw2)


def _centred_rows(a, mean, rows):
    # np.take always copies (a slice would be a view of the caller's data)
    a = np.asarray(a, dtype=np.float64)
    out = np.take(a, rows, axis=0) if rows is not None else a.copy()
    out -= mean
    return out


# ----------------------------------------------------------------------------- blocks
def _contract_pair(N, V):
    """``H[k, l] = V[:, k]^T N[k, l] V[:, l]`` for N of shape (K, K, d, d)."""
    if isinstance(N, WeightedGrams):
        return N.contract(V)
    # N[k, l] @ V[:, l] for every (k, l) as one batched product, then the dot
    # with V[:, k]: no einsum path search in the inner loop of the ALS.
    NV = np.matmul(N, V.T[None, :, :, None])[..., 0]  # (K, K, d)
    return np.einsum("ak,kla->kl", V, NV)


def _solve_factor(N, BtB, rhs, alpha, current, joint=None, solves=None, mode=None):
    """Exact ridge minimisation over one factor matrix given the others.

    The design's Gram is ``H[(k, i), (l, j)] = BtB[k, l] N[k, l, i, j]``.
    Small problems solve all channels jointly; when ``K d`` is large the
    channels are updated one after the other (each an exact ridge solve
    given the rest, so the loss still never increases), which costs
    ``K d^3`` instead of ``(K d)^3``.

    Parameters
    ----------
    N : ndarray of shape (K, K, d, d) or WeightedGrams
        The channel-by-channel update only multiplies off-diagonal blocks
        by vectors, so a lazy :class:`~mics.core.grams.WeightedGrams`
        never forms them there.
    BtB : ndarray of shape (K, K)
        Gram of the factor that multiplies this one in the design.
    rhs : ndarray of shape (d, K)
    alpha : float
    current : ndarray of shape (d, K)
        Present value (the start of the channel-by-channel update).
    joint : bool, optional
        Solve jointly; by default when ``K d <= _JOINT_SOLVE_MAX`` (a
        reduced operator decides by the full problem's ``d``).
    solves : WarmStartedSolves, optional
        Solves the channel-by-channel systems (warm-started conjugate
        gradients for large ``d``), each channel's as sequence
        ``(mode, k)``; by default each is a fresh :func:`solve_psd`.
    mode : str, optional
        Which factor this is (the sequence key of ``solves``).

    Returns
    -------
    factor : ndarray of shape (d, K)
    """
    K, _, d, _ = N.shape
    if (K * d <= _JOINT_SOLVE_MAX) if joint is None else joint:
        N = np.asarray(N)  # the data path forms its blocks lazily
        H = (BtB[:, :, None, None] * N).transpose(0, 2, 1, 3).reshape(K * d, K * d)
        H[np.diag_indices_from(H)] += alpha
        return solve_psd(H, rhs.T.reshape(-1)).reshape(K, d).T
    F = current.copy()
    for k in range(K):
        g = rhs[:, k].copy()
        for l in range(K):
            if l != k:
                g -= BtB[k, l] * (N[k, l] @ F[:, l])
        system = _channel_system(N, BtB[k, k], alpha, k)
        if solves is None:
            F[:, k] = solve_psd(system.dense(), g)
        else:
            F[:, k] = solves.solve((mode, k), system, g, F[:, k])
    return F


def _channel_system(N, b, alpha, k):
    """Channel ``k``'s system ``b N[k, k] + alpha I``, formed only when needed.

    On the data path (a lazy :class:`~mics.core.grams.WeightedGrams`) its
    products with vectors cost ``O(T d)`` without forming ``N[k, k]``
    (``O(T d^2)``): warm-started conjugate gradients need only those.
    """
    d = N.shape[2]
    times = N.times if isinstance(N, WeightedGrams) else (lambda k, f: N[k, k] @ f)

    def dense():
        H = b * N[k, k]  # a new array: the ridge goes on its diagonal in place
        H.flat[:: d + 1] += alpha
        return H

    return LazySystem(d, lambda f: b * times(k, f) + alpha * f, dense)


@dataclass
class BaselineProfile:
    """The baseline solve's constants for one operator and ``alpha_B`` (:func:`baseline_path`)."""

    Szz_inv_Szx: np.ndarray  # (m, p)
    solve: object  # the ridge solve with the profiled source scatter
    Szz_inv_Szy: np.ndarray  # (m, q)
    Sxy_t: np.ndarray  # (p, q) the profiled cross-moments with Y
    P0: np.ndarray  # (p, q) the channel-free ridge solution
    factorised: bool = True  # False: a singular scatter, solved by its pseudo-inverse


def profiled_source(op, alpha_B):
    """The profiled source scatter's ridge solve, and the channel-free solution.

    Constant for a given operator and penalty, so cached on the operator:
    the joint stage solves the baseline once per sweep, and its solution
    differs from the channel-free one by rank-``K`` terms only.
    """
    cache = op.fit_cache("_profile_cache")
    if alpha_B not in cache:
        Szz_inv_Szx = solve_psd(op.Szz, op.Sxz.T)
        Sxx_t = op.Sxx - op.Sxz @ Szz_inv_Szx
        A = Sxx_t + alpha_B * np.eye(op.p)
        factorised = True
        try:
            solver = partial(cho_solve, linalg.cho_factor(A, check_finite=False))
        except linalg.LinAlgError:
            # singular (more neurons than samples, constant neurons): minimum norm
            solver, factorised = partial(np.dot, linalg.pinvh(A)), False
        Szz_inv_Szy = solve_psd(op.Szz, op.Szy)
        Sxy_t = op.Sxy - op.Sxz @ Szz_inv_Szy
        P0 = solver(Sxy_t)
        cache[alpha_B] = BaselineProfile(Szz_inv_Szx, solver, Szz_inv_Szy, Sxy_t, P0, factorised)
    return cache[alpha_B]


def fit_baseline_path(op, ranks, alpha_B, factors=None, H_int=None):
    """Exact penalised minimisers over ``(B, D)`` given the channels, for several ranks.

    ``D`` is profiled out (it is unpenalised), leaving a ridge reduced-rank
    regression of the modulation-free residual ``R`` on the
    modulator-residualised source. With ``B_full`` the ridge solution, the
    rank-``r`` minimiser projects it on the top ``r`` eigenvectors of
    ``F = B_full^T (S + alpha I) B_full = B_full^T S_xr``, and its loss is
    ``||R_profiled||^2`` minus the top ``r`` eigenvalues of ``F``.

    Returns
    -------
    list of (B, D, loss)
        ``B`` (p, q), ``D`` (m, q); loss is the squared error plus
        ``alpha_B ||B||^2`` (without the channel penalty).
    """
    return [(B, D, loss) for B, D, loss, _ in baseline_path(op, ranks, alpha_B, factors, H_int)]


def baseline_path(op, ranks, alpha_B, factors=None, H_int=None):
    """:func:`fit_baseline_path`, each solution with its basis ``V_r`` (q, r).

    ``B = (B_full V_r) V_r^T`` has orthonormal ``V_r``: the callers that
    multiply by ``B`` use the factors (``p q r`` instead of ``p q^2``).
    """
    prof = profiled_source(op, alpha_B)
    q = op.q
    if factors is None:
        Bm, ux, uz, rw2 = np.zeros((q, 0)), np.zeros((op.p, 0)), np.zeros((op.m, 0)), op.tr_yy
    else:
        Bm = factors[1]
        ux, uz, rw2 = op.channel_crosses(*factors, H_int)
    # The residual's cross-moments are the channel-free ones minus rank-K
    # terms (S_xr = S_xy - ux Bm^T, and so on), so the ridge solution is
    # B_full = P0 - G Bm^T with G = solve(ut) for K right-hand sides, not q
    # (the solve then grows with the channels, not with the target neurons).
    Szz_inv_uz = solve_psd(op.Szz, uz) if uz.size else uz
    Szz_inv_Szr = prof.Szz_inv_Szy - Szz_inv_uz @ Bm.T
    ut = ux - op.Sxz @ Szz_inv_uz
    r_t = rw2 - np.sum((op.Szy - uz @ Bm.T) * Szz_inv_Szr)
    G = prof.solve(ut)
    top = min(max(ranks, default=0), q)
    if top:
        # F = B_full^T S_xr_t from the two factors as they are: expanded
        # around P0^T Sxy_t it would cancel digits when the channels carry
        # most of the variance the source explains
        F = (prof.P0 - G @ Bm.T).T @ (prof.Sxy_t - ut @ Bm.T)
        # Only the leading ``top`` eigenpairs are used: the subset solver
        # skips the rest (a third of the time of the full q x q problem).
        evals, V = linalg.eigh((F + F.T) / 2, subset_by_index=[q - top, q - 1])
        evals, V = evals[::-1], V[:, ::-1]
    else:
        evals, V = np.zeros(0), np.zeros((q, 0))
    out = []
    for r in ranks:
        Vr = V[:, :r]
        BV = prof.P0 @ Vr - G @ (Bm.T @ Vr)
        B = BV @ Vr.T
        D = Szz_inv_Szr - (prof.Szz_inv_Szx @ BV) @ Vr.T
        out.append((B, D, float(r_t - np.sum(evals[:r])), Vr))
    return out


def fit_baseline(op, rank, alpha_B, factors=None, H_int=None):
    """Exact penalised minimiser over ``(B, D)`` at one rank (see :func:`fit_baseline_path`)."""
    return fit_baseline_path(op, [rank], alpha_B, factors, H_int)[0]


@dataclass
class _ALSState:
    A: np.ndarray
    Bm: np.ndarray
    C: np.ndarray
    H_int: np.ndarray
    loss: float
    history: list = field(default_factory=list)


def _balance(A, Bm, C):
    """Equalise the three factor norms per channel.

    The product is unchanged and, for a fixed product, equal norms minimise
    the ridge penalty, so rebalancing can only lower the loss. It also stops
    the scale drifting between modes when the penalty is tiny.
    """
    na, nb, nc = (np.linalg.norm(F, axis=0) for F in (A, Bm, C))
    g = np.cbrt(na * nb * nc)
    with np.errstate(divide="ignore", invalid="ignore"):
        sa, sb, sc = (np.where(x > 0, g / x, 0.0) for x in (na, nb, nc))
    return sa, sb, sc


def _target_block(op, A, C, alpha_W, N_A=None):
    """Target patterns solved given source and modulator patterns, and the squared error.

    Returns ``Bm``, the interaction Gram ``H_int`` and the squared error at
    that block optimum: ``rr - <g, Bm> - alpha ||Bm||^2`` (``g`` the
    right-hand side), which needs no pass over the residual. ``N_A``, the
    modulator Gram of ``A``, is contracted when the caller has it; otherwise
    the interaction Gram comes from the operator directly.
    """
    H_int = op.interaction_gram(A, C) if N_A is None else _contract_pair(N_A, C)
    g = op.rhs_target(A, C)
    Hr = H_int + alpha_W * np.eye(H_int.shape[0])
    Bm = solve_psd(Hr, g.T).T
    sq_err = op.rr - float(np.sum(g * Bm)) - alpha_W * float(np.sum(Bm**2))
    return Bm, H_int, sq_err


def _balanced(A, Bm, C, H_int):
    """Rebalanced factors (same product, lower penalty) and the Gram they imply."""
    sa, sb, sc = _balance(A, Bm, C)
    s = sa * sc
    return A * sa, Bm * sb, C * sc, H_int * np.outer(s, s)


def _penalised(sq_err, A, Bm, C, alpha_W, base_penalty):
    return sq_err + alpha_W * (np.sum(A**2) + np.sum(Bm**2) + np.sum(C**2)) + base_penalty


# Line search along the last update (Bro 1998; Rajih, Comon & Harshman 2008):
# after a sweep, the source and modulator patterns are pushed on by
# ``step`` times their last change and the target patterns solved again;
# the point is kept only where the penalised loss is lower, so the loss
# still never increases. The step grows while it is accepted and falls
# back to its start when not. On flat valleys (over-specified and null
# fits) this cuts the sweeps to convergence several-fold.
_STEP_START = 1.0
_STEP_GROWTH = 1.5
_STEP_MAX = 16.0
# The same line search on the joint stage (baseline | channels), from its
# sixth iteration on. Most fits converge there in 2-3 iterations and are
# unchanged by it; where the baseline and the channels compete for the same
# variance (more neurons than samples, a large modulator population, short
# null recordings) the stage crawled: a fit at T = 2000, p = 3000 took 156
# sweeps, 73 with it, and at T = 500, p = 800, q = 50 128 sweeps, 72 with it
# (results/joint_step/ gives the sweeps with it).
_JOINT_EXTRAPOLATE_AFTER = 5
# ... and only where it lowers the loss by more than its rounding: near the
# optimum the losses differ at 1e-15, and a step accepted on rounding would
# move the factors along their last change without lowering anything (at
# tol=1e-15 the closed-form test ended 1e-8 from the optimum instead of 4e-11).
_JOINT_STEP_GAIN = 1e-12


def _als_sweeps(
    op,
    Bm,
    C,
    *,
    alpha_W,
    base_penalty,
    max_iter,
    tol,
    A=None,
    accelerate=True,
    group=None,
    solves=None,
):
    """ALS over (source, modulator, target) patterns with the baseline fixed.

    ``A`` only seeds the channel-by-channel source update (large problems);
    the first sweep solves for it given ``Bm`` and ``C``. With
    ``accelerate``, each sweep after the first also tries a line-search
    step along the last update (kept only when it lowers the loss).
    ``group`` (a :class:`mics.core.sparse.GroupPenalty`) replaces the block
    solves by their group-lasso versions; the loss, and hence every
    acceptance test, then includes the group penalty. ``solves`` (a
    :class:`~mics.core.linalg.WarmStartedSolves`, shared by every start and
    stage of a fit) does the channel-by-channel solves and keeps their
    factorisations for the next; None solves each afresh.

    Returns the state after convergence (or ``max_iter`` sweeps) and
    whether it converged.
    """
    history = []
    state = None
    converged = False
    previous = None
    step = _STEP_START
    if A is None:
        A = np.zeros((op.p, Bm.shape[1]))
    # joint or channel-by-channel solves as the full problem's sizes decide
    pf, _, mf = op.sizes
    joint_a = Bm.shape[1] * pf <= _JOINT_SOLVE_MAX
    joint_c = Bm.shape[1] * mf <= _JOINT_SOLVE_MAX
    for _ in range(max_iter):
        if group is not None:
            A, Bm, C, H_int, loss = group.sweep(op, A, Bm, C, alpha_W, base_penalty)
        else:
            BtB = Bm.T @ Bm
            A = _solve_factor(
                op.gram_source(C), BtB, op.rhs_source(C, Bm), alpha_W, A, joint_a, solves, "A"
            )
            N_A = op.gram_modulator(A)
            C = _solve_factor(N_A, BtB, op.rhs_modulator(A, Bm), alpha_W, C, joint_c, solves, "C")
            # the squared error alone is invariant to the rebalancing that follows
            Bm, H_int, sq_err = _target_block(op, A, C, alpha_W, N_A)
            A, Bm, C, H_int = _balanced(A, Bm, C, H_int)
            loss = _penalised(sq_err, A, Bm, C, alpha_W, base_penalty)
        if accelerate and previous is not None:
            A_e = A + step * (A - previous[0])
            C_e = C + step * (C - previous[1])
            if group is not None:
                A_e, Bm_e, C_e, H_e, loss_e = group.finish(op, A_e, C_e, alpha_W, base_penalty)
            else:
                Bm_e, H_e, sq_e = _target_block(op, A_e, C_e, alpha_W)
                A_e, Bm_e, C_e, H_e = _balanced(A_e, Bm_e, C_e, H_e)
                loss_e = _penalised(sq_e, A_e, Bm_e, C_e, alpha_W, base_penalty)
            if loss_e < loss:
                A, Bm, C, H_int, loss = A_e, Bm_e, C_e, H_e, loss_e
                step = min(step * _STEP_GROWTH, _STEP_MAX)
            else:
                step = _STEP_START
        previous = (A, C)
        history.append(loss)
        state = _ALSState(A, Bm, C, H_int, loss)
        if len(history) > 1 and history[-2] - loss <= tol * abs(history[-2]):
            converged = True
            break
    state.history = history
    return state, converged


# ----------------------------------------------------------------------------- init
def interaction_init(op, B, D, ridge=1e-3, basis=None):
    """Deterministic starting patterns from the truncated HOSVD.

    The full interaction is estimated by a Kronecker-preconditioned ridge,
    ``W_full = (S_xx + e I)^-1 (x) (S_zz + e I)^-1 applied to Phi^T R``,
    which equals the least-squares estimate when source and modulator are
    independent and is cheap on both computation paths. The leading
    singular vectors of its target and modulator unfoldings start the ALS
    (the first K of each; the caller pads when K exceeds their number).

    When ``W_full`` is large (``p m q`` above ``_EXACT_INIT_MAX``, e.g. a
    modulator population) it is not formed: on the data path that would
    cost ``2 T p m q``. Each unfolding is sketched instead by contracting the
    other two modes with fixed random vectors (a Khatri-Rao test matrix,
    whose sketch Gram is an unbiased estimate of the unfolding's Gram), which
    both operators compute through their ALS right-hand sides in
    ``O(T (p + m + q) s)``. The rule depends on the problem's size only, so
    both paths start from the same patterns.

    Returns
    -------
    Ub : ndarray of shape (q, q) or (q, s)
    Uc : ndarray of shape (m, m) or (m, s)
        Left singular vectors of the target and modulator unfoldings (or
        their sketches), by decreasing singular value.
    """
    op.set_baseline(B, D, basis)
    p, m, q = op.p, op.m, op.q
    # the full problem's sizes (those of a reduced operator's embedding):
    # the ridge, the choice to sketch and the sketch's draws are then its own
    pf, qf, mf = op.sizes
    ex = ridge * np.trace(op.Sxx) / pf
    ez = ridge * np.trace(op.Szz) / mf
    Pz = solve_psd(op.Szz + ez * np.eye(m), np.eye(m))
    # Px = (S_xx + e I)^-1 is applied by solves, never formed: at p = 300 the
    # inverse cost as much again as its products.
    Sxx_e = op.Sxx + ex * np.eye(p)
    if pf * mf * qf > _EXACT_INIT_MAX:
        rng = np.random.default_rng(_SKETCH_SEED)
        s = _SKETCH_SIZE
        # the sketch uses its draws only through products with Phi^T R, so a
        # reduced operator needs their projections only
        Wx, Wz, Wy = (
            op._draw(mode, rng.standard_normal((d, s)))
            for mode, d in (("source", pf), ("modulator", mf), ("target", qf))
        )
        Wx2 = op._draw("source", rng.standard_normal((pf, s)))
        PxW = solve_psd(Sxx_e, np.hstack([Wx, Wx2]))
        # target sketch: sum_ia W[i,a,j] wx[i,s] wz[a,s] = Phi^T R contracted
        # with (Px wx) and (Pz wz) over the source and modulator modes
        Yb = op.rhs_target(PxW[:, :s], Pz @ Wz)
        # modulator sketch: Pz times Phi^T R contracted with (Px wx') and wy
        Yc = Pz @ op.rhs_modulator(PxW[:, s:], Wy)
        return _leading_left_vectors(Yb), _leading_left_vectors(Yc)
    S = op.interaction_cross()
    W = solve_psd(Sxx_e, S.reshape(p, m * q)).reshape(p, m, q)
    W = np.einsum("ab,ibq->iaq", Pz, W)
    # leading left singular vectors of the unfoldings, from their small Grams
    Ub = _leading_left_vectors(W.transpose(2, 0, 1).reshape(q, -1))
    Uc = _leading_left_vectors(W.transpose(1, 0, 2).reshape(m, -1))
    return Ub, Uc


def _leading_left_vectors(F):
    """Left singular vectors of a wide matrix, by decreasing singular value."""
    evals, U = linalg.eigh(F @ F.T)
    return U[:, ::-1]


def _pad_columns(U, K, seed):
    """First K columns of U; when U has fewer (K > m), add fixed random ones."""
    if U.shape[1] >= K:
        return U[:, :K].copy()
    rng = np.random.default_rng(seed)
    extra = rng.standard_normal((U.shape[0], K - U.shape[1]))
    return np.hstack([U, extra / np.linalg.norm(extra, axis=0)])


# ----------------------------------------------------------------------------- driver
@dataclass(kw_only=True)
class MICFit:
    """Result of :func:`fit_mic_model` (factors in canonical form).

    Shapes: ``coef`` (p, q) baseline ``B``, ``modulator_coef`` (m, q) ``D``,
    ``weights`` (K,), ``source_patterns`` (p, K), ``target_patterns`` (q, K),
    ``modulator_patterns`` (m, K), ``coef_basis`` (q, r) or None: orthonormal
    columns with ``coef = coef @ coef_basis @ coef_basis.T``.
    """

    coef: np.ndarray
    modulator_coef: np.ndarray
    weights: np.ndarray
    source_patterns: np.ndarray
    target_patterns: np.ndarray
    modulator_patterns: np.ndarray
    loss_history: np.ndarray
    n_iter: int
    converged: bool
    init_losses: np.ndarray
    baseline_loss: float
    # Known from the baseline solve; lets the held-out score skip factorising
    # coef. None after a change of units that would not preserve it.
    coef_basis: np.ndarray | None = None

    def modulation_tensor(self):
        """``W`` of shape (p, q, m)."""
        return cp_tensor(
            self.weights, self.source_patterns, self.target_patterns, self.modulator_patterns
        )


def penalties(
    op, alpha, alpha_channels, sparsity=0.0, sparse_on=("source", "target", "modulator")
):
    """Absolute ridge penalties of a fit from the relative ones (see :class:`mics.MICs`).

    Per-sample variance times the number of parameters a component carries:
    the penalty grows with dimension (where shrinkage pays, few samples per
    parameter) but not with the number of samples, so the fit stays
    consistent as recordings get longer.

    Parameters
    ----------
    op : MomentOperator or DataOperator
        The operator of the (standardised) training data.
    alpha, alpha_channels : float or None
        Relative penalties on the baseline and on each channel factor
        (``alpha_channels=None`` uses ``alpha``).
    sparsity : float, default=0.0
        Relative group-lasso weight on the neurons (rows) of the channel
        factors (:mod:`mics.core.sparse`): ``sparsity`` times ``2 sqrt(n
        v_phi v_y)``, with ``v_phi`` the mean per-sample interaction variance
        and ``v_y`` the mean per-sample target variance. That is the size of
        the loss gradient at a neuron that carries nothing (per unit norm of
        the other two patterns), so ``sparsity`` reads as a threshold in
        standard errors; it grows like ``sqrt(n)``, slower than the data
        term, as a consistent lasso weight does.
    sparse_on : "all" or sequence of {"source", "target", "modulator"}
        Factors whose rows are penalised (also a comma-separated string).
        The modulator is penalised only when it has more than one column (a
        population), the source and target only when they have more than
        one neuron.

    Returns
    -------
    dict
        ``alpha_B`` and ``alpha_W`` for :func:`mics.core.fit_mic_model`, and
        ``group_penalty`` (a :class:`mics.core.sparse.GroupPenalty`) when
        ``sparsity > 0``.
    """
    alpha_W = alpha if alpha_channels is None else alpha_channels
    p, q, m = op.sizes  # a reduced operator's penalties are those of the full problem
    x_var = np.trace(op.Sxx) / (p * op.n)
    out = {
        "alpha_B": alpha * x_var * (p + q),
        "alpha_W": alpha_W * op.interaction_scale / op.n * (p + q + m),
    }
    if sparsity:
        from mics.core.sparse import GroupPenalty, sparse_factors  # imports this module

        lam = sparsity * 2 * np.sqrt(op.interaction_scale * op.tr_yy / (op.q * op.n))
        dims = {"source": op.p, "target": op.q, "modulator": op.m}
        names = sparse_factors(sparse_on)
        on = {name: lam if name in names and dims[name] > 1 else 0.0 for name in dims}
        out["group_penalty"] = GroupPenalty(**on)
    return out


def cp_tensor(weights, A, Bm, C):
    """The modulation tensor ``W = sum_k lambda_k a_k o b_k o c_k`` of CP factors.

    Parameters
    ----------
    weights : ndarray of shape (K,)
    A : ndarray of shape (p, K)
        Source patterns.
    Bm : ndarray of shape (q, K)
        Target patterns.
    C : ndarray of shape (m, K)
        Modulator patterns.

    Returns
    -------
    W : ndarray of shape (p, q, m)
        Zero when ``K = 0`` (einsum rather than tensorly's ``cp_to_tensor``,
        which refuses no factors).
    """
    return np.einsum("k,ik,jk,ak->ija", weights, A, Bm, C)


def canonical_channels(A, Bm, C):
    """Unit-norm patterns, positive weights sorted descending, canonical signs.

    The sign of each channel lives in its modulator pattern: the
    largest-magnitude entries of the source and target patterns are positive.
    """
    na, nb, nc = (np.linalg.norm(F, axis=0) for F in (A, Bm, C))
    w = na * nb * nc
    safe = lambda x: np.where(x > 0, x, 1.0)  # noqa: E731
    A, Bm, C = A / safe(na), Bm / safe(nb), C / safe(nc)
    sa, sb = canonical_signs(A), canonical_signs(Bm)
    A, Bm, C = A * sa, Bm * sb, C * (sa * sb)
    order = np.argsort(-w, kind="stable")
    return w[order], A[:, order], Bm[:, order], C[:, order]


#: Smallest ratio of source coordinates to samples at which ``joint="auto"``
#: profiles the baseline out (:func:`joint_method`).
PROFILED_MIN_RATIO = 1.0


def check_joint(joint):
    """``joint`` if it names a joint-stage method ("auto", "alternate", "profiled"), else raise."""
    if joint not in ("auto", "alternate", "profiled"):
        raise ValueError(f"joint must be 'auto', 'alternate' or 'profiled', got {joint!r}.")
    return joint


def joint_method(joint, op, alpha_B, group_penalty=None):
    """The joint stage's method for ``joint`` on ``op``: "alternate" or "profiled".

    "auto" profiles the baseline out (:mod:`mics.core.profiled`) where the
    source has at least ``PROFILED_MIN_RATIO`` times as many coordinates as
    samples: there the baseline can represent any channel term and the
    alternation crawls. A group penalty (not differentiable) and a
    singular baseline scatter (no ridge with more neurons than samples:
    the profiled loss updates its factorisation) always alternate.

    Parameters
    ----------
    joint : {"auto", "alternate", "profiled"}
    op : MomentOperator or DataOperator
    alpha_B : float
    group_penalty : GroupPenalty, optional

    Returns
    -------
    str
    """
    if group_penalty is not None or check_joint(joint) == "alternate":
        return "alternate"
    if joint == "auto" and op.p < PROFILED_MIN_RATIO * op.n:
        return "alternate"
    return "profiled" if profiled_source(op, alpha_B).factorised else "alternate"


def fit_mic_model(
    op,
    rank,
    n_channels,
    *,
    alpha_B=0.0,
    alpha_W=0.0,
    n_init=3,
    max_iter=200,
    tol=1e-7,
    random_state=None,
    warm_start=None,
    accelerate=True,
    group_penalty=None,
    dense_start=None,
    joint="auto",
):
    """Fit the MIC model in three stages (baseline, modulation, joint).

    Parameters
    ----------
    op : MomentOperator or DataOperator
    rank : int
        Baseline rank ``r``.
    n_channels : int
        Number of channels ``K`` (0 gives a baseline-plus-additive model).
    alpha_B, alpha_W : float
        Absolute ridge penalties (scatter units) on ``B`` and on each factor.
    n_init : int
        Random restarts in addition to the HOSVD start; the best is kept.
    max_iter : int
        Maximum sweeps for the modulation stage and for the joint stage.
    tol : float
        Relative loss decrease below which a stage has converged; for the
        profiled joint stage (``joint``), the relative gradient norm
        ``sqrt(g^T P^-1 g / (2 loss))`` below which it has.
    random_state : int, numpy.random.Generator or None
        Seed of the random restarts.
    warm_start : MICFit, optional
        A fit on the *same* operator with fewer channels (typically K - 1,
        the channel path) or as many (another penalty, the penalty path of
        :mod:`mics.model.penalty_path`): its target and modulator patterns,
        completed by the next HOSVD directions, are one more start (see
        :func:`warm_start_patterns`). Cross-validation uses it instead of
        random restarts: it must never come from data with the held-out block.
    accelerate : bool, default=True
        Line search along the last update in the modulation stage (after the
        probe sweeps that choose the start) and in the joint stage (from its
        sixth iteration): a step is kept only where it lowers the loss, so
        ``loss_history`` never increases either way.
    group_penalty : GroupPenalty, optional
        Group-lasso weights on the neurons of the channel factors
        (:mod:`mics.core.sparse`, from :func:`penalties` with ``sparsity``);
        ``loss_history`` then includes that penalty. None: the dense fit.
    dense_start : MICFit, optional
        With ``group_penalty`` (ignored without): the dense fit (the same
        ridge penalties, no group penalty) on the *same* operator. The group
        sweeps start from its channels and skip the dense modulation stage
        that would find them again (its starts, probes and sweeps). A
        sparsity path passes each fold's dense fit to its sparse candidates
        (:func:`mics.model.warm_path.warm_path`).
    joint : {"auto", "alternate", "profiled"}, default="auto"
        How the joint stage minimises the loss over baseline and channels
        together. "alternate": (baseline | channels) and (channels | baseline)
        in turn, with the line search of ``accelerate``, until the relative
        loss decrease is below ``tol``. "profiled": the baseline and target
        patterns profiled out (variable projection, :mod:`mics.core.profiled`),
        the source and modulator patterns moved by preconditioned L-BFGS from
        the best probed start (the modulation stage is then not continued on
        its own), until the decrease a block-Newton step predicts from the
        gradient is below ``tol`` of the loss. "auto": as :func:`joint_method`
        decides from the problem's shape. A group penalty always alternates.

    Returns
    -------
    MICFit
        ``converged`` is False when a stage stopped at ``max_iter``.
    """
    with single_blas_thread():  # many small dense solves: see its docstring
        return _fit_mic_model(
            op,
            rank,
            n_channels,
            alpha_B=alpha_B,
            n_init=n_init,
            random_state=random_state,
            warm_start=warm_start,
            dense_start=dense_start,
            joint=joint,
            sweeps=_SweepSettings(
                alpha_W=alpha_W,
                max_iter=max_iter,
                tol=tol,
                accelerate=accelerate,
                group=group_penalty,
                # the large source solves of every stage and start of this fit: each
                # preconditions the next (a start's first solves by another start's factor)
                solves=WarmStartedSolves(op.cg_min_order, max_iter=op.cg_iterations),
            ),
        )


def warm_start_patterns(previous, Ub, Uc, K):
    """Target and modulator patterns of a K-channel start from a fit with fewer channels.

    The previous channels are kept (patterns scaled by the cube root of
    their weights, as the balanced ALS holds them) and the missing ones are
    the leading HOSVD directions, which the previous fit's channels are
    least likely to explain first. Both come from the same training
    moments, so the start has never seen a held-out block.

    Parameters
    ----------
    previous : MICFit
        With ``k <= K`` channels.
    Ub : ndarray of shape (q, q)
    Uc : ndarray of shape (m, m)
        HOSVD directions (:func:`interaction_init`).
    K : int

    Returns
    -------
    Bm0 : ndarray of shape (q, K)
    C0 : ndarray of shape (m, K)
    """
    k = previous.weights.size
    g = np.cbrt(previous.weights)
    Bm_new = _pad_columns(Ub, K, seed=Ub.shape[0])[:, k:]
    C_new = _pad_columns(Uc, K, seed=Uc.shape[0])[:, k:]
    scale = g.mean() if k else 1.0
    Bm0 = np.hstack([previous.target_patterns * g, Bm_new * scale])
    C0 = np.hstack([previous.modulator_patterns * g, C_new * scale])
    return Bm0, C0


@dataclass(frozen=True)
class _SweepSettings:
    """How the ALS sweeps of one fit run: the same for every start and stage.

    ``group`` is a :class:`mics.core.sparse.GroupPenalty` or None (the dense
    fit); ``solves`` the fit's :class:`~mics.core.linalg.WarmStartedSolves`.
    """

    alpha_W: float
    max_iter: int
    tol: float
    accelerate: bool
    group: object
    solves: WarmStartedSolves


@dataclass(frozen=True)
class _Baseline:
    """A baseline solve (:func:`baseline_path`): ``B`` (p, q), ``D`` (m, q), its loss, ``V_r``."""

    B: np.ndarray
    D: np.ndarray
    loss: float
    basis: np.ndarray


@dataclass(frozen=True)
class _ChannelStage:
    """The channels found on the baseline residual (stage 2), where the joint stage starts.

    ``history`` holds the penalised loss after each sweep of the kept start;
    ``init_losses`` the loss of every start after its probe sweeps.
    """

    state: _ALSState
    converged: bool
    history: tuple
    init_losses: np.ndarray


@dataclass(frozen=True)
class _JointStage:
    """The end of the alternating joint stage: baseline, channels (balanced), loss history."""

    baseline: _Baseline
    A: np.ndarray
    Bm: np.ndarray
    C: np.ndarray
    history: tuple
    n_iter: int
    converged: bool


def _fit_mic_model(
    op, rank, K, *, alpha_B, n_init, random_state, warm_start, dense_start, joint, sweeps
):
    """The three stages of :func:`fit_mic_model` (BLAS already limited to one thread)."""
    rng = np.random.default_rng(random_state)
    baseline = _Baseline(*baseline_path(op, [rank], alpha_B)[0])
    if K == 0:
        return _channel_free_fit(op, baseline)
    base_penalty = alpha_B * np.sum(baseline.B**2)
    profiled = joint_method(joint, op, alpha_B, sweeps.group) == "profiled"
    if sweeps.group is not None and dense_start is not None and dense_start.weights.size == K:
        found = _sparse_from_dense(op, baseline, base_penalty, dense_start, sweeps)
    else:
        found = _modulation_stage(
            op,
            rank,
            alpha_B,
            baseline,
            K,
            base_penalty=base_penalty,
            starts=_starts(op, rank, alpha_B, baseline, K, warm_start, n_init, rng),
            sweeps=sweeps,
            profiled=profiled,
        )
    if profiled:
        return _profiled_stage(op, rank, K, alpha_B, found, sweeps, baseline.loss)
    end = _alternating_joint_stage(op, rank, alpha_B, baseline, found, sweeps)
    if not (found.converged and end.converged):
        stage = "joint refinement" if not end.converged else "modulation stage"
        warnings.warn(
            f"MIC {stage} did not converge in max_iter={sweeps.max_iter} sweeps; "
            "increase max_iter or tol.",
            ConvergenceWarning,
            stacklevel=3,
        )
    w, A, Bm, C = canonical_channels(end.A, end.Bm, end.C)
    return MICFit(
        coef=end.baseline.B,
        modulator_coef=end.baseline.D,
        weights=w,
        source_patterns=A,
        target_patterns=Bm,
        modulator_patterns=C,
        loss_history=np.asarray(end.history),
        n_iter=end.n_iter,
        converged=found.converged and end.converged,
        init_losses=found.init_losses,
        baseline_loss=baseline.loss,
        coef_basis=end.baseline.basis,
    )


def _channel_free_fit(op, baseline):
    """The fit with ``K = 0``: the baseline (and the modulator's additive effect) alone."""
    empty = np.zeros((0,))
    return MICFit(
        coef=baseline.B,
        modulator_coef=baseline.D,
        weights=empty,
        source_patterns=np.zeros((op.p, 0)),
        target_patterns=np.zeros((op.q, 0)),
        modulator_patterns=np.zeros((op.m, 0)),
        loss_history=np.asarray([baseline.loss]),
        n_iter=0,
        converged=True,
        init_losses=empty,
        baseline_loss=baseline.loss,
        coef_basis=baseline.basis,
    )


def _sparse_from_dense(op, baseline, base_penalty, dense_start, sweeps):
    """Stage 2 under a group penalty from a given dense fit (no starts probed).

    The dense fit's factors enter as the balanced ALS holds them: patterns
    times the cube root of the weights.
    """
    g = np.cbrt(dense_start.weights)
    op.set_baseline(baseline.B, baseline.D, baseline.basis)
    best, converged = _als_sweeps(
        op,
        dense_start.target_patterns * g,
        dense_start.modulator_patterns * g,
        alpha_W=sweeps.alpha_W,
        base_penalty=base_penalty,
        max_iter=sweeps.max_iter,
        tol=sweeps.tol,
        A=dense_start.source_patterns * g,
        accelerate=sweeps.accelerate,
        group=sweeps.group,
    )
    return _ChannelStage(best, converged, tuple(best.history), np.asarray(dense_start.init_losses))


def _starts(op, rank, alpha_B, baseline, K, warm_start, n_init, rng):
    """The starting target and modulator patterns of stage 2: HOSVD, warm, random.

    The HOSVD start depends on the baseline only, so it is cached on the
    operator and shared by every ``K``. Random restarts are drawn and
    normalised in the full problem's space, then mapped: a reduced
    operator's restarts are the full problem's.

    Returns
    -------
    list of (Bm0, C0)
        ``Bm0`` (q, K) and ``C0`` (m, K) per start.
    """
    cache = op.fit_cache("_init_cache")
    key = (rank, alpha_B)
    if key not in cache:
        cache[key] = interaction_init(op, baseline.B, baseline.D, basis=baseline.basis)
    Ub, Uc = cache[key]
    starts = [(_pad_columns(Ub, K, seed=op.q), _pad_columns(Uc, K, seed=op.m))]
    if warm_start is not None and 0 < warm_start.weights.size <= K:
        starts.append(warm_start_patterns(warm_start, Ub, Uc, K))
    _, qf, mf = op.sizes
    for _ in range(n_init):
        Bm0 = rng.standard_normal((qf, K))
        C0 = rng.standard_normal((mf, K))
        Bm0, C0 = Bm0 / np.linalg.norm(Bm0, axis=0), C0 / np.linalg.norm(C0, axis=0)
        starts.append((op._draw("restart_target", Bm0), op._draw("modulator", C0)))
    return starts


def _modulation_stage(op, rank, alpha_B, baseline, K, *, base_penalty, starts, sweeps, profiled):
    """Stage 2: the channels on the baseline residual, from several starts.

    Every start gets a short run of plain sweeps (which start is kept does
    not depend on the line search, only how fast it then converges); only
    the most promising is run on to convergence, so restarts cost a few
    sweeps each, not a full fit. Under a group penalty the sparse sweeps
    then start from that dense fit.
    """
    op.set_baseline(baseline.B, baseline.D, baseline.basis)
    n_probe = min(_PROBE_SWEEPS, sweeps.max_iter)
    probe = partial(
        _als_sweeps,
        alpha_W=sweeps.alpha_W,
        base_penalty=base_penalty,
        tol=sweeps.tol,
        solves=sweeps.solves,
    )
    results = [probe(op, Bm0, C0, max_iter=n_probe, accelerate=False) for Bm0, C0 in starts]
    init_losses = np.array([s.loss for s, _ in results])
    best, converged = results[int(np.argmin(init_losses))]
    # The history starts at the kept start's first sweep: a random start with
    # penalised factors need not be below the channel-free loss at sweep one.
    history = list(best.history)
    if profiled:
        # the joint stage moves the channels from here: run on their own
        # with the baseline fixed, they would converge to a point the
        # joint stage then leaves (at T = 2000, p = 3000, 21 sweeps)
        converged = True
    elif not converged and sweeps.max_iter > n_probe:
        best, converged = probe(
            op,
            best.Bm,
            best.C,
            max_iter=sweeps.max_iter - n_probe,
            A=best.A,
            accelerate=sweeps.accelerate,
        )
        history.extend(best.history)
    if sweeps.group is not None:
        # The group penalty starts from the dense fit (its starts probed and
        # run as above): from a start far from the channel, the first sparse
        # block can zero every neuron, a stationary point the ALS never
        # leaves. The history is that of the penalised loss only.
        best, converged = _als_sweeps(
            op,
            best.Bm,
            best.C,
            alpha_W=sweeps.alpha_W,
            base_penalty=base_penalty,
            max_iter=sweeps.max_iter,
            tol=sweeps.tol,
            A=best.A,
            accelerate=sweeps.accelerate,
            group=sweeps.group,
        )
        history = list(best.history)
    return _ChannelStage(best, converged, tuple(history), init_losses)


def _channel_penalty(A, Bm, C, alpha_W, group):
    """The channels' ridge penalty, plus the group penalty when there is one."""
    out = alpha_W * (np.sum(A**2) + np.sum(Bm**2) + np.sum(C**2))
    return out + group.value(A, Bm, C) if group is not None else out


def _alternating_joint_stage(op, rank, alpha_B, baseline, found, sweeps):
    """Stage 3: (baseline | channels) and (channels | baseline) in turn, from ``found``.

    Each iteration records two losses: after the baseline solve and after
    the channel sweep. From iteration ``_JOINT_EXTRAPOLATE_AFTER`` on (with
    ``accelerate``) the channels are also pushed along their last change
    (:func:`_joint_extrapolation`).
    """
    A, Bm, C, H_int = found.state.A, found.state.Bm, found.state.C, found.state.H_int
    history = list(found.history)
    n_iter = len(history)
    converged = False
    step = _STEP_START
    solved = None  # the baseline of an accepted line-search point: already solved
    for iteration in range(sweeps.max_iter):
        prev = history[-1]
        if solved is None:
            solved = _Baseline(*baseline_path(op, [rank], alpha_B, (A, Bm, C), H_int)[0])
        baseline, solved = solved, None
        history.append(baseline.loss + _channel_penalty(A, Bm, C, sweeps.alpha_W, sweeps.group))
        op.set_baseline(baseline.B, baseline.D, baseline.basis)
        state, _ = _als_sweeps(
            op,
            Bm,
            C,
            alpha_W=sweeps.alpha_W,
            base_penalty=alpha_B * np.sum(baseline.B**2),
            max_iter=1,
            tol=sweeps.tol,
            A=A,
            accelerate=False,
            group=sweeps.group,
            solves=sweeps.solves,
        )
        previous = A, Bm, C
        A, Bm, C, H_int, loss = state.A, state.Bm, state.C, state.H_int, state.loss
        if sweeps.accelerate and iteration >= _JOINT_EXTRAPOLATE_AFTER:
            pushed = _joint_extrapolation(op, rank, alpha_B, (A, Bm, C), previous, step, sweeps)
            if pushed.loss < loss - _JOINT_STEP_GAIN * abs(loss):
                A, Bm, C, H_int, loss = pushed.A, pushed.Bm, pushed.C, pushed.H_int, pushed.loss
                baseline = solved = pushed.baseline
                step = min(step * _STEP_GROWTH, _STEP_MAX)
            else:
                step = _STEP_START
        history.append(loss)
        n_iter += 1
        if prev - history[-1] <= sweeps.tol * abs(prev):
            converged = True
            break
    return _JointStage(baseline, A, Bm, C, tuple(history), n_iter, converged)


@dataclass(frozen=True)
class _JointPoint:
    """A line-search point of the joint stage: channels, their Gram, baseline, loss."""

    A: np.ndarray
    Bm: np.ndarray
    C: np.ndarray
    H_int: np.ndarray
    baseline: _Baseline
    loss: float


def _joint_extrapolation(op, rank, alpha_B, factors, previous, step, sweeps):
    """The channels pushed on along their last change, with the baseline solved for them.

    The caller keeps the point only where its loss is lower, so the loss
    never increases. Under a group penalty the neurons the last sweep
    dropped stay dropped: the members are read from the zero rows.
    """
    group = sweeps.group
    A_e, Bm_e, C_e = (
        F + step * (F - F0) * (1.0 if group is None else np.any(F != 0, 1, keepdims=True))
        for F, F0 in zip(factors, previous, strict=True)
    )
    H_e = op.interaction_gram(A_e, C_e)
    baseline = _Baseline(*baseline_path(op, [rank], alpha_B, (A_e, Bm_e, C_e), H_e)[0])
    loss = baseline.loss + _channel_penalty(A_e, Bm_e, C_e, sweeps.alpha_W, group)
    return _JointPoint(A_e, Bm_e, C_e, H_e, baseline, loss)


def _profiled_stage(op, rank, K, alpha_B, found, sweeps, base_loss):
    """Stage 3 by variable projection (:mod:`mics.core.profiled`) from the channels ``found``."""
    pf, _, mf = op.sizes  # joint or channel-by-channel Grams as the alternation decides
    loss = ProfiledLoss(op, rank, alpha_B, sweeps.alpha_W, profiled_source(op, alpha_B))
    point, joint_history, converged = profiled_joint_stage(
        loss,
        found.state.A,
        found.state.C,
        sweeps.max_iter,
        sweeps.tol,
        K * pf <= _JOINT_SOLVE_MAX,
        K * mf <= _JOINT_SOLVE_MAX,
    )
    history = list(found.history)
    n_iter = len(history) + len(joint_history) - 1  # its first entry is the start
    if not converged:
        warnings.warn(
            f"MIC joint refinement did not converge in max_iter={sweeps.max_iter} iterations "
            "(or found no lower loss along its search direction); increase max_iter or tol.",
            ConvergenceWarning,
            stacklevel=4,
        )
    w, A, Bm, C = canonical_channels(point.A, point.Bm, point.C)
    return MICFit(
        coef=point.B,
        modulator_coef=point.D,
        weights=w,
        source_patterns=A,
        target_patterns=Bm,
        modulator_patterns=C,
        loss_history=np.asarray(history + joint_history),
        n_iter=n_iter,
        converged=converged,
        init_losses=found.init_losses,
        baseline_loss=base_loss,
        coef_basis=point.basis,
    )
