"""Reduced-rank regression against the reference code and independent computations."""

from pathlib import Path

import numpy as np
import pytest
import scipy.io
from sklearn.utils.estimator_checks import check_estimator

from mics import MICs, ReducedRankRegression, ReducedRankRegressionCV
from mics.core.heldout import normalized_squared_error, one_sem_rule
from mics.core.rrr import reduced_rank_path, ridge_lambda_grid

# Training-set NSE of Y_V2 on X for ranks 0..10, from Semedo's MATLAB code.
REFERENCE_NSE = [
    1.000000000000,
    0.886557058813,
    0.862524230454,
    0.857910852002,
    0.855419051034,
    0.853471294619,
    0.851962857268,
    0.850868258821,
    0.849806945456,
    0.848952974784,
    0.848227194655,
]


@pytest.fixture(scope="module")
def semedo(data_dir):
    d = scipy.io.loadmat(data_dir / "semedo2019" / "sample_data.mat")
    return d["X"], d["Y_V2"], d["Y_V1"]


def _data(n=300, p=12, q=7, rank=2, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, p)) @ rng.standard_normal((p, p)) + 3.0
    B = rng.standard_normal((p, rank)) @ rng.standard_normal((rank, q))
    Y = X @ B + rng.standard_normal((n, q)) - 1.0
    return X, Y


@pytest.mark.shared_data
def test_training_nse_matches_reference(semedo):
    X, Y2, _ = semedo
    for rank, ref in enumerate(REFERENCE_NSE):
        model = ReducedRankRegression(rank=rank).fit(X, Y2)
        assert normalized_squared_error(Y2, model.predict(X)) == pytest.approx(ref, abs=1e-9)


# The reference comparison without the recordings: the training NSE of a
# reduced-rank regression depends on the data only through their centred
# second moments, kept here (n, X^T X, X^T Y and tr Y^T Y of the centred
# Semedo sample: 37 kB of sums, not the recordings).
MOMENTS = Path(__file__).resolve().parent / "data" / "semedo2019_v1_v2_moments.npz"


def test_training_nse_matches_reference_from_stored_moments():
    with np.load(MOMENTS) as f:
        Sxx, Sxy, tr_yy = f["Sxx"], f["Sxy"], float(f["tr_yy"])
    coefs, _ = reduced_rank_path(Sxx, Sxy, range(len(REFERENCE_NSE)))
    for B, ref in zip(coefs, REFERENCE_NSE, strict=True):
        rss = tr_yy - 2 * np.sum(B * Sxy) + np.sum(B * (Sxx @ B))
        assert rss / tr_yy == pytest.approx(ref, abs=1e-9)


@pytest.mark.shared_data
def test_stored_moments_are_those_of_the_recording(semedo):
    X, Y2, _ = semedo
    Xc, Yc = X - X.mean(0), Y2 - Y2.mean(0)
    with np.load(MOMENTS) as f:
        assert int(f["n"]) == X.shape[0]
        np.testing.assert_allclose(f["Sxx"], Xc.T @ Xc, rtol=1e-12, atol=1e-9)
        np.testing.assert_allclose(f["Sxy"], Xc.T @ Yc, rtol=1e-12, atol=1e-9)
        assert float(f["tr_yy"]) == pytest.approx(np.sum(Yc**2), rel=1e-12)


@pytest.mark.shared_data
def test_v1_to_v2_uses_fewer_dimensions_than_v1_to_v1(semedo):
    X, Y2, Y1 = semedo
    v2 = ReducedRankRegressionCV(cv=10).fit(X, Y2)
    v1 = ReducedRankRegressionCV(cv=10).fit(X, Y1)
    assert v2.rank_ < v1.rank_
    assert v2.rank_ >= 1


def test_full_rank_equals_ordinary_least_squares():
    X, Y = _data()
    model = ReducedRankRegression(rank=7).fit(X, Y)
    Xa = np.column_stack([np.ones(len(X)), X])
    beta = np.linalg.lstsq(Xa, Y, rcond=None)[0]
    np.testing.assert_allclose(model.coef_, beta[1:].T, rtol=1e-9, atol=1e-10)
    np.testing.assert_allclose(model.intercept_, beta[0], rtol=1e-9, atol=1e-9)


def test_rank_r_prediction_is_best_rank_r_approximation_of_fitted_values():
    # Eckart-Young: rank-r RRR predictions are the best rank-r approximation of
    # the OLS fitted values (in the centred data).
    X, Y = _data(rank=4)
    Xc = X - X.mean(0)
    fitted = Xc @ np.linalg.lstsq(Xc, Y - Y.mean(0), rcond=None)[0]
    U, s, Vt = np.linalg.svd(fitted, full_matrices=False)
    for r in (1, 2, 3):
        model = ReducedRankRegression(rank=r).fit(X, Y)
        best = (U[:, :r] * s[:r]) @ Vt[:r]
        np.testing.assert_allclose(model.predict(X) - Y.mean(0), best, atol=1e-8)
        assert np.linalg.matrix_rank(model.coef_, tol=1e-8) == r


