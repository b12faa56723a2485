"""Warm-started conjugate gradients for the large channel-by-channel solves (issue 34, item 3).

:class:`mics.core.linalg.WarmStartedSolves` replaces a fresh Cholesky
factorisation by conjugate gradients preconditioned with an earlier factor.
It must give the direct solution to its tolerance, never raise the block's
quadratic, fall back to a factorisation when the preconditioner is stale,
and leave a whole fit where the direct solves leave it.
"""

import numpy as np
import pytest
from scipy import linalg

import mics
from mics.core import als
from mics.core.linalg import WarmStartedSolves, cho_solve, solve_psd

from ._generate import make_mic_data


def _system(rng, d, scale=0.0, base=None):
    """An SPD ridge system like a source solve's; ``scale`` perturbs ``base``'s weights."""
    if base is None:
        X = rng.standard_normal((d + 20, d))
        w = 1.0 + rng.random(d + 20)
    else:
        X, w = base
        w = w * (1.0 + scale * rng.standard_normal(w.size))
    H = X.T @ (w[:, None] ** 2 * X) + 0.5 * np.eye(d)
    return H, (X, w)


def _quadratic(H, g, x):
    return 0.5 * x @ H @ x - g @ x


def test_conjugate_gradients_give_the_direct_solution_of_slowly_changing_systems():
    rng = np.random.default_rng(0)
    d = 120
    solves = WarmStartedSolves(min_order=100, rtol=1e-12, max_iter=30)
    H, base = _system(rng, d)
    g = rng.standard_normal(d)
    x = solves.solve("a", H, g, np.zeros(d))  # the first is factorised
    assert solves.counts == {"cg": 0, "factorised": 1}
    np.testing.assert_allclose(x, solve_psd(H, g), rtol=0, atol=1e-12 * np.abs(x).max())
    for _ in range(5):
        H, _ = _system(rng, d, scale=0.02, base=base)
        g = g + 0.01 * rng.standard_normal(d)
        direct = solve_psd(H, g)
        x_new = solves.solve("a", H, g, x)
        # to the tolerance asked: a residual of 1e-12 relative
        assert np.linalg.norm(H @ x_new - g) <= 1.01e-12 * np.linalg.norm(g)
        np.testing.assert_allclose(x_new, direct, rtol=0, atol=1e-9 * np.abs(direct).max())
        # started at the present value, never above it on the block's quadratic
        assert _quadratic(H, g, x_new) <= _quadratic(H, g, x)
        x = x_new
    # small changes: every later system solved by conjugate gradients
    assert solves.counts == {"cg": 5, "factorised": 1}


def test_a_stale_preconditioner_falls_back_to_a_fresh_factorisation():
    rng = np.random.default_rng(1)
    d = 150
    solves = WarmStartedSolves(min_order=100, max_iter=3)
    H0, _ = _system(rng, d)
    H1, _ = _system(rng, d)  # unrelated: the first factor is a poor preconditioner
    g = rng.standard_normal(d)
    solves.solve("a", H0, g, np.zeros(d))
    x = solves.solve("a", H1, g, np.zeros(d))
    assert solves.counts == {"cg": 0, "factorised": 2}
    np.testing.assert_allclose(x, solve_psd(H1, g), rtol=1e-10)
    # and each key keeps its own factor: "b" is factorised afresh
    solves.solve("b", H1, g, x)
    assert solves.counts["factorised"] == 3


def test_small_and_singular_systems_are_solve_psd():
    rng = np.random.default_rng(2)
    solves = WarmStartedSolves(min_order=50)
    H, _ = _system(rng, 20)
    g = rng.standard_normal(20)
    np.testing.assert_array_equal(solves.solve("a", H, g, g), solve_psd(H, g))
    A = rng.standard_normal((60, 30))
    H = A @ A.T  # order 60, rank 30: no Cholesky factor
    g = H @ rng.standard_normal(60)
    np.testing.assert_allclose(solves.solve("a", H, g, np.zeros(60)), solve_psd(H, g), atol=1e-8)
    assert solves.counts == {"cg": 0, "factorised": 0}


@pytest.mark.parametrize("lower", [False, True])
@pytest.mark.parametrize("columns", [None, 1, 3])
def test_cho_solve_is_scipys_to_the_bit_and_solves_the_system(lower, columns):
    # the check-free path must be the same LAPACK call, whatever the order of B
    rng = np.random.default_rng(3)
    H, _ = _system(rng, 40)
    factor = linalg.cho_factor(H, lower=lower)
    shape = (40,) if columns is None else (40, columns)
    for B in (rng.standard_normal(shape), np.asfortranarray(rng.standard_normal(shape))):
        X = cho_solve(factor, B)
        np.testing.assert_array_equal(X, linalg.cho_solve(factor, B))
        np.testing.assert_allclose(H @ X, B, rtol=1e-10, atol=1e-10)
    column = rng.standard_normal((40, 3))[:, 1]  # a strided view, as the preconditioner passes
    np.testing.assert_array_equal(cho_solve(factor, column), linalg.cho_solve(factor, column))


@pytest.fixture
def counted_solves(monkeypatch):
    """Every WarmStartedSolves a fit creates, with its counts."""
    made = []

    class Counted(WarmStartedSolves):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            made.append(self)

    monkeypatch.setattr(als, "WarmStartedSolves", Counted)
    return made


@pytest.mark.parametrize("solver", ["moments", "data"])
def test_a_fit_with_warm_started_solves_is_the_fit_with_direct_solves(
    monkeypatch, counted_solves, solver
):
    # more source neurons than samples: the fit runs in 300 sample
    # coordinates, channel by channel (K d > 256), with a long joint stage;
    # on the data path the systems are products with the data, formed only
    # to be factorised
    X, Y, Z, _ = make_mic_data(T=300, p=400, q=30, m=3, seed=4)
    # the alternation's joint stage (the default there profiles the baseline
    # out and solves no source system after the start)
    monkeypatch.setattr(als, "PROFILED_MIN_RATIO", np.inf)
    fits = {}
    for min_order in (np.inf, 100):
        for operator in (als.MomentOperator, als.DataOperator):
            monkeypatch.setattr(operator, "cg_min_order", min_order)
        est = mics.MICs(rank=2, n_channels=2, random_state=0, verbose=0, solver=solver)
        fits[min_order] = est.fit(X, Y, Z)
    direct, warm = fits[np.inf], fits[100]
    counts = {k: sum(s.counts[k] for s in counted_solves) for k in ("cg", "factorised")}
    # both kinds of solve were exercised, conjugate gradients dozens of times
    assert counts["cg"] >= 50 and counts["factorised"] > 0
    history = np.asarray(warm.loss_history_)
    assert np.all(np.diff(history) <= 1e-12 * history[:-1])  # the loss never increases
    assert warm.n_iter_ == direct.n_iter_
    np.testing.assert_allclose(warm.loss_history_, direct.loss_history_, rtol=1e-10)
    names = ("source_patterns_", "target_patterns_", "modulator_patterns_", "channel_weights_")
    for name in (*names, "coef_"):
        a, b = getattr(warm, name), getattr(direct, name)
        np.testing.assert_allclose(a, b, rtol=0, atol=1e-7 * np.abs(b).max())
