"""The conditional null of the modulation test, its reduced model, and the graded verdicts.

The null keeps the part of the modulator that the session's drift and the
source predict (``mics.core.conditioning``, ``Problem.conditioned``) and
permutes the rest; the reduced model removes a piecewise-linear additive
effect of the modulator. Checked against direct computations; the verdicts
against the effect sizes they must agree with.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from numpy.testing import assert_allclose

import mics
from mics.core.conditioning import (
    conditional_ridge,
    drift_basis,
    hinge_knots,
    modulator_hinges,
    session_position,
)
from mics.data.problem import make_problem
from mics.workflows.inference import ModulationTest, result_sentence


def test_session_position_per_trial():
    groups = np.repeat([7, 3, 9, 1], [5, 3, 4, 2])  # trial ids in order of appearance
    pos = session_position(groups.size, groups)
    assert_allclose(np.unique(pos), [0, 1 / 3, 2 / 3, 1])
    assert np.all(np.diff(pos) >= 0)
    for g in np.unique(groups):
        assert np.ptp(pos[groups == g]) == 0  # constant within a trial
    assert_allclose(session_position(5), np.linspace(0, 1, 5))


def test_drift_basis_spans_constants_and_trends():
    pos = np.linspace(0, 1, 200)
    basis = drift_basis(pos, 6)
    assert basis.shape == (200, 7)
    assert_allclose(basis[:, 0], 1.0)
    assert_allclose(basis[:, 1:].sum(axis=1), 1.0)  # B-splines: a partition of unity
    # a cubic trend lies in the span exactly
    trend = 2 - 3 * pos + pos**3
    coef = np.linalg.lstsq(basis, trend, rcond=None)[0]
    assert_allclose(basis @ coef, trend, atol=1e-10)
    assert_allclose(drift_basis(pos, 1), np.ones((200, 1)))
    with pytest.raises(ValueError, match="at least 1"):
        drift_basis(pos, 0)


def test_hinges_of_a_mostly_zero_modulator():
    rng = np.random.default_rng(0)
    running = np.where(rng.uniform(size=500) < 0.8, 0.0, rng.exponential(3.0, 500))
    pupil = rng.standard_normal(500)
    Z = np.column_stack([running, pupil])
    knots = hinge_knots(Z)
    # the running speed's quantiles at 0 merge and drop: knots only inside bursts
    assert np.all(knots[0] > 0) and knots[0].size <= 1
    assert knots[1].size == 4
    H = modulator_hinges(Z, knots)
    assert H.shape == (500, knots[0].size + 4)
    assert_allclose(H[:, -1], np.maximum(pupil - knots[1][-1], 0.0))


def _design(seed=0, n=600, p=8, m=2):
    rng = np.random.default_rng(seed)
    groups = np.repeat(np.arange(n // 20), 20)
    X = rng.standard_normal((n, p)) * rng.uniform(0.5, 3.0, p)
    pos = session_position(n, groups)
    Z = X[:, :3] @ rng.standard_normal((3, m)) + 2.0 * pos[:, None] + rng.standard_normal((n, m))
    return X, Z, groups


def test_conditional_ridge_matches_a_direct_fit():
    X, Z, groups = _design()
    n, p = X.shape
    G = drift_basis(session_position(n, groups), 5)
    A = np.column_stack([G, X, Z])
    folds = np.array_split(np.arange(n), 5)
    fit = conditional_ridge(
        A.T @ A, n, [(A[f].T @ A[f], f.size) for f in folds], G.shape[1], p, alphas=[0.3]
    )
    # direct: regress G out of X and Z, standardise X, ridge with penalty 0.3 n
    Xr = X - G @ np.linalg.lstsq(G, X, rcond=None)[0]
    Zr = Z - G @ np.linalg.lstsq(G, Z, rcond=None)[0]
    sd = np.sqrt((Xr**2).mean(axis=0))
    Xs = Xr / sd
    beta = np.linalg.solve(Xs.T @ Xs + 0.3 * n * np.eye(p), Xs.T @ Zr) / sd[:, None]
    assert_allclose(fit.coef_source, beta, rtol=1e-8, atol=1e-12)
    fitted = G @ fit.coef_drift + X @ fit.coef_source
    direct = Z - (Zr - Xr @ beta)
    assert_allclose(fitted, direct, atol=1e-9)
    assert fit.alpha == 0.3
    # the drift's share: adjusted R^2 of Z on the basis (units: the samples here)
    # pooled over the modulator's columns, each in units of its own spread
    Zc = Z - Z.mean(axis=0)
    k = np.linalg.matrix_rank(G) - 1
    r2 = 1 - ((Zr / Zc.std(axis=0)) ** 2).sum() / ((Zc / Zc.std(axis=0)) ** 2).sum()
    assert_allclose(fit.r2_drift, 1 - (1 - r2) * (n - 1) / (n - k - 1), rtol=1e-8)
    assert 0.5 < fit.r2_source < 1  # the source predicts most of what the drift leaves


def test_conditional_ridge_chooses_little_shrinkage_where_the_source_predicts():
    # With many samples per source neuron the least-penalised candidate within one
    # standard error of the best is near ordinary least squares: shrinkage would
    # leave predictable parts in the permuted residual.
    X, Z, groups = _design(n=2000)
    Y = np.random.default_rng(9).standard_normal((X.shape[0], 2))
    problem = make_problem(X, Y, Z, groups=groups)
    _, fit = problem.conditioned(problem.splits(5), source=True, drift_df=5)
    assert fit.alpha <= 1e-3


def test_conditioned_problem_permutes_the_residual_only():
    X, Z, groups = _design(seed=1)
    Y = np.random.default_rng(1).standard_normal((X.shape[0], 3))
    problem = make_problem(X, Y, Z, groups=groups)
    cond, fit = problem.conditioned(problem.splits(5), source=True, drift_df=5)
    index = np.random.default_rng(2).permutation(X.shape[0])
    # The permuted residual, refitted like the recording's: what the drift basis
    # and the source predict of it is taken out again, so a null copy's
    # residual is as (nearly) orthogonal to them as the recorded one.
    # (with trials, the source's design holds each sample and its trial's mean)
    G = drift_basis(session_position(X.shape[0], groups), 5)
    _, codes = np.unique(groups, return_inverse=True)
    means = np.array([X[codes == c].mean(axis=0) for c in range(codes.max() + 1)])[codes]
    S = np.column_stack([X, means])
    design = np.column_stack([G, S])
    moved = (Z - cond.Z_fitted)[index]
    expected = moved - design @ np.vstack(fit.coefficients(G.T @ moved, S.T @ moved))
    null = cond.permuted(index).Z
    assert_allclose(null, cond.Z_fitted + expected, atol=1e-10)
    recorded_left = np.abs(design.T @ (Z - cond.Z_fitted)).max()
    assert np.abs(design.T @ (null - cond.Z_fitted)).max() < 10 * recorded_left + 1e-8
    assert np.abs(design.T @ moved).max() > 100 * recorded_left  # before the refit: not so
    rolled = np.roll(Z - cond.Z_fitted, 17, axis=0)
    rolled -= design @ np.vstack(fit.coefficients(G.T @ rolled, S.T @ rolled))
    assert_allclose(cond.rolled(17).Z, cond.Z_fitted + rolled, atol=1e-10)
    assert_allclose(problem.permuted(index).Z, Z[index])  # unconditioned: the whole modulator

    # A permuted copy keeps the modulator's dependence on the source: its R^2 on
    # X stays near the recording's, where a whole permutation loses it.
    def r2(z):
        design = np.column_stack([np.ones(len(X)), X])
        res = z - design @ np.linalg.lstsq(design, z, rcond=None)[0]
        return 1 - res.var() / z.var()

    assert abs(r2(cond.permuted(index).Z) - r2(Z)) < 0.1
    assert r2(problem.permuted(index).Z) < 0.1 < r2(Z)


def test_conditioned_on_dask_matches_memory():
    da = pytest.importorskip("dask.array")
    X, Z, groups = _design(seed=3)
    Y = np.random.default_rng(3).standard_normal((X.shape[0], 2))
    mem = make_problem(X, Y, Z, groups=groups)
    lazy = make_problem(
        da.from_array(X, chunks=(130, -1)),
        da.from_array(Y, chunks=(130, -1)),
        da.from_array(Z, chunks=(130, -1)),
        groups=groups,
    )
    splits = mem.splits(5)
    a, fa = mem.conditioned(splits)
    b, fb = lazy.conditioned(splits)
    assert_allclose(np.asarray(b.Z_fitted), a.Z_fitted, atol=1e-10)
    assert_allclose(fb.r2_source, fa.r2_source, rtol=1e-8)
    index = np.random.default_rng(4).permutation(X.shape[0])
    assert_allclose(np.asarray(b.permuted(index).Z), a.permuted(index).Z, atol=1e-10)
    # the nonlinear reduced model agrees too
    assert_allclose(
        np.asarray(lazy.residualized(nonlinear=True).Y),
        mem.residualized(nonlinear=True).Y,
        atol=1e-10,
    )


def test_nonlinear_reduced_model_removes_a_saturating_additive_effect():
    rng = np.random.default_rng(5)
    n = 2000
    Z = rng.standard_normal((n, 1))
    Y = np.tanh(2 * Z) + 0.3 * Z**2 + 0.1 * rng.standard_normal((n, 2))
    problem = make_problem(rng.standard_normal((n, 3)), Y, Z)
    linear = np.asarray(problem.residualized().Y)
    hinge = np.asarray(problem.residualized(nonlinear=True).Y)
    assert hinge.var() < 0.2 * linear.var()
    H = modulator_hinges(Z, hinge_knots(Z))
    assert np.abs(H.T @ hinge).max() < 1e-8 * n  # orthogonal to the basis in sample


# ------------------------------------------------------------------ graded verdicts


def _test(p, effect, interval, k=1, gain=0.2):
    return ModulationTest(
        statistic=0.01,
        selected_improvement=0.01 if k else 0.0,
        null_distribution=np.zeros(99),
        p_value=p,
        n_channels=k,
        shifts=np.zeros(99, dtype=int),
        effect_size=effect,
        effect_interval=np.asarray(interval, dtype=float),
        effect_resampling="trial",
        baseline_gain=gain,
    )


@pytest.mark.parametrize(
    ("p", "effect", "interval", "k", "verdict"),
    [
        (0.01, 0.02, [0.005, 0.03], 1, "gating"),
        (0.01, 0.02, [np.nan, np.nan], 1, "gating"),  # no bootstrap: the estimate decides
        (0.01, -0.0009, [-0.011, 0.0062], 0, "pairing"),  # results/park2024, before
        (0.005, -0.0005, [-0.0057, 0.0048], 0, "pairing"),  # the Semedo PCs form, before
        (0.01, 0.004, [-0.002, 0.01], 1, "pairing"),  # positive, but the interval covers 0
        (0.3, 0.02, [0.005, 0.03], 1, "none"),
        (0.3, -0.01, [-0.02, 0.0], 0, "none"),
    ],
)
def test_verdict_agrees_with_the_effect_size(p, effect, interval, k, verdict):
    test = _test(p, effect, interval, k)
    assert test.verdict() == verdict
    text = result_sentence(test)
    assert "gating is present" not in text
    if verdict == "gating":
        assert text.startswith("Gating detected")
    elif verdict == "pairing":
        assert text.startswith("The modulator's pairing with the source and target matters")
        assert "no gating channel predicts held-out activity" in text
        assert "Gating detected" not in text
    else:
        assert text.startswith("No modulation detected")


def test_relative_effect_is_a_share_of_the_communicated_variance():
    test = _test(0.01, 0.02, [0.01, 0.03], gain=0.25)
    assert test.relative_effect == pytest.approx(0.08)
    assert "8% of the variance the baseline communicates" in test.summary()
    assert np.isnan(_test(0.01, 0.02, [0.01, 0.03], gain=np.nan).relative_effect)


def test_test_reports_what_the_null_kept():
    data, _ = mics.simulate_null_family(
        "nonlinear",
        size=dict(n_trials=40, n_samples_per_trial=12, n_source=8, n_target=6, n_modulators=1),
        random_state=0,
        source_drive=0.5,
    )
    est = mics.MICs(cv=4, max_channels=1, n_init=1, verbose=0, random_state=0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        test = mics.test_modulation(
            est, data.X, data.Y, data.Z, n_permutations=4, n_boot=0, verbose=0, random_state=0
        )
        drift_only = mics.test_modulation(
            est, data.X, data.Y, data.Z, n_permutations=4, n_boot=0, verbose=0,
            random_state=0, condition_on="drift",
        )  # fmt: skip
    assert test.condition_on == ("source", "drift")
    assert 0.3 < test.modulator_r2_source < 1
    assert "The null kept the modulator's predictable part" in test.summary()
    assert drift_only.condition_on == ("drift",) and np.isnan(drift_only.modulator_r2_source)
    plain = drift_only
    # same observed statistic, another null
    assert test.statistic == plain.statistic
    assert not np.array_equal(test.null_distribution, plain.null_distribution)
    # the baseline's held-out gain is measured on the recorded target (none at rank 0)
    assert np.isnan(test.baseline_gain) == (test.rank == 0)
    assert test.rank == 0 or test.baseline_gain > 0
    with pytest.raises(ValueError, match="condition_on"):
        mics.test_modulation(est, data.X, data.Y, data.Z, n_permutations=2, condition_on="time")
    with pytest.raises(ValueError, match="additive"):
        mics.test_modulation(est, data.X, data.Y, data.Z, n_permutations=2, additive="cubic")


def test_source_map_diagnostic_sees_a_nonlinear_map():
    from mics.workflows.inference import reduced_problem

    est = mics.MICs(cv=5, verbose=0, random_state=0)
    r2 = {}
    for family in ("nonlinear", "linear"):
        data, _ = mics.simulate_null_family(family, size="park", random_state=0)
        problem = make_problem(data.X, data.Y, data.Z, groups=data.trial.values)
        reduced = reduced_problem(
            est, problem, additive="nonlinear", source_map="quadratic",
            condition_on=("source", "drift"), drift_df=5,
        )  # fmt: skip
        r2[family] = reduced.source_map_r2
    # u + 0.3 u^2 on the communicated components: a few percent of the variance
    assert r2["nonlinear"] > 0.02 > r2["linear"]


# -------------------------------------------------- a modulator carried by a few trials


def test_effective_units_count_the_trials_that_carry_the_modulator():
    from mics.workflows.inference import modulator_units

    rng = np.random.default_rng(6)
    groups = np.repeat(np.arange(20), 10)
    X, Y = rng.standard_normal((200, 4)), rng.standard_normal((200, 3))
    Z = np.zeros((200, 2))
    for trial in (2, 9, 15):  # three trials carry it, alike (same squares, shuffled)
        Z[groups == trial] = rng.permutation(np.r_[np.full(5, 3.0), np.full(5, -3.0)])[:, None]
    # standardised as the package does, counted directly
    centred = (Z - Z.mean(0)) / Z.std(0)
    e = np.bincount(groups, weights=(centred**2).sum(1))
    expected = e.sum() ** 2 / (e**2).sum()
    got = modulator_units(make_problem(X, Y, Z, groups=groups))
    assert got["modulator_units"] == 20 and got["modulator_unit"] == "trial"
    assert got["modulator_effective_units"] == pytest.approx(expected, rel=1e-12)
    assert expected == pytest.approx(3.0)  # balanced: the mean is 0, the rest stay silent
    # units change nothing; every trial alike gives all of them
    scaled = np.column_stack([1e3 * Z[:, 0], -1e-3 * Z[:, 1] + 5.0])
    again = modulator_units(make_problem(X, Y, scaled, groups=groups))
    assert again["modulator_effective_units"] == pytest.approx(expected, rel=1e-9)
    even = np.tile(np.r_[np.ones(5), -np.ones(5)], 20)[:, None]
    assert modulator_units(make_problem(X, Y, even, groups=groups))[
        "modulator_effective_units"
    ] == pytest.approx(20)
    # without trial ids: blocks of round(sqrt(n)) = 14 samples
    blocks = modulator_units(make_problem(X, Y, Z))
    assert blocks["modulator_unit"] == "block" and blocks["modulator_units"] == 15


@pytest.mark.filterwarnings("ignore:.*look like artifacts")  # the heavy tails, on purpose
def test_effective_units_of_dask_inputs_match_memory():
    da = pytest.importorskip("dask.array")
    from mics.workflows.inference import modulator_units

    X, Z, groups = _design(seed=8)
    Z = Z * np.random.default_rng(8).pareto(1.5, size=(Z.shape[0], 1))  # heavy tails
    Y = np.random.default_rng(8).standard_normal((X.shape[0], 2))
    mem = modulator_units(make_problem(X, Y, Z, groups=groups))
    lazy = modulator_units(
        make_problem(*(da.from_array(a, chunks=(130, -1)) for a in (X, Y, Z)), groups=groups)
    )
    assert lazy["modulator_units"] == mem["modulator_units"]
    assert lazy["modulator_effective_units"] == pytest.approx(
        mem["modulator_effective_units"], rel=1e-10
    )


@pytest.mark.parametrize(
    ("effective", "r2_source", "said"),
    [(9.0, 0.8, "caveat"), (9.0, 0.1, "count"), (9.0, np.nan, "count"), (150.0, 0.8, "")],
)
def test_a_modulator_in_few_trials_that_the_source_predicts_is_named(effective, r2_source, said):
    test = _test(0.01, 0.02, [0.01, 0.03])
    test.modulator_effective_units, test.modulator_units = effective, 400
    test.modulator_unit, test.modulator_r2_source = "trial", r2_source
    text = test.summary()
    assert ("sits in about 9 of the 400 trials" in text) == (said != "")
    assert ("over-rejected in simulations" in text) == (said == "caveat")


def test_bursty_null_family_draws_the_caveat_and_a_linear_one_does_not():
    # The two ends of results/null_families: a bursty modulator that drives
    # the source (few trials carry it) and the linear family (all of them do).
    est = mics.MICs(cv=4, max_channels=1, n_init=1, max_iter=50, verbose=0, random_state=0)
    size = dict(n_trials=60, n_samples_per_trial=10, n_source=8, n_target=6, n_modulators=1)
    texts, shares = {}, {}
    for family in ("bursty", "linear"):
        data, _ = mics.simulate_null_family(family, size=size, random_state=1)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            test = mics.test_modulation(
                est, data.X, data.Y, data.Z, groups=data.trial.values, n_permutations=2,
                n_boot=0, verbose=0, random_state=0,
            )  # fmt: skip
        texts[family] = test.summary()
        shares[family] = test.modulator_effective_units / test.modulator_units
        assert test.modulator_units == 60 and test.modulator_unit == "trial"
    assert shares["bursty"] < 0.15 < 0.5 < shares["linear"]
    assert "over-rejected in simulations" not in texts["linear"]
    assert "sits in about" in texts["bursty"]
