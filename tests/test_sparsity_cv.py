"""Sparsity chosen by cross-validation inside MICs (issue 33, part 2): ``sparsity="cv"``.

The path must be scored on the folds of the rank and channel selection
(its dense end is the selection's own fold fit), choose a weight that finds
planted members, keep ``K = 0`` on data without a channel, agree between
the moment path, the data path and chunked inputs, and not depend on units.
"""

import warnings

import numpy as np
import pytest
from sklearn.utils.estimator_checks import check_estimator

import mics
from mics.core.als import MomentOperator, fit_mic_model, penalties
from mics.core.heldout import data_heldout_loss
from mics.core.scales import InputScales
from mics.core.stats import compute_moments
from mics.data import BlockedKFold
from mics.model.sparsity_path import SPARSITY_GRID, one_sem_sparser, sparsity_grid

# Planted members: 6 of 60 source and 8 of 40 target neurons carry the channel.
PLANTED = dict(
    n_samples=1500,
    n_source=60,
    n_target=40,
    n_modulators=1,
    rank=2,
    n_channels=1,
    geometry="random",
    modulation_snr=0.5,
    source_members=0.1,
    target_members=0.2,
)
FAST = dict(cv=5, verbose=0, random_state=0)
SMALL_GRID = (0.0, 4.0, 16.0, 64.0)  # dense, some extra neurons, the members, empty


def _precision_recall(selected, truth):
    tp = np.sum(selected & truth)
    return tp / max(selected.sum(), 1), tp / max(truth.sum(), 1)


@pytest.fixture(scope="module")
def planted():
    return mics.simulate(random_state=1, **PLANTED)


@pytest.fixture(scope="module")
def selected(planted):
    """Rank, channels and sparsity all chosen on the same folds (the full grid)."""
    X, Y, Z, _ = planted
    return mics.MICs(sparsity="cv", max_rank=3, max_channels=2, **FAST).fit(X, Y, Z)


# ----------------------------------------------------------------------------- the choice
def test_chosen_sparsity_recovers_the_planted_members(planted, selected):
    _, _, _, truth = planted
    model, res = selected, selected.cv_results_
    assert (model.rank_, model.n_channels_) == (2, 1)
    np.testing.assert_array_equal(res["sparsity"], SPARSITY_GRID)
    assert model.sparsity_ > 0 and model.sparsity_ == res["sparsity"][res["sparsity_best_index"]]
    for attr, members in (
        ("source_patterns_", truth.source_members_),
        ("target_patterns_", truth.target_members_),
    ):
        precision, recall = _precision_recall(getattr(model, attr)[:, 0] != 0, members[:, 0])
        assert precision >= 0.9 and recall >= 0.8, (attr, precision, recall)
    # the rule, recomputed: the largest weight within one SEM of the lowest mean
    mean, sem = res["sparsity_mean_loss"], res["sparsity_sem_loss"]
    np.testing.assert_allclose(mean, res["sparsity_fold_loss"].mean(axis=1))
    lowest = int(np.argmin(mean))
    assert res["sparsity_lowest_index"] == lowest
    assert res["sparsity_best_index"] == np.flatnonzero(mean <= mean[lowest] + sem[lowest]).max()
    # and it matters: the held-out minimum keeps extra neurons, the choice fewer
    n_source = res["sparsity_n_source"]
    assert n_source[res["sparsity_best_index"]] < n_source[lowest] <= n_source[0] == 60
    assert np.all(np.diff(res["sparsity_n_source"]) <= 0)  # sparser along the path
    assert res["sparsity_fold_n_target"].shape == (len(SPARSITY_GRID), 5)
    np.testing.assert_array_equal(res["sparsity_n_modulator"][res["sparsity_n_source"] > 0], 1)


def test_dense_end_of_the_path_is_the_selections_fold_fit(selected):
    # The selection's K = 1 fold fit and the path's sparsity-0 fit are the
    # same fit (HOSVD start, no restarts) of the same fold moments.
    res = selected.cv_results_
    K = int(np.flatnonzero(res["n_channels"] == selected.n_channels_)[0])
    np.testing.assert_allclose(
        res["sparsity_fold_loss"][0], res["n_channels_fold_loss"][K], rtol=0, atol=1e-8
    )


