"""The modulation test: the observed fit and one null data set."""

from __future__ import annotations

import mics
from benchmarks import SIZES, data, quiet, warm_up


class ModulationTest:
    """``test_modulation(MICs(), X, Y, Z, n_permutations=1, n_jobs=1)``.

    Times the observed fit plus ONE null data set: the default selection on
    the data (what :class:`benchmarks.fit.DefaultSelection` times), then one
    circular shift of the modulator with the additive effect regressed out
    and its cross-validated channel selection (no final fit). The cost of a
    null data set is this time minus the default selection's; a test with
    ``n`` shifts costs about ``n`` of them.
    """

    params = list(SIZES)
    param_names = ["size"]
    rounds = 1
    repeat = (2, 5, 15.0)
    timeout = 240

    def setup(self, size):
        warm_up()
        self.X, self.Y, self.Z = data(**SIZES[size], rank=2, n_channels=1)

    def time_observed_and_one_null(self, size):
        with quiet():
            mics.test_modulation(
                mics.MICs(random_state=0, verbose=0),
                self.X,
                self.Y,
                self.Z,
                n_permutations=1,
                n_jobs=1,
                verbose=0,
                random_state=0,
            )
