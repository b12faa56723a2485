"""Accelerated ALS: a loss that never increases, the same optimum, fewer sweeps, one cap.

See "Acceleration and stopping" in docs/model.md.
"""

import warnings

import numpy as np
import pytest
from sklearn.exceptions import ConvergenceWarning

import mics
from mics.core import (
    DataOperator,
    InputScales,
    MomentOperator,
    compute_moments,
    fit_mic_model,
    penalties,
)


def _null_operators(seed, T=1500, p=20, q=15, m=6):
    """Moment and data operators of one standardised data set without modulation."""
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((T, p))
    B = rng.standard_normal((p, 3)) @ rng.standard_normal((3, q)) / np.sqrt(p)
    Y = X @ B + rng.standard_normal((T, q))
    Z = rng.standard_normal((T, m))
    X, Y, Z = InputScales.from_data(X, Y, Z).standardize(X, Y, Z)
    cm = compute_moments(X, Y, Z).centered()
    return MomentOperator(cm), DataOperator(cm, X, Y, Z)


def _fit(op, K=2, **kw):
    kw = {"n_init": 0, "max_iter": 2000, "tol": 1e-6, "random_state": 0, **kw}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        return fit_mic_model(op, 3, K, **penalties(op, 0.05, 0.25), **kw)


@pytest.mark.parametrize("path", [0, 1], ids=["moments", "data"])
@pytest.mark.parametrize("seed", range(3))
def test_accelerated_loss_never_increases(seed, path):
    op = _null_operators(seed)[path]
    fit = _fit(op, K=3)
    h = fit.loss_history
    # the joint stage alternates two exact block solves: rounding only
    assert np.all(np.diff(h) <= 1e-12 * np.abs(h[:-1]))


@pytest.mark.parametrize("seed", range(4))
def test_acceleration_reaches_a_loss_as_low_in_fewer_sweeps(seed):
    """On null data (over-specified channels) the plain ALS crawls; the line search does not."""
    op, _ = _null_operators(seed)
    plain, fast = _fit(op, accelerate=False), _fit(op, accelerate=True)
    assert fast.n_iter < plain.n_iter
    # both stopped by the same rule; the accelerated fit is not left higher
    # than the plain one's stopping point (within the stopping tolerance)
    assert fast.loss_history[-1] <= plain.loss_history[-1] * (1 + 1e-6)


def test_both_paths_agree_with_acceleration():
    mom, dat = _null_operators(5)
    a, b = _fit(mom, tol=1e-12), _fit(dat, tol=1e-12)
    Wa, Wb = a.modulation_tensor(), b.modulation_tensor()
    assert np.linalg.norm(Wa - Wb) <= 1e-8 * np.linalg.norm(Wa)
    np.testing.assert_allclose(a.loss_history[-1], b.loss_history[-1], rtol=1e-10)


def _null_data(seed=0, T=600):
    X, Y, Z, _ = mics.simulate(
        n_samples=T,
        n_source=8,
        n_target=6,
        n_modulators=2,
        rank=2,
        n_channels=0,
        random_state=seed,
    )
    return X, Y, Z


def test_statistics_do_not_move_when_max_iter_doubles():
    X, Y, Z = _null_data()
    kw = dict(rank=2, cv=4, max_channels=2, n_init=0, random_state=0, verbose=0)
    tests = [
        mics.test_modulation(
            mics.MICs(max_iter=it, **kw), X, Y, Z, n_permutations=9, random_state=1, verbose=0
        )
        for it in (200, 400)
    ]
    assert tests[0].n_capped == 0  # so the cap played no part ...
    assert tests[0].statistic == tests[1].statistic  # ... and doubling it changes nothing
    np.testing.assert_array_equal(tests[0].null_distribution, tests[1].null_distribution)


def test_capped_fits_are_counted_and_warned():
    X, Y, Z = _null_data(1)
    est = mics.MICs(rank=2, cv=4, max_channels=2, n_init=0, max_iter=6, random_state=0, verbose=0)
    fixed = mics.MICs(rank=2, n_channels=2, n_init=0, max_iter=6, random_state=0)
    with pytest.warns(ConvergenceWarning, match="max_iter=6"):
        fixed.fit(X, Y, Z)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        est.fit(X, Y, Z)
    capped = est.cv_results_["n_channels_n_capped"]
    assert capped.shape == est.cv_results_["n_channels"].shape
    assert capped[0] == 0 and capped[1:].sum() > 0  # K = 0 has no channel to fit
    with pytest.warns(UserWarning, match="stopped at max_iter=6"):
        res = mics.test_modulation(est, X, Y, Z, n_permutations=3, random_state=0, verbose=0)
    assert res.n_capped > 0 and "n_capped=" in repr(res)
    roomy = mics.MICs(rank=2, cv=4, max_channels=2, n_init=0, random_state=0, verbose=0)
    assert roomy.fit(X, Y, Z).cv_results_["n_channels_n_capped"].sum() == 0
