"""The fast paths of issue #10: BLAS contractions, warm-started CV fits, sequential test."""

import warnings

import numpy as np
import pytest
from scipy import stats

from mics.core.als import (
    DataOperator,
    MomentOperator,
    _contract_pair,
    baseline_path,
    fit_mic_model,
)
from mics.core.heldout import heldout_loss
from mics.core.stats import compute_moments
from mics.data.folds import BlockedKFold
from mics.workflows.inference import _collect_null, _monte_carlo_p_value

from ._generate import make_mic_data


@pytest.fixture(scope="module")
def operator():
    X, Y, Z, _ = make_mic_data(T=400, p=9, q=7, m=3, seed=3)
    op = MomentOperator(compute_moments(X, Y, Z).centered())
    rng = np.random.default_rng(0)
    B = rng.standard_normal((9, 7))
    D = rng.standard_normal((3, 7))
    op.set_baseline(B, D)
    return op, B, D, rng


# ---------------------------------------------------------------- BLAS paths vs NumPy twins
def test_moment_operator_contractions_match_einsum(operator):
    op, B, D, rng = operator
    cm_M = op.Mab.reshape(op.m, op.m, op.p, op.p).transpose(2, 0, 3, 1)  # back to (i, a, j, b)
    A, C, Bm = (rng.standard_normal((n, 2)) for n in (op.p, op.m, op.q))
    S = op.Sphiy - np.einsum("iaj,jq->iaq", op.Sphix, B) - np.einsum("iab,bq->iaq", op.Sphiz, D)
    np.testing.assert_allclose(op.Sphir, S, rtol=1e-12, atol=1e-9)
    np.testing.assert_allclose(
        op.gram_source(C), np.einsum("ak,bl,iajb->klij", C, C, cm_M), rtol=1e-12, atol=1e-9
    )
    np.testing.assert_allclose(
        op.gram_modulator(A), np.einsum("ik,jl,iajb->klab", A, A, cm_M), rtol=1e-12, atol=1e-9
    )
    np.testing.assert_allclose(
        op.rhs_source(C, Bm), np.einsum("iaj,ak,jk->ik", S, C, Bm), rtol=1e-12, atol=1e-9
    )
    np.testing.assert_allclose(
        op.rhs_modulator(A, Bm), np.einsum("iaj,ik,jk->ak", S, A, Bm), rtol=1e-12, atol=1e-9
    )
    np.testing.assert_allclose(
        op.rhs_target(A, C), np.einsum("iaj,ik,ak->jk", S, A, C), rtol=1e-12, atol=1e-9
    )
    N = op.gram_modulator(A)
    np.testing.assert_allclose(
        _contract_pair(N, C), np.einsum("ak,klab,bl->kl", C, N, C), rtol=1e-12, atol=1e-9
    )


def _dense_baseline_path(op, ranks):
    """NumPy twin of the baseline solve: full eigendecomposition, dense projection."""
    Szz_inv = np.linalg.inv(op.Szz)
    Sxx_t = op.Sxx - op.Sxz @ Szz_inv @ op.Sxz.T
    Szr_t = op.Sxy - op.Sxz @ Szz_inv @ op.Szy
    B_full = np.linalg.solve(Sxx_t, Szr_t)
    F = B_full.T @ Szr_t
    evals, V = np.linalg.eigh((F + F.T) / 2)
    out = []
    for r in ranks:
        P = V[:, ::-1][:, :r] @ V[:, ::-1][:, :r].T
        B = B_full @ P
        D = Szz_inv @ (op.Szy - op.Sxz.T @ B)
        loss = op.residual_norm2(B, D)
        out.append((B, D, loss))
    return out


