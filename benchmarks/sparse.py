"""Sparse channel patterns (issue 33): what the group lasso over neurons costs.

Issue 33's cost targets, each as a pair timed in one class so that the
ratio is read from one run:

- :class:`SparseFixedFit`: ``MICs(rank=3, n_channels=2, sparsity=8)``
  against the dense fixed fit ``MICs(rank=3, n_channels=2)`` on the same
  data (target: sparse <= 3x dense at T=20000, p=300, q=100, m=3).
  ``sparsity=8`` is the value ``MICs(sparsity="cv")`` chooses on the large
  data set here and the one ``results/sparse_members`` uses.
- :class:`SparsityPath`: the full path with cross-validation,
  ``MICs(sparsity="cv")`` with the default selection of rank and channels,
  against the dense default selection ``MICs()`` (target <= 3x).

Data: ``mics.simulate`` with a rank-3 baseline and two channels (seed 0),
the suite's two sizes (:data:`benchmarks.SIZES`).
"""

from __future__ import annotations

import mics
from benchmarks import SIZES, data, quiet, warm_up

#: The fixed group-lasso weight of the sparse fit (see the module docstring).
SPARSITY = 8.0


def _data(size):
    return data(**SIZES[size], rank=3, n_channels=2)


class SparseFixedFit:
    """``MICs(rank=3, n_channels=2, sparsity=8).fit`` beside the dense fixed fit.

    The dense fit is ``MICs(rank=3, n_channels=2).fit`` on the same data.
    """

    params = list(SIZES)
    param_names = ["size"]
    rounds = 1
    repeat = (3, 10, 20.0)
    timeout = 180

    def setup(self, size):
        warm_up()
        self.X, self.Y, self.Z = _data(size)

    def _fit(self, sparsity):
        est = mics.MICs(rank=3, n_channels=2, sparsity=sparsity, random_state=0, verbose=0)
        with quiet():
            return est.fit(self.X, self.Y, self.Z)

    def time_dense(self, size):
        self._fit(0.0)

    def time_sparse(self, size):
        self._fit(SPARSITY)

    def track_n_iter_sparse(self, size):
        """ALS sweeps of the sparse fit (``n_iter_``): a change in convergence shows here."""
        return int(self._fit(SPARSITY).n_iter_)

    track_n_iter_sparse.unit = "sweeps"


class SparsityPath:
    """``MICs(sparsity="cv").fit`` beside the dense default selection ``MICs().fit``.

    Both select rank and channels on the same 10 folds; the sparse one then
    fits the sparsity path (0 to 32) on every fold at the selected sizes and
    chooses by the one-SEM rule (:mod:`mics.model.sparsity_path`). One
    process, one core (``n_jobs=1``), so the two are timed alike.
    """

    params = list(SIZES)
    param_names = ["size"]
    rounds = 1
    repeat = (1, 3, 60.0)
    number = 1
    timeout = 900

    def setup(self, size):
        warm_up()
        self.X, self.Y, self.Z = _data(size)

    def _fit(self, **params):
        est = mics.MICs(random_state=0, verbose=0, n_jobs=1, **params)
        with quiet():
            return est.fit(self.X, self.Y, self.Z)

    def time_default_selection(self, size):
        self._fit()

    def time_sparsity_cv(self, size):
        self._fit(sparsity="cv")

    def track_sparsity(self, size):
        """The chosen weight (``sparsity_``): a change of the path or its rule shows here."""
        return float(self._fit(sparsity="cv").sparsity_)

    track_sparsity.unit = "sparsity"
