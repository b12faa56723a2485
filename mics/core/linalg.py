"""Small linear-algebra helpers shared across the numerical core."""

from __future__ import annotations

from functools import cache

import numpy as np
from scipy import linalg
from scipy.linalg import lapack
from threadpoolctl import ThreadpoolController

__all__ = ["canonical_signs", "solve_psd", "orthonormal_svd", "single_blas_thread"]


@cache
def _controller():
    # Built once: ``threadpool_limits(...)`` rescans every loaded library on
    # each call (about 4 ms), and the fits that need the limit run in their
    # thousands inside cross-validation and permutation tests. Libraries are
    # those loaded at the first call (numpy and scipy are, by then).
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
