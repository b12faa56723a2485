"""The effect size of the modulation test: held-out variance fraction with its interval.

Checked against the truth of simulations (the fraction of target variance
the true channel carries), against null data (an interval around 0), and
against the test it rides on (its statistic and p-value must not move).
"""

import numpy as np
import pytest

import mics
from mics.workflows.inference import ModulationTest, result_sentence

SIZES = dict(n_source=5, n_target=4, n_modulators=1, rank=1)


def _estimator():
    return mics.MICs(rank=1, max_channels=2, cv=5, n_init=0, random_state=0, verbose=0)


def _true_gain(X, Y, Z, truth, n_folds=5):
    """Held-out gain of the true channel on the estimator's folds: the effect size's target.

    Per contiguous fold, the NSE of the true model without its channel minus
    that of the true model (both against the fold's own target variance),
    averaged over folds: what the cross-validated effect size would be if the
    parameters were estimated without error.
    """
    gains = (X @ truth.source_patterns_) * (Z @ truth.modulator_patterns_)
    term = (gains * truth.channel_weights_) @ truth.target_patterns_.T
    noise = Y - truth.predict(X, Z)

    def ss(a):
        return np.sum((a - a.mean(axis=0)) ** 2)

    folds = np.array_split(np.arange(Y.shape[0]), n_folds)
    return np.mean([(ss(noise[f] + term[f]) - ss(noise[f])) / ss(Y[f]) for f in folds])


@pytest.fixture(scope="module")
def gated():
    X, Y, Z, truth = mics.simulate(
        n_samples=1200,
        n_channels=1,
        geometry="random",
        modulation_snr=0.3,
        random_state=3,
        **SIZES,
    )
    res = mics.test_modulation(
        _estimator(), X, Y, Z, n_permutations=9, n_boot=30, random_state=0, verbose=0
    )
    return X, Y, Z, truth, res


def test_effect_size_estimates_the_true_variance_fraction(gated):
    X, Y, Z, truth, res = gated
    true = _true_gain(X, Y, Z, truth)
    assert 0.08 < true < 0.2  # the simulation is what this test assumes
    assert res.n_channels == 1 and res.effect_channels == 1
    # 1200 samples for 5 + 4 + 1 pattern entries: estimation error is small, so the
    # estimate sits within 10% of the true held-out gain. A number in other units
    # (NSE of the residual the test shifts, an in-sample R^2, percent) misses this band.
    assert 0.9 * true < res.effect_size < 1.1 * true
    lo, hi = res.effect_interval
    assert lo < res.effect_size < hi
    assert lo < true < hi
    assert lo > 0.5 * true and hi < 1.5 * true  # informative: far from 0, not vacuous
    assert res.effect_resampling == "block"
    assert np.isclose(res.channel_gains.sum(), res.effect_size)


def test_effect_size_leaves_the_test_unchanged(gated):
    X, Y, Z, _, res = gated
    alone = mics.test_modulation(
        _estimator(), X, Y, Z, n_permutations=9, n_boot=0, random_state=0, verbose=0
    )
    assert alone.statistic == res.statistic and alone.p_value == res.p_value
    np.testing.assert_array_equal(alone.null_distribution, res.null_distribution)
    assert alone.effect_size == res.effect_size  # the estimate needs no bootstrap
    assert np.isnan(alone.effect_interval).all() and alone.effect_resampling == ""


def test_null_data_give_an_interval_around_zero_with_whole_trials():
    X, Y, Z, _ = mics.simulate(n_samples=600, n_channels=0, random_state=5, **SIZES)
    groups = np.repeat(np.arange(30), 20)
    res = mics.test_modulation(
        _estimator(), X, Y, Z, groups=groups, n_permutations=9, n_boot=30,
        random_state=1, verbose=0,
    )  # fmt: skip
    assert res.null == "trial" and res.effect_resampling == "trial"
    lo, hi = res.effect_interval
    assert lo <= 0 <= hi
    assert abs(res.effect_size) < 0.01 and hi < 0.02
    if res.n_channels == 0:
        assert res.effect_channels == 1  # the one-channel value, not 0 by construction


def test_bootstrap_draws_keep_copies_of_a_unit_together():
    from mics.workflows.inference import _unit_draw

    starts, lengths = np.array([0, 3, 5, 9]), np.array([3, 2, 4, 1])
    idx, codes = _unit_draw(starts, lengths, np.random.RandomState(0))
    assert idx.size == codes.size
    # Each label is one run (contiguous), holds its unit's rows in order, and a unit
    # drawn twice keeps one label: no fold can hold one copy out while the other trains.
    for code in np.unique(codes):
        run = np.flatnonzero(codes == code)
        assert np.array_equal(run, np.arange(run[0], run[-1] + 1))
        rows = np.arange(starts[code], starts[code] + lengths[code])
        copies = run.size // lengths[code]
        assert np.array_equal(idx[run], np.tile(rows, copies))


