"""The ALS's small ridge solves."""

from __future__ import annotations

import numpy as np
from threadpoolctl import threadpool_limits

from benchmarks import solve_psd, warm_up


class SolvePSD:
    """``solve_psd(A, b)`` on a C-ordered SPD matrix, one BLAS thread (as inside the fits)."""

    params = [60, 100, 300]
    param_names = ["n"]
    rounds = 1
    repeat = (10, 50, 1.0)

    def setup(self, n):
        warm_up()
        rng = np.random.default_rng(0)
        F = rng.standard_normal((n, 2 * n))
        self.A = F @ F.T / n + np.eye(n)
        self.b = rng.standard_normal(n)
        self._limits = threadpool_limits(1, user_api="blas")

    def teardown(self, n):
        self._limits.restore_original_limits()

    def time_solve_psd(self, n):
        solve_psd(self.A, self.b)
