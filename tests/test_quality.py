"""Data quality: the detectors at the seam, the warning, the fold flag and the helpers.

Every detector is pinned both ways: it names the planted defect (the exact
samples and columns) and stays quiet on the valid heavy tails a recording
has (bursty running, calcium transients, pupil dilations, spike counts).
The robust numerics are checked against plain-loop twins.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import mics
from mics.core.heldout import fold_mean_sem, fold_outliers
from mics.core.robust import (
    local_steps,
    robust_scale,
    segment_starts,
    side_medians,
    spike_sizes,
    sustained_levels,
    top_levels,
)
from mics.data import DataQualityWarning, QualityThresholds, make_problem, quality_checks
from mics.data.quality import detect, quality_scope
from mics.model.selection import FoldOutlierWarning
from mics.preprocessing import (
    artifact_mask,
    drop_artifacts,
    find_artifacts,
    interpolate_artifacts,
)
from mics.simulation import calcium_events, inject_artifacts, running_speed


def _sim(seed=2, n=1500, **kw):
    return mics.simulate(n_samples=n, random_state=seed, **kw)[:3]


def _quality_warnings(record):
    return [w for w in record if issubclass(w.category, DataQualityWarning)]


# ----------------------------------------------------------------------------- core twins
def _segments(rng, n):
    cuts = np.sort(rng.choice(np.arange(1, n), size=4, replace=False))
    groups = np.zeros(n, dtype=int)
    for c in cuts:
        groups[c:] += 1
    return groups


def _loop_side_medians(a, groups):
    n = a.shape[0]
    before, after = np.full(a.shape, np.nan), np.full(a.shape, np.nan)
    for t in range(n):
        left = [s for s in range(t - 3, t) if s >= 0 and groups[s] == groups[t]]
        right = [s for s in range(t + 1, t + 4) if s < n and groups[s] == groups[t]]
        if left:
            before[t] = np.median(a[left], axis=0)
        if right:
            after[t] = np.median(a[right], axis=0)
    return before, after


def test_side_medians_and_spikes_match_loop_twins_within_segments():
    rng = np.random.RandomState(0)
    a = rng.standard_normal((60, 3))
    groups = _segments(rng, 60)
    starts = segment_starts(groups, 60)
    before, after = side_medians(a, starts)
    want_b, want_a = _loop_side_medians(a, groups)
    np.testing.assert_allclose(before, want_b, rtol=0, atol=1e-15)
    np.testing.assert_allclose(after, want_a, rtol=0, atol=1e-15)
    # spikes: the same-sign smaller departure, the nearest sample at an edge
    spikes = spike_sizes(a, starts)
    for t in range(60):
        same = groups == groups[t]
        prev = t - 1 if t > 0 and same[t - 1] else None
        nxt = t + 1 if t + 1 < 60 and same[t + 1] else None
        for j in range(3):
            if prev is None and nxt is None:  # a segment of one sample
                assert spikes[t, j] == 0.0
                continue
            left = a[t, j] - (want_b[t, j] if prev is not None else a[nxt, j])
            right = a[t, j] - (want_a[t, j] if nxt is not None else a[prev, j])
            want = np.sign(left) * min(abs(left), abs(right)) if left * right > 0 else 0.0
            assert spikes[t, j] == pytest.approx(want, abs=1e-15)


def test_local_steps_match_a_loop_twin():
    rng = np.random.RandomState(1)
    a = rng.standard_normal((50, 2)).cumsum(axis=0)
    groups = _segments(rng, 50)
    got = local_steps(a, segment_starts(groups, 50))
    for t in range(50):
        for j in range(2):

            def step(s, j=j, t=t):  # |a[s] - a[s - 1]| when both lie in t's segment
                ok = 1 <= s < 50 and groups[s] == groups[s - 1] == groups[t]
                return abs(a[s, j] - a[s - 1, j]) if ok else np.nan

            sides = [[step(t - 1), step(t - 2)], [step(t + 2), step(t + 3)]]
            means = [np.mean([v for v in side if not np.isnan(v)] or [np.nan]) for side in sides]
            want = np.nanmin(means) if not np.all(np.isnan(means)) else 0.0
            assert got[t, j] == pytest.approx(want, abs=1e-14)


def test_sustained_and_top_levels_match_definitions():
    rng = np.random.RandomState(2)
    d = rng.standard_normal((40, 2))
    groups = _segments(rng, 40)
    got = sustained_levels(d, segment_starts(groups, 40), width=3)
    for j in range(2):
        runs = [
            d[t : t + 3, j].min()
            for t in range(38)
            if groups[t] == groups[t + 2]  # three samples of one segment
        ]
        assert got[j] == max(runs)
    levels = np.abs(rng.standard_normal((100, 2)))
    np.testing.assert_array_equal(top_levels(levels, n_top=5), np.sort(levels, axis=0)[-5])
    # a mostly zero column falls back on the median of its non-zero values
    sparse = np.zeros((100, 1))
    sparse[[3, 40, 77], 0] = [1.0, 2.0, 5.0]
    assert top_levels(sparse, n_top=30)[0] == 2.0


def test_robust_scale_is_the_sd_for_gaussians_and_ignores_outliers():
    rng = np.random.RandomState(3)
    a = rng.standard_normal((20000, 2)) * [1.0, 3.0]
    a[:50] = 1e6  # a quarter percent of wild values
    np.testing.assert_allclose(robust_scale(a), [1.0, 3.0], rtol=0.03)
    # mostly constant: the mean absolute deviation stands in for a zero MAD
    counts = np.zeros((100, 1))
    counts[::10] = 1.0
    assert robust_scale(counts)[0] == pytest.approx(np.sqrt(np.pi / 2) * 0.1)


# ----------------------------------------------------------------------------- detectors
@pytest.mark.parametrize("role", ["X", "Y"])
def test_artifact_frames_are_named_and_clean_frames_are_not(role):
    X, Y, Z = _sim()
    assert not detect(X, Y, Z)
    Xd, Yd, Zd, truth = inject_artifacts(
        X, Y, Z, f"{role} frame", count=3, size=20, random_state=0
    )
    report = detect(Xd, Yd, Zd)
    np.testing.assert_array_equal(report.frames[role], truth.samples)
    assert report.cells[role].size == 0  # a frame's neurons are not listed one by one
    np.testing.assert_array_equal(report.samples, truth.samples)


@pytest.mark.parametrize("defect,size", [("X sample", 100), ("Y sample", 100), ("Z glitch", 20)])
def test_extreme_samples_and_glitches_are_named_with_their_column(defect, size):
    X, Y, Z = _sim()
    Xd, Yd, Zd, truth = inject_artifacts(X, Y, Z, defect, count=4, size=size, random_state=1)
    report = detect(Xd, Yd, Zd)
    role = defect[0]
    got = {tuple(c) for c in report.cells[role]}
    assert got == set(zip(truth.samples, truth.columns, strict=True))
    assert report.frames.get(role, np.zeros(0)).size == 0
    np.testing.assert_array_equal(report.samples, truth.samples)


def test_two_glitches_two_samples_apart_do_not_hide_each_other():
    X, Y, Z = _sim()
    Zd = Z.copy()
    Zd[500, 0] += 50
    Zd[502, 0] -= 50
    Yd = Y.copy()
    Yd[900] += 30 * Y.std(axis=0)
    Yd[902] -= 30 * Y.std(axis=0)
    report = detect(X, Yd, Zd)
    np.testing.assert_array_equal(report.cells["Z"][:, 0], [500, 502])
    np.testing.assert_array_equal(report.frames["Y"], [900, 902])


def test_valid_heavy_tails_stay_quiet():
    """Bursty running, calcium transients, pupil-like and population modulators, spike counts."""
    rng = np.random.RandomState(4)
    for seed in range(3):
        X, Y, _ = _sim(seed)
        n = X.shape[0]
        running = np.column_stack(
            [running_speed(n, random_state=seed), running_speed(n, smooth=0, random_state=seed)]
        )
        calcium = calcium_events(n, 3, rate=0.02, tau_samples=3, random_state=seed)
        for Z in (running, calcium):
            assert not detect(X, Y, Z), Z
        Xc, Yc, Zl = _sim(seed, calcium={}, source_autocorr=0.5, modulator_kind="locomotion")
        assert not detect(Xc, Yc, Zl)  # calcium traces; running state, speed and pupil
        counts = rng.poisson(rng.uniform(0.05, 3.0, size=40), size=(n, 40)).astype(float)
        assert not detect(counts, None, None)


@pytest.mark.shared_data
def test_real_recordings_are_clean(data_dir, monkeypatch):
    monkeypatch.setenv("MICS_DATA_DIR", str(data_dir))
    from mics import datasets

    ds = datasets.park2024()
    report = find_artifacts(ds.activity, None, np.c_[ds.pupil.values, ds.speed.values])
    assert not report, report.describe()
    activity = datasets.semedo2019().activity
    trials = np.repeat(np.arange(400), 10)
    assert not find_artifacts(activity, groups=trials), "Semedo"


def test_no_score_reaches_across_a_trial_edge():
    """A one-sample trial at another level is a spike only if trials were contiguous."""
    rng = np.random.RandomState(5)
    lengths = np.r_[np.full(20, 30), 1, np.full(20, 30)]
    groups = np.repeat(np.arange(lengths.size), lengths)
    Z = rng.standard_normal((groups.size, 1))
    lone = np.flatnonzero(groups == 20)
    Z[lone] += 60.0
    X = rng.standard_normal((groups.size, 6))
    assert detect(X, None, Z).cells["Z"][:, 0].tolist() == lone.tolist()
    assert not detect(X, None, Z, groups=groups)


# ----------------------------------------------------------------------------- the warning
def test_fit_warns_once_naming_samples_trials_and_columns():
    import xarray as xr

    X, Y, Z = _sim()
    Xd, Yd, Zd, truth = inject_artifacts(X, Y, Z, "Z glitch", count=2, size=200, random_state=3)
    trials = np.repeat([f"t{k}" for k in range(30)], 50)
    Zl = xr.DataArray(
        Zd,
        dims=("time", "modulator"),
        coords={"modulator": ["run", "pupil", "whisk"], "trial": ("time", trials)},
    )
    model = mics.MICs(rank=3, n_channels=2, n_init=1, random_state=0)
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        model.fit(Xd, Yd, Zl)
    found = _quality_warnings(record)
    assert len(found) == 1
    text = str(found[0].message)
    names = np.array(["run", "pupil", "whisk"])[truth.columns]
    for t, name in zip(truth.samples, names, strict=True):
        assert f"{t} (trial {trials[t]})" in text and name in text
    assert "interpolate_artifacts" in text and "drop_artifacts" in text
    assert found[0].filename == __file__  # points at the user's line


def test_quality_checks_switch_off_raise_and_tune():
    X, Y, Z = _sim()
    Xd, Yd, Zd, _ = inject_artifacts(X, Y, Z, "Y frame", count=1, size=50, random_state=0)
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        with quality_checks(False):
            make_problem(Xd, Yd, Zd)
        with quality_checks(frame=None, sample=None):  # the frame's neurons: not single samples
            make_problem(Xd, Yd, Zd)
        make_problem(Xd, Yd, Zd, quality="ignore")
        with quality_checks(False), quality_checks(modulator=12.0):  # still off inside
            make_problem(Xd, Yd, Zd)
    assert not _quality_warnings(record)
    with quality_checks("raise"), pytest.raises(ValueError, match="artifact frame"):
        make_problem(Xd, Yd, Zd)
    with pytest.warns(DataQualityWarning):
        make_problem(Xd, Yd, Zd, quality=QualityThresholds(frame=3.0))
    with pytest.raises(ValueError, match="frame_level"):
        QualityThresholds(frame_level=0)


def test_inside_a_scope_only_the_first_problem_is_checked():
    X, Y, Z = _sim()
    Xd, Yd, Zd, _ = inject_artifacts(X, Y, Z, "X frame", count=1, size=50, random_state=0)
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        with quality_scope():
            for shift in range(3):
                make_problem(Xd, Yd, np.roll(Zd, shift, axis=0))
    assert len(_quality_warnings(record)) == 1


def test_test_modulation_and_bootstrap_warn_once_per_call():
    X, Y, Z = _sim(n=600)
    Xd, Yd, Zd, _ = inject_artifacts(X, Y, Z, "Z glitch", count=1, size=300, random_state=0)
    cheap = mics.MICs(rank=3, cv=3, max_channels=1, n_init=0, max_iter=20, tol=1e-3)
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        mics.test_modulation(cheap, Xd, Yd, Zd, n_permutations=4, n_boot=3, random_state=0)
    assert len(_quality_warnings(record)) == 1
    fixed = mics.MICs(rank=3, n_channels=1, n_init=0, max_iter=20, tol=1e-3)
    with quality_checks(False):
        fixed.fit(Xd, Yd, Zd)
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        mics.bootstrap_channels(
            fixed,
            Xd,
            Yd,
            Zd,
            n_boot=3,
            random_state=0,
        )
    assert len(_quality_warnings(record)) == 1


def test_power_analysis_warns_once():
    X, Y, Z = _sim(n=400)
    Xd, Yd, Zd, _ = inject_artifacts(X, Y, Z, "X frame", count=1, size=300, random_state=0)
    cheap = mics.MICs(rank=3, cv=3, max_channels=1, n_init=0, max_iter=10, tol=1e-2)
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        mics.power_analysis(
            cheap, Xd, Yd, Zd, strengths=[0.0], n_sims=2, n_permutations=2, random_state=0
        )
    assert len(_quality_warnings(record)) == 1


def test_chunked_inputs_flag_the_same_samples_in_one_pass():
    da = pytest.importorskip("dask.array")
    X, Y, Z = _sim()
    Xd, Yd, Zd, truth = inject_artifacts(X, Y, Z, "Y frame", count=2, size=40, random_state=5)
    chunked = [da.from_array(a, chunks=(300, -1)) for a in (Xd, Yd, Zd)]
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        make_problem(*chunked)
    found = _quality_warnings(record)
    assert len(found) == 1
    report = find_artifacts(*chunked)
    np.testing.assert_array_equal(report.frames["Y"], truth.samples)
    # one chunk: the very scores of the in-memory arrays
    whole = find_artifacts(*(da.from_array(a, chunks=(-1, -1)) for a in (Xd, Yd, Zd)))
    for role in "XYZ":
        np.testing.assert_array_equal(whole.scores[role], detect(Xd, Yd, Zd).scores[role])


def test_lag_scan_checks_the_recording_once():
    X, Y, Z = _sim(n=500)
    Xd, Yd, Zd, _ = inject_artifacts(X, Y, Z, "Y frame", count=1, size=80, random_state=0)
    estimator = mics.MICs(cv=3, max_channels=1, n_init=0, max_iter=10, tol=1e-2)
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        mics.lag_scan(Xd, Yd, Zd, lags=[-1, 0, 1], ranks=range(3), cv=3, estimator=estimator)
    found = _quality_warnings(record)
    assert len(found) == 1


# ----------------------------------------------------------------------------- fold flag
def test_fold_outliers_flag_only_orders_of_magnitude():
    rng = np.random.RandomState(0)
    clean = 0.6 + 0.2 * rng.random_sample((5, 10))
    assert not fold_outliers(clean).any()
    bad = clean.copy()
    bad[2, 4] = 50.0  # one candidate, one fold
    np.testing.assert_array_equal(fold_outliers(bad), np.arange(10) == 4)
    low = clean * 0.01
    low[:, 4] *= 100  # 100x the median but below 1: a better fold than most, not a wreck
    assert not fold_outliers(low).any()
    half = clean.copy()
    half[:, :5] = 100.0  # half the folds: no "other folds" to compare with
    assert not fold_outliers(half).any()
    nan_rows = np.vstack([np.full((1, 10), np.nan), bad])
    np.testing.assert_array_equal(fold_outliers(nan_rows), np.arange(10) == 4)


def test_clean_tables_give_the_plain_mean_and_sem_bit_for_bit():
    rng = np.random.RandomState(1)
    loss = rng.random_sample((6, 10))
    mean, sem, out = fold_mean_sem(loss)
    assert not out.any()
    np.testing.assert_array_equal(mean, loss.mean(axis=1))
    np.testing.assert_array_equal(sem, loss.std(axis=1, ddof=1) / np.sqrt(10))
    loss[:, 3] = 100.0
    mean, sem, out = fold_mean_sem(loss)
    kept = np.delete(loss, 3, axis=1)  # the outlier fold left out (to rounding)
    np.testing.assert_allclose(mean, kept.mean(axis=1), rtol=1e-15)
    np.testing.assert_allclose(sem, kept.std(axis=1, ddof=1) / 3.0, rtol=1e-14)
    assert out.tolist() == [i == 3 for i in range(10)]


def test_one_source_frame_no_longer_decides_the_selection():
    """The issue's case: a 100 SD source frame made the default fit select rank 1, K 1."""
    X, Y, Z = _sim()
    clean = mics.MICs(random_state=0, verbose=0).fit(X, Y, Z)
    assert not any(k.endswith("fold_outlier") for k in clean.cv_results_)
    Xd = X.copy()
    Xd[700] += 100 * X.std(axis=0)
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        model = mics.MICs(random_state=0, verbose=0).fit(Xd, Y, Z)
    assert (model.rank_, model.n_channels_) == (clean.rank_, clean.n_channels_) == (3, 2)
    fold = 700 // 150  # the 10 contiguous folds of 150 samples
    np.testing.assert_array_equal(model.cv_results_["rank_fold_outlier"], np.arange(10) == fold)
    assert any(issubclass(w.category, FoldOutlierWarning) for w in record)
    assert len(_quality_warnings(record)) == 1


