"""Fits do not depend on the units of X, Y or Z (issue #11).

Every test compares a fit on rescaled inputs with the fit on the original
ones, and checks each fitted quantity against what the model says it must
become: unchanged (patterns, selections, cross-validated losses, p-values)
or rescaled by a known factor (coefficients, weights, predictions).
"""

import numpy as np
import pytest

from mics import (
    MICs,
    ReducedRankRegression,
    ReducedRankRegressionCV,
    simulate,
    test_modulation,
)
from mics.core.rrr import ridge_lambda_grid
from mics.core.scales import InputScales, scale_moments
from mics.core.stats import compute_moments
from mics.model.fit import fit_from_moments

RTOL = 1e-6

# (scale of X, scale of Y, scale of each Z column); m = 2 modulators.
SCALINGS = [
    (1e-3, 1.0, 1.0),
    (1e3, 1.0, 1.0),
    (1.0, 1e-3, 1.0),
    (1.0, 1e3, 1.0),
    (1.0, 1.0, 1e-3),
    (1.0, 1.0, 1e3),
    (1e3, 1e3, 1e3),
    (1e-3, 1e-3, 1e-3),
    (1e3, 1e-3, 1e3),
    (1.0, 1.0, (1e3, 1e-3)),  # per column: e.g. speed in cm/s, pupil in pixels
    (1e-3, 1e3, (1e-2, 1e2)),
]
IDS = [f"x{sx:g}-y{sy:g}-z{np.ravel(sz).tolist()}" for sx, sy, sz in SCALINGS]


@pytest.fixture(scope="module")
def data():
    # Inputs not of unit variance, so that "standardised" is not a no-op.
    X, Y, Z, _ = simulate(
        n_samples=300,
        n_source=8,
        n_target=6,
        n_modulators=2,
        rank=2,
        n_channels=2,
        modulation_snr=1.0,
        random_state=1,
    )
    return 3.0 * X + 1.0, 0.5 * Y - 2.0, Z * np.array([2.0, 0.3]) + 5.0


def _scaled(data, scaling):
    X, Y, Z = data
    sx, sy, sz = scaling
    sz = np.broadcast_to(np.asarray(sz, dtype=float), (Z.shape[1],))
    return (sx * X, sy * Y, Z * sz), (sx, sy, sz)


def _close(actual, expected, scale=None):
    """Equal to relative precision RTOL of the reference's magnitude."""
    expected = np.asarray(expected)
    scale = np.max(np.abs(expected)) if scale is None else scale
    np.testing.assert_allclose(actual, expected, rtol=0, atol=RTOL * scale)


@pytest.fixture(scope="module")
def fixed_reference(data):
    return MICs(2, 2, verbose=0, random_state=0).fit(*data)


@pytest.mark.parametrize("scaling", SCALINGS, ids=IDS)
def test_fixed_rank_fit_is_equivariant(data, fixed_reference, scaling):
    ref = fixed_reference
    (X, Y, Z), (sx, sy, sz) = _scaled(data, scaling)
    fit = MICs(2, 2, verbose=0, random_state=0).fit(X, Y, Z)

    # The modulation tensor and the baseline rescale as the model says.
    W_ref = ref.modulation_tensor()
    _close(fit.modulation_tensor(), W_ref * sy / (sx * sz[None, None, :]))
    _close(fit.coef_, ref.coef_ * sy / sx)
    _close(fit.modulator_coef_, ref.modulator_coef_ * sy / sz[None, :])
    _close(fit.intercept_, ref.intercept_ * sy)
    _close(fit.source_mean_, ref.source_mean_ * sx)
    _close(fit.modulator_mean_, ref.modulator_mean_ * sz)
    _close(fit.source_covariance_, ref.source_covariance_ * sx**2)
    _close(fit.loss_history_, ref.loss_history_ * sy**2)
    # Predictions in Y's units, and B(z) at a modulator state in Z's units.
    _close(fit.predict(X, Z), ref.predict(*data[::2]) * sy, scale=np.abs(Y).max())
    z = data[2][7]
    _close(fit.communication_matrix(z * sz), ref.communication_matrix(z) * sy / sx)
    # Subspaces, source and target patterns do not change at all.
    _close(np.abs(fit.source_subspace_.T @ ref.source_subspace_), np.eye(2), scale=1)
    _close(np.abs(fit.target_subspace_.T @ ref.target_subspace_), np.eye(2), scale=1)
    if np.ptp(sz) == 0:  # one scale for all of Z: channels keep their order
        _close(fit.source_patterns_, ref.source_patterns_, scale=1)
        _close(fit.target_patterns_, ref.target_patterns_, scale=1)
        _close(fit.modulator_patterns_, ref.modulator_patterns_, scale=1)
        _close(fit.channel_weights_, ref.channel_weights_ * sy / (sx * sz[0]))
        dec, dec_ref = fit.decompose(), ref.decompose()
        for part in ("reshape", "private_source", "private_target", "new"):
            _close(dec[part].values, dec_ref[part].values, scale=1)
        _close(dec["channel_weight"].values, fit.channel_weights_)
    # The whole-tensor split weighs modulators per standard deviation: no units.
    dec, dec_ref = fit.decompose(), ref.decompose()
    for part in ("reshape", "private_source", "private_target", "new"):
        _close(float(dec[f"total_{part}"]), float(dec_ref[f"total_{part}"]), scale=1)
    # Canonical form in the user's units: descending weights, unit patterns.
    assert np.all(np.diff(fit.channel_weights_) <= 0)
    _close(np.linalg.norm(fit.modulator_patterns_, axis=0), [1.0, 1.0], scale=1)


