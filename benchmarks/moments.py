"""The one pass over the data: raw moments, and their centring."""

from __future__ import annotations

import functools

import numpy as np

from benchmarks import SIZES, compute_moments, data, warm_up


def _data(size):
    return data(**SIZES[size], rank=2, n_channels=1)


@functools.cache
def _raw(size):
    return compute_moments(*_data(size))


class MomentPass:
    """``compute_moments(X, Y, Z)`` and ``RawMoments.centered()``."""

    params = list(SIZES)
    param_names = ["size"]
    repeat = (3, 8, 4.0)
    timeout = 120

    def setup(self, size):
        warm_up()
        self.X, self.Y, self.Z = _data(size)
        self.raw = _raw(size)

    def time_compute_moments(self, size):
        compute_moments(self.X, self.Y, self.Z)

    def peakmem_compute_moments(self, size):
        compute_moments(self.X, self.Y, self.Z)

    def time_centered(self, size):
        self.raw.centered()


class BLASReference:
    """The BLAS floor of the moment pass on this machine: one ``V.T @ V`` of its rows.

    ``V`` holds the joined Khatri-Rao rows ``kron([1, z], [1, x])`` and the
    target of the same data, centred: the arithmetic of
    ``compute_moments`` in one BLAS ``syrk``. It does not call ``mics``; it
    tells machine noise from a change of code in ``MomentPass``.
    """

    params = list(SIZES)
    param_names = ["size"]
    rounds = 1
    repeat = (3, 5, 3.0)
    timeout = 120

    def setup(self, size):
        self.V = _rows(size)

    def time_syrk(self, size):
        self.V.T @ self.V


@functools.cache
def _rows(size):
    X, Y, Z = _data(size)
    (T, p), q, m = X.shape, Y.shape[1], Z.shape[1]
    d = (p + 1) * (m + 1)
    V = np.empty((T, d + q))
    U = V[:, :d].reshape(T, m + 1, p + 1)
    U[:, 0, 0] = 1.0
    U[:, 0, 1:] = X - X.mean(0)
    U[:, 1:] = U[:, :1] * (Z - Z.mean(0))[:, :, None]
    V[:, d:] = Y - Y.mean(0)
    V.T @ V  # start BLAS's threads
    return V