def _result(p_value, n_channels, effect=0.031, interval=(0.012, 0.05)):
    return ModulationTest(
        0.02, 0.01, np.zeros(99), p_value, n_channels, np.zeros(99, dtype=int),
        effect_size=effect, effect_interval=np.array(interval), effect_channels=max(n_channels, 1),
        effect_resampling="block",
    )  # fmt: skip


def test_one_sentence_reconciles_detection_with_the_selected_channels():
    detected = result_sentence(_result(0.01, 2))
    assert detected.startswith("Gating detected")
    assert "2 channel(s) selected" in detected and "3.1% [1.2%, 5%" in detected
    # Rejected, yet the effect's interval covers 0: the pairing matters, but
    # no gate is measured, in those words (never "gating is present").
    weak = result_sentence(_result(0.04, 0, 0.002, (-0.003, 0.006)))
    assert weak.startswith("The modulator's pairing with the source and target matters")
    assert "one channel would explain 0.20%" in weak and "gating is present" not in weak
    missed = _result(0.4, 0, -0.004, (-0.01, 0.003)).summary(power=0.021)
    assert missed.startswith("No modulation detected") and "selected K = 0" in missed
    assert "minimum detectable effect here is 2.1% at 80% power" in missed
    assert missed.count(".") >= 1 and "\n" not in missed
    assert "No modulation detected" in result_sentence(_result(0.3, 1))
    assert "Gating detected" in result_sentence(_result(0.3, 1), alpha=0.5)


def test_fit_summary_quotes_the_cv_gains_of_its_own_selection(gated):
    X, Y, Z, _, res = gated
    model = _estimator().set_params(rank=None, max_rank=2).fit(X, Y, Z)
    loss = model.cv_results_["n_channels_mean_loss"]
    gains = model.heldout_gains()
    assert model.n_channels_ >= 1
    assert np.isclose(gains.sum(), loss[0] - loss[model.n_channels_])
    text = model.summary(test=res)
    assert f"{100 * gains.sum():.2g}% of the held-out" in text
    assert "Gating detected" not in text or res.p_value <= 0.05
    fixed = mics.MICs(rank=1, n_channels=1, n_init=0, verbose=0).fit(X, Y, Z)
    assert fixed.heldout_gains() is None and "fixed" in fixed.summary()


# ------------------------------------------------- the interval without refits (issue 47)
def test_fold_interval_is_a_corrected_t_interval_over_the_estimates_own_folds(gated):
    from scipy import stats

    X, Y, Z, truth, boot = gated
    res = mics.test_modulation(
        _estimator(), X, Y, Z, n_permutations=9, interval="folds", random_state=0, verbose=0
    )
    # The interval rides on the test like the bootstrap: statistic, null and
    # estimate do not move.
    assert res.statistic == boot.statistic and res.p_value == boot.p_value
    assert res.effect_size == boot.effect_size and res.effect_resampling == "folds"
    # Reference: the same cross-validation's fold losses, by hand.
    est = _estimator().set_params(rank=res.rank, max_channels=1, channel_search="grid")
    fold_loss = est.fit(X, Y, Z).cv_results_["n_channels_fold_loss"]
    gains = fold_loss[0] - fold_loss[1]
    np.testing.assert_allclose(res.effect_draws[:, 0], gains, rtol=1e-12)
    assert np.isclose(gains.mean(), res.effect_size, rtol=1e-12)  # folds' mean = estimate
    # Nadeau & Bengio's corrected resampled t: 1 / J + n_test / n_train, 5 folds.
    assert gains.size == 5
    scale = np.sqrt(1 / 5 + 1 / 4)
    half = stats.t.ppf(0.975, gains.size - 1) * gains.std(ddof=1) * scale
    np.testing.assert_allclose(res.effect_interval, gains.mean() + np.array([-half, half]))
    np.testing.assert_allclose(res.channel_gain_intervals[0], res.effect_interval)
    lo, hi = res.effect_interval
    assert lo < _true_gain(X, Y, Z, truth) < hi  # and it covers the truth here
    assert "corrected t interval over the folds" in res.summary()
    # It is the default: no interval= and no n_boot= give the same interval.
    default = mics.test_modulation(_estimator(), X, Y, Z, n_permutations=9, random_state=0,
                                   verbose=0)  # fmt: skip
    assert default.effect_resampling == "folds"
    np.testing.assert_array_equal(default.effect_interval, res.effect_interval)
    np.testing.assert_array_equal(default.effect_draws, res.effect_draws)


def test_n_boot_asks_for_the_bootstrap_and_contradictions_raise(gated):
    from mics.workflows.inference import effect_interval_method

    # n_boot given (the gated fixture's 30): bootstrap refits, one row per draw.
    assert gated[-1].effect_resampling == "block" and gated[-1].effect_draws.shape == (30, 1)
    assert effect_interval_method(None, None, 9) == ("folds", 0)
    assert effect_interval_method(None, 30, 9) == ("bootstrap", 30)
    assert effect_interval_method(None, 0, 9) == ("bootstrap", 0)  # the estimate alone
    assert effect_interval_method("bootstrap", None, 9) == ("bootstrap", 9)
    assert effect_interval_method("folds", 0, 9) == ("folds", 0)
    X, Y, Z, _ = mics.simulate(n_samples=200, n_channels=0, random_state=0, **SIZES)
    with pytest.raises(ValueError, match="interval='folds' refits nothing"):
        mics.test_modulation(
            _estimator(), X, Y, Z, n_permutations=2, interval="folds", n_boot=5, verbose=0
        )


