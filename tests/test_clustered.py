"""Cluster-robust least squares and false-discovery control (mics.core.clustered)."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import linalg, signal, stats

from mics.core.clustered import (
    clustered_ols,
    fdr_select,
    residual_autocorrelation,
)


def _ar(rng, n, k, rho):
    burn = 200
    x = rng.standard_normal((n + burn, k))
    return signal.lfilter([np.sqrt(1 - rho**2)], [1, -rho], x, axis=0)[burn:]


def _direct_cr2(C, W, y, codes):
    """CR2 variances and Bell-McCaffrey dof from the textbook n x n formulas."""
    D = np.column_stack([C, W])
    n, k = D.shape
    M = np.linalg.inv(D.T @ D)
    H = D @ M @ D.T
    beta = M @ D.T @ y
    u = y - D @ beta
    t = W.shape[1]
    tested = np.arange(C.shape[1], k)
    meat = np.zeros(k)
    G = []
    for g in np.unique(codes):
        idx = np.flatnonzero(codes == g)
        A = np.real(linalg.sqrtm(np.linalg.inv(np.eye(idx.size) - H[np.ix_(idx, idx)])))
        score = D[idx].T @ A @ u[idx]
        meat += (M @ score) ** 2
        # column g of Imbens-Kolesar's G matrix for each tested coefficient
        E = np.zeros((n, idx.size))
        E[idx, np.arange(idx.size)] = 1.0
        G.append((np.eye(n) - H) @ E @ A @ D[idx] @ M[:, tested])  # (n, t)
    Gm = np.stack(G, axis=1)  # (n, G, t)
    dof = np.empty(t)
    for i in range(t):
        lam = np.linalg.eigvalsh(Gm[:, :, i].T @ Gm[:, :, i])
        dof[i] = lam.sum() ** 2 / np.sum(lam**2)
    return beta[tested], np.sqrt(meat[tested]), dof


def test_clustered_ols_matches_textbook_cr2_and_bell_mccaffrey():
    rng = np.random.default_rng(0)
    n, G = 120, 12
    codes = np.repeat(np.arange(G), n // G)
    C = np.column_stack([np.ones(n), rng.standard_normal((n, 3))])
    W = rng.standard_normal((n, 2)) * (1 + np.abs(C[:, 1:2]))  # heteroscedastic leverage
    y = C @ [1.0, 0.5, -0.2, 0.0] + 0.3 * W[:, 0] + rng.standard_normal(n)
    fit = clustered_ols(C, W, y, codes)
    beta, se, dof = _direct_cr2(C, W, y, codes)
    np.testing.assert_allclose(fit.estimate[:, 0], beta, rtol=1e-10)
    np.testing.assert_allclose(fit.std_error[:, 0], se, rtol=1e-8)
    np.testing.assert_allclose(fit.dof, dof, rtol=1e-8)
    assert np.all(fit.dof < G - 1)  # the correction lowers them
    expected_p = 2 * stats.t.sf(np.abs(beta / se), dof)
    np.testing.assert_allclose(fit.p_value[:, 0], expected_p, rtol=1e-8)


def test_singleton_clusters_give_hc2():
    rng = np.random.default_rng(1)
    n = 60
    C = np.column_stack([np.ones(n), rng.standard_normal(n)])
    W = rng.standard_normal((n, 1))
    y = rng.standard_normal(n) * (1 + W[:, 0] ** 2)
    D = np.column_stack([C, W])
    M = np.linalg.inv(D.T @ D)
    h = np.einsum("ij,jk,ik->i", D, M, D)
    u = y - D @ (M @ D.T @ y)
    hc2 = np.sqrt(np.sum((D @ M)[:, 2] ** 2 * u**2 / (1 - h)))
    fit = clustered_ols(C, W, y, np.arange(n))
    np.testing.assert_allclose(fit.std_error[0, 0], hc2, rtol=1e-10)


def test_collinear_controls_are_a_span_and_several_responses_share_the_design():
    rng = np.random.default_rng(2)
    n = 200
    codes = np.arange(n) // 10
    C = rng.standard_normal((n, 3))
    C = np.column_stack([np.ones(n), C, C[:, 0] + C[:, 1]])  # a redundant control
    W = rng.standard_normal((n, 2))
    Y = rng.standard_normal((n, 4))
    both = clustered_ols(C, W, Y, codes)
    alone = clustered_ols(C[:, :4], W, Y[:, 2], codes)
    np.testing.assert_allclose(both.statistic[:, 2], alone.statistic[:, 0], rtol=1e-9)
    np.testing.assert_allclose(both.p_value[:, 2], alone.p_value[:, 0], rtol=1e-9)


def test_prais_winsten_prewhitening_is_the_transform_written_out():
    rng = np.random.default_rng(3)
    n, rho = 90, 0.6
    codes = np.repeat(np.arange(3), 30)
    C = np.ones((n, 1))
    W = rng.standard_normal((n, 1))
    y = rng.standard_normal(n)

    def pw(a):
        out = a.copy()
        for g in range(3):
            s = slice(30 * g, 30 * g + 30)
            seg = a[s]
            out[s][0] = np.sqrt(1 - rho**2) * seg[0]
            out[s][1:] = seg[1:] - rho * seg[:-1]
        return out

    fit = clustered_ols(C, W, y, codes, autocorrelation=rho)
    ref = clustered_ols(pw(C), pw(W), pw(y), codes)
    np.testing.assert_allclose(fit.statistic, ref.statistic, rtol=1e-10)


def test_residual_autocorrelation_recovers_an_ar1_coefficient():
    rng = np.random.default_rng(4)
    u = _ar(rng, 20000, 3, 0.7)
    codes = np.arange(20000) // 500
    assert residual_autocorrelation(u, codes) == pytest.approx(0.7, abs=0.02)
    assert residual_autocorrelation(rng.standard_normal(5000), np.arange(5000) // 50) < 0.05


def _rejections(rng, n_rep, cluster, rho_fit):
    """Share of null coefficients with p < 0.05: AR(0.8) regressors and errors."""
    n, t = 600, 8
    codes = np.arange(n) // cluster
    hits = []
    for _ in range(n_rep):
        X = _ar(rng, n, t + 4, 0.8)
        z = _ar(rng, n, 1, 0.8)
        e = _ar(rng, n, 1, 0.8)[:, 0]
        controls = np.column_stack([np.ones(n), X[:, t:], z])
        fit = clustered_ols(controls, z * X[:, :t], e, codes, autocorrelation=rho_fit)
        hits.append(fit.p_value[:, 0] < 0.05)
    return np.mean(hits), np.size(hits)


def test_trial_clustered_prewhitened_tests_hold_their_level_where_iid_tests_do_not():
    rng = np.random.default_rng(5)
    rate, n = _rejections(rng, 60, 30, 0.8)
    # exact binomial band for a 5% test over n (nearly independent) p-values
    lo, hi = stats.binom.ppf([0.0005, 0.9995], n, 0.05) / n
    assert lo <= rate <= hi
    # the same regressions treating every sample as independent reject far too often
    iid, _ = _rejections(np.random.default_rng(5), 15, 1, 0.0)
    assert iid > 0.15


def test_clustered_ols_rejects_bad_inputs():
    rng = np.random.default_rng(6)
    n = 40
    C, W, y = np.ones((n, 1)), rng.standard_normal((n, 2)), rng.standard_normal(n)
    codes = np.arange(n) // 10
    with pytest.raises(ValueError, match="linear combinations"):
        clustered_ols(C, np.column_stack([W, W[:, 0]]), y, codes)
    with pytest.raises(ValueError, match="at least two clusters"):
        clustered_ols(C, W, y, np.zeros(n))
    with pytest.raises(ValueError, match="NaN"):
        clustered_ols(C, W, np.r_[np.nan, y[1:]], codes)
    with pytest.raises(ValueError, match="same rows"):
        clustered_ols(C, W, y[:-1], codes)
    with pytest.raises(ValueError, match="autocorrelation"):
        clustered_ols(C, W, y, codes, autocorrelation=1.0)


def test_fdr_select_is_benjamini_hochberg_and_yekutieli():
    p = np.array([0.001, 0.008, 0.039, 0.041, 0.042, 0.06, 0.074, 0.205])
    bh, q = fdr_select(p, 0.05, "bh")
    # step-up: the largest k with p_(k) <= k q / m is 2
    np.testing.assert_array_equal(bh, [True, True] + [False] * 6)
    np.testing.assert_allclose(q[:2], [0.008, 0.032])
    by, _ = fdr_select(p, 0.05, "by")
    # the threshold divided by sum_{i <= 8} 1/i = 2.718: only the first survives
    np.testing.assert_array_equal(by, [True] + [False] * 7)
    # order does not matter, NaN is not tested
    perm = np.r_[np.nan, p[::-1]]
    rejected, adjusted = fdr_select(perm, 0.05, "bh")
    np.testing.assert_array_equal(rejected, np.r_[False, bh[::-1]])
    assert np.isnan(adjusted[0])
    with pytest.raises(ValueError, match="method"):
        fdr_select(p, 0.05, "holm")
    with pytest.raises(ValueError, match="fdr"):
        fdr_select(p, 1.5)


def test_joint_wald_test_is_the_cr2_quadratic_form_and_blind_to_signs():
    rng = np.random.default_rng(7)
    n, G = 150, 15
    codes = np.repeat(np.arange(G), n // G)
    C = np.column_stack([np.ones(n), rng.standard_normal((n, 2))])
    W = rng.standard_normal((n, 3))
    y = 0.2 * W[:, 1] + rng.standard_normal(n)
    fit = clustered_ols(C, W, y, codes, joint=True)
    # the CR2 covariance of the tested block, written out
    D = np.column_stack([C, W])
    M = np.linalg.inv(D.T @ D)
    H = D @ M @ D.T
    u = y - H @ y
    cov = np.zeros((3, 3))
    for g in range(G):
        idx = np.flatnonzero(codes == g)
        A = np.real(linalg.sqrtm(np.linalg.inv(np.eye(idx.size) - H[np.ix_(idx, idx)])))
        s = (M @ D[idx].T @ A @ u[idx])[3:]
        cov += np.outer(s, s)
    beta = (M @ D.T @ y)[3:]
    wald = beta @ np.linalg.solve(cov, beta) / 3
    np.testing.assert_allclose(fit.joint_statistic[0], wald, rtol=1e-8)
    np.testing.assert_allclose(fit.joint_p_value[0], stats.f.sf(wald, 3, G - 1), rtol=1e-8)
    flipped = clustered_ols(C, W * [1, -1, -1], y, codes, joint=True)
    np.testing.assert_allclose(flipped.joint_statistic, fit.joint_statistic, rtol=1e-10)
    assert clustered_ols(C, W, y, codes).joint_p_value is None
