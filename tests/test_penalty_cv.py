"""Penalties chosen by cross-validation (issue 32, part 4): ``alpha="cv"`` and the like.

The chosen values must not depend on units, a grid of one value must be the
fixed fit, the choice must be the grid's held-out minimum (and the held-out
losses right), the path's training objective must never increase, and on
low-sample simulations the chosen penalties must recover channels at least
as well as the fixed default.
"""

import warnings

import numpy as np
import pytest

from mics import MICs, simulate
from mics.core.als import MomentOperator, fit_mic_model, penalties
from mics.core.heldout import data_heldout_loss
from mics.core.scales import InputScales
from mics.core.stats import compute_moments
from mics.data import BlockedKFold
from mics.data.validation import check_alpha
from mics.model.fit import fit_from_moments
from mics.model.penalty_path import (
    ALPHA_CHANNELS_GRID,
    ALPHA_GRID,
    chosen_penalties,
    penalty_grid,
)
from mics.simulation import factor_match_score

SMALL = dict(rank=2, n_channels=1, cv=5, random_state=0, verbose=0)


@pytest.fixture(scope="module")
def data():
    # Few samples per parameter, so the penalties matter; inputs not of unit
    # variance, so "standardised" is not a no-op.
    X, Y, Z, _ = simulate(
        n_samples=200,
        n_source=30,
        n_target=20,
        n_modulators=2,
        rank=2,
        n_channels=1,
        modulation_snr=0.5,
        random_state=3,
    )
    return 3.0 * X + 1.0, 0.5 * Y - 2.0, Z * np.array([2.0, 0.3]) + 5.0


@pytest.fixture(scope="module")
def cv_fit(data):
    return MICs(alpha="cv", alpha_channels="cv", **SMALL).fit(*data)


# ----------------------------------------------------------------------------- settings
def test_check_alpha_accepts_candidates_only_where_asked():
    assert check_alpha("cv", choose=True) == "cv"
    assert check_alpha([0.1, 1], choose=True) == (0.1, 1.0)
    assert check_alpha(np.array([0.5]), choose=True) == (0.5,)
    assert check_alpha(0.3) == 0.3
    for bad in ("cv", [0.1], True, -1.0, np.inf, "0.1"):
        with pytest.raises(ValueError, match="alpha must be a non-negative finite number"):
            check_alpha(bad)
    for bad in ([], [0.1, -1.0], [np.nan], ["cv"], [[0.1]]):
        with pytest.raises(ValueError, match="alpha"):
            check_alpha(bad, choose=True)
    with pytest.raises(ValueError, match='"cv" or a sequence'):
        check_alpha("auto", "alpha_channels", choose=True)


def test_grids():
    # "cv" means the documented grids, largest first; a sequence is sorted
    # and deduplicated; a number is fixed
    np.testing.assert_array_equal(penalty_grid("cv"), ALPHA_GRID)
    np.testing.assert_array_equal(penalty_grid("cv", "alpha_channels"), ALPHA_CHANNELS_GRID)
    assert 0.05 in ALPHA_GRID and 0.25 in ALPHA_CHANNELS_GRID  # the fixed defaults
    assert np.all(np.diff(ALPHA_CHANNELS_GRID) < 0) and np.all(np.diff(ALPHA_GRID) < 0)
    np.testing.assert_array_equal(penalty_grid([0.1, 1.0, 0.1, 0.5]), [1.0, 0.5, 0.1])
    assert penalty_grid(0.25) is None and penalty_grid(None) is None


def test_bad_settings_are_refused(data):
    with pytest.raises(ValueError, match="alpha_channels must be"):
        MICs(alpha_channels="best", **SMALL).fit(*data)
    with pytest.raises(ValueError, match="alpha"):
        fit_from_moments(compute_moments(*data), 1, 1, alpha="cv")
    # moments of one block cannot be cross-validated
    fixed = dict(SMALL, alpha_channels="cv")
    with pytest.raises(ValueError, match="at least two blocks"):
        MICs(**fixed).fit_moments(compute_moments(*data))


