"""Small linear-algebra helpers shared across the numerical core."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import cache, partial

import numpy as np
from scipy import linalg
from scipy.linalg import lapack
from scipy.sparse.linalg import LinearOperator, cg
from threadpoolctl import ThreadpoolController

__all__ = [
    "canonical_signs",
    "cho_solve",
    "solve_psd",
    "orthonormal_svd",
    "single_blas_thread",
    "LazySystem",
    "WarmStartedSolves",
]


@cache
def _controller():
    # Built once: ``threadpool_limits(...)`` rescans every loaded library on
    # each call, which takes longer than a small fit's solves, and the fits
    # that need the limit run in their thousands inside cross-validation and
    # permutation tests. Libraries are those loaded at the first call (numpy
    # and scipy are, by then).
    return ThreadpoolController()


def single_blas_thread():
    """Context manager limiting BLAS to one thread (cached library scan).

    The ALS sweeps are many small dense solves: threaded BLAS gains little
    on them and, on a busy machine, spinning BLAS threads slow them tenfold.
    Parallelism belongs one level up (folds, permutations: joblib/Dask).
    """
    return _controller().limit(limits=1, user_api="blas")


def canonical_signs(vectors):
    """Flip each column so that its largest-magnitude entry is positive.

    Parameters
    ----------
    vectors : ndarray of shape (n, k)

    Returns
    -------
    signs : ndarray of shape (k,)
        The +1/-1 factors applied (so a caller can move the sign elsewhere).
    """
    if vectors.size == 0:
        return np.ones(vectors.shape[1])
    idx = np.argmax(np.abs(vectors), axis=0)
    signs = np.sign(vectors[idx, np.arange(vectors.shape[1])])
    signs[signs == 0] = 1.0
    return signs


def solve_psd(A, B):
    """Solve ``A X = B`` for symmetric positive (semi)definite ``A``.

    Cholesky when ``A`` is positive definite; otherwise the minimum-norm
    least-squares solution, so that a singular design (more neurons than
    samples, duplicated neurons) degrades gracefully instead of failing.
    The Cholesky path reads the upper triangle of ``A`` only, whatever its
    memory order (matrices assembled in floating point are symmetric only
    to rounding).

    Parameters
    ----------
    A : ndarray of shape (n, n)
    B : ndarray of shape (n,) or (n, k)

    Returns
    -------
    X : ndarray of shape (n,) or (n, k)
    """
    # One LAPACK call (dposv): the ALS solves thousands of small systems, and
    # the checks of cho_factor / cho_solve cost as much as the factorisation.
    # LAPACK wants Fortran order; handed a C-ordered A, f2py would transpose-
    # copy it (a quarter of the time of a 300 x 300 solve). A's transpose is
    # a Fortran view, and its lower triangle is A's upper one, the triangle
    # read before: no copy beyond f2py's plain one.
    A = np.asarray(A)
    if A.ndim == 2 and A.flags.c_contiguous and not A.flags.f_contiguous:
        _, X, info = lapack.dposv(A.T, B, lower=1)
    else:
        _, X, info = lapack.dposv(A, B)
    if info == 0:
        return X
    return linalg.lstsq(A, B, check_finite=False, lapack_driver="gelsd")[0]


def cho_solve(factor, B):
    """``scipy.linalg.cho_solve(factor, B)`` without its argument checks.

    The same LAPACK ``potrs`` call, so the same bits. scipy's checks (by
    default the finiteness of the factor and of ``B``) are a pass over the
    whole factor per call: as much as the solve itself where a solver applies
    one factor many times (the profiled stage's source solve and its
    preconditioner, the warm-started solves). Factors come from
    ``cho_factor`` on validated inputs.

    Parameters
    ----------
    factor : tuple of (ndarray of shape (n, n), bool)
        ``(c, lower)`` as :func:`scipy.linalg.cho_factor` returns it.
    B : ndarray of shape (n,) or (n, k)

    Returns
    -------
    X : ndarray of shape (n,) or (n, k)
    """
    c, lower = factor
    X, info = lapack.dpotrs(c, B, lower=lower)
    if info:  # pragma: no cover - only for arguments of the wrong shape
        raise ValueError(f"LAPACK dpotrs failed (info={info})")
    return X


def orthonormal_svd(B, rank):
    """Rank-``rank`` SVD of ``B`` with canonical signs.

    Returns
    -------
    U : ndarray of shape (p, rank)
    s : ndarray of shape (rank,)
    V : ndarray of shape (q, rank)
        ``B ≈ U diag(s) V.T``; the largest-|.| entry of each column of ``U``
        is positive (the sign moves to ``V``).
    """
    U, s, Vt = linalg.svd(B, full_matrices=False, check_finite=False)
    U, s, V = U[:, :rank], s[:rank], Vt[:rank].T
    signs = canonical_signs(U)
    return U * signs, s, V * signs


@dataclass
class LazySystem:
    """A symmetric system of order ``order``: its products, and the matrix on demand.

    Attributes
    ----------
    order : int
    matvec : callable
        ``matvec(v)`` -> ``H @ v`` for ``v`` of shape (order,).
    dense : callable
        ``dense()`` -> ``H``, an (order, order) array (not modified by the solves).
    """

    order: int
    matvec: Callable
    dense: Callable


class WarmStartedSolves:
    """Ridge systems that change a little from one solve to the next, solved to 1e-10.

    The channel-by-channel source update of the ALS solves, at every sweep,
    one system of order ``d`` per channel, and from one sweep to the next
    each changes only as much as the other factors did. A fresh Cholesky
    factorisation costs ``d^3 / 3``. From ``min_order`` up, each system is
    instead solved by conjugate gradients (:func:`scipy.sparse.linalg.cg`)
    started from the present value and preconditioned by the Cholesky
    factor of the last system of the same ``key`` that was factorised: a
    few products with the system and solves with the factor
    (``studies/performance/source_solve.py``).
    When that does not reach the tolerance within ``max_iter`` iterations
    (a new start, a large change), the system is factorised afresh and its
    factor kept for the next solves.

    Conjugate gradients started at ``x0`` lower the quadratic
    ``x^T H x / 2 - g^T x`` at every iteration, and the solution returned
    is either theirs at a relative residual of ``rtol`` or the factorised
    one: a block minimisation by these solves still never raises the loss.

    A system is an array, or a :class:`LazySystem` known by its products
    with vectors and formed only when it must be factorised: on the data
    path a product costs ``O(T d)`` and forming the system ``O(T d^2)``.

    Parameters
    ----------
    min_order : int or float
        Systems of smaller order go to :func:`solve_psd` (``numpy.inf``: all).
    rtol : float
        Relative residual ``||g - H x|| / ||g||`` conjugate gradients must reach.
    max_iter : int
        Iterations after which the system is factorised instead.
    """

    def __init__(self, min_order, rtol=1e-10, max_iter=8):
        self.min_order = min_order
        self.rtol = rtol
        self.max_iter = max_iter
        self._factors = {}
        #: solves by conjugate gradients and by a fresh factorisation (above ``min_order``)
        self.counts = {"cg": 0, "factorised": 0}

    def solve(self, key, H, g, x0):
        """Solve ``H x = g`` (``H`` symmetric positive definite, order ``d``) from ``x0``.

        Parameters
        ----------
        key : hashable
            Which sequence of systems ``H`` belongs to (a channel of a factor).
        H : ndarray of shape (d, d) or LazySystem
        g, x0 : ndarray of shape (d,)

        Returns
        -------
        x : ndarray of shape (d,)
        """
        if isinstance(H, np.ndarray):
            H = LazySystem(H.shape[0], H.__matmul__, partial(np.asarray, H))
        d = H.order
        if d < self.min_order:
            return solve_psd(H.dense(), g)
        factor = self._factors.get(key)
        if factor is not None:
            precondition = LinearOperator((d, d), matvec=partial(cho_solve, factor))
            x, info = cg(
                LinearOperator((d, d), matvec=H.matvec),
                g,
                x0=x0,
                rtol=self.rtol,
                atol=0.0,
                maxiter=self.max_iter,
                M=precondition,
            )
            if info == 0:
                self.counts["cg"] += 1
                return x
        H = H.dense()
        try:
            factor = linalg.cho_factor(H, check_finite=False)
        except linalg.LinAlgError:  # singular: solve_psd's minimum-norm solution
            self._factors.pop(key, None)
            return solve_psd(H, g)
        self._factors[key] = factor
        self.counts["factorised"] += 1
        return cho_solve(factor, g)