@pytest.fixture(scope="module")
def selected_reference(data):
    return MICs(verbose=0, random_state=0, cv=5, max_rank=4, max_channels=2, n_init=1).fit(*data)


@pytest.mark.parametrize("scaling", SCALINGS, ids=IDS)
def test_default_selection_is_equivariant(data, selected_reference, scaling):
    ref = selected_reference
    (X, Y, Z), (sx, sy, sz) = _scaled(data, scaling)
    fit = MICs(verbose=0, random_state=0, cv=5, max_rank=4, max_channels=2, n_init=1)
    fit.fit(X, Y, Z)
    assert (fit.rank_, fit.n_channels_) == (ref.rank_, ref.n_channels_) == (2, 2)
    for key in ("rank_mean_loss", "n_channels_mean_loss", "n_channels_sem_loss"):
        _close(fit.cv_results_[key], ref.cv_results_[key], scale=1)
    _close(fit.modulation_tensor(), ref.modulation_tensor() * sy / (sx * sz[None, None, :]))
    _close(fit.predict(X, Z), ref.predict(*data[::2]) * sy, scale=np.abs(Y).max())


@pytest.mark.slow
def test_permutation_test_does_not_depend_on_units(data):
    est = MICs(verbose=0, cv=5, max_rank=4, max_channels=2, n_init=1, random_state=0)
    X, Y, Z = data
    rng = np.random.default_rng(0)
    Zn = rng.standard_normal(Z.shape)  # a modulator that gates nothing: a spread null
    ref = test_modulation(est, X, Y, Zn, n_permutations=3, verbose=0, random_state=4)
    (X2, Y2, Z2), _ = _scaled((X, Y, Zn), (1e3, 1e-3, (1e-3, 1e2)))
    out = test_modulation(est, X2, Y2, Z2, n_permutations=3, verbose=0, random_state=4)
    assert out.p_value == ref.p_value
    assert out.n_channels == ref.n_channels
    _close(out.null_distribution, ref.null_distribution, scale=1)
    _close(out.statistic, ref.statistic, scale=1)
    assert np.ptp(np.append(ref.null_distribution, ref.statistic)) > 1e-3


def test_issue_example_modulator_in_other_units_keeps_the_channels(data):
    # The issue's report: Z x100 used to shrink every channel to zero.
    ref = MICs(2, 2, verbose=0, random_state=0).fit(*data)
    X, Y, Z = data
    fit = MICs(2, 2, verbose=0, random_state=0).fit(X, Y, 100 * Z)
    assert np.all(ref.channel_weights_ > 0)
    _close(fit.channel_weights_ * 100, ref.channel_weights_)


def test_scales_are_the_documented_statistics(data):
    X, Y, Z = data
    fit = MICs(2, 1, verbose=0, random_state=0).fit(X, Y, Z)
    assert fit.source_scale_ == pytest.approx(np.sqrt(np.mean(X.var(axis=0))), rel=1e-12)
    assert fit.target_scale_ == pytest.approx(np.sqrt(np.mean(Y.var(axis=0))), rel=1e-12)
    np.testing.assert_allclose(fit.modulator_scale_, Z.std(axis=0), rtol=1e-12)
    # The same scales from the moments alone: centred, and raw around any shifts
    # (the fixed-rank fit on the moment path takes them from its raw moments).
    far = (X.mean(0) + 4.0, Z.mean(0) - 3.0, Y.mean(0) + 2.0)
    for scales in (
        InputScales.from_moments(compute_moments(X, Y, Z).centered()),
        InputScales.from_raw_moments(compute_moments(X, Y, Z)),
        InputScales.from_raw_moments(compute_moments(X, Y, Z, shifts=far)),
        InputScales.from_data(X, Y, Z),
    ):
        assert scales.source == pytest.approx(fit.source_scale_, rel=1e-10)
        assert scales.target == pytest.approx(fit.target_scale_, rel=1e-10)
        np.testing.assert_allclose(scales.modulator, fit.modulator_scale_, rtol=1e-10)