# ----------------------------------------------------------------------------- the choice
def test_chosen_values_are_the_held_out_minimum(cv_fit):
    res = cv_fit.cv_results_
    for name, fitted in (("alpha", cv_fit.alpha_), ("alpha_channels", cv_fit.alpha_channels_)):
        grid, mean = res[name], res[f"{name}_mean_loss"]
        assert res[f"{name}_fold_loss"].shape == (grid.size, 5)
        np.testing.assert_allclose(mean, res[f"{name}_fold_loss"].mean(axis=1))
        assert res[f"{name}_best_index"] == int(np.argmin(mean))
        assert fitted == grid[np.argmin(mean)]
        # the penalty is not inert: the candidates' losses differ
        assert mean.max() - mean.min() > 1e-3
    assert chosen_penalties(cv_fit.get_params(), res) == (cv_fit.alpha_, cv_fit.alpha_channels_)


def test_held_out_losses_are_those_of_the_fold_fits(data):
    """Every fold loss of the path, recomputed from the data fold by fold.

    Fold fits run in the standard units of all samples (as the selection's):
    standardise all rows, fit on the training rows' moments (each candidate
    warm-started from the previous one) and score the held-out rows by
    their predictions. A refit of ``MICs`` on the training rows would
    standardise them again, and since the core's channel penalty is relative
    only after standardisation, land up to about 0.3% away in NSE.
    """
    X, Y, Z = data
    grid = [2.0, 0.25, 0.02]
    model = MICs(alpha_channels=grid, solver="moments", **SMALL).fit(X, Y, Z)
    res = model.cv_results_
    Xs, Ys, Zs = InputScales.from_data(X, Y, Z).standardize(X, Y, Z)
    expected = np.empty((len(grid), 5))
    for f, (train, test) in enumerate(BlockedKFold(5).split(X)):
        cm = compute_moments(Xs[train], Ys[train], Zs[train]).centered()
        op = MomentOperator(cm)
        previous = None
        for i, a in enumerate(grid):
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                fit = fit_mic_model(
                    op, 2, 1, **penalties(op, 0.05, a), n_init=0, tol=1e-6, warm_start=previous
                )
            expected[i, f] = data_heldout_loss(
                (Xs, Ys, Zs), test, cm, fit.coef, fit.modulator_coef, fit
            )
            previous = fit
    np.testing.assert_allclose(res["alpha_channels_fold_loss"], expected, rtol=1e-9)
    # the candidates are different models: the check can fail
    assert np.all(np.abs(np.diff(expected, axis=0)).max(axis=1) > 1e-3)


def test_penalised_loss_never_increases_along_the_path(cv_fit):
    # Largest penalty first: the optimum of a smaller penalty is below the
    # previous fit's objective, and the warm start begins there.
    objective = cv_fit.cv_results_["alpha_channels_penalised_loss"]
    assert objective.shape == (len(ALPHA_CHANNELS_GRID), 5)
    assert np.all(np.diff(objective, axis=0) <= 1e-9 * np.abs(objective[:-1]))
    # and it does fall: the penalty is not inert
    assert np.all(objective[-1] < objective[0])


