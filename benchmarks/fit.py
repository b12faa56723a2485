"""Fits of the estimator: a fixed-rank fit and the default cross-validated selection."""

from __future__ import annotations

import mics
from benchmarks import SIZES, data, quiet, warm_up


class FixedRankFit:
    """``MICs(rank=2, n_channels=1).fit``: the moment pass, the baseline, the ALS and its restarts.

    Data: ``mics.simulate`` with a rank-2 baseline and one channel (seed 0).
    """

    params = list(SIZES)
    param_names = ["size"]
    repeat = (3, 10, 5.0)
    timeout = 120

    def setup(self, size):
        warm_up()
        self.X, self.Y, self.Z = data(**SIZES[size], rank=2, n_channels=1)

    def _fit(self):
        est = mics.MICs(rank=2, n_channels=1, random_state=0, verbose=0)
        with quiet():
            return est.fit(self.X, self.Y, self.Z)

    def time_fit(self, size):
        self._fit()

    def track_n_iter(self, size):
        """ALS sweeps of the final fit (``n_iter_``): a change in convergence shows here."""
        return int(self._fit().n_iter_)

    track_n_iter.unit = "sweeps"


class DefaultSelection:
    """``MICs().fit``: rank 0..10, then the channel counts, over 10 folds; then the final fit.

    Same data as :class:`FixedRankFit`.
    """

    params = list(SIZES)
    param_names = ["size"]
    rounds = 1
    repeat = (2, 5, 15.0)
    timeout = 180

    def setup(self, size):
        warm_up()
        self.X, self.Y, self.Z = data(**SIZES[size], rank=2, n_channels=1)

    def time_fit(self, size):
        with quiet():
            mics.MICs(random_state=0, verbose=0).fit(self.X, self.Y, self.Z)