@pytest.mark.parametrize("path", ["moments", "data"])
def test_low_rank_baseline_basis_gives_the_dense_results(path):
    # The baseline solve computes only the leading eigenpairs and returns
    # B with its basis; set_baseline and the held-out score then multiply
    # by the factors. Every product must equal the dense computation.
    X, Y, Z, _ = make_mic_data(T=500, p=12, q=9, m=3, seed=5)
    test = np.arange(100, 200)
    train = np.setdiff1d(np.arange(500), test)
    total = compute_moments(X, Y, Z)
    block = compute_moments(
        X[test], Y[test], Z[test], shifts=(total.x_shift, total.z_shift, total.y_shift)
    )
    cm = (total - block).centered()
    op = MomentOperator(cm) if path == "moments" else DataOperator(cm, X, Y, Z, rows=train)
    ranks = [0, 1, 3, 9]
    # one rank at a time (the fits' use: only the leading r eigenpairs are
    # computed) and the whole path at once (the rank stage's)
    single = [baseline_path(op, [r], 0.0)[0] for r in ranks]
    for (B, D, loss, V), (B0, D0, loss0) in zip(
        single + baseline_path(op, ranks, 0.0), 2 * _dense_baseline_path(op, ranks), strict=True
    ):
        r = V.shape[1]
        np.testing.assert_allclose(V.T @ V, np.eye(r), atol=1e-12)
        np.testing.assert_allclose(B, B0, rtol=1e-9, atol=1e-9 * np.abs(B0).max(initial=1))
        np.testing.assert_allclose(D, D0, rtol=1e-9, atol=1e-9 * np.abs(D0).max(initial=1))
        assert loss == pytest.approx(loss0, rel=1e-10)
        assert op.residual_norm2(B, D, V) == pytest.approx(op.residual_norm2(B, D), rel=1e-12)
        assert heldout_loss(block, cm, B, D, basis=V) == pytest.approx(
            heldout_loss(block, cm, B, D), rel=1e-12
        )
        if path == "moments":
            op.set_baseline(B, D)
            dense = op.Sphir.copy()
            op.set_baseline(B, D, V)
            np.testing.assert_allclose(
                op.Sphir, dense, rtol=1e-12, atol=1e-12 * np.abs(dense).max()
            )
    # a fit carries the basis of its baseline, and the score uses it
    fit = fit_mic_model(op, 3, 1, random_state=0)
    V = fit.coef_basis
    np.testing.assert_allclose(fit.coef @ V @ V.T, fit.coef, atol=1e-12 * np.abs(fit.coef).max())
    fit_without = type(fit)(**{**vars(fit), "coef_basis": None})
    assert heldout_loss(block, cm, fit.coef, fit.modulator_coef, fit) == pytest.approx(
        heldout_loss(block, cm, fit.coef, fit.modulator_coef, fit_without), rel=1e-12
    )


def test_moment_pass_equals_khatri_rao_gram():
    rng = np.random.default_rng(1)
    X, Y, Z = (
        rng.standard_normal((97, 6)) + 3,
        rng.standard_normal((97, 4)),
        rng.standard_normal((97, 2)),
    )
    shifts = (np.full(6, 2.5), np.full(2, -0.5), np.full(4, 0.25))
    raw = compute_moments(X, Y, Z, shifts=shifts, chunk_size=10)  # ragged last chunk
    xt = np.column_stack([np.ones(97), X - shifts[0]])
    zt = np.column_stack([np.ones(97), Z - shifts[1]])
    U = np.einsum("ti,ta->tia", xt, zt).reshape(97, -1)
    np.testing.assert_allclose(raw.G.reshape(U.shape[1], -1), U.T @ U, rtol=1e-12, atol=1e-10)
    np.testing.assert_allclose(raw.Gy.reshape(U.shape[1], -1), U.T @ (Y - shifts[2]), rtol=1e-12)
    np.testing.assert_allclose(raw.Syy, (Y - shifts[2]).T @ (Y - shifts[2]), rtol=1e-12)


# ---------------------------------------------------------------- warm starts in CV
def _fold_operator(seed):
    X, Y, Z, _ = make_mic_data(T=800, p=20, q=15, seed=seed)
    train, _ = next(iter(BlockedKFold(5).split(X)))
    train = train if seed % 2 else np.sort(train)[::-1].copy()  # any fold, any order
    return MomentOperator(compute_moments(X[train], Y[train], Z[train]).centered())


@pytest.mark.parametrize("seed", range(6))
def test_warm_started_fold_fit_is_no_worse_than_cold_restarts(seed):
    op = _fold_operator(seed)
    kw = dict(max_iter=300, tol=1e-10)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        one = fit_mic_model(op, 3, 1, n_init=0, **kw)
        warm = fit_mic_model(op, 3, 2, n_init=0, warm_start=one, **kw)
        cold = fit_mic_model(op, 3, 2, n_init=3, random_state=seed, **kw)
    assert warm.loss_history[-1] <= cold.loss_history[-1] * (1 + 1e-6)
    # the history of the warm fit never increases (exact block minimisation)
    h = warm.loss_history
    assert np.all(np.diff(h) <= 1e-10 * np.abs(h[:-1]))


