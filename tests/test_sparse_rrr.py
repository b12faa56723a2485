"""Sparse reduced-rank regression (Kobak et al. 2021): the baseline's member neurons (issue 33)."""

import numpy as np
import pytest
from scipy import linalg
from sklearn.utils.estimator_checks import check_estimator

from mics import ReducedRankRegression, ReducedRankRegressionCV
from mics.core import (
    fit_reduced_rank,
    fit_sparse_rrr,
    linear_moments,
    one_sem_rule,
    reduced_rank_path,
    sparse_rrr_penalty,
)


def _planted(seed, n=2000, p=150, q=100, rank=2, frac=0.1, gain=0.3):
    """A rank-``rank`` subspace carried by ``frac`` of the source neurons, unit noise."""
    rng = np.random.default_rng(seed)
    members = np.zeros(p, dtype=bool)
    members[rng.choice(p, int(round(frac * p)), replace=False)] = True
    W = np.zeros((p, rank))
    # magnitudes bounded away from zero: a near-zero member is no member
    W[members] = rng.uniform(0.5, 1.0, (members.sum(), rank)) * rng.choice(
        [-1, 1], (members.sum(), rank)
    )
    V = np.linalg.qr(rng.standard_normal((q, rank)))[0]
    X = rng.standard_normal((n, p))
    Y = 2.0 + gain * X @ W @ V.T + rng.standard_normal((n, q))
    return X, Y, members


def _moments(X, Y):
    Xc, Yc = X - X.mean(axis=0), Y - Y.mean(axis=0)
    return Xc.T @ Xc, Xc.T @ Yc, float(np.sum(Yc * Yc))


def test_loss_never_increases_from_a_random_start():
    X, Y, _ = _planted(0, n=600, p=60, q=30)
    Sxx, Sxy, tr_yy = _moments(X, Y)
    rng = np.random.default_rng(1)
    V0 = np.linalg.qr(rng.standard_normal((30, 2)))[0]
    init = (rng.standard_normal((60, 2)), V0)
    for alpha, sparsity in ((0.0, 3.0), (50.0, 1.0), (0.0, 20.0)):
        fit = fit_sparse_rrr(Sxx, Sxy, tr_yy, 600, 2, alpha=alpha, sparsity=sparsity, init=init)
        steps = np.diff(fit.loss_history)
        if sparsity < 20:  # (20 zeroes every neuron at once)
            assert fit.n_iter >= 3  # a random start has a long way to go
        assert np.all(steps <= 1e-10 * fit.loss_history[0]), (alpha, sparsity, steps.max())
        assert fit.converged


def test_solution_satisfies_the_optimality_conditions():
    # At a minimiser, V is the Procrustes solution of Sxy^T W, and every row
    # of W satisfies the group-lasso KKT conditions given V. A solver that
    # stopped early or solved another problem fails here.
    X, Y, _ = _planted(2, n=800, p=50, q=30)
    Sxx, Sxy, tr_yy = _moments(X, Y)
    alpha = 10.0
    fit = fit_sparse_rrr(Sxx, Sxy, tr_yy, 800, 2, alpha=alpha, sparsity=3.0)
    W, V, lam = fit.source_loadings, fit.target_loadings, fit.penalty
    P, _, Qt = linalg.svd(Sxy.T @ W, full_matrices=False)
    np.testing.assert_allclose(V, P @ Qt, atol=1e-6)
    grad = 2 * ((Sxx + alpha * np.eye(50)) @ W - Sxy @ V)  # of the smooth part
    on = fit.members
    assert 0 < on.sum() < 50
    norms = np.linalg.norm(W[on], axis=1, keepdims=True)
    np.testing.assert_allclose(grad[on], -lam * W[on] / norms, atol=1e-6 * lam)
    assert np.all(np.linalg.norm(grad[~on], axis=1) <= lam * (1 + 1e-8))


