"""Power on the user's own recording: planted strengths, exact intervals, and calibration.

The calibration test is the point: the detection rate that
:func:`mics.power_analysis` predicts from one recording must match the rate
of the real test on fresh recordings with a channel of that strength.
"""

import numpy as np
import pytest
from scipy import stats

import mics
from mics.workflows.power import _crossing, _placed, clopper_pearson, plant_channel

SIZES = dict(n_samples=300, n_source=6, n_target=5, n_modulators=1, rank=1)
TEST = dict(n_permutations=19)


def _estimator():
    return mics.MICs(rank=1, max_channels=1, cv=5, n_init=0, random_state=0, verbose=0)


def test_planted_channel_carries_the_asked_share_of_target_variance():
    X, Y, Z, _ = mics.simulate(n_channels=0, random_state=0, n_modulators=2, **{
        k: v for k, v in SIZES.items() if k != "n_modulators"
    })  # fmt: skip
    rng = np.random.RandomState(1)
    a, b, c = (v / np.linalg.norm(v) for v in (rng.randn(6), rng.randn(5), rng.randn(2)))
    for strength in (0.01, 0.2, 0.6):
        new = plant_channel(X, Y, Z, strength, a, b, c)
        added = new - Y
        share = added.var(axis=0).sum() / new.var(axis=0).sum()
        assert share == pytest.approx(strength, rel=1e-9)
        # All of it along the target pattern, gated by the modulator pattern:
        # rank one in time x neurons, and zero where the modulator is at its mean.
        assert np.linalg.matrix_rank(added - added.mean(axis=0), tol=1e-8) == 1
        direction = np.linalg.svd(added - added.mean(axis=0))[2][0]
        assert abs(direction @ b) == pytest.approx(1)
    assert np.array_equal(plant_channel(X, Y, Z, 0.0, a, b, c), Y)
    with pytest.raises(ValueError, match=r"\[0, 1\)"):
        plant_channel(X, Y, Z, 1.0, a, b, c)


def test_patterns_lie_where_the_geometry_says():
    rng = np.random.RandomState(0)
    U = np.linalg.qr(rng.randn(6, 2))[0]
    for _ in range(5):
        inside, outside, free = (_placed(rng, U, p) for p in ("in", "out", "free"))
        for v in (inside, outside, free):
            assert np.linalg.norm(v) == pytest.approx(1)
        assert np.linalg.norm(U.T @ inside) == pytest.approx(1)
        assert np.linalg.norm(U.T @ outside) == pytest.approx(0, abs=1e-12)
        assert 0 < np.linalg.norm(U.T @ free) < 1


def test_clopper_pearson_matches_scipy_exact_interval():
    for k in (0, 3, 15, 30):
        ref = stats.binomtest(k, 30).proportion_ci(0.95, method="exact")
        low, high = clopper_pearson(k, 30)
        assert (low, high) == pytest.approx((ref.low, ref.high))


def test_minimum_detectable_effect_interpolates_the_monotone_rates():
    s = np.array([0.0, 0.01, 0.02, 0.04])
    assert _crossing(s, [0.05, 0.6, 1.0, 1.0], 0.8) == pytest.approx(0.015)
    # A dip from simulation noise after crossing does not move it.
    assert _crossing(s, [0.05, 0.9, 0.7, 1.0], 0.8) == pytest.approx(0.01 * 0.75 / 0.85)
    assert np.isnan(_crossing(s, [0.0, 0.1, 0.3, 0.7], 0.8))
    assert _crossing(s, [0.9, 1, 1, 1], 0.8) == 0.0


