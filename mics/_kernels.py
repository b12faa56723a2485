"""numba kernels: the inner loops that BLAS does not already do well.

This module imports only numpy and numba (pynapple's rule), so the rest of
the package stays importable and testable without looking at JIT details.
Every kernel has a pure-NumPy twin in ``tests/test_kernels.py``.

Where BLAS already runs at peak (the Gram of the Khatri-Rao rows, the
weighted Grams of the data-space path) the callers use it directly; the
kernels here fuse work that NumPy would do in several passes with large
temporaries.
"""

from __future__ import annotations

import numba
import numpy as np


def _jit(func):
    """``njit(cache=True)``, falling back to no cache where none can be written.

    A read-only install (site-packages owned by root, a container image)
    leaves numba no cache locator; it then raises at decoration time, which
    would make ``import mics`` fail.
    """
    try:
        return numba.njit(cache=True, nogil=True)(func)
    except RuntimeError:
        return numba.njit(cache=False, nogil=True)(func)


@_jit
def khatri_rao_rows(X, Z, x_shift, z_shift, out):
    """Row-wise Kronecker products of augmented, shifted samples.

    ``out[t] = kron([1, X[t] - x_shift], [1, Z[t] - z_shift])``, written in
    place: one pass, no temporaries (NumPy needs the shifted copies and a
    broadcast product first).

    Parameters
    ----------
    X : ndarray of shape (n, p)
    Z : ndarray of shape (n, m)
    x_shift : ndarray of shape (p,)
    z_shift : ndarray of shape (m,)
    out : ndarray of shape (n, (p + 1) * (m + 1))
    """
    n, p = X.shape
    m = Z.shape[1]
    m1 = m + 1
    zt = np.empty(m1)
    for t in range(n):
        zt[0] = 1.0
        for a in range(m):
            zt[a + 1] = Z[t, a] - z_shift[a]
        for a in range(m1):
            out[t, a] = zt[a]
        for i in range(p):
            xi = X[t, i] - x_shift[i]
            base = (i + 1) * m1
            for a in range(m1):
                out[t, base + a] = xi * zt[a]


@_jit
def contract_modulator_modes(M, C):
    """Contract both modulator modes of the interaction scatter with ``C``.

    ``N[k, l, i, j] = sum_{a, b} C[a, k] C[b, l] M[i, a, j, b]``: the Gram of
    the source-update design. ``M`` is symmetric under ``(i, a) <-> (j, b)``,
    so only ``i <= j`` is computed, halving the work; the contraction is
    done in one pass without the (p, m, p, K) temporary of ``tensordot``.

    Parameters
    ----------
    M : ndarray of shape (p, m, p, m)
    C : ndarray of shape (m, K)

    Returns
    -------
    N : ndarray of shape (K, K, p, p)
    """
    p, m = M.shape[0], M.shape[1]
    K = C.shape[1]
    N = np.zeros((K, K, p, p))
    tmp = np.empty((m, K))
    for i in range(p):
        for j in range(i, p):
            # tmp[a, l] = sum_b M[i, a, j, b] C[b, l]
            for a in range(m):
                for l in range(K):
                    s = 0.0
                    for b in range(m):
                        s += M[i, a, j, b] * C[b, l]
                    tmp[a, l] = s
            for k in range(K):
                for l in range(K):
                    s = 0.0
                    for a in range(m):
                        s += C[a, k] * tmp[a, l]
                    N[k, l, i, j] = s
                    N[l, k, j, i] = s
    return N


@_jit
def contract_source_modes(M, A):
    """Contract both source modes of the interaction scatter with ``A``.

    ``N[k, l, a, b] = sum_{i, j} A[i, k] A[j, l] M[i, a, j, b]``: the Gram of
    the modulator-update design, in one pass over ``M`` (which is streamed
    once, the expensive part when p is large).

    Parameters
    ----------
    M : ndarray of shape (p, m, p, m)
    A : ndarray of shape (p, K)

    Returns
    -------
    N : ndarray of shape (K, K, m, m)
    """
    p, m = M.shape[0], M.shape[1]
    K = A.shape[1]
    # T[i, a, b, l] = sum_j M[i, a, j, b] A[j, l], accumulated row by row of M
    N = np.zeros((K, K, m, m))
    tmp = np.zeros((m, m, K))
    for i in range(p):
        tmp[:] = 0.0
        for a in range(m):
            for j in range(p):
                for b in range(m):
                    v = M[i, a, j, b]
                    for l in range(K):
                        tmp[a, b, l] += v * A[j, l]
        for k in range(K):
            aik = A[i, k]
            for l in range(K):
                for a in range(m):
                    for b in range(m):
                        N[k, l, a, b] += aik * tmp[a, b, l]
    return N
