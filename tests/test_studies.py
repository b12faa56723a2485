"""The real-data studies run end to end on a tiny configuration; their bookkeeping is right."""

from __future__ import annotations

import sys

import numpy as np
import pandas as pd
import pytest
from scipy import stats

import mics
from tests.conftest import ROOT

sys.path.insert(0, str(ROOT / "studies"))
import study_tools  # noqa: E402


def test_holm_matches_hand_computed_reference():
    # m = 4: sorted p 0.01, 0.02, 0.03, 0.2 -> 0.04, 0.06, 0.06 (monotone), 0.2
    p = [0.03, 0.2, 0.01, np.nan, 0.02]
    np.testing.assert_allclose(
        study_tools.holm(p), [0.06, 0.2, 0.04, np.nan, 0.06], rtol=0, atol=1e-15
    )
    # the adjustment is capped at 1 and does not depend on input order
    q = np.array([0.5, 0.9, 0.4])
    perm = [2, 0, 1]
    np.testing.assert_array_equal(study_tools.holm(q)[perm], study_tools.holm(q[perm]))
    assert study_tools.holm(q).max() == 1.0


def test_sum_test_against_explicit_count():
    rng = np.random.default_rng(0)
    nulls = rng.normal(size=(3, 99))
    observed = np.array([0.5, 1.0, -0.2])
    expected = (1 + sum(nulls[:, i].sum() >= 1.3 for i in range(99))) / 100
    assert study_tools.sum_test(observed, nulls) == expected
    # an observed sum above every null sum gets the smallest attainable p-value
    assert study_tools.sum_test([100.0, 0, 0], nulls) == 1 / 100


def test_binomial_ci_is_clopper_pearson():
    # closed forms at the ends: k = n gives lower = (alpha / 2) ** (1 / n)
    lo, hi = study_tools.binomial_ci(20, 20)
    assert lo == pytest.approx(0.025 ** (1 / 20), rel=1e-9) and hi == 1.0
    lo, hi = study_tools.binomial_ci(0, 20)
    assert lo == 0.0 and hi == pytest.approx(1 - 0.025 ** (1 / 20), rel=1e-9)


def test_improvement_is_the_statistic_of_test_modulation():
    X, Y, Z = mics.simulate(
        n_samples=600, n_source=8, n_target=6, n_modulators=2, rank=2, n_channels=1,
        random_state=3,
    )[:3]  # fmt: skip
    groups = np.repeat(np.arange(30), 20)
    est = mics.MICs(rank=2, random_state=0, **study_tools.CHEAP)
    stat, model = study_tools.improvement(est, X, Y, Z, groups)
    res = mics.test_modulation(
        est,
        X,
        Y,
        Z,
        n_permutations=1,
        groups=groups,
        null="trial",
        verbose=0,
        random_state=0,
        n_boot=0,
    )
    assert stat == pytest.approx(res.statistic, rel=1e-10, abs=1e-12)
    assert model.n_channels_ == res.n_channels


def _check_tests_table(tests, stop=None):
    n = tests.n_perm.to_numpy()
    p = tests.p_value.to_numpy()
    assert np.all((p > 0) & (p <= 1))
    # p-values live on the grid k / (n_perm + 1), k >= 1, or are Besag-Clifford's
    # stop / n_perm for a control stopped early (n_perm = permutations run)
    k = p * (n + 1)
    on_grid = np.isclose(k, np.round(k), atol=1e-9)
    stopped = np.isclose(p, (stop or np.nan) / n)
    assert np.all(on_grid | stopped)
    assert set(tests.analysis) == {"real", "control"}


def _check_png(path):
    """A real picture: a PNG of a figure's size, not blank (several colours drawn)."""
    assert path.read_bytes()[:4] == b"\x89PNG"
    from matplotlib import image

    img = image.imread(path)
    assert img.ndim == 3 and img.shape[0] >= 200 and img.shape[1] >= 200, img.shape
    assert img[..., :3].std() > 0.01  # a blank (single-colour) canvas has 0
    assert len(np.unique(img[..., :3].reshape(-1, 3), axis=0)) > 10