def test_zero_sparsity_is_the_dense_reduced_rank_regression():
    X, Y, _ = _planted(3, n=500, p=40, q=25, rank=3)
    Sxx, Sxy, tr_yy = _moments(X, Y)
    for rank in (1, 3):
        # ordinary RRR, as the package fits it
        (B,), _ = fit_reduced_rank(X, Y, [rank])
        fit = fit_sparse_rrr(Sxx, Sxy, tr_yy, 500, rank)
        np.testing.assert_allclose(fit.coef, B, atol=1e-8 * np.abs(B).max())
        assert fit.members.all()
        # with a ridge: the exact ridge-penalised minimiser
        (Br,), _ = reduced_rank_path(Sxx, Sxy, [rank], alpha=200.0, exact_ridge=True)
        fit = fit_sparse_rrr(Sxx, Sxy, tr_yy, 500, rank, alpha=200.0)
        np.testing.assert_allclose(fit.coef, Br, atol=1e-8 * np.abs(Br).max())
    # the estimator at sparsity=0 is today's fit, bit for bit
    (B,), (b,) = fit_reduced_rank(X, Y, [2], alpha=30.0)
    est = ReducedRankRegression(rank=2, alpha=30.0, sparsity=0.0).fit(X, Y)
    np.testing.assert_array_equal(est.coef_, B.T)
    np.testing.assert_array_equal(est.intercept_, b)
    np.testing.assert_array_equal(est.source_members_, np.arange(40))
    # and a vanishing sparsity is continuous with it
    est = ReducedRankRegression(rank=2, sparsity=1e-9).fit(X, Y)
    (B,), _ = fit_reduced_rank(X, Y, [2])
    np.testing.assert_allclose(est.coef_, B.T, atol=1e-6 * np.abs(B).max())


def test_units_do_not_change_the_members():
    X, Y, _ = _planted(4, n=800, p=60, q=30)
    sx, sy, alpha = 37.0, 0.02, 5.0
    ref = ReducedRankRegression(rank=2, alpha=alpha, sparsity=3.0).fit(X, Y)
    # alpha is in the units of the scatter X^T X, so it scales with X squared
    scaled = ReducedRankRegression(rank=2, alpha=alpha * sx**2, sparsity=3.0).fit(sx * X, sy * Y)
    assert 0 < ref.source_members_.size < 60
    np.testing.assert_array_equal(scaled.source_members_, ref.source_members_)
    np.testing.assert_allclose(
        scaled.coef_, ref.coef_ * sy / sx, atol=1e-7 * np.abs(ref.coef_).max() * sy / sx
    )
    np.testing.assert_allclose(scaled.loss_history_, ref.loss_history_ * sy**2, rtol=1e-9)
    # the absolute weight is 2 sqrt(n v_x v_y) per unit of sparsity
    Sxx, _, tr_yy = _moments(X, Y)
    v_x, v_y = X.var(axis=0).mean(), Y.var(axis=0).mean()
    assert sparse_rrr_penalty(Sxx, tr_yy, 800, 30, 1.0) == pytest.approx(
        2 * np.sqrt(800 * v_x * v_y)
    )


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_recovers_planted_source_members(seed):
    # 15 of 150 source neurons carry a rank-2 subspace; sparsity 4 as documented
    X, Y, members = _planted(10 + seed)
    est = ReducedRankRegression(rank=2, sparsity=4.0).fit(X, Y)
    selected = np.zeros(150, dtype=bool)
    selected[est.source_members_] = True
    tp = np.sum(selected & members)
    precision, recall = tp / max(selected.sum(), 1), tp / members.sum()
    assert precision >= 0.9 and recall >= 0.8, (precision, recall)
    # the dense fit keeps every neuron
    assert ReducedRankRegression(rank=2).fit(X, Y).source_members_.size == 150


def test_pure_noise_selects_few_neurons():
    # 4 standard errors leaves about `rank` neurons the subspace has turned
    # towards; above sqrt(n_target) ~ 7 none survives (as documented).
    rng = np.random.default_rng(5)
    X, Y = rng.standard_normal((1000, 100)), rng.standard_normal((1000, 50))
    assert ReducedRankRegression(rank=2, sparsity=4.0).fit(X, Y).source_members_.size <= 3
    assert ReducedRankRegression(rank=2, sparsity=8.0).fit(X, Y).source_members_.size == 0


def test_moments_summed_in_chunks_give_the_fit_on_data():
    # The seam: moments accumulated chunk by chunk around arbitrary shifts
    # (as chunked and Dask inputs are), then centred, give the estimator's fit.
    X, Y, _ = _planted(8, n=700, p=40, q=20)
    Z = np.zeros((700, 1))
    raw = linear_moments(X, Y, Z, X[0], Z[0], Y[0], chunk_size=97)
    n, sx, sy = raw.n, raw.sx, raw.sy
    Sxx = raw.Sxx - np.outer(sx, sx) / n
    Sxy = raw.Sxy - np.outer(sx, sy) / n
    tr_yy = float(np.trace(raw.Syy) - sy @ sy / n)
    fit = fit_sparse_rrr(Sxx, Sxy, tr_yy, n, 2, sparsity=3.0)
    est = ReducedRankRegression(rank=2, sparsity=3.0).fit(X, Y)
    np.testing.assert_array_equal(np.flatnonzero(fit.members), est.source_members_)
    np.testing.assert_allclose(fit.coef, est.coef_.T, atol=1e-8 * np.abs(fit.coef).max())