def test_scale_moments_matches_moments_of_scaled_data(data):
    X, Y, Z = data
    sx, sy, sz = 3.0, 0.2, np.array([10.0, 0.5])
    got = scale_moments(compute_moments(X, Y, Z).centered(), sx, sy, sz)
    want = compute_moments(sx * X, sy * Y, Z * sz).centered()
    for name in ("x_mean", "z_mean", "y_mean", "phi_mean", "Sxx", "Sxz", "Szz", "Sxy"):
        _close(getattr(got, name), getattr(want, name))
    for name in ("Szy", "Syy", "M", "Sphix", "Sphiz", "Sphiy"):
        _close(getattr(got, name), getattr(want, name))
    light = scale_moments(compute_moments(X, Y, Z).centered(), sx, sy, sz, interaction=False)
    assert light.M is None and light.Sphiy is None


def test_fit_from_moments_matches_estimator_in_any_units(data):
    (X, Y, Z), _ = _scaled(data, (1e3, 1e-3, (1e2, 1e-2)))
    fit = fit_from_moments(compute_moments(X, Y, Z), 2, 2, random_state=3)
    est = MICs(2, 2, solver="moments", verbose=0, random_state=3).fit(X, Y, Z)
    _close(fit.coef, est.coef_.T)
    _close(fit.modulator_coef, est.modulator_coef_.T)
    _close(fit.weights, est.channel_weights_)
    _close(fit.modulator_patterns, est.modulator_patterns_, scale=1)


def test_data_solver_is_equivariant(data):
    ref = MICs(2, 2, solver="data", verbose=0, random_state=0).fit(*data)
    (X, Y, Z), (sx, sy, sz) = _scaled(data, (1e-3, 1e3, (1e2, 1.0)))
    fit = MICs(2, 2, solver="data", verbose=0, random_state=0).fit(X, Y, Z)
    _close(fit.modulation_tensor(), ref.modulation_tensor() * sy / (sx * sz[None, None, :]))


@pytest.mark.parametrize("sx, sy", [(1e3, 1.0), (1e-3, 1e3), (1.0, 1e-3)])
def test_reduced_rank_regression_is_equivariant(data, sx, sy):
    X, Y, _ = data
    ref = ReducedRankRegression(rank=2).fit(X, Y)
    fit = ReducedRankRegression(rank=2).fit(sx * X, sy * Y)
    _close(fit.coef_, ref.coef_ * sy / sx)
    _close(np.abs(fit.source_subspace_.T @ ref.source_subspace_), np.eye(2), scale=1)
    # The ridge penalty is Semedo's lambda, in units of X^T X: it carries X's
    # units squared, and the data-driven grid does so by construction.
    np.testing.assert_allclose(ridge_lambda_grid(sx * X), sx**2 * ridge_lambda_grid(X))
    lam = ridge_lambda_grid(X)[3]
    ref = ReducedRankRegression(rank=2, alpha=lam).fit(X, Y)
    fit = ReducedRankRegression(rank=2, alpha=lam * sx**2).fit(sx * X, sy * Y)
    _close(fit.coef_, ref.coef_ * sy / sx)
    cv_ref = ReducedRankRegressionCV(ranks=range(5), cv=5).fit(X, Y)
    cv_fit = ReducedRankRegressionCV(ranks=range(5), cv=5).fit(sx * X, sy * Y)
    assert cv_fit.rank_ == cv_ref.rank_
    _close(cv_fit.cv_results_["mean_loss"], cv_ref.cv_results_["mean_loss"], scale=1)


@pytest.mark.parametrize("value", [2.0, 0.1])
@pytest.mark.parametrize("solver", ["moments", "data"])
@pytest.mark.parametrize(
    "which, message",
    [("X", "source X is constant"), ("Y", "target Y is constant")],
)
def test_constant_population_is_refused(data, which, message, solver, value):
    # 0.1 is not a binary fraction: its column mean is off by rounding and
    # leaves a variance of about 1e-34, which must still count as constant.
    X, Y, Z = data
    X = np.full_like(X, value) if which == "X" else X
    Y = np.full_like(Y, value) if which == "Y" else Y
    with pytest.raises(ValueError, match=message):
        MICs(1, 1, verbose=0, solver=solver).fit(X, Y, Z)
    with pytest.raises(ValueError, match=message):
        MICs(verbose=0, cv=3, max_rank=1, max_channels=1, solver=solver).fit(X, Y, Z)


def test_fixed_moment_fit_standardises_the_moments_not_the_data(data, monkeypatch):
    # The fixed-rank moment path makes no standardised copies of X, Y, Z
    # (at T = 20000, p = 300 they cost a variance pass and 64 MB) ...
    def refuse(*args):
        raise AssertionError("the data were standardised")

    with monkeypatch.context() as patch:
        patch.setattr(InputScales, "standardize", refuse)
        patch.setattr(InputScales, "from_data", classmethod(refuse))
        fit = MICs(2, 2, solver="moments", verbose=0, random_state=0).fit(*data)
    # ... and fits what the data path, which does standardise them, fits.
    other = MICs(2, 2, solver="data", verbose=0, random_state=0).fit(*data)
    _close(fit.modulation_tensor(), other.modulation_tensor())
    _close(fit.coef_, other.coef_)
    _close(fit.modulator_coef_, other.modulator_coef_)