def test_path_losses_are_those_of_the_fold_fits(planted):
    """The dense end recomputed fold by fold from the data, and a sparse point differs."""
    X, Y, Z, _ = planted
    model = mics.MICs(rank=2, n_channels=1, sparsity=[0.0, 16.0], solver="moments", **FAST)
    res = model.fit(X, Y, Z).cv_results_
    Xs, Ys, Zs = InputScales.from_data(X, Y, Z).standardize(X, Y, Z)
    dense, sparse = np.empty(5), np.empty(5)
    for f, (train, test) in enumerate(BlockedKFold(5).split(X)):
        cm = compute_moments(Xs[train], Ys[train], Zs[train]).centered()
        op = MomentOperator(cm)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            pen = penalties(op, model.alpha, model.alpha_channels)  # the estimator's defaults
            fit = fit_mic_model(op, 2, 1, **pen, n_init=0, tol=1e-6)
            # the sparse candidate: group sweeps from the fold's dense fit
            pen16 = penalties(op, model.alpha, model.alpha_channels, sparsity=16.0)
            fit16 = fit_mic_model(op, 2, 1, **pen16, n_init=0, tol=1e-6, dense_start=fit)
        dense[f] = data_heldout_loss((Xs, Ys, Zs), test, cm, fit.coef, fit.modulator_coef, fit)
        sparse[f] = data_heldout_loss(
            (Xs, Ys, Zs), test, cm, fit16.coef, fit16.modulator_coef, fit16
        )
    np.testing.assert_allclose(res["sparsity_fold_loss"][0], dense, rtol=0, atol=1e-8)
    np.testing.assert_allclose(res["sparsity_fold_loss"][1], sparse, rtol=0, atol=1e-8)
    assert np.all(np.abs(res["sparsity_fold_loss"][1] - dense) > 1e-5)  # the check can fail


def test_with_alpha_channels_chosen_too(planted):
    # alpha_channels is chosen on the dense model first (the same engine, the
    # same fold fit at one candidate), then the sparsity path runs at it
    X, Y, Z, _ = planted
    model = mics.MICs(rank=2, n_channels=1, alpha_channels=[0.25], sparsity=[0.0, 16.0], **FAST)
    res = model.fit(X, Y, Z).cv_results_
    np.testing.assert_array_equal(res["alpha_channels_fold_loss"][0], res["sparsity_fold_loss"][0])
    assert (model.alpha_channels_, model.sparsity_) == (0.25, 16.0)


def test_no_channel_keeps_k0_and_skips_the_path():
    # the channel count is selected on the dense model, as without sparsity
    # (10 of 10 such null data sets kept K = 0; three here)
    for seed in range(3):
        X, Y, Z, _ = mics.simulate(
            n_samples=600, n_source=30, n_target=20, rank=2, n_channels=0, random_state=100 + seed
        )
        model = mics.MICs(rank=2, sparsity="cv", max_channels=2, cv=5, verbose=0).fit(X, Y, Z)
        assert model.n_channels_ == 0, seed
        assert np.isnan(model.cv_results_["sparsity_mean_loss"]).all()  # not run
        assert model.sparsity_ == 0.0 and model.source_patterns_.shape == (30, 0)


# ----------------------------------------------------------------------------- seams
@pytest.fixture(scope="module")
def moments_fit(planted):
    X, Y, Z, _ = planted
    return mics.MICs(rank=2, n_channels=1, sparsity=SMALL_GRID, solver="moments", **FAST).fit(
        X, Y, Z
    )


def _same_path(a, b, rtol):
    ra, rb = a.cv_results_, b.cv_results_
    np.testing.assert_allclose(ra["sparsity_fold_loss"], rb["sparsity_fold_loss"], rtol=rtol)
    for role in ("source", "target", "modulator"):
        np.testing.assert_array_equal(ra[f"sparsity_fold_n_{role}"], rb[f"sparsity_fold_n_{role}"])
    assert a.sparsity_ == b.sparsity_
    for name in ("source_patterns_", "target_patterns_"):
        np.testing.assert_array_equal(getattr(a, name) != 0, getattr(b, name) != 0)


def test_moment_data_and_chunked_paths_agree(planted, moments_fit):
    X, Y, Z, _ = planted
    params = dict(rank=2, n_channels=1, sparsity=SMALL_GRID, **FAST)
    data = mics.MICs(solver="data", **params).fit(X, Y, Z)
    res = moments_fit.cv_results_
    # the grid spans the dense fit, extra neurons and an emptied channel
    assert res["sparsity_n_source"][0] == 60 and res["sparsity_n_source"][-1] == 0
    assert 0 < moments_fit.sparsity_ < SMALL_GRID[-1]
    _same_path(moments_fit, data, rtol=1e-6)
    np.testing.assert_allclose(data.source_patterns_, moments_fit.source_patterns_, atol=1e-6)
    da = pytest.importorskip("dask.array")
    chunked = [da.from_array(a, chunks=(400, -1)) for a in (X, Y, Z)]
    lazy = mics.MICs(**params).fit(*chunked)
    _same_path(moments_fit, lazy, rtol=1e-8)


def test_invariant_to_units(planted, moments_fit):
    X, Y, Z, _ = planted
    other = mics.MICs(**moments_fit.get_params()).fit(X * 250.0 + 3.0, Y * 0.02 - 1.0, Z * 7.0)
    _same_path(moments_fit, other, rtol=1e-7)
    np.testing.assert_allclose(other.source_patterns_, moments_fit.source_patterns_, atol=1e-7)


