"""numba kernels: the inner loops that BLAS does not already do well.

This module imports only numpy and numba (pynapple's rule), so the rest of
the package stays importable and testable without looking at JIT details.
Every kernel has a pure-NumPy twin in ``tests/test_kernels.py``.

Since issue #10 the package's hot paths no longer call these kernels: the
moment pass is one BLAS ``syrk`` per chunk of Khatri-Rao rows (it needs no
sign-split weighted rows) and both contractions of the interaction scatter
are single GEMMs in the (a, b, i, j) layout (``MomentOperator``), which beat
the loops below. They are kept, with their NumPy twins, as the reference
peers of ``benchmarks/bench_kernels.py``.
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
def split_weighted_rows(Xt, w, pos, neg):
    """Rows scaled by ``sqrt(|w|)``, sorted into two buffers by the sign of ``w``.

    Then ``Xt^T diag(w) Xt = pos^T pos - neg^T neg``: two BLAS rank-k updates
    whose row counts add up to one, for a weighted Gram that BLAS has no
    routine for. One pass, no temporaries (NumPy needs the scaled copy and
    two boolean gathers).

    Parameters
    ----------
    Xt : ndarray of shape (n, d)
    w : ndarray of shape (n,)
    pos, neg : ndarray of shape (>= n, d)
        Output buffers, filled from the top.

    Returns
    -------
    n_pos, n_neg : int
        Rows written to ``pos`` and ``neg`` (rows with ``w == 0`` are dropped).
    """
    n, d = Xt.shape
    n_pos = 0
    n_neg = 0
    for t in range(n):
        wt = w[t]
        if wt > 0.0:
            s = np.sqrt(wt)
            for j in range(d):
                pos[n_pos, j] = s * Xt[t, j]
            n_pos += 1
        elif wt < 0.0:
            s = np.sqrt(-wt)
            for j in range(d):
                neg[n_neg, j] = s * Xt[t, j]
            n_neg += 1
    return n_pos, n_neg


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
