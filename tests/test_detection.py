"""Detection end to end: selection finds no channel without modulation, two with.

Small honest versions of ``benchmarks/validate_detection.py``: fixed seeds
(not picked), T = 1000, p = 30, q = 20, m = 3, r = 3.
"""

import warnings

import numpy as np
import pytest

import mics

DATA = dict(n_samples=1000, n_source=30, n_target=20, n_modulators=3, rank=3)
SELECT = dict(cv=5, max_rank=5, max_channels=3, verbose=0)
CHEAP = dict(rank=3, cv=5, max_channels=2, n_init=1, verbose=0)


def _null(seed):
    return mics.simulate(**DATA, n_channels=0, random_state=100 + seed)[:3]


def _signal(seed):
    return mics.simulate(
        **DATA, n_channels=2, geometry="new", modulation_snr=0.5, random_state=200 + seed
    )[:3]


def _fit(X, Y, Z, seed):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # capped CV fits may not converge
        return mics.MICs(random_state=seed, **SELECT).fit(X, Y, Z)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_selection_finds_no_channel_without_modulation(seed):
    model = _fit(*_null(seed), seed)
    assert model.n_channels_ == 0
    assert model.rank_ == 3


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_selection_finds_two_channels(seed):
    model = _fit(*_signal(seed), seed)
    assert model.rank_ == 3
    assert model.n_channels_ == 2


def _test(X, Y, Z):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return mics.test_modulation(
            mics.MICs(random_state=0, **CHEAP),
            X,
            Y,
            Z,
            n_permutations=19,
            min_shift=100,
            random_state=0,
            verbose=0,
        )


def test_permutation_test_detects_modulation():
    res = _test(*_signal(0))
    assert res.n_channels == 2
    assert res.p_value == pytest.approx(1 / 20)  # the smallest attainable
    assert res.statistic > res.null_distribution.max()


def test_permutation_test_null_is_not_significant():
    res = _test(*_null(0))
    assert res.p_value > 0.05
    assert res.null_distribution.shape == (19,)
    # the statistic is continuous: the null is a spread, not a spike at zero
    assert np.unique(res.null_distribution).size == 19
    assert res.null_distribution.min() < res.statistic < res.null_distribution.max()
