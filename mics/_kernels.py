"""numba kernels: the inner loops that BLAS does not already do well.

This module imports only numpy and numba (pynapple's rule), so the rest of
the package stays importable and testable without looking at JIT details.
Every kernel has a pure-NumPy twin in ``tests/test_kernels.py``.

Where BLAS already runs at peak the callers use it directly: the Gram of
the Khatri-Rao rows (``dsyrk``), the weighted Grams of the data-space path,
and the contraction of the interaction scatter's *source* modes, which is
two plain matrix products in the (i, a, b, j) layout (2.5x faster than a
numba loop, ``benchmarks/bench_kernels.py``). The kernels here fuse work
that NumPy would do in several passes with large temporaries.
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
def contract_modulator_modes(Mt, C):
    """Contract both modulator modes of the interaction scatter with ``C``.

    ``N[k, l, i, j] = sum_{a, b} C[a, k] C[b, l] M[i, a, j, b]``: the Gram of
    the source-update design. ``Mt`` is ``M`` laid out as (i, a, b, j) so
    that every inner loop runs over contiguous ``j`` and vectorises; done in
    one pass without the (p, m, p, K) temporary of ``tensordot``.

    Parameters
    ----------
    Mt : ndarray of shape (p, m, m, p)
        ``M.transpose(0, 1, 3, 2)``, C-contiguous.
    C : ndarray of shape (m, K)

    Returns
    -------
    N : ndarray of shape (K, K, p, p)
    """
    p, m = Mt.shape[0], Mt.shape[1]
    K = C.shape[1]
    N = np.zeros((K, K, p, p))
    tmp = np.empty((m, K, p))
    for i in range(p):
        # tmp[a, l, j] = sum_b M[i, a, j, b] C[b, l]
        tmp[:] = 0.0
        for a in range(m):
            for b in range(m):
                for l in range(K):
                    cbl = C[b, l]
                    for j in range(p):
                        tmp[a, l, j] += Mt[i, a, b, j] * cbl
        for k in range(K):
            for l in range(K):
                for a in range(m):
                    cak = C[a, k]
                    for j in range(p):
                        N[k, l, i, j] += cak * tmp[a, l, j]
    return N
