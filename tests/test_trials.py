"""Trial-structured recordings: folds, resampling, nulls, lags and condition means."""

import warnings

import numpy as np
import pytest
import scipy.io
import xarray as xr
from sklearn.model_selection import KFold

import mics
from mics.data.folds import (
    TrialBlockedKFold,
    check_groups,
    cv_splits,
    shift_within_trials,
    trial_bootstrap_indices,
    trial_permutation_indices,
)
from mics.data.problem import ArrayProblem
from mics.preprocessing import lag_embed, subtract_condition_means


def _unequal_trials(seed=0, n_trials=23):
    rng = np.random.default_rng(seed)
    lengths = rng.integers(3, 9, size=n_trials)
    return np.repeat(np.arange(n_trials) * 7 + 100, lengths)  # arbitrary ids


def _segments(idx):
    """Split an index array into runs of consecutive integers."""
    breaks = np.flatnonzero(np.diff(idx) != 1) + 1
    return np.split(idx, breaks)


# ------------------------------------------------------------------ groups and folds
def test_check_groups_codes_trials_in_time_order_and_rejects_interleaving():
    codes = check_groups(np.array(["b", "b", "a", "a", "a", "c"]), 6)
    np.testing.assert_array_equal(codes, [0, 0, 1, 1, 1, 2])
    with pytest.raises(ValueError, match="not contiguous"):
        check_groups(np.array([0, 0, 1, 0]), 4)
    with pytest.raises(ValueError, match="one trial id per sample"):
        check_groups(np.zeros(3), 4)


@pytest.mark.parametrize("gap", [0, 5])
def test_no_fold_mixes_two_trials(gap):
    groups = _unequal_trials()
    n = groups.size
    splits = cv_splits(5, n, groups=groups, gap=gap)
    assert len(splits) == 5
    tests = np.sort(np.concatenate([te for _, te in splits]))
    np.testing.assert_array_equal(tests, np.arange(n))  # the test blocks partition the data
    for train, test in splits:
        # every trial is entirely in, or entirely out of, each side
        for side in (train, test):
            for trial in np.unique(groups[side]):
                assert np.all(np.isin(np.flatnonzero(groups == trial), side))
        assert not set(groups[train]) & set(groups[test])
        assert len(_segments(test)) == 1  # one contiguous block of whole trials
        if gap:
            dist = np.abs(train[:, None] - test[None, :]).min()
            assert dist > gap


def test_trial_folds_equal_sample_folds_for_equal_trials():
    groups = np.repeat(np.arange(40), 10)
    a = cv_splits(10, groups.size, groups=groups)
    b = list(KFold(10).split(np.zeros(groups.size)))
    for (tr1, te1), (tr2, te2) in zip(a, b, strict=True):
        np.testing.assert_array_equal(te1, te2)
        np.testing.assert_array_equal(tr1, tr2)


def test_splitter_that_cuts_trials_is_refused():
    groups = np.repeat(np.arange(10), 7)  # 70 samples; KFold(3) cuts trials
    with pytest.raises(ValueError, match="both sides"), warnings.catch_warnings():
        warnings.simplefilter("ignore")  # KFold says it ignores groups
        cv_splits(KFold(3), groups.size, groups=groups)
    with pytest.raises(ValueError, match="at least 12 trials"):
        list(TrialBlockedKFold(12).split(np.zeros(70), groups=groups))


# ------------------------------------------------------------------ bootstrap and null
def test_trial_bootstrap_draws_whole_trials():
    groups = _unequal_trials(1)
    codes = check_groups(groups, groups.size)
    rng = np.random.RandomState(0)
    idx, new_codes = trial_bootstrap_indices(codes, rng)
    n_trials = codes.max() + 1
    assert np.unique(new_codes).size == n_trials
    for k in range(n_trials):
        drawn = idx[new_codes == k]
        trial = codes[drawn[0]]
        np.testing.assert_array_equal(drawn, np.flatnonzero(codes == trial))