# ----------------------------------------------------------------------------- helpers
def test_interpolation_is_exact_on_lines_and_leaves_the_rest_alone():
    n = 200
    t = np.arange(n, dtype=float)
    X = np.column_stack([2.0 * t + 1, -0.5 * t]) + 0.0
    Y = np.column_stack([3.0 * t, t + 7, 0.1 * t, t, -t, 2 * t])
    Z = (0.25 * t)[:, None]
    Xd, Yd, Zd = X.copy(), Y.copy(), Z.copy()
    Yd[50] += 1000.0  # a frame
    Zd[120, 0] = -900.0  # a glitch
    report = detect(Xd, Yd, Zd, thresholds=QualityThresholds(min_neurons=2))
    assert report.frames["Y"].tolist() == [50] and report.cells["Z"].tolist() == [[120, 0]]
    Xi, Yi, Zi = interpolate_artifacts(Xd, Yd, Zd, report=report)
    np.testing.assert_allclose(Yi, Y, rtol=0, atol=1e-12)
    np.testing.assert_allclose(Zi, Z, rtol=0, atol=1e-12)
    keep = np.ones(n, dtype=bool)
    keep[50] = False
    np.testing.assert_array_equal(Yi[keep], Yd[keep])  # bit for bit elsewhere
    np.testing.assert_array_equal(Xi, Xd)