# ----------------------------------------------------------------------------- interfaces
def test_choose_sparsity_is_the_estimator_path(planted, moments_fit):
    from mics.workflows import choose_sparsity

    X, Y, Z, _ = planted
    est = mics.MICs(rank=2, n_channels=1, solver="moments", cv=5, random_state=0)
    res = choose_sparsity(est, X, Y, Z, grid=SMALL_GRID[::-1])
    ref = moments_fit.cv_results_
    np.testing.assert_array_equal(res["sparsity"], SMALL_GRID[::-1])  # largest first, as before
    np.testing.assert_array_equal(res["fold_loss"], ref["sparsity_fold_loss"][::-1])
    np.testing.assert_array_equal(res["n_source"], ref["sparsity_n_source"][::-1])
    assert res["sparsity_"] == moments_fit.sparsity_ == res["sparsity"][res["best_index"]]
    assert res["model"].sparsity_ == res["sparsity_"]


@pytest.mark.filterwarnings("ignore::sklearn.exceptions.SkipTestWarning")  # array API
def test_settings_are_checked():
    X, Y, Z, _ = mics.simulate(n_samples=100, n_source=5, n_target=4, random_state=0)
    for bad in ("auto", [], [1.0, -1.0], [np.nan], ["cv"], -1.0):
        with pytest.raises(ValueError, match="sparsity must be"):
            mics.MICs(rank=1, n_channels=1, sparsity=bad).fit(X, Y, Z)
    check_estimator(mics.MICs(rank=1, sparsity="cv"))  # clone, get/set_params accept it
    np.testing.assert_array_equal(sparsity_grid([4, 0, 4, 1]), [0.0, 1.0, 4.0])
    assert sparsity_grid(2.0) is None and sparsity_grid("cv")[0] == 0.0
    # the rule on a table: 3 is the sparsest within one SEM of the lowest (index 1)
    assert one_sem_sparser([1.0, 0.5, 0.55, 0.58, 0.7], [0.1, 0.1, 0.1, 0.1, 0.1]) == 3


def test_plot_sparsity_path(selected):
    import matplotlib

    matplotlib.use("Agg")
    from mics.plotting import plot_sparsity_path

    res = selected.cv_results_
    ax, counts = plot_sparsity_path(selected)
    main = [line for line in ax.get_lines() if line.get_label() == "held-out NSE"][0]
    np.testing.assert_allclose(main.get_ydata(), res["sparsity_mean_loss"])
    assert [t.get_text() for t in ax.get_xticklabels()] == [f"{g:g}" for g in SPARSITY_GRID]
    star = [line for line in ax.get_lines() if line.get_marker() == "*"][0]
    assert star.get_xdata()[0] == res["sparsity_best_index"]
    drawn = {line.get_label(): line.get_ydata() for line in counts.get_lines()}
    assert set(drawn) == {"source neurons", "target neurons"}  # one modulator: not penalised
    np.testing.assert_allclose(drawn["source neurons"], res["sparsity_n_source"])
    with pytest.raises(ValueError, match="no sparsity path"):
        plot_sparsity_path({"rank": res["rank"]})
    null = {**res, "sparsity_mean_loss": np.full(len(SPARSITY_GRID), np.nan)}
    with pytest.raises(ValueError, match="no channel was selected"):
        plot_sparsity_path(null)


def test_bootstrap_refits_at_the_chosen_sparsity(monkeypatch):
    # the bootstrap is conditional on the selected model: each resample refits
    # at sparsity_ (and the chosen penalties), it does not rerun the path
    from mics.workflows import inference

    X, Y, Z, _ = mics.simulate(n_samples=600, n_source=20, n_target=12, rank=1, n_channels=1,
                               source_members=0.3, target_members=0.4, modulation_snr=0.5,
                               geometry="random", random_state=1)  # fmt: skip
    model = mics.MICs(rank=1, n_channels=1, sparsity=(0.0, 2.0, 8.0), alpha_channels="cv",
                      cv=4, random_state=0).fit(X, Y, Z)  # fmt: skip
    seen = []
    real = inference._boot_fit

    def spy(fixed, problem, seed):
        seen.append(fixed.get_params())
        return real(fixed, problem, seed)

    monkeypatch.setattr(inference, "_boot_fit", spy)
    mics.bootstrap_channels(model, X, Y, Z, n_boot=2, random_state=0)
    assert len(seen) == 2
    for params in seen:
        assert params["sparsity"] == model.sparsity_
        assert params["alpha_channels"] == model.alpha_channels_
        assert params["alpha"] == model.alpha  # a fixed setting stays as given
        assert (params["rank"], params["n_channels"]) == (1, 1)