def test_subspaces_are_orthonormal_and_span_the_coefficients():
    X, Y = _data()
    model = ReducedRankRegression(rank=2).fit(X, Y)
    U, V = model.source_subspace_, model.target_subspace_
    np.testing.assert_allclose(U.T @ U, np.eye(2), atol=1e-12)
    np.testing.assert_allclose(V.T @ V, np.eye(2), atol=1e-12)
    B = model.coef_.T
    np.testing.assert_allclose(U @ U.T @ B @ V @ V.T, B, atol=1e-10)


def test_rank_zero_predicts_training_mean():
    X, Y = _data()
    model = ReducedRankRegression(rank=0).fit(X, Y)
    np.testing.assert_allclose(model.predict(X[:5]), np.tile(Y.mean(0), (5, 1)))


def test_constant_source_neuron_gets_zero_weight_like_the_reference():
    X, Y = _data()
    Xk = np.column_stack([X[:, :3], np.full(len(X), 2.5), X[:, 3:]])
    model = ReducedRankRegression(rank=2).fit(Xk, Y)
    ref = ReducedRankRegression(rank=2).fit(X, Y)
    np.testing.assert_allclose(model.coef_[:, 3], 0.0)
    np.testing.assert_allclose(np.delete(model.coef_, 3, axis=1), ref.coef_, atol=1e-10)


def test_ridge_matches_closed_form_and_shrinks():
    X, Y = _data()
    alpha = 50.0
    model = ReducedRankRegression(rank=7, alpha=alpha).fit(X, Y)
    Xc, Yc = X - X.mean(0), Y - Y.mean(0)
    ridge = np.linalg.solve(Xc.T @ Xc + alpha * np.eye(X.shape[1]), Xc.T @ Yc)
    np.testing.assert_allclose(model.coef_, ridge.T, rtol=1e-8, atol=1e-10)
    ols = ReducedRankRegression(rank=7).fit(X, Y)
    assert np.linalg.norm(model.coef_) < np.linalg.norm(ols.coef_)


def test_ridge_lambda_grid_matches_shrinkage_definition():
    X, _ = _data()
    lam = ridge_lambda_grid(X)
    Xc = X - X.mean(0)
    d = np.linalg.eigvalsh(Xc.T @ Xc)
    # the shrinkage of the top eigenvalue is d_max / (d_max + lambda)
    np.testing.assert_allclose(d[-1] / (d[-1] + lam), np.linspace(0.5, 1.0, 51))


def test_one_sem_rule_picks_simplest_within_one_sem():
    assert one_sem_rule([1.0, 0.5, 0.45, 0.44], [0.1, 0.05, 0.02, 0.02]) == 2
    assert one_sem_rule([1.0, 0.5, 0.45, 0.44], [0.1, 0.05, 0.02, 0.07]) == 1


def test_cv_folds_are_contiguous_and_sem_is_reported():
    X, Y = _data(rank=2)
    model = ReducedRankRegressionCV(ranks=range(0, 6), cv=5).fit(X, Y)
    res = model.cv_results_
    assert list(res["rank"]) == [0, 1, 2, 3, 4, 5]
    np.testing.assert_allclose(res["mean_loss"], res["fold_loss"].mean(1))
    np.testing.assert_allclose(res["sem_loss"], res["fold_loss"].std(1, ddof=1) / np.sqrt(5))
    # first fold is the first contiguous block: refit by hand and compare
    tr, te = np.arange(60, 300), np.arange(60)
    m = ReducedRankRegression(rank=2).fit(X[tr], Y[tr])
    assert res["fold_loss"][2, 0] == pytest.approx(
        normalized_squared_error(Y[te], m.predict(X[te]))
    )
    assert model.rank_ == 2


@pytest.mark.parametrize(
    "estimator", [ReducedRankRegression(), ReducedRankRegressionCV(cv=3), MICs(rank=1)]
)
def test_check_estimator(estimator):
    check_estimator(estimator)


def test_bad_input_messages():
    X, Y = _data()
    with pytest.raises(ValueError, match="share the time axis"):
        ReducedRankRegression().fit(X, Y[:-1])
    Xn = X.copy()
    Xn[3, 2] = np.nan
    with pytest.raises(ValueError, match="NaN"):
        ReducedRankRegression().fit(Xn, Y)
    with pytest.raises(ValueError, match="exceeds min"):
        ReducedRankRegression(rank=8).fit(X, Y)
    with pytest.raises(ValueError, match="need at least 400 samples"):
        ReducedRankRegressionCV(cv=400).fit(X, Y)
