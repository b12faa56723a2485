"""The asymmetry statistic: private-source against private-target modulation.

Known truths: a channel planted outside the baseline source subspace (and
inside the target one) is source-side reconfiguration (difference +1), the
mirror image is target-side (-1); the statistic must recover the planted
side from data; its p-value and interval follow their definitions; the
decomposition, its summary and the figure carry it.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import xarray as xr
from numpy.testing import assert_allclose
from scipy import stats

import mics
from mics.model.decomposition import PARTS, asymmetry_from_draws, decompose_channels

P, Q, M, RANK = 16, 14, 2, 2
# One start and a loose tolerance: every bootstrap refit clones these, and the
# signs and fractions tested here do not move at tighter tolerances.
FAST = dict(n_init=1, tol=1e-4, max_iter=100, random_state=0)


def _orthonormal(rng, n, k):
    return np.linalg.qr(rng.standard_normal((n, k)))[0]


def _factors(geometries, seed=0):
    """Subspaces and unit patterns placed exactly in / out of the subspaces."""
    rng = np.random.default_rng(seed)
    U, V = _orthonormal(rng, P, RANK), _orthonormal(rng, Q, RANK)
    A, B = [], []
    for g in geometries:
        a, b = rng.standard_normal(P), rng.standard_normal(Q)
        a_in, b_in = U @ (U.T @ a), V @ (V.T @ b)
        a = a_in if g in ("reshape", "private_target") else a - a_in
        b = b_in if g in ("reshape", "private_source") else b - b_in
        A.append(a / np.linalg.norm(a))
        B.append(b / np.linalg.norm(b))
    C = _orthonormal(rng, M, len(geometries))
    return U, V, np.array(A).T, np.array(B).T, C


@pytest.mark.parametrize(
    ("geometries", "weights", "expected"),
    [
        (["private_source"], [1.0], 1.0),
        (["private_target"], [1.0], -1.0),
        (["reshape"], [1.0], 0.0),
        (["new"], [1.0], 0.0),
        # equal weights, orthogonal modulator patterns: half the energy each side
        (["private_source", "private_target"], [1.0, 1.0], 0.0),
        # energies lambda^2: 4 against 1 -> (4 - 1) / 5
        (["private_source", "private_target"], [2.0, 1.0], 0.6),
    ],
)
def test_total_asymmetry_known_geometry(geometries, weights, expected):
    U, V, A, B, C = _factors(geometries)
    ds = decompose_channels(U, V, A, B, weights, C)
    assert_allclose(float(ds.total_asymmetry), expected, atol=1e-12)
    assert_allclose(
        float(ds.total_asymmetry),
        float(ds.total_private_source - ds.total_private_target),
        atol=1e-15,
    )
    assert_allclose(sum(float(ds[f"total_{p}"]) for p in PARTS), 1.0, atol=1e-12)


def test_total_asymmetry_nan_without_channels():
    U, V, *_ = _factors([])
    ds = decompose_channels(U, V, np.zeros((P, 0)), np.zeros((Q, 0)), [], np.zeros((M, 0)))
    assert np.isnan(float(ds.total_asymmetry))


# ------------------------------------------------------------------- from draws


def _draws(diffs, rest=0.2):
    """Fraction draws (B, 4) whose private_source - private_target are ``diffs``."""
    diffs = np.asarray(diffs, dtype=float)
    half = (1 - rest) / 2
    out = np.empty((diffs.size, 4))
    out[:, 0] = rest / 2
    out[:, 1] = half + diffs / 2
    out[:, 2] = half - diffs / 2
    out[:, 3] = rest / 2
    return out


def test_p_value_inverts_the_percentile_interval():
    # 100 draws, 3 of them <= 0: two-sided p = 2 * 3 / 100
    diffs = np.r_[-0.2, -0.1, 0.0, np.linspace(0.05, 0.6, 97)]
    observed = dict(zip(PARTS, _draws([0.3])[0], strict=True))
    res = asymmetry_from_draws(observed, _draws(diffs), interval="percentile")
    assert_allclose(float(res.p_value), 0.06)
    assert_allclose(float(res.difference), 0.3)
    assert_allclose(
        res.difference_interval.values,
        [np.quantile(diffs, 0.025, method="inverted_cdf"), np.sort(diffs)[-3]],
    )
    assert_allclose(float(res.bias), diffs.mean() - 0.3)
    # p > 0.05 <=> the 95% interval reaches 0; at 90% it excludes 0 and p < 0.1
    assert res.difference_interval.values[0] <= 0
    res90 = asymmetry_from_draws(observed, _draws(diffs), confidence=0.9, interval="percentile")
    assert res90.difference_interval.values[0] > 0 and float(res90.p_value) < 0.1
    # fractions and their intervals are those of the draws, per part
    assert_allclose(res.fraction.sum(), 1.0)
    assert_allclose(
        res.fraction_interval.sel(part="private_source").values[0],
        np.quantile(_draws(diffs)[:, 1], 0.025, method="inverted_cdf"),
    )


def test_estimate_outside_every_draw_is_flagged():
    # draws centred well below the estimate: Efron's z0 is clipped and both
    # bias-corrected levels fall on the largest draw, an interval of width 0
    # that excludes the estimate; the result says so and warns
    diffs = np.linspace(-0.1, 0.2, 50)
    observed = dict(zip(PARTS, _draws([0.35])[0], strict=True))
    with pytest.warns(UserWarning, match="outside all 50 bootstrap draws"):
        res = asymmetry_from_draws(observed, _draws(diffs))
    assert res.attrs["estimate_outside_draws"] == 1
    low, high = res.difference_interval.values
    assert low == high == float(res.difference_draws.max()) < float(res.difference)
    # draws on both sides of the estimate: no flag, no warning
    observed = dict(zip(PARTS, _draws([0.05])[0], strict=True))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        res = asymmetry_from_draws(observed, _draws(diffs))
    assert res.attrs["estimate_outside_draws"] == 0
    low, high = res.difference_interval.values
    assert low < 0.05 < high


@pytest.mark.parametrize("confidence", [0.8, 0.9, 0.95])
def test_bias_corrected_p_agrees_with_its_interval(confidence):
    rng = np.random.default_rng(3)
    for shift in np.linspace(-0.3, 0.3, 13):
        diffs = rng.normal(0.1, 0.1, 199)
        obs = dict(zip(PARTS, _draws([0.1 + shift])[0], strict=True))
        res = asymmetry_from_draws(obs, _draws(diffs), confidence=confidence, interval="bc")
        low, high = res.difference_interval.values
        assert (low > 0 or high < 0) == (float(res.p_value) < 1 - confidence)


def test_bias_correction_removes_the_bootstrap_bias():
    # The estimate 0.08 and draws centred at 0.1 (s.d. 0.04): the bootstrap says the
    # estimator is biased by +0.02, so the bias-corrected interval is centred on
    # 0.08 - 0.02 = 0.06, +- 1.96 x 0.04 (reaching 0), while the percentile
    # interval, centred on 0.1, excludes 0.
    rng = np.random.default_rng(4)
    diffs = rng.normal(0.1, 0.04, 4000)
    obs = dict(zip(PARTS, _draws([0.08])[0], strict=True))
    pct = asymmetry_from_draws(obs, _draws(diffs), interval="percentile")
    bc = asymmetry_from_draws(obs, _draws(diffs), interval="bc")
    assert pct.difference_interval.values[0] > 0 and float(pct.p_value) < 0.05
    # (the lower bound sits at the 0.15% quantile of the draws: a noisy tail)
    assert_allclose(bc.difference_interval.values, [0.06 - 0.0784, 0.06 + 0.0784], atol=0.02)
    assert float(bc.p_value) > 0.05
    # symmetric draws around the estimate: no correction
    sym = np.r_[diffs - 0.1, 0.1 - diffs] + 0.2
    obs2 = dict(zip(PARTS, _draws([0.2])[0], strict=True))
    assert_allclose(
        asymmetry_from_draws(obs2, _draws(sym), interval="bc").difference_interval.values,
        asymmetry_from_draws(obs2, _draws(sym), interval="percentile").difference_interval.values,
    )


def test_p_value_symmetric_and_bounded():
    rng = np.random.default_rng(1)
    diffs = rng.normal(0.0, 0.1, 400)
    obs = dict(zip(PARTS, _draws([0.0])[0], strict=True))
    p = float(asymmetry_from_draws(obs, _draws(diffs)).p_value)
    p_flip = float(asymmetry_from_draws(obs, _draws(-diffs)).p_value)
    assert p == p_flip and 0.3 < p <= 1.0
    # every draw on one side: p = 0, read as "below 2 / B"
    res = asymmetry_from_draws(obs, _draws(np.abs(diffs) + 0.01))
    assert float(res.p_value) == 0.0
    assert "p < 0.005" in res.mics.summary()


def test_draws_without_modulation_are_dropped_and_bad_input_refused():
    draws = _draws(np.linspace(0.1, 0.5, 10))
    draws[3] = np.nan
    res = asymmetry_from_draws(dict(zip(PARTS, draws[0], strict=True)), draws)
    assert res.attrs["n_boot"] == 9
    with pytest.raises(ValueError, match="shape"):
        asymmetry_from_draws({p: 0.25 for p in PARTS}, np.zeros((5, 3)))
    with pytest.raises(ValueError, match="finite"):
        asymmetry_from_draws({p: 0.25 for p in PARTS}, np.full((5, 4), np.nan))


# ------------------------------------------------------------- recovery (data)


def _fit(geometry, seed, n_samples=400, snr=0.3):
    X, Y, Z, _ = mics.simulate(
        n_samples=n_samples,
        n_source=P,
        n_target=Q,
        n_modulators=M,
        rank=RANK,
        n_channels=1,
        geometry=geometry,
        modulation_snr=snr,
        random_state=seed,
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = mics.MICs(rank=RANK, n_channels=1, **FAST).fit(X, Y, Z)
    return model, X, Y, Z


def test_recovers_the_planted_side():
    # 10 simulations at a moderate modulation SNR (0.3), half with a private-source
    # channel, half private-target; 10 resamples each (the sign is what's tested).
    hits, significant = 0, 0
    for seed in range(10):
        geometry = "private_source" if seed % 2 == 0 else "private_target"
        sign = 1 if geometry == "private_source" else -1
        model, X, Y, Z = _fit(geometry, 100 + seed)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            res = mics.asymmetry(model, X, Y, Z, n_boot=10, verbose=0, random_state=seed)
        hits += int(np.sign(float(res.difference)) == sign)
        low, high = res.difference_interval.values
        significant += int(sign * low > 0 and sign * high > 0)
        assert_allclose(res.fraction.sum(), 1.0, atol=1e-9)
        assert_allclose(float(res.difference), float(model.decompose().total_asymmetry))
    assert hits >= 9, f"planted side recovered in {hits}/10"
    assert significant >= 9, f"interval on the planted side in {significant}/10"


def test_equal_reconfiguration_is_not_called_asymmetric():
    # Null: a private-source and a private-target channel of EQUAL weight (true
    # difference 0). The calibration proper (40 data sets x 40 resamples, false
    # positives at 0.05: docs/guide/decomposition.md) is too slow for a test;
    # 10 data sets x 16 resamples at the 10% level must not reject more often
    # than such a test plausibly could: 5 or more of 10 has probability 0.002.
    rejections, n = 0, 10
    for seed in range(n):
        X, Y, Z, truth = mics.simulate(
            n_samples=300,
            n_source=P,
            n_target=Q,
            n_modulators=M,
            rank=RANK,
            n_channels=2,
            geometry=["private_source", "private_target"],
            modulation_snr=0.3,
            random_state=500 + seed,
        )
        noise = Y - truth.predict(X, Z)
        truth.channel_weights_ = np.full(2, truth.channel_weights_.mean())
        Y = truth.predict(X, Z) + noise
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            model = mics.MICs(rank=RANK, n_channels=2, **FAST).fit(X, Y, Z)
            res = mics.asymmetry(
                model, X, Y, Z, n_boot=16, confidence=0.9, verbose=0, random_state=seed
            )
        assert_allclose(float(model.decompose().total_asymmetry), float(res.difference))
        low, high = res.difference_interval.values
        rejections += int(low > 0 or high < 0)
    assert stats.binom.sf(4, n, 0.1) < 0.002
    assert rejections <= 4, f"{rejections}/{n} rejections of a true null at 10%"


# ------------------------------------------------------------- surfaces


@pytest.fixture(scope="module")
def source_side():
    model, X, Y, Z = _fit("private_source", 7, snr=0.5)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        res = mics.asymmetry(model, X, Y, Z, n_boot=12, verbose=0, random_state=0)
    return model, X, Y, Z, res


def test_summary_and_decomposition_surface_it(source_side):
    model, _, _, _, res = source_side
    assert res.mics.kind == "asymmetry"
    text = res.mics.summary()
    assert text.startswith("MIC asymmetry")
    assert "reconfigures source patterns more than target patterns" in text
    assert "private source" in text and "reshape" in text and "new" in text
    dec = model.decompose()
    dec_text = dec.mics.summary(asymmetry=res)
    assert "leaning to the source side" in dec_text
    assert "private source - private target = +" in dec_text
    assert dec.mics.kind == "decomposition"


def test_reuses_bootstrap_draws(source_side):
    model, X, Y, Z, res = source_side
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        boot = mics.bootstrap_channels(model, X, Y, Z, n_boot=12, verbose=0, random_state=0)
    again = mics.asymmetry(model, bootstrap=boot)
    xr.testing.assert_allclose(again.difference_draws, res.difference_draws)
    assert float(again.p_value) == float(res.p_value)


def test_refuses_models_without_channels():
    X, Y, Z, _ = mics.simulate(n_samples=200, n_source=8, n_target=6, n_channels=0, rank=1,
                               random_state=0)  # fmt: skip
    model = mics.MICs(rank=1, n_channels=0).fit(X, Y, Z)
    with pytest.raises(ValueError, match="no channels"):
        mics.asymmetry(model, X, Y, Z)


def test_refuses_a_baseline_of_rank_zero():
    # every channel is "new" without a communication subspace: both private
    # fractions are 0, so a difference of 0 would be an artefact, not a finding
    X, Y, Z, _ = mics.simulate(n_samples=300, n_source=8, n_target=6, n_channels=1, rank=1,
                               random_state=0)  # fmt: skip
    model = mics.MICs(rank=0, n_channels=1, random_state=0).fit(X, Y, Z)
    parts = model.decompose()
    assert float(parts.total_new) == pytest.approx(1.0, abs=1e-12)
    with pytest.raises(ValueError, match="rank 0"):
        mics.asymmetry(model, X, Y, Z)


def test_plot_asymmetry(source_side):
    pytest.importorskip("matplotlib")
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    res = source_side[-1]
    axes = mics.plotting.plot_asymmetry(res)
    left, right = axes
    heights = [bar.get_height() for bar in left.patches]
    assert_allclose(heights, res.fraction.values)
    observed = [line for line in right.get_lines() if "observed" in str(line.get_label())]
    assert observed and np.allclose(observed[0].get_xdata(), float(res.difference))
    assert "p" in right.get_title()
    with pytest.raises(ValueError, match="mics.asymmetry"):
        mics.plotting.plot_asymmetry(source_side[0].decompose())
    plt.close("all")


def test_trials_are_resampled_whole():
    ds, _ = mics.simulate_trials(
        n_trials=24, n_source=10, n_target=8, n_channels=1, geometry="private_target",
        modulation_snr=0.5, random_state=0,
    )  # fmt: skip
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = mics.MICs(rank=2, n_channels=1, **FAST).fit(ds.X, ds.Y, ds.Z)
        res = mics.asymmetry(model, ds.X, ds.Y, ds.Z, n_boot=8, verbose=0, random_state=0)
    assert res.attrs["resampling"] == "trial"
    assert "resamples of whole trials" in res.mics.summary()
    assert res.difference_draws.size == 8
