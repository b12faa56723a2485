"""A population of neurons as the modulator (m = 100): the data path's speed and memory."""

from __future__ import annotations

import mics
from benchmarks import SIZES, data, quiet, warm_up


def _population(size, m=100):
    return data(**dict(SIZES[size], m=m), rank=2, n_channels=1, modulator_kind="population")


class PopulationModulatorFit:
    """``MICs(rank=2, n_channels=1, solver="data").fit`` with a 100-neuron modulator.

    ``mics.simulate(modulator_kind="population")`` at the suite's sizes with
    m = 100. ``peakmem_fit`` is the process's peak resident memory over the
    fit, the data included (asv measures the whole process).
    """

    params = list(SIZES)
    param_names = ["size"]
    rounds = 1
    repeat = (2, 5, 15.0)
    timeout = 180

    def setup(self, size):
        warm_up()
        self.X, self.Y, self.Z = _population(size)

    def _fit(self):
        est = mics.MICs(rank=2, n_channels=1, solver="data", random_state=0, verbose=0)
        with quiet():
            return est.fit(self.X, self.Y, self.Z)

    def time_fit(self, size):
        self._fit()

    def peakmem_fit(self, size):
        self._fit()

    def track_n_iter(self, size):
        """ALS sweeps of the final fit (``n_iter_``)."""
        return int(self._fit().n_iter_)

    track_n_iter.unit = "sweeps"


class PopulationSelection:
    """The default selection ``MICs().fit`` at T=3000, p=60, q=40 with m = 3 and m = 100.

    Issue 17's comparison: how much a population modulator costs the
    selection (``solver="auto"`` takes the moments at m = 3, the data at
    m = 100), on ``mics.simulate(modulator_kind="population")`` with a
    rank-3 baseline and one channel.
    """

    params = [3, 100]
    param_names = ["m"]
    rounds = 1
    repeat = (1, 3, 20.0)
    timeout = 300

    def setup(self, m):
        warm_up()
        self.X, self.Y, self.Z = data(
            3000, 60, 40, m, rank=3, n_channels=1, modulator_kind="population"
        )

    def time_fit(self, m):
        with quiet():
            mics.MICs(random_state=0, verbose=0).fit(self.X, self.Y, self.Z)