def test_bad_input():
    X, Y, _ = _planted(6, n=200, p=20, q=10)
    for bad in (-1.0, np.nan, "lots", True):
        with pytest.raises(ValueError, match="sparsity must be a non-negative"):
            ReducedRankRegression(rank=2, sparsity=bad).fit(X, Y)
    Sxx, Sxy, tr_yy = _moments(X, Y)
    with pytest.raises(ValueError, match="sparsity must be a non-negative"):
        fit_sparse_rrr(Sxx, Sxy, tr_yy, 200, 2, sparsity=-0.5)
    with pytest.raises(ValueError, match="rank must be an integer between 0 and"):
        fit_sparse_rrr(Sxx, Sxy, tr_yy, 200, 11, sparsity=1.0)
    with pytest.raises(ValueError, match="init must be"):
        fit_sparse_rrr(
            Sxx, Sxy, tr_yy, 200, 2, sparsity=1.0, init=(np.zeros((20, 1)), np.eye(10)[:, :2])
        )


def test_constant_neuron_and_rank_zero():
    X, Y, _ = _planted(7, n=300, p=20, q=10)
    X[:, 3] = 1.5
    est = ReducedRankRegression(rank=2, sparsity=1.0).fit(X, Y)
    assert 3 not in est.source_members_
    assert np.all(est.coef_[:, 3] == 0)
    est = ReducedRankRegression(rank=0, sparsity=1.0).fit(X, Y)
    assert est.source_members_.size == 0
    np.testing.assert_allclose(est.predict(X), np.broadcast_to(Y.mean(axis=0), Y.shape))


def test_sparsity_chosen_by_cv_finds_the_members_and_paths_agree():
    da = pytest.importorskip("dask.array")
    X, Y, members = _planted(12, n=1500, p=60, q=30, frac=0.2)
    est = ReducedRankRegressionCV(ranks=range(4), cv=5, sparsity="cv").fit(X, Y)
    res = est.cv_results_
    assert est.rank_ == 2
    # the one-SEM rule: the sparsest candidate within one SEM of the best
    best, chosen = np.argmin(res["sparsity_mean_loss"]), res["sparsity_best_index"]
    assert (
        res["sparsity_mean_loss"][chosen]
        <= res["sparsity_mean_loss"][best] + res["sparsity_sem_loss"][best]
    )
    assert np.all(np.diff(res["sparsity"]) < 0) and est.sparsity_ == res["sparsity"][chosen]
    assert est.sparsity_ > 0
    selected = np.isin(np.arange(60), est.source_members_)
    tp = np.sum(selected & members)
    assert tp / selected.sum() >= 0.9 and tp / members.sum() >= 0.8
    # chunked (Dask) inputs: the same folds from their moments, the same fit
    chunked = ReducedRankRegressionCV(ranks=range(4), cv=5, sparsity="cv").fit(
        da.from_array(X, chunks=(251, -1)), da.from_array(Y, chunks=(251, -1))
    )
    np.testing.assert_allclose(
        chunked.cv_results_["sparsity_fold_loss"], res["sparsity_fold_loss"], atol=1e-10
    )
    np.testing.assert_allclose(chunked.coef_, est.coef_, atol=1e-10)
    np.testing.assert_allclose(chunked.intercept_, est.intercept_, atol=1e-10)
    # a fixed sparsity is the plain estimator at the selected rank
    fixed = ReducedRankRegressionCV(ranks=range(4), cv=5, sparsity=4.0).fit(X, Y)
    plain = ReducedRankRegression(rank=fixed.rank_, sparsity=4.0).fit(X, Y)
    np.testing.assert_array_equal(fixed.coef_, plain.coef_)
    assert "sparsity" not in fixed.cv_results_
    with pytest.raises(ValueError, match="sparsity must be a non-negative"):
        ReducedRankRegressionCV(sparsity=-1).fit(X, Y)


@pytest.mark.parametrize(
    "estimator",
    [ReducedRankRegression(sparsity=2.0), ReducedRankRegressionCV(cv=3, sparsity="cv")],
)
def test_check_estimator_sparse(estimator):
    check_estimator(estimator)


