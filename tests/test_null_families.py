"""Recordings without gating that depart from the model (``mics.simulate_null_family``).

Fast tests pin what defines each family (the drift, the nonlinearity, the
counts, the bursts, the lag); the slow ones pin the test's calibration on the
two families that fooled the earlier test, sized by the binomial: at most 5
rejections of 30 at 0.05 (probability 0.016 for an exact test), where the
earlier test rejects at least 10 of 30.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from scipy import stats

import mics
from mics.preprocessing import subtract_condition_means
from mics.simulation.null_families import FAMILIES, GATE_KINDS, SIZES, simulate_null_family

SMALL = dict(n_trials=64, n_samples_per_trial=20, n_source=12, n_target=10, n_modulators=2)


def _trial_means(values, data):
    codes = data.trial.values
    return np.array([values[codes == c].mean(axis=0) for c in np.unique(codes)])


@pytest.mark.parametrize("family", list(FAMILIES))
def test_every_family_without_gate_has_no_gate(family):
    data, truth = simulate_null_family(family, size=SMALL, random_state=0)
    assert dict(data.sizes) == {"time": 1280, "source": 12, "target": 10, "modulator": 2}
    assert truth["gate_fraction"] == 0.0 and "source_pattern" not in truth
    assert np.all(np.isfinite(data.X)) and np.all(np.isfinite(data.Y))
    assert set(data.coords) >= {"trial", "trial_time", "direction"}


@pytest.mark.parametrize("kind", GATE_KINDS)
def test_gate_carries_its_share(kind):
    _, truth = simulate_null_family(
        "linear", size=SMALL, gate=0.05, gate_kind=kind, random_state=1
    )
    # variance 0.05 per target neuron against a total of about 1 + 1 + 0.2 + 0.05
    assert 0.01 < truth["gate_fraction"] < 0.04
    _, stronger = simulate_null_family(
        "linear", size=SMALL, gate=0.2, gate_kind=kind, random_state=1
    )
    assert stronger["gate_fraction"] > 3 * truth["gate_fraction"]


def test_drift_declines_together():
    data, _ = simulate_null_family("drift", size="park", random_state=0)
    z = _trial_means(np.asarray(data.Z), data).mean(axis=1)
    rho = stats.spearmanr(np.arange(z.size), z).statistic
    assert rho < -0.4  # the state falls over the session


def test_poisson_counts_and_bursts_and_lag():
    counts, _ = simulate_null_family("poisson", size=SMALL, stimulus_strength=0.0, random_state=0)
    assert np.array_equal(counts.Y, np.round(counts.Y)) and counts.Y.min() >= 0
    bursty, _ = simulate_null_family(
        "bursty", size=SMALL, stimulus_strength=0.0, burst_fraction=0.2, random_state=0
    )
    z = _trial_means(np.asarray(bursty.Z), bursty)
    quiet = np.isclose(z, np.median(z, axis=0), atol=1e-9)
    assert 0.6 < quiet.mean() < 0.95  # most trials without a burst
    with pytest.raises(ValueError, match="family"):
        simulate_null_family("gated", size=SMALL)
    with pytest.raises(TypeError, match="takes"):
        simulate_null_family("drift", size=SMALL, lag=3)
    assert set(SIZES) == {"park", "semedo"}


def _rejections(family, method, n=30, **options):
    est = mics.MICs(cv=5, max_channels=2, n_init=1, max_iter=100, tol=1e-5, verbose=0,
                    random_state=0)  # fmt: skip
    rejected = 0
    for seed in range(n):
        data, _ = simulate_null_family(family, size="park", random_state=seed, **options)
        data = subtract_condition_means(data, "direction")
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            test = mics.test_modulation(
                est, data.X, data.Y, data.Z, n_permutations=19, conditions="direction",
                n_boot=0, verbose=0, random_state=seed, n_jobs=2, **method,
            )  # fmt: skip
        rejected += test.p_value <= 0.05
    return rejected


PREVIOUS = dict(condition_on=None, additive="linear", source_map="linear")


@pytest.mark.slow
@pytest.mark.parametrize("family", ["drift", "nonlinear"])
def test_calibrated_where_the_previous_test_was_fooled(family):
    assert stats.binom.sf(5, 30, 0.05) < 0.02
    assert _rejections(family, {}) <= 5
    assert _rejections(family, PREVIOUS, n=12) >= 6  # the confound is real here
