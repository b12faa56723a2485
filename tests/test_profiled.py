"""The joint stage by variable projection (issue 47, item 3): ``mics.core.profiled``.

The profiled loss must be the minimum of the full loss over the baseline
and the target patterns (checked against the alternation run to its
fixed point, which does not go through it), its gradient the loss's
(against finite differences), and the profiled fit the same optimum as the
alternation (and as the closed form, ``tests/test_als_reference.py``),
with a loss that never increases, a first-order stopping rule and far
fewer iterations where baseline and channels compete (p > T).
"""

import warnings

import numpy as np
import pytest
from sklearn.exceptions import ConvergenceWarning

import mics
from mics.core import als, compute_moments, penalties
from mics.core.profiled import BlockPreconditioner, ProfiledLoss
from mics.core.scales import InputScales

from ._generate import make_mic_data


def _operators(T=300, p=12, q=8, m=3, seed=0):
    """Moment and data operators of standardised simulated data, and their penalties."""
    X, Y, Z, _ = make_mic_data(T=T, p=p, q=q, m=m, r=2, K=2, seed=seed)
    X, Y, Z = InputScales.from_data(X, Y, Z).standardize(X, Y, Z)
    cm = compute_moments(X, Y, Z).centered()
    ops = als.MomentOperator(cm), als.DataOperator(cm, X, Y, Z)
    return ops, penalties(ops[0], 0.05, 0.125)


def _loss(op, pen, rank=2):
    return ProfiledLoss(
        op, rank, pen["alpha_B"], pen["alpha_W"], als.profiled_source(op, pen["alpha_B"])
    )


def _point(op, K=2, seed=1):
    rng = np.random.default_rng(seed)
    return rng.standard_normal((op.p, K)), rng.standard_normal((op.m, K))


def _full_loss(op, A, Bm, C, B, D, pen):
    """The penalised loss at every parameter, from the operator's block quantities."""
    op.set_baseline(B, D)
    H = op.interaction_gram(A, C)
    g = op.rhs_target(A, C)
    sq = op.rr - 2 * np.sum(g * Bm) + np.sum(H * (Bm.T @ Bm))
    ridge = np.sum(A**2) + np.sum(Bm**2) + np.sum(C**2)
    return sq + pen["alpha_B"] * np.sum(B**2) + pen["alpha_W"] * ridge


@pytest.mark.parametrize("path", [0, 1], ids=["moments", "data"])
def test_profiled_loss_is_the_minimum_over_baseline_and_targets(path):
    (ops, pen) = _operators()
    op = ops[path]
    A, C = _point(op)
    point = _loss(op, pen)(A, C)
    # the full loss at the profiled minimiser is the profiled loss ...
    full = _full_loss(op, A, point.Bm, C, point.B, point.D, pen)
    np.testing.assert_allclose(full, point.loss, rtol=1e-12)
    # ... and the alternation of the two exact block solves (baseline given
    # the targets, targets given the baseline) descends to it and not below
    Bm, H, previous = np.zeros_like(point.Bm), op.interaction_gram(A, C), np.inf
    for _ in range(5000):
        B, D, _, basis = als.baseline_path(op, [2], pen["alpha_B"], (A, Bm, C), H)[0]
        op.set_baseline(B, D, basis)
        Bm, _, _ = als._target_block(op, A, C, pen["alpha_W"])
        alternated = _full_loss(op, A, Bm, C, B, D, pen)
        if previous - alternated <= 1e-15 * alternated:
            break
        previous = alternated
    np.testing.assert_allclose(alternated, point.loss, rtol=1e-10)
    np.testing.assert_allclose(B, point.B, atol=1e-6 * np.abs(point.B).max())
    # a wrong minimiser is visibly worse
    assert _full_loss(op, A, 1.05 * point.Bm, C, point.B, point.D, pen) > point.loss * (1 + 1e-6)


@pytest.mark.parametrize("path", [0, 1], ids=["moments", "data"])
@pytest.mark.parametrize("rank", [0, 2])
def test_profiled_gradient_is_the_loss_gradient(path, rank):
    (ops, pen) = _operators(seed=2)
    op = ops[path]
    loss = _loss(op, pen, rank)
    A, C = _point(op, seed=3)
    point = loss(A, C)
    rng = np.random.default_rng(4)
    for _ in range(3):
        dA, dC = rng.standard_normal(A.shape), rng.standard_normal(C.shape)
        eps = 1e-5
        up = loss(A + eps * dA, C + eps * dC, gradient=False).loss
        down = loss(A - eps * dA, C - eps * dC, gradient=False).loss
        slope = np.sum(point.gA * dA) + np.sum(point.gC * dC)
        np.testing.assert_allclose((up - down) / (2 * eps), slope, rtol=1e-6)


