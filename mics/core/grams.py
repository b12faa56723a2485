"""Weighted Gram matrices of the data-space path, formed only as far as needed.

Each ALS block of the data-space path needs the scatter of the features
``F`` (source or modulator, centred, shape (T, d)) weighted by the other
modes' projections ``v_k`` (shape (T,), one per channel)::

    N[k, l] = (F * v_k)^T (F * v_l) - T mean(F * v_k) mean(F * v_l)^T

The diagonal blocks ``F^T diag(v_k^2) F`` are symmetric rank-T updates
(BLAS ``dsyrk``, half the work of a general product). The off-diagonal
blocks are only needed whole when all channels are solved jointly; the
channel-by-channel update multiplies them by a vector, which costs
``O(T d)`` straight from the scaled rows instead of ``O(T d^2)`` to form
them. :class:`WeightedGrams` therefore answers the off-diagonal blocks
lazily, and forms a diagonal block only when it is first asked for: a
large channel-by-channel solve by warm-started conjugate gradients
(:class:`mics.core.linalg.WarmStartedSolves`) needs it only as products
with vectors (:meth:`WeightedGrams.times`), ``O(T d)`` each.
``np.asarray`` materialises every block.
"""

from __future__ import annotations

import numpy as np
from scipy.linalg import blas

__all__ = ["WeightedGrams"]


class _OffDiagonal:
    """``N[k, l]`` as a matrix-vector product (``N[k, l] @ f``)."""

    def __init__(self, grams, k, l):
        self._g, self._k, self._l = grams, k, l

    def __matmul__(self, f):
        g, k, l = self._g, self._k, self._l
        return g.scaled[k].T @ (g.scaled[l] @ f) - g.n * g.means[k] * (g.means[l] @ f)


class WeightedGrams:
    """The blocks ``N[k, l]`` of shape (K, K, d, d), lazily.

    Parameters
    ----------
    F : ndarray of shape (T, d)
        Centred features.
    V : ndarray of shape (T, K)
        Per-channel weights (projections of the other modes).
    buffer : ndarray of shape (>= K, T, d), optional
        Reused storage for the scaled rows ``F * v_k`` (saves allocating
        K arrays of the data's size every sweep).
    means : ndarray of shape (d, K), optional
        ``F^T V / T``, the column means of the scaled rows, when the caller
        has them from its moments (a pass over ``F`` saved); computed here
        otherwise.
    """

    def __init__(self, F, V, buffer=None, means=None):
        T, d = F.shape
        K = V.shape[1]
        self.n = T
        self.shape = (K, K, d, d)
        if buffer is None or buffer.shape[0] < K:
            buffer = np.empty((K, T, d))
        self.scaled = buffer[:K]
        for k in range(K):
            np.multiply(F, V[:, k : k + 1], out=self.scaled[k])
        if means is None:
            means = F.T @ V / T
        self.means = [means[:, k] for k in range(K)]
        self._diagonal = [None] * K

    def diagonal(self, k):
        """The block ``N[k, k]`` of shape (d, d), formed at the first call."""
        if self._diagonal[k] is None:
            # dsyrk on the transposed (Fortran) view of C-ordered rows: no copy
            c = blas.dsyrk(1.0, self.scaled[k].T, trans=0, lower=0)
            c += np.triu(c, 1).T
            c -= self.n * np.outer(self.means[k], self.means[k])
            self._diagonal[k] = c
        return self._diagonal[k]

    def times(self, k, f):
        """``N[k, k] @ f`` without forming the block (``O(T d)``) unless it is formed already."""
        if self._diagonal[k] is not None:
            return self._diagonal[k] @ f
        return self.scaled[k].T @ (self.scaled[k] @ f) - self.n * self.means[k] * (
            self.means[k] @ f
        )

    def __getitem__(self, index):
        k, l = index
        return self.diagonal(k) if k == l else _OffDiagonal(self, k, l)

    def __array__(self, dtype=None, copy=None):
        K, _, d, _ = self.shape
        N = np.empty(self.shape)
        for k in range(K):
            N[k, k] = self.diagonal(k)
            for l in range(k + 1, K):
                N[k, l] = self.scaled[k].T @ self.scaled[l] - self.n * np.outer(
                    self.means[k], self.means[l]
                )
                N[l, k] = N[k, l].T
        return N if dtype is None else N.astype(dtype)

    def contract(self, U):
        """``H[k, l] = U[:, k]^T N[k, l] U[:, l]`` without forming the blocks.

        Parameters
        ----------
        U : ndarray of shape (d, K)

        Returns
        -------
        H : ndarray of shape (K, K)
        """
        K = self.shape[0]
        P = np.column_stack([self.scaled[k] @ U[:, k] for k in range(K)])  # (T, K)
        mu = np.array([self.means[k] @ U[:, k] for k in range(K)])
        return P.T @ P - self.n * np.outer(mu, mu)