def test_interpolation_stays_inside_the_trial():
    values = np.r_[np.full(5, 10.0), np.full(5, 0.0)][:, None]
    mask = np.zeros((10, 1), dtype=bool)
    mask[5] = True  # the first sample of the second trial
    from mics.preprocessing.artifacts import interpolate_within_trials

    groups = np.repeat([0, 1], 5)
    got = interpolate_within_trials(values, mask, groups)
    assert got[5, 0] == 0.0  # the trial's own nearest value, not a line from trial 0
    assert interpolate_within_trials(values, mask)[5, 0] == 5.0  # continuous: 10 -> 0


def test_dropping_keeps_whole_trials_and_aligns_x_y_z():
    import xarray as xr

    X, Y, Z = _sim()
    Xd, Yd, Zd, truth = inject_artifacts(X, Y, Z, "Y frame", count=2, size=60, random_state=7)
    ids = np.repeat(np.arange(100, 130), 50)  # 30 trials of 50 samples, ids 100..129
    bad_trials = np.unique(ids[truth.samples])
    keep = artifact_mask(Xd, Yd, Zd, groups=ids)
    np.testing.assert_array_equal(keep, ~np.isin(ids, bad_trials))
    X2, Y2, Z2, g2 = drop_artifacts(Xd, Yd, Zd, groups=ids)
    np.testing.assert_array_equal(X2, Xd[keep])
    np.testing.assert_array_equal(Y2, Yd[keep])
    np.testing.assert_array_equal(Z2, Zd[keep])
    np.testing.assert_array_equal(g2, ids[keep])
    # samples alone when asked, and labelled inputs keep their coordinates
    alone = artifact_mask(Xd, Yd, Zd, groups=ids, whole_trials=False)
    assert (~alone).sum() == truth.samples.size
    Yl = xr.DataArray(Yd, dims=("time", "neuron"), coords={"trial": ("time", ids)})
    X3, Y3, Z3, g3 = drop_artifacts(Xd, Yl, Zd)
    assert isinstance(Y3, xr.DataArray)
    np.testing.assert_array_equal(Y3.trial.values, ids[keep])
    np.testing.assert_array_equal(g3, ids[keep])
    np.testing.assert_array_equal(X3, Xd[keep])