def test_bootstrap_channels_resamples_whole_trials(monkeypatch):
    ds, _ = mics.simulate_trials(
        n_trials=24,
        n_samples_per_trial=10,
        n_source=6,
        n_target=5,
        rank=1,
        n_channels=1,
        modulation_snr=1.0,
        stimulus_strength=0.0,
        random_state=0,
    )
    X, Y, Z = (np.asarray(ds[k]) for k in "XYZ")
    groups = ds.trial.values
    model = mics.MICs(rank=1, n_channels=1, n_init=1, verbose=0, random_state=0).fit(X, Y, Z)
    seen = []
    original = ArrayProblem.resampled

    def spy(self, idx, groups=None):
        seen.append(idx)
        return original(self, idx, groups)

    monkeypatch.setattr(ArrayProblem, "resampled", spy)
    out = mics.bootstrap_channels(model, ds.X, ds.Y, ds.Z, n_boot=3, verbose=0, random_state=1)
    assert out.attrs["resampling"] == "trial"  # picked up from the trial coordinate
    assert len(seen) == 3
    for idx in seen:
        assert idx.size == X.shape[0]
        # each run of consecutive samples starts a trial and ends one
        for seg in _segments(idx):
            # a run of consecutive samples is exactly the samples of the trials it touches
            np.testing.assert_array_equal(
                seg, np.flatnonzero(np.isin(groups, np.unique(groups[seg])))
            )


def test_trial_permutation_stays_within_condition_and_keeps_time_courses():
    n_trials, L = 30, 6
    groups = np.repeat(np.arange(n_trials), L)
    cond_trial = np.arange(n_trials) % 3
    conditions = np.repeat(cond_trial, L)
    rng = np.random.RandomState(0)
    positions = np.zeros((n_trials, n_trials), dtype=int)
    for _ in range(300):
        idx = trial_permutation_indices(groups, rng, conditions)
        src = groups[idx].reshape(n_trials, L)
        assert np.all(src == src[:, :1])  # one source trial per null trial
        within = idx.reshape(n_trials, L) % L  # each trial's time course in order
        np.testing.assert_array_equal(within, np.tile(np.arange(L), (n_trials, 1)))
        np.testing.assert_array_equal(np.sort(src[:, 0]), np.arange(n_trials))  # a permutation
        np.testing.assert_array_equal(cond_trial[src[:, 0]], cond_trial)  # within condition
        positions[np.arange(n_trials), src[:, 0]] += 1
    # every same-condition source reaches every position (uniform: 300 / 10 = 30 expected)
    same = cond_trial[:, None] == cond_trial[None, :]
    assert positions[~same].sum() == 0
    assert positions[same].min() > 10


def test_conditions_must_be_constant_within_trials():
    groups = np.repeat(np.arange(4), 3)
    with pytest.raises(ValueError, match="constant within each trial"):
        trial_permutation_indices(groups, np.random.RandomState(0), np.arange(12) % 2)


