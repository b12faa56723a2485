"""The modulation test: one null data set's cost; the effect interval's and the joint stage's."""

from __future__ import annotations

import mics
from benchmarks import SIZES, data, quiet, warm_up


def _test(X, Y, Z, estimator=None, **options):
    """``test_modulation(MICs(random_state=0), X, Y, Z, ...)``, quietly, seed 0."""
    estimator = mics.MICs(random_state=0, verbose=0) if estimator is None else estimator
    with quiet():
        mics.test_modulation(estimator, X, Y, Z, verbose=0, random_state=0, **options)


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
        _test(self.X, self.Y, self.Z, n_permutations=1, n_jobs=1)


class _ReadmeTest:
    """The README's test data (``mics.simulate(n_samples=2000)``), 1 to 3 samples of a few s."""

    rounds = 1
    repeat = (1, 3, 20.0)
    timeout = 300

    def setup(self, *params):
        warm_up()
        self.X, self.Y, self.Z = mics.simulate(n_samples=2000, random_state=0)[:3]


class EffectInterval(_ReadmeTest):
    """What the effect size's interval adds to a test (issue 47, item 4: at most 1.3x).

    ``test_modulation(MICs(), X, Y, Z, n_permutations=19)`` at T = 2000
    (``mics.simulate``'s defaults, the README's test): with ``n_boot=0`` (the
    estimate only), with the default interval (no refit: a t interval over
    the estimate's own folds) and with ``interval="bootstrap"`` (``n_boot =
    min(n_permutations, 100)`` refits, the default before issue 47). All run
    in one commit, so their ratios need no second environment.
    """

    params = [["none", "default", "bootstrap"]]
    param_names = ["interval"]

    def time_test(self, interval):
        options = {"none": dict(n_boot=0), "default": {}, "bootstrap": dict(interval="bootstrap")}
        _test(self.X, self.Y, self.Z, n_permutations=19, **options[interval])


class JointStage(_ReadmeTest):
    """The README's test with the joint stage alternated or profiled (``MICs(joint=...)``).

    ``test_modulation(MICs(joint=...), X, Y, Z, n_permutations=19)`` at
    T = 2000 (p = 80 < T: "auto" alternates). "profiled" moves the test's
    statistics far less with ``tol`` (``results/joint_step/``); this is
    what it costs. Both in one commit, so the ratio needs no second
    environment. On commits without the parameter both run the default.
    """

    params = [["auto", "profiled"]]
    param_names = ["joint"]

    def time_test(self, joint):
        est = mics.MICs(random_state=0, verbose=0)
        if "joint" in est.get_params():
            est.set_params(joint=joint)
        _test(self.X, self.Y, self.Z, estimator=est, n_permutations=19)