def test_plot_artifacts_marks_the_flagged_samples():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    X, Y, Z = _sim()
    Xd, Yd, Zd, truth = inject_artifacts(X, Y, Z, "Z glitch", count=3, size=100, random_state=0)
    report = find_artifacts(Xd, Yd, Zd)
    fig, ax = plt.subplots()
    assert mics.plotting.plot_artifacts(report, ax=ax) is ax
    marks = [line for line in ax.lines if line.get_marker() == "o"]
    assert len(marks) == 1
    np.testing.assert_array_equal(marks[0].get_xdata(), truth.samples)
    assert "3 flagged" in ax.get_title()
    plt.close(fig)


def test_inject_artifacts_changes_exactly_the_named_entries():
    X, Y, Z = _sim(n=300)
    for defect in ("X frame", "Y sample", "Z glitch"):
        Xd, Yd, Zd, truth = inject_artifacts(X, Y, Z, defect, count=4, size=25, random_state=0)
        role = defect[0]
        before, after = {"X": (X, Xd), "Y": (Y, Yd), "Z": (Z, Zd)}[role]
        changed = np.argwhere(before != after)
        if truth.columns[0] < 0:
            np.testing.assert_array_equal(np.unique(changed[:, 0]), truth.samples)
            assert changed.shape[0] == 4 * before.shape[1]
        else:
            assert {tuple(c) for c in changed} == set(
                zip(truth.samples, truth.columns, strict=True)
            )
        sizes = (after - before)[changed[:, 0], changed[:, 1]] / before.std(axis=0)[changed[:, 1]]
        np.testing.assert_allclose(np.abs(sizes), 25.0)


