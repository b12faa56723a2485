"""Thousands of neurons per population (issue 34): fixed fits and the default selection.

The four targets of the issue, each with its peak memory (asv's ``peakmem_``
is the process's peak resident memory over the call, the data included):

======================  ==================  ==================
data (T, p, q, m)       call                target
======================  ==================  ==================
2000, 3000, 200, 3      fixed fit           <= 5 s
2000, 3000, 200, 3      default selection   <= 60 s, < 4 GB
20000, 3000, 1000, 3    default selection   <= 3 min, < 8 GB
20000, 1000, 500, 3     default selection   <= 15 s
======================  ==================  ==================

With p > T the source is fitted in the T coordinates of its samples' span,
exactly (``mics.model.reduction``); the selection holds one fold's
interaction moments at a time when ``cv`` of them would not fit in
``memory_limit``. Data from ``mics.simulate`` (rank-3 baseline, two
channels), simulated once per process.
"""

from __future__ import annotations

import mics
from benchmarks import data, quiet, warm_up

#: (T, p, q, m) of each case, by name.
CASES = {
    "T2000_p3000_q200": dict(T=2000, p=3000, q=200, m=3),
    "T20000_p3000_q1000": dict(T=20000, p=3000, q=1000, m=3),
    "T20000_p1000_q500": dict(T=20000, p=1000, q=500, m=3),
}


def _data(case):
    return data(**CASES[case], rank=3, n_channels=2)


class ManyNeuronsFit:
    """``MICs(rank=3, n_channels=2).fit`` with more source neurons than samples (target 5 s)."""

    params = ["T2000_p3000_q200"]
    param_names = ["case"]
    rounds = 1
    repeat = (1, 3, 30.0)
    timeout = 600

    def setup(self, case):
        warm_up()
        self.X, self.Y, self.Z = _data(case)

    def _fit(self):
        est = mics.MICs(rank=3, n_channels=2, random_state=0, verbose=0)
        with quiet():
            return est.fit(self.X, self.Y, self.Z)

    def time_fit(self, case):
        self._fit()

    def peakmem_fit(self, case):
        self._fit()

    def track_coordinates(self, case):
        """Source coordinates fitted (``reduction_``; p when nothing is reduced)."""
        return int(self._fit().reduction_.get("source_coordinates", self.X.shape[1]))

    track_coordinates.unit = "coordinates"


class ManyNeuronsDataPathFit:
    """``MICs(rank=3, n_channels=2, solver="data").fit`` at T=20000, p=2000, q=500.

    The data path forms a source system of order p from the data
    (``T p^2``) only to factorise it; from order 1000 its solves are
    warm-started conjugate gradients on products with the data
    (``mics.core.linalg.WarmStartedSolves``). No target of its own: the
    default selection at T=20000, p=3000 runs on this path.
    """

    params = ["T20000_p2000_q500"]
    param_names = ["case"]
    rounds = 1
    repeat = (1, 2, 60.0)
    timeout = 900

    def setup(self, case):
        warm_up()
        self.X, self.Y, self.Z = data(T=20000, p=2000, q=500, m=3, rank=3, n_channels=2)

    def time_fit(self, case):
        est = mics.MICs(rank=3, n_channels=2, random_state=0, verbose=0, solver="data")
        with quiet():
            est.fit(self.X, self.Y, self.Z)


class ManyNeuronsSelection:
    """The default selection ``MICs().fit`` (rank and channels by 10-fold CV).

    Targets: 60 s and 4 GB at T=2000, p=3000, q=200; 3 min and 8 GB at
    T=20000, p=3000, q=1000; 15 s at T=20000, p=1000, q=500.
    """

    params = list(CASES)
    param_names = ["case"]
    rounds = 1
    repeat = (1, 1, 60.0)
    timeout = 1800

    def setup(self, case):
        warm_up()
        self.X, self.Y, self.Z = _data(case)

    def _fit(self):
        with quiet():
            return mics.MICs(random_state=0, verbose=0).fit(self.X, self.Y, self.Z)

    def time_fit(self, case):
        self._fit()

    def peakmem_fit(self, case):
        self._fit()


class ManyNeuronsJointStage:
    """The p > T fixed fit with its joint stage alternated or profiled (issue 47, item 3).

    ``MICs(rank=3, n_channels=2).fit`` at T=2000, p=3000, q=200, once with
    ``mics.core.als.PROFILED_MIN_RATIO`` infinite (every joint stage
    alternates, as before the profiled stage) and once at its default
    ("auto": profiled where the source has as many coordinates as samples).
    Both in one commit, so the ratio needs no second environment. On
    commits without the setting both run the alternation.
    """

    params = (["T2000_p3000_q200"], ["alternate", "auto"])
    param_names = ["case", "joint"]
    rounds = 1
    repeat = (1, 3, 30.0)
    timeout = 600

    def setup(self, case, joint):
        warm_up()
        self.X, self.Y, self.Z = _data(case)

    def _fit(self, joint):
        from mics.core import als

        default = getattr(als, "PROFILED_MIN_RATIO", None)
        als.PROFILED_MIN_RATIO = float("inf") if joint == "alternate" else default
        try:
            est = mics.MICs(rank=3, n_channels=2, random_state=0, verbose=0)
            with quiet():
                return est.fit(self.X, self.Y, self.Z)
        finally:
            als.PROFILED_MIN_RATIO = default

    def time_fit(self, case, joint):
        self._fit(joint)

    def track_iterations(self, case, joint):
        """Sweeps (alternation) or iterations (profiled), the 5 probe sweeps included."""
        return int(self._fit(joint).n_iter_)

    track_iterations.unit = "iterations"