def test_both_paths_give_the_same_profiled_loss():
    (mom, dat), pen = _operators(seed=5)
    A, C = _point(mom, seed=6)
    a, b = _loss(mom, pen)(A, C), _loss(dat, pen)(A, C)
    np.testing.assert_allclose(a.loss, b.loss, rtol=1e-12)
    for name in ("gA", "gC", "Bm", "B", "D"):
        x, y = getattr(a, name), getattr(b, name)
        np.testing.assert_allclose(x, y, atol=1e-9 * np.abs(y).max())


@pytest.mark.parametrize("joint", [True, False])
def test_preconditioner_inverts_the_block_grams(joint):
    (op, _), pen = _operators(seed=7)
    A, C = _point(op, seed=8)
    Bm = np.random.default_rng(9).standard_normal((op.q, 2))
    P = BlockPreconditioner(op, A, Bm, C, pen["alpha_W"], joint, joint)
    BtB = Bm.T @ Bm
    for N, d, G in ((op.gram_source(C), op.p, A), (op.gram_modulator(A), op.m, C)):
        H = 2 * (BtB[:, :, None, None] * N).transpose(0, 2, 1, 3).reshape(2 * d, 2 * d)
        if not joint:  # channel by channel: the diagonal blocks only
            H[:d, d:] = H[d:, :d] = 0
        H += 2 * pen["alpha_W"] * np.eye(2 * d)
        want = (H @ G.T.reshape(-1)).reshape(2, d).T
        got = P.solve(want, C)[0] if G is A else P.solve(A, want)[1]
        np.testing.assert_allclose(got, G, rtol=1e-9, atol=1e-12)


def _p_over_t(seed=0, T=120, p=200, q=20):
    X, Y, Z = mics.simulate(n_samples=T, n_source=p, n_target=q, n_modulators=3, rank=3,
                            n_channels=2, random_state=seed)[:3]  # fmt: skip
    X, Y, Z = InputScales.from_data(X, Y, Z).standardize(X, Y, Z)
    cm = compute_moments(X, Y, Z).centered()
    ops = als.MomentOperator(cm), als.DataOperator(cm, X, Y, Z)
    return ops, penalties(ops[0], 0.05, 0.125)


def _fit(op, pen, joint, rank=3, **kw):
    kw = {"n_init": 1, "max_iter": 1000, "tol": 1e-7, "random_state": 0, **kw}
    with warnings.catch_warnings():
        warnings.simplefilter("error", ConvergenceWarning)
        return als.fit_mic_model(op, rank, 2, **pen, joint=joint, **kw)


def _relative_gradient(op, pen, fit):
    """``sqrt(g^T P^-1 g / (2 f))`` of the profiled loss at a fit's patterns."""
    g = np.cbrt(fit.weights)
    A, C = fit.source_patterns * g, fit.modulator_patterns * g
    point = _loss(op, pen, 3)(A, C)
    pA, pC = BlockPreconditioner(op, A, point.Bm, C, pen["alpha_W"], False, True).solve(
        point.gA, point.gC
    )
    return np.sqrt((np.sum(point.gA * pA) + np.sum(point.gC * pC)) / (2 * point.loss))


@pytest.mark.parametrize("path", [0, 1], ids=["moments", "data"])
def test_profiled_fit_reaches_the_alternations_optimum_in_fewer_iterations(path):
    # p > T: the baseline can absorb any channel term and the alternation
    # crawls; the profiled stage converges far sooner, to a lower loss
    ops, pen = _p_over_t()
    op = ops[path]
    alternate, profiled = _fit(op, pen, "alternate"), _fit(op, pen, "profiled")
    for h in (alternate.loss_history, profiled.loss_history):
        assert np.all(np.diff(h) <= 1e-12 * np.abs(h[:-1]))  # never increases
    assert profiled.loss_history[-1] <= alternate.loss_history[-1]
    assert profiled.n_iter <= 0.8 * alternate.n_iter, (profiled.n_iter, alternate.n_iter)
    # stopped on the first-order measure, and the alternation run much
    # tighter reaches the same point
    assert _relative_gradient(op, pen, profiled) <= 1e-7
    tight = _fit(op, pen, "alternate", tol=1e-13, max_iter=20000)
    np.testing.assert_allclose(profiled.loss_history[-1], tight.loss_history[-1], rtol=1e-11)
    W, W_tight = profiled.modulation_tensor(), tight.modulation_tensor()
    assert np.linalg.norm(W - W_tight) <= 1e-5 * np.linalg.norm(W_tight)