def test_power_analysis_result_summary_and_figure():
    pytest.importorskip("matplotlib")
    import matplotlib

    matplotlib.use("Agg")
    from mics.plotting import plot_power

    X, Y, Z, _ = mics.simulate(n_channels=0, random_state=0, **SIZES)
    groups = np.repeat(np.arange(30), 10)
    # With 9 trial permutations the smallest p is 0.1: alpha = 0.1 makes 30% unmissable.
    res = mics.power_analysis(
        _estimator(), X, Y, Z, groups=groups, strengths=[0.3, 0.0], geometry=["reshape", "new"],
        n_sims=2, n_permutations=9, alpha=0.1, random_state=0, verbose=0,
    )  # fmt: skip
    assert res.strengths.tolist() == [0.0, 0.3] and res.geometries == ["reshape", "new"]
    assert res.p_values.shape == (2, 2, 2) and res.p_values.min() >= 0.1
    assert res.detections[:, 1].tolist() == [2, 2]
    res2 = mics.power_analysis(
        _estimator(), X, Y, Z, strengths=[0.0, 0.3], n_sims=3, random_state=0, verbose=0, **TEST
    )
    assert res2.detections[0].tolist() == [0, 3]
    assert res2.minimum_detectable_effect[0] == pytest.approx(0.3 * 0.8)
    assert "minimum detectable effect on this recording is 24% (random) at 80% power" in (
        res2.summary()
    )
    ax = plot_power(res2)
    assert len(ax.lines) >= 3 and "strength" in ax.get_xlabel()
    with pytest.raises(ValueError, match="unknown geometry"):
        mics.power_analysis(_estimator(), X, Y, Z, geometry="sideways", verbose=0)
    with pytest.raises(ValueError, match=r"\[0, 1\)"):
        mics.power_analysis(_estimator(), X, Y, Z, strengths=[0.5, 1.2], verbose=0)
    with pytest.raises(ValueError, match="rank 0"):
        mics.power_analysis(_estimator().set_params(rank=0), X, Y, Z, geometry="reshape")


def _gated_recording():
    """A recording whose own channel the test finds (p <= 0.05)."""
    X, Y, Z, _ = mics.simulate(n_channels=1, modulation_snr=1.0, random_state=3, **SIZES)
    own = mics.test_modulation(_estimator(), X, Y, Z, n_boot=0, random_state=0, verbose=0, **TEST)
    assert own.p_value <= 0.05
    return X, Y, Z


def test_power_at_strength_zero_is_not_the_recordings_own_gating():
    """The fast version of the next test: 4 null copies, not 4 detections.

    Planting into the recording as it is would find its channel in all 4; in
    null copies an exact 5% test does so with probability 0.05^4 = 6e-6.
    """
    X, Y, Z = _gated_recording()
    res = mics.power_analysis(
        _estimator(), X, Y, Z, strengths=[0.0], n_sims=4, random_state=0, verbose=0, **TEST
    )
    assert res.detections[0, 0] < 4, res.detections


@pytest.mark.slow
def test_gating_already_in_the_recording_does_not_count_as_power():
    """Channels are planted into null copies: the recording's own gating is broken there.

    Planting into the recording as it is would detect its own strong channel
    at strength 0 in every simulation (and report a minimum detectable
    effect of 0).
    """
    X, Y, Z = _gated_recording()
    res = mics.power_analysis(
        _estimator(), X, Y, Z, strengths=[0.0], n_sims=20, random_state=0, verbose=0, **TEST
    )
    # At an exact 5% test, 4 or more of 20 has probability 0.016.
    assert res.detections[0, 0] <= 3, res.detections


@pytest.mark.slow
def test_predicted_detection_rate_matches_the_real_test_on_fresh_data():
    """30 planted copies of one null recording against 30 fresh recordings of that strength."""
    strength, n = 0.007, 30
    X, Y, Z, _ = mics.simulate(n_channels=0, random_state=0, **SIZES)
    predicted = mics.power_analysis(
        _estimator(), X, Y, Z, strengths=[strength], n_sims=n, random_state=1, verbose=0, **TEST
    )
    # The fresh recordings' channel carries the same share of target variance:
    # modulation_snr / (1 + baseline_snr + additive_snr + modulation_snr) = strength.
    snr = strength * (1 + 1.0 + 0.2) / (1 - strength)
    hits = 0
    for i in range(n):
        Xf, Yf, Zf, _ = mics.simulate(
            n_channels=1, geometry="random", modulation_snr=snr, random_state=1000 + i, **SIZES
        )
        res = mics.test_modulation(_estimator(), Xf, Yf, Zf, n_boot=0, random_state=i,
                                   verbose=0, **TEST)  # fmt: skip
        hits += res.p_value <= 0.05
    low, high = predicted.rate_intervals[0, 0]
    assert 0.2 < predicted.rates[0, 0] < 0.9  # an informative strength, not 0% or 100%
    assert low <= hits / n <= high, (predicted.detections, hits)