def test_test_modulation_trial_null_reports_itself_and_permutes_within_condition():
    ds, _ = mics.simulate_trials(
        n_trials=24,
        n_samples_per_trial=10,
        n_conditions=4,
        n_source=6,
        n_target=5,
        rank=1,
        random_state=2,
    )
    d = subtract_condition_means(ds, "direction")
    est = mics.MICs(rank=1, cv=3, max_channels=1, n_init=1, verbose=0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        res = mics.test_modulation(
            est,
            d.X,
            d.Y,
            d.Z,
            conditions="direction",
            n_permutations=5,
            verbose=0,
            random_state=0,
        )
        circ = mics.test_modulation(
            est, d.X, d.Y, d.Z, null="circular", n_permutations=3, verbose=0, random_state=0
        )
    assert res.null == "trial" and res.shifts.size == 0
    assert circ.null == "circular" and circ.shifts.size == 3
    cond = d.direction.values[::10]
    assert res.permutations.shape == (5, 24)
    for perm in res.permutations:
        np.testing.assert_array_equal(cond[perm], cond)
    assert "null='trial'" in repr(res)
    with pytest.raises(ValueError, match="needs trial ids"):
        mics.test_modulation(est, np.asarray(d.X), np.asarray(d.Y), np.asarray(d.Z), null="trial")
    with pytest.raises(ValueError, match="'circular' or 'trial'"):
        mics.test_modulation(est, d.X, d.Y, d.Z, null="shuffle")


# ------------------------------------------------------------------ estimators
def _trial_data(seed=0):
    groups = _unequal_trials(seed, n_trials=30)
    X, Y, Z = mics.simulate(
        n_samples=groups.size,
        n_source=6,
        n_target=5,
        n_modulators=2,
        rank=2,
        n_channels=1,
        modulation_snr=1.0,
        random_state=seed,
    )[:3]
    return X, Y, Z, groups


class _Fixed:
    """A splitter replaying given folds (an independent route to the same folds)."""

    def __init__(self, splits):
        self.splits = splits

    def split(self, X, y=None, groups=None):
        yield from self.splits

    def get_n_splits(self, X=None, y=None, groups=None):
        return len(self.splits)


def test_mics_selection_uses_trial_folds_from_groups_or_coordinate():
    X, Y, Z, groups = _trial_data()
    kw = dict(max_rank=3, max_channels=1, n_init=1, verbose=0, random_state=0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        a = mics.MICs(cv=5, **kw).fit(X, Y, Z, groups=groups)
        # the same folds built by hand from trial boundaries
        codes = check_groups(groups, groups.size)
        runs = np.array_split(np.arange(codes.max() + 1), 5)
        splits = [
            (np.flatnonzero(~np.isin(codes, r)), np.flatnonzero(np.isin(codes, r))) for r in runs
        ]
        b = mics.MICs(cv=_Fixed(splits), **kw).fit(X, Y, Z)
        time = np.arange(groups.size)
        da = [
            xr.DataArray(v, dims=("time", "n"), coords={"time": time, "trial": ("time", groups)})
            for v in (X, Y, Z)
        ]
        c = mics.MICs(cv=5, **kw).fit(*da)
        d = mics.MICs(cv=5, **kw).fit(X, Y, Z)  # sample folds cut trials: different losses
    for key in ("rank_fold_loss", "n_channels_fold_loss"):
        np.testing.assert_allclose(a.cv_results_[key], b.cv_results_[key], rtol=1e-10)
        np.testing.assert_allclose(a.cv_results_[key], c.cv_results_[key], rtol=1e-10)
    assert not np.allclose(a.cv_results_["rank_fold_loss"], d.cv_results_["rank_fold_loss"])
    # labelled outputs keep the trial coordinate
    assert "trial" in c.predict(da[0], da[2]).coords
    np.testing.assert_array_equal(c.predict(da[0], da[2]).trial.values, groups)


def test_reduced_rank_cv_and_mics_without_modulator_take_groups():
    X, Y, _, groups = _trial_data(1)
    a = mics.ReducedRankRegressionCV(ranks=range(5), cv=4).fit(X, Y, groups=groups)
    splits = cv_splits(4, groups.size, groups=groups)
    b = mics.ReducedRankRegressionCV(ranks=range(5), cv=_Fixed(splits)).fit(X, Y)
    np.testing.assert_allclose(a.cv_results_["fold_loss"], b.cv_results_["fold_loss"])
    m = mics.MICs(max_rank=4, cv=4, verbose=0).fit(X, Y, groups=groups)
    np.testing.assert_allclose(m.cv_results_["fold_loss"], a.cv_results_["fold_loss"])


def _reference_rrr_rank(X, Y, fold_of_sample, ranks):
    """Semedo's procedure written out in NumPy: RRR, NSE per fold, ModelSelect."""
    losses = []
    for f in np.unique(fold_of_sample):
        te, tr = fold_of_sample == f, fold_of_sample != f
        mx, my = X[tr].mean(0), Y[tr].mean(0)
        B = np.linalg.pinv(X[tr] - mx) @ (Y[tr] - my)
        fitted = (X[tr] - mx) @ B
        _, _, Vt = np.linalg.svd(fitted, full_matrices=False)
        row = []
        for r in ranks:
            pred = my + (X[te] - mx) @ B @ Vt[:r].T @ Vt[:r]
            row.append(((Y[te] - pred) ** 2).sum() / ((Y[te] - Y[te].mean(0)) ** 2).sum())
        losses.append(row)
    losses = np.array(losses)
    mean, sem = losses.mean(0), losses.std(0, ddof=1) / np.sqrt(len(losses))
    best = np.argmin(mean)
    return ranks[int(np.flatnonzero(mean <= mean[best] + sem[best])[0])]


@pytest.mark.slow
@pytest.mark.shared_data
def test_semedo_trial_folds_select_the_reference_rank(data_dir):
    d = scipy.io.loadmat(data_dir / "semedo2019" / "sample_data.mat")
    X, Y2 = d["X"], d["Y_V2"]
    groups = np.repeat(np.arange(400), 10)  # 400 trials x 10 bins
    ranks = list(range(1, 11))  # the reference scans 1..10 dimensions
    reference = _reference_rrr_rank(X, Y2, groups // 40, ranks)  # 40-trial blocks
    model = mics.ReducedRankRegressionCV(ranks=ranks, cv=10).fit(X, Y2, groups=groups)
    assert model.rank_ == reference


# ------------------------------------------------------------------ lags
def test_shift_within_trials_matches_a_per_trial_loop():
    groups = _unequal_trials(2)
    codes = check_groups(groups, groups.size)
    x = np.random.default_rng(0).standard_normal((groups.size, 3))
    for lag in (-2, 0, 1, 4):
        expected = np.full_like(x, np.nan)
        for t in range(groups.size):
            s = t - lag
            if 0 <= s < groups.size and codes[s] == codes[t]:
                expected[t] = x[s]
        np.testing.assert_array_equal(shift_within_trials(x, lag, codes), expected)


def test_no_lag_column_mixes_two_trials():
    groups = _unequal_trials(3)
    codes = check_groups(groups, groups.size)
    pos = np.arange(groups.size)
    x = np.column_stack([codes * 1000.0 + pos, -pos])  # trial and sample readable from values
    out = lag_embed(x, lags=3, groups=groups)
    assert out.shape == (groups.size, 8)
    for j, lag in enumerate(range(4)):
        block = out[:, 2 * j : 2 * j + 2]
        ok = np.isfinite(block[:, 0])
        np.testing.assert_array_equal(block[ok, 0] // 1000, codes[ok])  # same trial
        np.testing.assert_array_equal(-block[ok, 1], pos[ok] - lag)  # the delayed sample
        # only the first `lag` samples of each trial are missing
        starts = np.r_[0, np.flatnonzero(np.diff(codes)) + 1]
        into = pos - np.repeat(starts, np.diff(np.r_[starts, groups.size]))
        np.testing.assert_array_equal(~ok, into < lag)


def test_lag_embed_labels_lags_and_keeps_trial_coordinate():
    groups = np.repeat(np.arange(5), 4)
    da = xr.DataArray(
        np.arange(40.0).reshape(20, 2),
        dims=("time", "neuron"),
        coords={"time": np.arange(20) * 0.1, "trial": ("time", groups), "neuron": [7, 9]},
    )
    out = lag_embed(da, lags=[0, 2])
    assert out.dims == ("time", "neuron_lag")
    np.testing.assert_array_equal(out.trial.values, groups)
    lag2 = out.sel(lag=2)
    np.testing.assert_array_equal(lag2.neuron.values, [7, 9])
    np.testing.assert_array_equal(lag2.values[2:4], da.values[0:2])
    assert np.isnan(lag2.values[4:6]).all()  # first samples of trial 1 have no lag-2 value
    kept = out.dropna("time")
    assert kept.sizes["time"] == 10
    with pytest.raises(ValueError, match="lags must"):
        lag_embed(da, lags=-1)


def test_lag_scan_finds_the_delay_and_direction():
    rng = np.random.default_rng(0)
    groups = np.repeat(np.arange(60), 20)
    codes = check_groups(groups, groups.size)
    X = rng.standard_normal((groups.size, 5))
    drive = np.nan_to_num(shift_within_trials(X[:, :2], 2, codes))  # source leads by 2
    Y = drive @ rng.standard_normal((2, 4)) + rng.standard_normal((groups.size, 4))
    scan = mics.lags.lag_scan(X, Y, lags=range(-3, 4), groups=groups, cv=5, fs=10.0, verbose=0)
    assert int(scan.lag[np.argmax(scan["communication"].values)]) == 2
    assert int(scan["rank"].sel(lag=2)) == 2
    assert scan.lag_s.sel(lag=2) == pytest.approx(0.2)
    back = mics.lags.lag_scan(Y, X, lags=range(-3, 4), groups=groups, cv=5, verbose=0)
    assert int(back.lag[np.argmax(back["communication"].values)]) == -2  # target leads
    assert scan.attrs["n_samples"] == 60 * (20 - 6)


def test_plot_lag_scan_draws_both_panels():
    import matplotlib

    matplotlib.use("Agg")
    scan = xr.Dataset(
        {
            "communication": ("lag", [0.1, 0.3, 0.2]),
            "communication_sem": ("lag", [0.01] * 3),
            "modulation": ("lag", [0.0, 0.02, 0.01]),
            "modulation_sem": ("lag", [0.01] * 3),
        },
        coords={"lag": [-1, 0, 1]},
    )
    axes = mics.plotting.plot_lag_scan(scan)
    assert len(axes) == 2
    np.testing.assert_allclose(axes[0].lines[0].get_ydata(), [0.1, 0.3, 0.2])
    assert axes[1].get_xlabel() == "source lead (samples)"


# ------------------------------------------------------------------ condition means
def _condition_data(seed=0):
    rng = np.random.default_rng(seed)
    n_trials, L = 24, 5
    cond_trial = rng.permutation(np.arange(n_trials) % 4)
    groups = np.repeat(np.arange(n_trials), L)
    cond = np.repeat(cond_trial, L)
    x = rng.standard_normal((n_trials * L, 3)) + 10 * cond[:, None]
    return x, groups, cond, L


def test_subtract_condition_means_matches_explicit_loop():
    x, groups, cond, L = _condition_data()
    ttime = np.tile(np.arange(L), groups.size // L)
    expected = x.copy()
    for c in np.unique(cond):
        for t in range(L):
            sel = (cond == c) & (ttime == t)
            expected[sel] -= x[sel].mean(0)
    np.testing.assert_allclose(subtract_condition_means(x, cond, trial=groups), expected)
    np.testing.assert_allclose(subtract_condition_means(x, cond, trial_time=ttime), expected)


def test_training_condition_means_never_see_test_trials():
    x, groups, cond, L = _condition_data(1)
    train = np.arange(0, 24, 2)  # even trials
    a = subtract_condition_means(x, cond, trial=groups, train=train)
    test_rows = ~np.isin(groups, train)
    spoiled = x.copy()
    spoiled[test_rows] += 1e6 * np.random.default_rng(2).standard_normal(spoiled[test_rows].shape)
    b = subtract_condition_means(spoiled, cond, trial=groups, train=train)
    np.testing.assert_allclose(a[~test_rows], b[~test_rows])  # training residuals untouched
    # test residuals are the test values minus the training means
    np.testing.assert_allclose(b[test_rows] - a[test_rows], (spoiled - x)[test_rows])
    with pytest.raises(ValueError, match="no training trial"):
        subtract_condition_means(x, cond, trial=groups, train=[0])


def test_condition_means_do_not_depend_on_trial_order_or_units():
    x, groups, cond, L = _condition_data(3)
    order = np.random.default_rng(0).permutation(24)
    rows = np.concatenate([np.flatnonzero(groups == t) for t in order])
    a = subtract_condition_means(x, cond, trial=groups)
    b = subtract_condition_means(x[rows], cond[rows], trial=groups[rows])
    np.testing.assert_allclose(b, a[rows])
    np.testing.assert_allclose(subtract_condition_means(100 * x, cond, trial=groups), 100 * a)


def test_subtract_condition_means_on_labelled_data_keeps_coordinates():
    ds, _ = mics.simulate_trials(
        n_trials=16,
        n_samples_per_trial=6,
        n_conditions=4,
        n_source=3,
        n_target=2,
        rank=1,
        random_state=0,
    )
    out = subtract_condition_means(ds, "direction")
    for name in ("X", "Y", "Z"):
        assert out[name].dims == ds[name].dims
        means = out[name].groupby(out.direction.astype(str) + "_" + out.trial_time.astype(str))
        np.testing.assert_allclose(means.mean().values, 0, atol=1e-12)
        np.testing.assert_array_equal(out[name].trial.values, ds.trial.values)
    da = subtract_condition_means(ds.X.T, "direction")  # any dimension order
    np.testing.assert_allclose(da.T.values, out.X.values)
    assert out.attrs["condition_means_subtracted"] == "direction"
    with pytest.raises(ValueError, match="not a coordinate"):
        subtract_condition_means(ds, "orientation")


# ------------------------------------------------------------------ simulation
def test_stimulus_drive_gives_spurious_communication_that_subtraction_removes():
    ds, truth = mics.simulate_trials(rank=0, n_channels=0, random_state=5)
    assert truth.rank_ == 0
    raw = mics.ReducedRankRegressionCV(cv=5).fit(ds.X, ds.Y)
    sub = subtract_condition_means(ds, "direction")
    clean = mics.ReducedRankRegressionCV(cv=5).fit(sub.X, sub.Y)
    assert raw.rank_ > 0
    assert raw.cv_results_["mean_score"][raw.rank_] > 0.02
    assert clean.rank_ == 0


def test_simulate_trials_fluctuations_follow_the_truth():
    ds, truth = mics.simulate_trials(
        n_trials=200, rank=2, n_channels=0, stimulus_strength=0.0, autocorr=0.0, random_state=1
    )
    X, Y, Z = (np.asarray(ds[k]) for k in "XYZ")
    resid = Y - truth.predict(X, Z)
    assert resid.var(0).mean() == pytest.approx(1.0, rel=0.05)  # unit noise, nothing else
    ds2, _ = mics.simulate_trials(
        n_trials=200, rank=2, stimulus_strength=0.0, autocorr=0.8, random_state=1
    )
    x = np.asarray(ds2.X)
    same = ds2.trial.values[1:] == ds2.trial.values[:-1]
    r = np.mean([np.corrcoef(x[1:][same, j], x[:-1][same, j])[0, 1] for j in range(x.shape[1])])
    assert r == pytest.approx(0.8, abs=0.03)
    across = np.corrcoef(x[1:][~same, 0], x[:-1][~same, 0])[0, 1]
    assert abs(across) < 0.2  # trials restart: no autocorrelation across boundaries