def test_profiled_fits_agree_with_the_alternation_on_small_problems():
    # p < T, where "auto" alternates: the same optimum either way
    (op, _), pen = _operators(T=400, p=10, q=7, m=3, seed=11)
    a = _fit(op, pen, "alternate", rank=2, n_init=2, tol=1e-13, max_iter=20000)
    b = _fit(op, pen, "profiled", rank=2, n_init=2, tol=1e-9)
    np.testing.assert_allclose(b.loss_history[-1], a.loss_history[-1], rtol=1e-12)
    Wa, Wb = a.modulation_tensor(), b.modulation_tensor()
    assert np.linalg.norm(Wa - Wb) <= 1e-6 * np.linalg.norm(Wa)
    np.testing.assert_allclose(b.coef, a.coef, atol=1e-6 * np.abs(a.coef).max())


def test_tightening_tol_moves_a_profiled_fit_by_its_tolerance():
    # the stop is a relative gradient norm, so the fit's error scales with tol
    ops, pen = _p_over_t(seed=3)
    fits = [_fit(ops[0], pen, "profiled", tol=tol) for tol in (1e-5, 1e-7, 1e-9)]
    W = [f.modulation_tensor() for f in fits]
    moves = [np.linalg.norm(W[i] - W[2]) / np.linalg.norm(W[2]) for i in (0, 1)]
    assert moves[1] <= 1e-5 and moves[1] <= 0.1 * moves[0], moves


def test_auto_profiles_where_the_source_outnumbers_the_samples():
    (op, _), pen = _operators()
    assert als.joint_method("auto", op, pen["alpha_B"]) == "alternate"  # p = 12 < T = 300
    assert als.joint_method("profiled", op, pen["alpha_B"]) == "profiled"
    (op_wide, _), pen_wide = _p_over_t()
    assert als.joint_method("auto", op_wide, pen_wide["alpha_B"]) == "profiled"
    assert als.joint_method("alternate", op_wide, pen_wide["alpha_B"]) == "alternate"
    group = penalties(op_wide, 0.05, 0.125, sparsity=1.0)["group_penalty"]
    assert als.joint_method("profiled", op_wide, pen_wide["alpha_B"], group) == "alternate"
    with pytest.raises(ValueError, match="joint must be"):
        als.joint_method("newton", op, pen["alpha_B"])


def test_mics_joint_reaches_the_final_fit_and_every_fold_fit(monkeypatch):
    # MICs(joint=...) must choose the method of every MIC fit it runs, the
    # selection's fold fits included, not only the final one
    X, Y, Z, _ = make_mic_data(T=300, p=12, q=8, m=3, r=2, K=2, seed=4)
    original, seen = als.fit_mic_model, []

    def spy(*args, **kwargs):
        seen.append(kwargs.get("joint", "auto"))
        return original(*args, **kwargs)

    monkeypatch.setattr(als, "fit_mic_model", spy)
    for name in ("mics.model.fit", "mics.model.selection", "mics.model.warm_path"):
        module = __import__(name, fromlist=["_"])
        if getattr(module, "fit_mic_model", None) is original:
            monkeypatch.setattr(module, "fit_mic_model", spy)
    est = mics.MICs(joint="profiled", cv=3, max_rank=2, max_channels=2, random_state=0, verbose=0)
    est.fit(X, Y, Z)
    assert len(seen) > 3 and set(seen) == {"profiled"}, seen


def test_mics_profiled_fit_is_no_worse_than_the_alternation():
    # p < T: "auto" alternates, "profiled" reaches at least the same optimum
    X, Y, Z, _ = make_mic_data(T=300, p=12, q=8, m=3, r=2, K=2, seed=5)
    fits = {
        joint: mics.MICs(rank=2, n_channels=2, joint=joint, random_state=0, verbose=0).fit(X, Y, Z)
        for joint in ("auto", "alternate", "profiled")
    }
    np.testing.assert_array_equal(fits["auto"].loss_history_, fits["alternate"].loss_history_)
    profiled, alternate = fits["profiled"].loss_history_, fits["alternate"].loss_history_
    assert not np.array_equal(profiled, alternate)  # a different method ran
    assert profiled[-1] <= alternate[-1] * (1 + 1e-9)
    np.testing.assert_allclose(profiled[-1], alternate[-1], rtol=1e-5)
    with pytest.raises(ValueError, match="joint must be"):
        mics.MICs(joint="newton").fit(X, Y, Z)