def _check_effects(tests, out):
    """Every real test has an effect size with an interval and one sentence; the README too."""
    real = tests[tests.analysis == "real"]
    assert np.all(np.isfinite(real.effect_size))
    assert np.all(real.effect_low <= real.effect_high) and np.all(real.effect_n_boot == 2)
    ctrl = tests[tests.analysis == "control"]
    assert np.all(ctrl.effect_n_boot == 0) and ctrl.effect_low.isna().all()
    assert all("p = " in s and "held-out target variance" in s for s in real.sentence)
    text = (out / "README.md").read_text()
    for heading in (
        "## Effect sizes and minimum detectable effects",
        "## Source- against target-side reconfiguration (asymmetry)",
        "## Split-by-state RRR",
    ):
        assert heading in text
    assert "minimum detectable effect" in text


def _check_power(power, keys):
    assert np.all((power.detections >= 0) & (power.detections <= power.n_sims))
    assert np.all((power.ci_low <= power.rate) & (power.rate <= power.ci_high))
    # one MDE per power analysis
    assert np.all(power.groupby(keys, dropna=False).mde.nunique(dropna=False) == 1)


def _check_split(states):
    n = states.n_perm.to_numpy()[:, None]
    p = states[[f"{m}_p" for m in study_tools.SPLIT_METHODS]].to_numpy()
    k = p * (n + 1)
    assert np.all((p > 0) & (p <= 1)) and np.allclose(k, np.round(k))


def test_detection_stop_makes_the_full_tests_decisions():
    for n in (19, 39, 99, 199):
        h = study_tools.detection_stop(n)
        assert study_tools.same_decisions(h, n)
        for e in range(n + 1):  # exceedances the full test would see
            full = (1 + e) / (1 + n) <= 0.05
            # a test that stops (e >= h) has p = h / L >= h / n > 0.05; one that does not
            # stop runs to the end and has the full test's p-value
            assert not (e >= h and full)
        assert h / n > 0.05
    assert not study_tools.same_decisions(10, 39 * 10)  # 10 / 390 < 0.05
    with pytest.raises(ValueError):
        study_tools.detection_stop(9)


def _check_decomposition(decomp, keys):
    totals = decomp.groupby(keys).fraction.sum()
    np.testing.assert_allclose(totals, 1.0, atol=1e-8)
    assert np.all(decomp.ci_low <= decomp.ci_high)