def test_fold_interval_leaves_out_the_outlier_fold_as_the_estimate_does(monkeypatch):
    from types import SimpleNamespace

    from mics.model.selection import summarize_cv
    from mics.workflows import inference

    # A channel table as the selection summarises it, one fold an order of
    # magnitude off (one artifact frame in its block).
    loss = np.random.RandomState(1).uniform(0.4, 0.6, size=(3, 6))
    loss[1:] -= [[0.05], [0.08]]
    loss[:, 2] = [60.0, 50.0, 40.0]
    table = summarize_cv([0, 1, 2], loss, key="n_channels")
    results = {f"n_channels_{k}": v for k, v in table.items() if k != "n_channels"}
    assert results["n_channels_fold_outlier"].tolist() == [i == 2 for i in range(6)]
    outcome = SimpleNamespace(cv_results=results)
    monkeypatch.setattr(inference, "fit_problem", lambda *a, **k: outcome)
    gains, folds, n_splits = inference._cumulative_gains({"max_channels": 2}, None, per_fold=True)
    assert n_splits == 6  # the correction counts every fold's training overlap
    kept = np.delete(loss, 2, axis=1)
    np.testing.assert_allclose(folds, (kept[0] - kept[1:]).T, rtol=1e-15)
    np.testing.assert_allclose(folds.mean(axis=0), gains, rtol=1e-12)  # mean = estimate
    np.testing.assert_array_equal(inference._cumulative_gains({"max_channels": 2}, None), gains)
    # Both kinds of interval, by hand: 5 folds used of 6, so 1 / J + 1 / (6 - 1).
    from scipy import stats

    _, _, cumulative, per_channel = inference._fold_effect({"max_channels": 2}, None, 0.9)
    for got, values in ((cumulative[1], kept[0] - kept[2]), (per_channel[1], kept[1] - kept[2])):
        half = stats.t.ppf(0.95, 4) * values.std(ddof=1) * np.sqrt(1 / 5 + 1 / 5)
        np.testing.assert_allclose(got, values.mean() + np.array([-half, half]), rtol=1e-12)


def test_chunked_problems_get_the_fold_interval_where_the_bootstrap_gives_none():
    da = pytest.importorskip("dask.array")
    from mics.data.problem import make_problem
    from mics.workflows.inference import heldout_effect

    X, Y, Z, _ = mics.simulate(n_samples=800, n_channels=1, random_state=3, **SIZES)
    memory = make_problem(X, Y, Z).unlabelled()
    chunked = make_problem(*(da.from_array(a, chunks=200) for a in (X, Y, Z))).unlabelled()
    assert not chunked.in_memory
    boot = heldout_effect(_estimator(), chunked, 1, 1, n_boot=10)
    assert np.isnan(boot[2]).all() and boot[3] == ""
    g_mem, _, iv_mem, _ = heldout_effect(_estimator(), memory, 1, 1, interval="folds")
    g_chk, _, iv_chk, how = heldout_effect(_estimator(), chunked, 1, 1, interval="folds")
    assert how == "folds" and np.isfinite(iv_chk).all()
    np.testing.assert_allclose(iv_chk, iv_mem, rtol=1e-9)
    np.testing.assert_allclose(g_chk, g_mem, rtol=1e-9)


def test_interval_must_be_named():
    X, Y, Z, _ = mics.simulate(n_samples=200, n_channels=0, random_state=0, **SIZES)
    with pytest.raises(ValueError, match="interval must be 'folds' or 'bootstrap'"):
        mics.test_modulation(_estimator(), X, Y, Z, n_permutations=2, interval="fold")


def test_too_few_trials_for_the_folds_warn_at_the_caller_and_give_no_bootstrap_interval():
    from mics.data.problem import make_problem
    from mics.workflows.inference import heldout_effect

    X, Y, Z, _ = mics.simulate(n_samples=240, n_channels=1, random_state=3, **SIZES)
    trial = np.repeat(np.arange(6), 40)  # 6 trials: a draw holds about 4 distinct ones
    problem = make_problem(X, Y, Z, groups=trial).unlabelled()
    estimator = _estimator().set_params(cv=5)
    with pytest.warns(UserWarning, match="bootstrap draws had enough distinct trials") as rec:
        gains, draws, intervals, how = heldout_effect(
            estimator, problem, 1, 1, n_boot=8, random_state=0
        )
    assert rec[0].filename == __file__  # the warning points at the caller
    assert how == "trial" and np.isnan(intervals).all() and np.isfinite(gains).all()
    assert np.isnan(draws).all(axis=1).sum() > 4  # most draws could not be cross-validated
