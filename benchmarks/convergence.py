"""Fits where there is nothing to find (issue 31): sweeps and time of null and over-specified fits.

Data without modulation (``mics.simulate(n_channels=0)``, a rank-3
baseline, a population modulator) fitted with one or two channels, so every
channel is fitted noise: the fits that crawl to the sweep cap without
acceleration. ``track_n_iter`` counts the final fit's ALS sweeps, so a
change of the stopping rule or of the acceleration shows as sweeps as well
as time. At the population size (T=20000, p=300, q=100, m=200) the suite
also times 30 sweeps of a plain NumPy data-space ALS on the same data
(``studies/validation/population.py``'s ``plain_als``, the peer of issue 31)
and the default selection, with its peak memory.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

import mics
from benchmarks import data, quiet, warm_up

#: (T, p, q) per modulator size: the m = 3 / 100 selection's shape, and the population size.
SHAPES = {3: (3000, 60, 40), 100: (3000, 60, 40), 200: (20000, 300, 100)}


def _null(m):
    T, p, q = SHAPES[m]
    kind = "gaussian" if m == 3 else "population"
    return data(T, p, q, m, rank=3, n_channels=0, modulator_kind=kind)


class NullFit:
    """``MICs(rank=3, n_channels=K).fit`` on data without modulation, m = 3, 100 and 200."""

    params = ([3, 100, 200], [1, 2])
    param_names = ["m", "n_channels"]
    rounds = 1
    repeat = (1, 3, 30.0)
    timeout = 300

    def setup(self, m, n_channels):
        warm_up()
        self.X, self.Y, self.Z = _null(m)

    def _fit(self, n_channels):
        est = mics.MICs(rank=3, n_channels=n_channels, random_state=0, verbose=0)
        with quiet():
            return est.fit(self.X, self.Y, self.Z)

    def time_fit(self, m, n_channels):
        self._fit(n_channels)

    def track_n_iter(self, m, n_channels):
        """ALS sweeps of the final fit (``n_iter_``)."""
        return int(self._fit(n_channels).n_iter_)

    track_n_iter.unit = "sweeps"


def _plain_als():
    """The plain NumPy ALS of the population study, loaded by path (studies are scripts)."""
    path = Path(__file__).resolve().parents[1] / "studies" / "validation" / "population.py"
    spec = importlib.util.spec_from_file_location("_population_study", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.plain_als


class PopulationNullFitPeer:
    """The no-channel fit at the population size against 30 plain NumPy sweeps, in one run.

    ``time_mics`` is ``MICs(rank=2, n_channels=1).fit`` (the issue's call);
    ``time_plain_30_sweeps`` the peer on the same arrays. Their ratio is the
    figure issue 31 asks for (the fit must be faster than the peer).
    """

    rounds = 1
    repeat = (1, 3, 60.0)
    timeout = 300

    def setup(self):
        warm_up()
        self.X, self.Y, self.Z = _null(200)
        self.plain_als = _plain_als()

    def time_mics(self):
        with quiet():
            mics.MICs(rank=2, n_channels=1, random_state=0, verbose=0).fit(self.X, self.Y, self.Z)

    def time_plain_30_sweeps(self):
        self.plain_als(self.X, self.Y, self.Z, rank=2, n_sweeps=30)


class PopulationDefaultSelection:
    """The default selection ``MICs().fit`` at T=20000, p=300, q=100, m=200 (target < 5 min, 2 GB).

    One planted channel on a population modulator. One sample: it takes
    minutes.
    """

    rounds = 1
    repeat = 1
    number = 1
    timeout = 900

    def setup(self):
        warm_up()
        T, p, q = SHAPES[200]
        self.X, self.Y, self.Z = data(
            T, p, q, 200, rank=3, n_channels=1, modulator_kind="population"
        )

    def _fit(self):
        with quiet():
            mics.MICs(random_state=0, verbose=0, n_jobs=1).fit(self.X, self.Y, self.Z)

    def time_fit(self):
        self._fit()

    def peakmem_fit(self):
        self._fit()