def test_one_value_grid_is_the_fixed_fit(data):
    # sizes selected: the same route and random draws, so bitwise the same fit
    sel = dict(SMALL, rank=None, n_channels=None, max_rank=3, max_channels=2)
    fixed = MICs(alpha=0.1, alpha_channels=0.5, **sel).fit(*data)
    grid = MICs(alpha=[0.1], alpha_channels=(0.5,), **sel).fit(*data)
    assert (grid.rank_, grid.n_channels_) == (fixed.rank_, fixed.n_channels_)
    for name in ("coef_", "modulator_coef_", "channel_weights_", "source_patterns_"):
        np.testing.assert_array_equal(getattr(grid, name), getattr(fixed, name))
    for key, value in fixed.cv_results_.items():
        np.testing.assert_array_equal(grid.cv_results_[key], value)
    assert (
        (grid.alpha_, grid.alpha_channels_) == (0.1, 0.5) == (fixed.alpha_, fixed.alpha_channels_)
    )
    # sizes fixed: the fixed fit skips the folds and standardises its moments
    # instead of the data, so the same fit to rounding
    fixed = MICs(alpha=0.1, alpha_channels=0.5, **SMALL).fit(*data)
    grid = MICs(alpha=[0.1], alpha_channels=[0.5], **SMALL).fit(*data)
    for name in ("coef_", "modulator_coef_", "channel_weights_", "source_patterns_"):
        np.testing.assert_allclose(getattr(grid, name), getattr(fixed, name), rtol=1e-8)
    assert not hasattr(fixed, "cv_results_")


def test_fixed_sizes_use_the_folds_for_the_penalties_only(cv_fit):
    assert (cv_fit.rank_, cv_fit.n_channels_) == (2, 1)
    assert not any(k.startswith(("rank", "n_channels")) for k in cv_fit.cv_results_)
    assert cv_fit.alpha_ in ALPHA_GRID and cv_fit.alpha_channels_ in ALPHA_CHANNELS_GRID
    np.testing.assert_array_equal(cv_fit.cv_results_["alpha_rank"], 2)


def test_no_channel_keeps_the_provisional_penalty(data):
    X, Y, Z = data
    rng = np.random.default_rng(0)
    model = MICs(alpha_channels=[1.0, 0.2, 0.01], n_channels=0, rank=2, cv=5, verbose=0).fit(
        X, Y, rng.standard_normal(Z.shape)
    )
    assert model.alpha_channels_ == 0.2  # the candidate nearest the default 0.25
    assert np.isnan(model.cv_results_["alpha_channels_mean_loss"]).all()


def test_selected_sizes_with_chosen_penalties(data):
    model = MICs(alpha="cv", alpha_channels="cv", max_rank=3, max_channels=2, cv=5, verbose=0).fit(
        *data
    )
    res = model.cv_results_
    assert "rank_mean_loss" in res and "n_channels_mean_loss" in res
    # alpha is scored at each candidate's best rank
    assert set(res["alpha_rank"]) <= set(range(4))
    if model.n_channels_:
        assert np.isfinite(res["alpha_channels_mean_loss"]).all()


# ----------------------------------------------------------------------------- units
@pytest.mark.parametrize("solver", ["moments", "data"])
def test_chosen_penalties_do_not_depend_on_units(data, cv_fit, solver):
    X, Y, Z = data
    sx, sy, sz = 1e3, 2e-3, np.array([50.0, 1e-2])
    ref = cv_fit if solver == "moments" else None
    if ref is None or cv_fit.solver_ != solver:
        ref = MICs(alpha="cv", alpha_channels="cv", solver=solver, **SMALL).fit(X, Y, Z)
    new = MICs(alpha="cv", alpha_channels="cv", solver=solver, **SMALL).fit(X * sx, Y * sy, Z * sz)
    assert (new.alpha_, new.alpha_channels_) == (ref.alpha_, ref.alpha_channels_)
    for key in ("alpha_fold_loss", "alpha_channels_fold_loss"):
        np.testing.assert_allclose(new.cv_results_[key], ref.cv_results_[key], rtol=1e-8)
    np.testing.assert_allclose(new.source_patterns_, ref.source_patterns_, rtol=1e-8, atol=1e-10)
    np.testing.assert_allclose(new.target_patterns_, ref.target_patterns_, rtol=1e-8, atol=1e-10)
    # c . (z / s) = (c / s) . z: the modulator patterns map by 1 / s, renormalised
    C = ref.modulator_patterns_ / sz[:, None]
    C /= np.linalg.norm(C, axis=0)
    np.testing.assert_allclose(new.modulator_patterns_, C, rtol=1e-8, atol=1e-10)
    np.testing.assert_allclose(new.coef_, ref.coef_ * sy / sx, rtol=1e-8, atol=1e-12)