# ----------------------------------------------------------------------------- validation
@pytest.mark.slow
def test_planted_defects_are_named_or_harmless_and_cleaning_restores_the_selection():
    """A small run of ``studies/validation/artifacts.py`` part (i): 6 data sets x 5 defects."""
    from mics.simulation.artifacts import DEFECTS

    kinds = [{}, {"modulator_kind": "locomotion", "source_autocorr": 0.5}, {"calcium": {}}]
    rng = np.random.RandomState(50)
    ok = cleaned = total = 0
    for seed in range(6):
        X, Y, Z = _sim(500 + seed, **kinds[seed % 3])
        reference = mics.MICs(random_state=seed, verbose=0).fit(X, Y, Z)
        for defect in DEFECTS:
            count = int(rng.randint(1, 11))
            size = float(np.exp(rng.uniform(np.log(20), np.log(1000))))
            Xd, Yd, Zd, truth = inject_artifacts(
                X, Y, Z, defect, count=count, size=size, random_state=rng
            )
            with warnings.catch_warnings(record=True) as record:
                warnings.simplefilter("always")
                model = mics.MICs(random_state=seed, verbose=0).fit(Xd, Yd, Zd)
            report = find_artifacts(Xd, Yd, Zd)
            same = (model.rank_, model.n_channels_) == (reference.rank_, reference.n_channels_)
            named = _quality_warnings(record) and np.isin(truth.samples, report.samples).all()
            ok += bool(same or named)
            fixed = mics.MICs(random_state=seed, verbose=0).fit(
                *interpolate_artifacts(Xd, Yd, Zd, report=report)
            )
            cleaned += (fixed.rank_, fixed.n_channels_) == (reference.rank_, reference.n_channels_)
            total += 1
    assert ok == total
    assert cleaned >= 0.95 * total


@pytest.mark.slow
def test_no_false_alarm_on_valid_heavy_tails_over_many_data_sets():
    found = 0
    for seed in range(150):
        X, Y, _ = _sim(1000 + seed)
        n = X.shape[0]
        Z = np.column_stack(
            [
                running_speed(n, random_state=seed),
                calcium_events(n, 2, rate=0.02, tau_samples=6, random_state=seed)[:, 0],
                _sim(2000 + seed, modulator_kind="locomotion")[2],
            ]
        )
        found += bool(detect(X, Y, Z))
        found += bool(detect(*_sim(3000 + seed, calcium={}, source_autocorr=0.5)))
    assert found == 0