def test_warm_start_is_a_start_not_the_answer():
    """A warm start from a different K must not be returned unchanged: the fit improves on it."""
    op = _fold_operator(0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        one = fit_mic_model(op, 3, 1, n_init=0, max_iter=300, tol=1e-10)
        two = fit_mic_model(op, 3, 2, n_init=0, warm_start=one, max_iter=300, tol=1e-10)
    # two true channels: the second one lowers the loss well below the K = 1 optimum
    assert two.loss_history[-1] < 0.9 * one.loss_history[-1]
    assert two.weights.size == 2


# ---------------------------------------------------------------- sequential test
def test_sequential_p_value_equals_full_test_when_not_stopped():
    null = np.array([0.1, 0.5, -0.2, 0.3, 0.05])
    assert _monte_carlo_p_value(null, 0.4, 5, None) == pytest.approx(2 / 6)
    assert _monte_carlo_p_value(null, 0.4, 5, 3) == pytest.approx(2 / 6)  # 1 < h exceedances
    stopped, _ = _collect_null(iter(null), 0.0, 5, 2, 0)
    np.testing.assert_array_equal(stopped, null[:2])
    assert _monte_carlo_p_value(stopped, 0.0, 5, 2) == pytest.approx(2 / 2)


@pytest.mark.parametrize("h", [1, 5])
def test_sequential_test_is_calibrated_on_null_draws(h):
    """Besag-Clifford p-values under exchangeability: P(p <= a) <= a, binomial CI."""
    rng = np.random.default_rng(7)
    n_perm, reps, alpha = 99, 4000, 0.05
    rejections, evaluated = 0, 0
    for _ in range(reps):
        draws = rng.standard_normal(n_perm + 1)  # observed and nulls exchangeable
        null, _ = _collect_null(iter(draws[1:]), draws[0], n_perm, h, 0)
        evaluated += null.size
        rejections += _monte_carlo_p_value(null, draws[0], n_perm, h) <= alpha
    ci = stats.binomtest(rejections, reps).proportion_ci(0.99)
    assert ci.low <= alpha  # not anti-conservative
    assert ci.high >= alpha - 0.01  # and not needlessly conservative
    # and it stops early on null data: about h / E[p] evaluations, far fewer than 99
    assert evaluated / reps < (30 if h == 5 else 10)


@pytest.mark.slow
def test_sequential_modulation_test_same_for_one_and_two_jobs():
    import mics

    X, Y, Z, _ = make_mic_data(T=300, p=6, q=5, m=2, K=0, seed=4)
    est = mics.MICs(rank=2, cv=3, max_channels=1, n_init=0, random_state=0, verbose=0)
    kw = dict(n_permutations=9, min_shift=30, verbose=0, random_state=0, stop_after=2)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        a = mics.test_modulation(est, X, Y, Z, n_jobs=1, **kw)
        b = mics.test_modulation(est, X, Y, Z, n_jobs=2, **kw)
        full = mics.test_modulation(est, X, Y, Z, n_jobs=1, **{**kw, "stop_after": None})
    np.testing.assert_array_equal(a.null_distribution, b.null_distribution)
    assert a.p_value == b.p_value
    # Where it must stop, from the test run to the end (same shifts, same
    # order): the second null statistic reaching the observed one is the
    # second shift on these data (exceedances at shifts 1, 2, 3, 8 and 9 of 9).
    exceed = np.flatnonzero(full.null_distribution >= full.statistic)
    assert exceed.tolist() == [0, 1, 2, 7, 8]
    assert a.statistic == full.statistic
    stop = exceed[1] + 1
    assert a.null_distribution.size == stop == 2
    np.testing.assert_array_equal(a.null_distribution, full.null_distribution[:stop])
    np.testing.assert_array_equal(a.shifts, full.shifts[:stop])
    # Besag-Clifford's p = h / L, not the unstopped (1 + 5) / (1 + 9)
    assert a.p_value == 2 / 2
    assert full.p_value == 6 / 10


@pytest.mark.parametrize("groups", [None, "trials"])
def test_null_statistic_skips_only_the_final_fit(groups):
    """A null statistic needs the CV losses only: the same value, no final fit."""
    import mics
    from mics.data import make_problem
    from mics.model.fit import fit_problem
    from mics.workflows.inference import best_gain

    X, Y, Z, _ = make_mic_data(T=400, p=6, q=5, m=2, K=1, seed=3)
    g = np.repeat(np.arange(40), 10) if groups else None
    est = mics.MICs(rank=2, cv=4, max_channels=2, n_init=1, random_state=0, verbose=0)
    Zs = np.roll(Z, 97, axis=0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = est.fit(X, Y, Zs, groups=g)
        skipped = fit_problem(est.get_params(), make_problem(X, Y, Zs, groups=g), cv_only=True)
    assert best_gain(skipped.cv_results) == best_gain(model.cv_results_)
    for key, value in model.cv_results_.items():
        np.testing.assert_array_equal(skipped.cv_results[key], value)
    assert hasattr(model, "coef_") and skipped.fit is None


@pytest.mark.slow
def test_stopped_tests_keep_their_worker_processes():
    """Stopping early must not abort joblib's workers (respawning cost ~4.6 s a test)."""
    import os
    import shutil
    import subprocess

    import mics

    if shutil.which("pgrep") is None:
        pytest.skip("needs pgrep to list the worker processes")

    def children():
        out = subprocess.run(["pgrep", "-P", str(os.getpid())], capture_output=True, text=True)
        return set(out.stdout.split())

    X, Y, Z, _ = make_mic_data(T=300, p=6, q=5, m=2, K=0, seed=4)
    est = mics.MICs(rank=2, cv=3, max_channels=1, n_init=0, random_state=0, verbose=0)
    kw = dict(n_permutations=99, min_shift=30, verbose=0, stop_after=1, n_jobs=2)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        # a test run to the end leaves the pool's workers alive ...
        mics.test_modulation(
            est, X, Y, Z, random_state=0, **{**kw, "stop_after": None, "n_permutations": 4}
        )
        workers = children()
        # ... and stopped tests must keep them
        first = mics.test_modulation(est, X, Y, Z, random_state=0, **kw)
        second = mics.test_modulation(est, X, Y, Z, random_state=1, **kw)
        assert workers <= children()
    assert first.null_distribution.size < 99 and second.null_distribution.size < 99
    assert not [w for w in caught if "cancelled" in str(w.message)]
    # the batches change nothing about which null fits are used
    serial = mics.test_modulation(est, X, Y, Z, random_state=1, **{**kw, "n_jobs": 1})
    np.testing.assert_array_equal(serial.null_distribution, second.null_distribution)


# ---------------------------------------------------------------- BLAS threads, CV tolerance
def test_single_blas_thread_limits_and_restores():
    from threadpoolctl import threadpool_info

    from mics.core.linalg import single_blas_thread

    def blas_threads():
        return [i["num_threads"] for i in threadpool_info() if i["user_api"] == "blas"]

    before = blas_threads()
    with single_blas_thread():
        assert blas_threads() and all(n == 1 for n in blas_threads())
        with single_blas_thread():  # nested, as selection -> fit_mic_model
            assert all(n == 1 for n in blas_threads())
        assert all(n == 1 for n in blas_threads())
    assert blas_threads() == before


@pytest.mark.parametrize("K", [0, 2])
def test_cv_tolerance_keeps_the_channel_curve(monkeypatch, K):
    """The looser fold-fit tolerance moves the CV curve far less than its SEM.

    Reference: the same selection with the estimator's own tolerance (1e-7)
    in the fold fits. Null data (K = 0) has the slowly converging
    over-specified candidates that the tolerance is for.
    """
    import mics
    from mics.core import als as modulation
    from mics.model import selection

    calls, cv_tol = [], selection.CV_TOL
    fit_mic_model_ = modulation.fit_mic_model

    def recording_fit(*args, **kw):
        fit = fit_mic_model_(*args, **kw)
        calls.append((kw["tol"], fit.n_iter))
        return fit

    # _channel_path imports fit_mic_model at call time: only fold fits are recorded
    monkeypatch.setattr(modulation, "fit_mic_model", recording_fit)
    X, Y, Z, _ = make_mic_data(T=1200, p=20, q=15, m=3, K=K, seed=11)
    # the whole curve (the sequential search would stop at K + 1)
    est = mics.MICs(
        rank=3, cv=5, max_channels=3, n_init=0, channel_search="grid", random_state=0, verbose=0
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        loose = mics.MICs(**est.get_params()).fit(X, Y, Z)
        loose_calls, calls[:] = list(calls), []
        monkeypatch.setattr(selection, "CV_TOL", 0.0)
        tight = mics.MICs(**est.get_params()).fit(X, Y, Z)
    # every fold fit (5 folds x K = 0..3) ran at the CV tolerance, and it saved sweeps
    assert len(loose_calls) == len(calls) == 20
    assert {t for t, _ in loose_calls} == {max(est.tol, cv_tol)}
    assert {t for t, _ in calls} == {est.tol}
    assert sum(n for _, n in loose_calls) < sum(n for _, n in calls)
    a, b = loose.cv_results_, tight.cv_results_
    assert loose.n_channels_ == tight.n_channels_ == K
    diff = np.abs(a["n_channels_mean_loss"] - b["n_channels_mean_loss"])
    assert np.max(diff) < 0.05 * np.min(b["n_channels_sem_loss"])
    # the final fit on all data still runs to the estimator's tolerance
    np.testing.assert_allclose(loose.loss_history_, tight.loss_history_, rtol=1e-10)


@pytest.mark.parametrize("order", ["C", "F"])
def test_solve_psd_reads_the_upper_triangle_in_either_memory_order(order):
    # The C-ordered path hands LAPACK the transposed view (no transposing
    # copy): it must still read A's upper triangle. Garbage below the
    # diagonal makes reading the wrong one give a wrong answer.
    from mics.core.linalg import solve_psd

    rng = np.random.default_rng(7)
    F = rng.standard_normal((12, 12))
    S = F @ F.T + 12 * np.eye(12)
    B = rng.standard_normal((12, 3))
    A = np.array(np.triu(S) + np.tril(rng.standard_normal((12, 12)), -1), order=order)
    kept = A.copy(order=order)
    want = np.linalg.solve(S, B)
    np.testing.assert_allclose(solve_psd(A, B), want, rtol=1e-10)
    np.testing.assert_allclose(solve_psd(A, B[:, 0]), want[:, 0], rtol=1e-10)
    np.testing.assert_array_equal(A, kept)  # inputs are not overwritten
    # singular: the minimum-norm least-squares answer, not a failure
    u = rng.standard_normal((12, 1))
    P = np.array(u @ u.T, order=order)
    np.testing.assert_allclose(solve_psd(P, B), np.linalg.pinv(u @ u.T) @ B, atol=1e-10)


@pytest.mark.parametrize("path", ["moments", "data"])
@pytest.mark.parametrize("alpha_B", [0.0, 3.0])
def test_baseline_given_channels_is_the_dense_ridge_solve_on_their_residual(path, alpha_B):
    # The joint stage's baseline solve updates the channel-free solution by
    # rank-K terms. It must equal the dense ridge reduced-rank regression of
    # the residual Y - Phi W (its cross-moments formed directly), and its
    # loss the residual's penalised squared error.
    X, Y, Z, _ = make_mic_data(T=400, p=14, q=9, m=3, seed=8)
    cm = compute_moments(X, Y, Z).centered()
    op = MomentOperator(cm) if path == "moments" else DataOperator(cm, X, Y, Z)
    rng = np.random.default_rng(1)
    A, Bm, C = (
        rng.standard_normal((14, 2)),
        rng.standard_normal((9, 2)),
        rng.standard_normal((3, 2)),
    )
    H_int = op.interaction_gram(A, C)
    ux, uz, rw2 = op.channel_crosses(A, Bm, C, H_int)
    Sxr, Szr = op.Sxy - ux @ Bm.T, op.Szy - uz @ Bm.T
    Szz_inv = np.linalg.inv(op.Szz)
    Sxx_t = op.Sxx - op.Sxz @ Szz_inv @ op.Sxz.T + alpha_B * np.eye(14)
    Sxr_t = Sxr - op.Sxz @ Szz_inv @ Szr
    B_full = np.linalg.solve(Sxx_t, Sxr_t)
    evals, V = np.linalg.eigh(B_full.T @ Sxr_t)
    V = V[:, ::-1]
    ranks = [0, 1, 3]
    path = baseline_path(op, ranks, alpha_B, (A, Bm, C), H_int)
    for (B, D, loss, _), r in zip(path, ranks, strict=True):
        B0 = B_full @ V[:, :r] @ V[:, :r].T
        D0 = Szz_inv @ (Szr - op.Sxz.T @ B0)
        np.testing.assert_allclose(B, B0, rtol=1e-9, atol=1e-9 * np.abs(B0).max(initial=1))
        np.testing.assert_allclose(D, D0, rtol=1e-9, atol=1e-9 * np.abs(D0).max(initial=1))
        direct = (
            rw2
            - 2 * np.sum(B0 * Sxr)
            - 2 * np.sum(D0 * Szr)
            + np.sum(B0 * (op.Sxx @ B0))
            + 2 * np.sum(B0 * (op.Sxz @ D0))
            + np.sum(D0 * (op.Szz @ D0))
            + alpha_B * np.sum(B0**2)
        )
        assert loss == pytest.approx(direct, rel=1e-10)