# ----------------------------------------------------------------------------- recovery
def _hard_regime(geometry, seed):
    """A T = 300 data set of the "hard" regime of ``studies/validation/penalties.py``."""
    return simulate(
        n_samples=300,
        n_source=150,
        n_target=100,
        n_modulators=2,
        rank=3,
        n_channels=2,
        geometry=geometry,
        modulation_snr=0.3,
        source_autocorr=0.5,
        modulator_kind="locomotion",
        modulator_autocorr=0.9,
        random_state=seed,
    )


@pytest.mark.slow
def test_low_sample_recovery_with_chosen_penalties():
    """At T = 300 for p = 150, q = 100, the chosen penalty recovers channels as well or better.

    The "hard" regime of ``studies/validation/penalties.py`` (autocorrelated
    sources, a running state with bouts, modulation SNR 0.3), one data set
    per geometry. There, over 12 data sets per T, the median factor match
    of ``alpha_channels=0.25`` (the earlier default) is 0.649 at T = 300
    (v0.1: 0.678) and "cv" is at least 0.25's on 11/12
    (results/penalties/). Measured here with 5 folds:
    equal on two data sets (0.25 is chosen), better by 0.007 and 0.027 on
    the others.
    """
    better = []
    for i, geometry in enumerate(["reshape", "private_source", "private_target", "new"]):
        seed = 300000 + 100 + i
        X, Y, Z, truth = _hard_regime(geometry, seed)
        fms = {}
        for alpha_channels in (0.25, "cv"):
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                model = MICs(
                    rank=3,
                    n_channels=2,
                    alpha_channels=alpha_channels,
                    cv=5,
                    random_state=seed,
                    verbose=0,
                ).fit(X, Y, Z)
            fms[alpha_channels] = factor_match_score(truth, model)
        assert fms["cv"] >= fms[0.25] - 1e-9, (geometry, fms)
        better.append(fms["cv"] - fms[0.25])
    assert sum(better) > 0.02


# Factor match scores of v0.1 (commit bb0100c, its default settings) on the
# twelve T = 300 data sets of the "hard" regime of
# studies/validation/penalties.py (seeds 300100-300111), from
# results/penalties/penalties_runs.csv: the reference the default must meet.
V01_HARD_T300 = (
    0.6797, 0.6759, 0.8975, 0.9145, 0.6272, 0.5107,
    0.8821, 0.8656, 0.3775, 0.4947, 0.8197, 0.4790,
)  # fmt: skip


def test_default_low_sample_recovery_at_least_v01():
    """Issue 32: the default penalties recover channels at T = 300 at least as well as v0.1.

    The data sets v0.1 was scored on (p = 150, q = 100, m = 2, rank 3,
    K = 2, autocorrelated sources, a running state with bouts, modulation
    SNR 0.3). The earlier default ``alpha_channels=0.25`` fails this test
    (median 0.649 against v0.1's 0.678, lower on 10 of 12 data sets);
    the default 0.125 is v0.1's effective penalty in standard units.
    """
    scores = []
    for i in range(len(V01_HARD_T300)):
        geometry = ["reshape", "private_source", "private_target", "new"][i % 4]
        seed = 300000 + 100 + i
        X, Y, Z, truth = _hard_regime(geometry, seed)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            model = MICs(rank=3, n_channels=2, random_state=seed, verbose=0).fit(X, Y, Z)
        scores.append(factor_match_score(truth, model))
    scores, v01 = np.array(scores), np.array(V01_HARD_T300)
    assert np.median(scores) >= np.median(v01), (scores.round(4), v01)
    assert np.mean(scores >= v01 - 1e-3) >= 0.75, (scores.round(4), v01)