@pytest.mark.slow
@pytest.mark.shared_data
def test_park_study_end_to_end(data_dir, tmp_path):
    import park2024_state_gating as park

    tests, splits, decomp, summary = park.main(
        ["--sessions", "2", "--n-perm", "4", "--control-perm", "9", "--control-stop", "2",
         "--control-donors", "2", "--n-splits", "2", "--n-boot", "2", "--effect-boot", "2",
         "--modulators", "pupil", "running", "--power-modulators", "pupil",
         "--power-strengths", "0.0005", "--power-sims", "1", "--power-perm", "19",
         "--split-perm", "3", "--n-jobs", "1", "--out", str(tmp_path)]
    )  # fmt: skip
    _check_tests_table(tests, stop=2)
    ctrl = tests[tests.analysis == "control"]
    # each session borrows the modulators of the next two sessions
    assert len(ctrl) == 8 and np.all(ctrl.modulator_session != ctrl.session)
    assert np.all(ctrl.groupby("session").modulator_session.nunique() == 2)
    assert np.all(ctrl.n_perm <= 9)
    real = tests[tests.analysis == "real"]
    assert np.all(real.modulator_session == real.session)
    assert np.all(real.n_source + real.n_target <= 74) and np.all(
        np.abs(real.n_source - real.n_target) <= 1
    )
    for _, sub in real.groupby("modulators"):
        np.testing.assert_allclose(sub.p_holm_set, study_tools.holm(sub.p_value))
    _check_decomposition(decomp, ["session", "modulators"])
    # split 0 of the descriptive split table reproduces the tested statistic
    s0 = splits[splits.split_seed == 0].set_index(["session", "modulators"]).statistic
    keys = list(zip(real.session, real.modulators, strict=True))
    np.testing.assert_allclose(s0.loc[keys], real.statistic, rtol=1e-8)
    s = summary.set_index("quantity")
    assert s.loc["control_nonsignificant", "value"] == np.sum(ctrl.p_value > 0.05)
    k_real, k_ctrl = np.sum(real.p_value <= 0.05), np.sum(ctrl.p_value <= 0.05)
    fisher = stats.fisher_exact(
        [[k_real, len(real) - k_real], [k_ctrl, len(ctrl) - k_ctrl]], alternative="greater"
    )
    assert s.loc["real_vs_control_fisher_p", "value"] == pytest.approx(fisher.pvalue)
    for name in ("tests.csv", "splits.csv", "sessions.csv", "summary.csv", "README.md"):
        assert (tmp_path / name).stat().st_size > 0
    _check_png(tmp_path / "park2024.png")
    _check_effects(tests, tmp_path)
    power = pd.read_csv(tmp_path / "power.csv")
    # one power analysis per session (pupil), one row per planted strength
    assert len(power) == 2 and set(power.modulators) == {"pupil"}
    _check_power(power, ["session"])
    states = pd.read_csv(tmp_path / "split_by_state.csv")
    assert len(states) == 4 and set(states.state) == {"pupil", "running"}
    p_real = real.set_index(["session", "modulators"]).p_value
    np.testing.assert_array_equal(
        states.mics_p, [p_real[(a, b)] for a, b in zip(states.session, states.state, strict=True)]
    )
    _check_split(states)
    asym = pd.read_csv(tmp_path / "asymmetry.csv")
    assert len(asym) == len(real) and asym.n_boot.le(2).all()
    _check_asymmetry(asym, real)
    # the CSVs hold the numbers the study returned
    written = pd.read_csv(tmp_path / "tests.csv")
    np.testing.assert_allclose(written.p_value, tests.p_value.to_numpy(), rtol=1e-12)
    np.testing.assert_allclose(written.statistic, tests.statistic.to_numpy(), rtol=1e-9)
    info = pd.read_csv(tmp_path / "sessions.csv")
    assert list(info.n_trials) == [128, 128]


@pytest.mark.slow
@pytest.mark.shared_data
def test_semedo_study_end_to_end(data_dir, tmp_path):
    import semedo2019_third_population as semedo

    subs, tests, decomp, summary = semedo.main(
        ["--n-perm", "4", "--control-perm", "9", "--control-stop", "2", "--n-controls", "2",
         "--n-boot", "2", "--effect-boot", "2", "--power-strengths", "0.0005",
         "--power-sims", "1", "--power-perm", "19", "--split-perm", "3", "--n-jobs", "1",
         "--out", str(tmp_path)]
    )  # fmt: skip
    _check_tests_table(tests, stop=2)
    # both forms of the held-out population, each with its own controls
    assert list(tests.control) == ["real", "time-reversed", "trial-permuted 1"] * 2
    assert list(tests.modulator) == [semedo.MODULATOR_NEURONS] * 3 + [semedo.MODULATOR_PCS] * 3
    assert list(tests.n_modulators) == [31] * 3 + [3] * 3
    _check_decomposition(decomp, ["modulator"])
    s = summary.set_index("quantity")
    real = tests[tests.analysis == "real"]
    holm = [s.loc[f"modulation_p_holm[{m}]", "value"] for m in real.modulator]
    np.testing.assert_allclose(holm, study_tools.holm(real.p_value))
    # the paper's central result with trial-blocked 10-fold CV: fewer predictive
    # dimensions V1 -> V2 than V1 -> V1 (ranks 2 and 5 on this sample)
    rank = subs[subs.selected].set_index("target")["rank"]
    assert (rank["V2"], rank["V1"]) == (2, 5)
    assert np.all(subs.groupby("target").selected.sum() == 1)
    _check_png(tmp_path / "semedo2019.png")
    _check_effects(tests, tmp_path)
    power = pd.read_csv(tmp_path / "power.csv")
    assert list(power.modulator) == [semedo.MODULATOR_NEURONS, semedo.MODULATOR_PCS]
    _check_power(power, ["modulator"])
    states = pd.read_csv(tmp_path / "split_by_state.csv")
    assert list(states.modulator) == list(real.modulator)
    np.testing.assert_array_equal(states.mics_p, real.p_value)
    _check_split(states)
    asym = pd.read_csv(tmp_path / "asymmetry.csv")
    assert list(asym.modulator) == list(real.modulator)
    _check_asymmetry(asym, real)
    written = pd.read_csv(tmp_path / "tests.csv")
    np.testing.assert_allclose(written.p_value, tests.p_value.to_numpy(), rtol=1e-12)
    chosen = pd.read_csv(tmp_path / "subspaces.csv").query("selected").set_index("target")
    assert (chosen.loc["V2", "rank"], chosen.loc["V1", "rank"]) == (2, 5)