def _few_samples(seed, n, p=200, q=12, n_members=10, gain=0.8):
    """Genes-like sources (shared programs) with about as many neurons as samples, rank 2."""
    rng = np.random.default_rng(seed)
    mixing = rng.standard_normal((8, p)) * 0.4
    W = np.zeros((p, 2))
    W[rng.choice(p, n_members, replace=False)] = rng.standard_normal((n_members, 2))
    M = rng.standard_normal((2, q))
    X = rng.standard_normal((n, 8)) @ mixing + rng.standard_normal((n, p))
    S = X @ W
    return X, gain * (S / S.std(axis=0)) @ M + rng.standard_normal((n, q))


def test_rank_and_sparsity_chosen_together_where_dense_fits_see_no_rank():
    # 240 samples of 200 neurons: every dense fit predicts worse than the
    # mean, so the dense rank choice is 0 (the empty model the issue found at
    # the reference's demo scale). Chosen together with the sparsity, the
    # rank is one the sparse fits can use, and the held-out R^2 on fresh
    # samples is within 0.01 of the best fixed rank's.
    X, Y = _few_samples(0, 1740)
    train, test = slice(0, 240), slice(240, None)

    def r2(est):
        resid = Y[test] - est.predict(X[test])
        return 1 - np.sum(resid**2) / np.sum((Y[test] - Y[test].mean(axis=0)) ** 2)

    est = ReducedRankRegressionCV(cv=5, sparsity="cv").fit(X[train], Y[train])
    res = est.cv_results_
    assert res["rank"][res["best_index"]] == 0  # what the dense fits see
    assert est.rank_ >= 1 and est.source_members_.size > 0
    # each rank at the sparsity its own cross-validation would choose (the
    # same folds: the row of the joint table)
    fixed = []
    for i, rank in enumerate(res["joint_rank"]):
        if rank > 0:
            j = one_sem_rule(res["joint_mean_loss"][i], res["joint_sem_loss"][i])
            fit = ReducedRankRegression(rank=int(rank), sparsity=res["sparsity"][j])
            fixed.append(r2(fit.fit(X[train], Y[train])))
    assert len(fixed) >= 2 and max(fixed) > 0.1
    assert r2(est) >= max(fixed) - 0.01, (est.rank_, r2(est), fixed)
    # the joint table and its one-SEM cell: the smallest rank, then the
    # sparsest candidate, within one SEM of the best cell
    mean, sem = res["joint_mean_loss"], res["joint_sem_loss"]
    i, j = res["joint_best_index"]
    best = np.unravel_index(np.argmin(mean), mean.shape)
    assert res["joint_rank"][i] == est.rank_ and res["sparsity"][j] == est.sparsity_
    assert mean[i, j] <= mean[best] + sem[best]
    assert not np.any(mean[:i] <= mean[best] + sem[best])
    assert not np.any(mean[i, :j] <= mean[best] + sem[best])


@pytest.mark.slow
def test_selection_does_not_move_when_the_tolerances_tighten(monkeypatch):
    # Issue 47: tightening the solver's tolerances 100x changes no selection
    # and moves the fit by far less than its precision claims.
    from mics.core import sparse_rrr

    X, Y, _ = _planted(12, n=1000, p=40, q=20, frac=0.2)
    Xf, Yf = _few_samples(1, 240)
    fits = {}
    for scale in (1.0, 0.01):
        monkeypatch.setattr(sparse_rrr, "_CD_TOL", 1e-10 * scale)
        monkeypatch.setattr(sparse_rrr, "_PATH_TOL", 1e-8 * scale)
        fits[scale] = [
            ReducedRankRegressionCV(ranks=range(4), cv=5, sparsity="cv").fit(X, Y),
            ReducedRankRegressionCV(ranks=range(4), cv=5, sparsity="cv").fit(Xf, Yf),
        ]
    for loose, tight in zip(fits[1.0], fits[0.01], strict=True):
        assert (loose.rank_, loose.sparsity_) == (tight.rank_, tight.sparsity_)
        np.testing.assert_array_equal(loose.source_members_, tight.source_members_)
        np.testing.assert_allclose(
            loose.cv_results_["joint_mean_loss"], tight.cv_results_["joint_mean_loss"], rtol=1e-6
        )
        np.testing.assert_allclose(loose.coef_, tight.coef_, atol=1e-6 * np.abs(tight.coef_).max())