def test_semedo_controls_keep_trials_whole():
    import semedo2019_third_population as semedo

    Z = np.arange(semedo.N_TRIALS * semedo.N_BINS, dtype=float)[:, None]
    Zp = semedo.trial_permuted(Z, 1).reshape(semedo.N_TRIALS, semedo.N_BINS)
    # every permuted trial is one original trial, in its own time order
    starts = Zp[:, 0]
    np.testing.assert_array_equal(Zp, starts[:, None] + np.arange(semedo.N_BINS))
    assert np.all(starts % semedo.N_BINS == 0)
    assert sorted(starts) == list(Z[:: semedo.N_BINS, 0]) and not np.all(np.diff(starts) > 0)


def test_compare_tests_counts_changed_statistics_and_p_values():
    import park2024_channel_search as compare_tests

    keys = dict(
        session=["a", "a", "b", "b"],
        modulators=["pupil"] * 4,
        analysis=["real", "control", "real", "control"],
        modulator_session=["a", "b", "b", "a"],
        n_channels=[0, 0, 1, 0],
    )
    old = pd.DataFrame(
        {**keys, "statistic": [0.003, -0.01, 0.02, -0.004], "p_value": [0.016, 0.6, 0.01, 0.3]}
    )
    new = old.copy()
    new.loc[0, ["statistic", "p_value"]] = [-0.006, 0.75]  # statistic and p changed
    new.loc[3, "p_value"] = 0.25  # p alone changed (the null moved)
    text = compare_tests.compare(old, new, ("grid", "sequential"))
    rows = {line.split(" | ")[0].strip("| "): line for line in text.splitlines()[2:4]}
    # real: 2 tests, 1 same statistic, 1 same p, 2 then 1 at p <= 0.05, same K on 2
    assert rows["real"] == "| real | 2 | 1 | 1 | 2 | 1 | 2 |"
    assert rows["control"] == "| control | 2 | 2 | 1 | 0 | 0 | 2 |"
    assert "Tests whose statistic or p-value changed (2):" in text
    # the tables must hold the same tests in the same order
    with pytest.raises(ValueError, match="different tests"):
        compare_tests.compare(old, new.iloc[::-1].reset_index(drop=True))


def _check_asymmetry(asym, real):
    """Defined (tested, with an interval) exactly where the real test rejected at 0.05."""
    assert len(asym) == len(real)
    status = asym.status if "status" in asym else pd.Series([""] * len(asym))
    tested = (status == "tested").to_numpy()
    np.testing.assert_array_equal(tested, asym.reported)
    assert np.all(asym.p_value[tested] <= 0.05)
    assert np.all((asym.p_value[~tested] > 0.05) | (asym["rank"][~tested] == 0))
    defined = asym[tested]
    assert np.all(defined.difference_low <= defined.difference_high)
    np.testing.assert_allclose(
        defined.difference_fitted,
        defined.fraction_private_source - defined.fraction_private_target,
    )
    if "asymmetry_p" in asym:
        assert asym.asymmetry_p[~tested].isna().all()
