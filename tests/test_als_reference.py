"""The ALS core against a closed-form optimum that does not go through it.

With one modulator (``m = 1``) and one channel (``K = 1``) the channel term
``lambda (c z)(a . x) b`` is ``(z x) G`` with ``G = lambda c a b^T`` a
rank-1 (p, q) matrix (``c = +-1``). With ``alpha = alpha_channels = 0``
(no ridge) and a full-rank baseline (``rank = min(p, q)``: ``B`` is then
unconstrained) the MIC fit minimises

    ||y - 1 mu - x B - z D - phi G||^2   over mu, B, D and rank(G) <= 1,

with ``phi = (x - x_mean) (z - z_mean)`` (the interaction is built from the
centred source and modulator; its mean goes into the intercept). For a
fixed ``G`` the best ``(mu, B, D)`` is ordinary least squares, so by
Frisch-Waugh-Lovell the profiled problem is

    ||M y - (M phi) G||^2   over rank(G) <= 1,    M = I - projection on [1, x, z],

a rank-1 reduced-rank regression of the residual ``y`` on the residual
``phi``: ``G = G_ols v v^T`` with ``G_ols`` the least-squares coefficients
and ``v`` the top right singular vector of the fitted values
``(M phi) G_ols``. ``(mu, B, D)`` are then the least-squares fit of
``y - phi G`` on ``[1, x, z]``. All of this is plain NumPy here (``lstsq``
and one SVD), with no moment, operator, standardisation or ALS code of
``mics``.

Without penalties the optimum does not depend on units, so the
standardisation inside ``MICs`` changes nothing, and every route (moment
solver, data solver, Dask chunks, precomputed moments) must land on it.
The ALS converges linearly, so the agreement is set by ``tol``: measured
relative (Frobenius) errors of tensor / coef_ / modulator_coef_ /
intercept_ were 5.8e-8 / 7.6e-7 / 7.6e-7 / 2.1e-6 at ``tol=1e-10``,
3.7e-9 / 5.0e-8 / 5.0e-8 / 1.3e-7 at ``1e-12`` and 1.6e-11 / 2.1e-10 /
2.1e-10 / 5.5e-10 at ``TOL = 1e-15`` (moments, data and fit_moments; the
Dask route 1e-12 / 1.3e-11 / 1.4e-11 / 3.5e-11), each without a
convergence warning. ``RTOL`` allows about four times the largest.
"""

import warnings

import numpy as np
import pytest
from sklearn.exceptions import ConvergenceWarning

import mics
from mics.core import als, compute_moments

T, P, Q = 400, 5, 4
TOL = 1e-15  # relative loss decrease that stops a stage
RTOL = 2e-9  # measured: 5.5e-10 at most (intercept), 1.6e-11 on the tensor


def _data(seed=0):
    """Correlated source and modulator (so the residualisation matters), a planted channel."""
    rng = np.random.default_rng(seed)
    z = 2.0 + rng.standard_normal((T, 1))  # non-zero mean: centring matters
    X = rng.standard_normal((T, P)) @ rng.standard_normal((P, P)) + 0.5 * z + 1.0
    B = rng.standard_normal((P, Q))
    D = rng.standard_normal((1, Q))
    a, b = rng.standard_normal(P), rng.standard_normal(Q)
    phi = (X - X.mean(0)) * (z - z.mean(0))
    Y = 0.3 + X @ B + z @ D + 0.4 * np.outer(phi @ a, b) + rng.standard_normal((T, Q))
    return X, Y, z


def _reference(X, Y, z, centre=True, additive=True, truncate_fitted=True):
    """Closed-form optimum: (tensor (p, q, 1), coef (p, q), modulator_coef (1, q), intercept).

    The keyword arguments give plausible wrong answers (for the power test):
    an interaction of the uncentred inputs, no additive term, or the rank-1
    truncation of the least-squares ``G`` itself rather than of the fitted
    values.
    """
    phi = (X - X.mean(0)) * (z - z.mean(0)) if centre else X * z
    base = np.column_stack([np.ones(len(X)), X] + ([z] if additive else []))

    def residual(V):
        return V - base @ np.linalg.lstsq(base, V, rcond=None)[0]

    Ry, Rphi = residual(Y), residual(phi)
    G_ols = np.linalg.lstsq(Rphi, Ry, rcond=None)[0]
    if truncate_fitted:
        v = np.linalg.svd(Rphi @ G_ols)[2][0]
        G = np.outer(G_ols @ v, v)
    else:
        U, s, Vt = np.linalg.svd(G_ols)
        G = s[0] * np.outer(U[:, 0], Vt[0])
    coefs = np.linalg.lstsq(base, Y - phi @ G, rcond=None)[0]
    D = coefs[1 + P :] if additive else np.zeros((1, Y.shape[1]))
    return G[:, :, None], coefs[1 : 1 + P], D, coefs[0]


def _rel(a, b):
    return float(np.linalg.norm(a - b) / np.linalg.norm(b))


def _estimator(**kw):
    return mics.MICs(
        rank=min(P, Q),
        n_channels=1,
        alpha=0.0,
        alpha_channels=0.0,
        tol=TOL,
        max_iter=5000,
        n_init=2,
        random_state=0,
        verbose=0,
        **kw,
    )


def _fit(route, X, Y, z):
    if route == "moments":
        return _estimator(solver="moments").fit(X, Y, z)
    if route == "data":
        return _estimator(solver="data").fit(X, Y, z)
    if route == "dask":
        da = pytest.importorskip("dask.array")
        chunks = lambda a: da.from_array(a, chunks=(150, a.shape[1]))  # noqa: E731
        return _estimator().fit(chunks(X), chunks(Y), chunks(z))
    if route == "fit_moments":
        return _estimator().fit_moments(compute_moments(X, Y, z))
    raise ValueError(route)


@pytest.mark.parametrize("joint", ["alternate", "profiled"])
@pytest.mark.parametrize("route", ["moments", "data", "dask", "fit_moments"])
def test_every_route_reaches_the_closed_form_optimum(route, joint, monkeypatch):
    # the joint stage either way: by alternation (the default here, p < T)
    # or with the baseline profiled out (mics.core.profiled)
    monkeypatch.setattr(als, "PROFILED_MIN_RATIO", np.inf if joint == "alternate" else 0.0)
    X, Y, z = _data()
    W_ref, B_ref, D_ref, mu_ref = _reference(X, Y, z)
    with warnings.catch_warnings():
        warnings.simplefilter("error", ConvergenceWarning)  # converged, not capped
        model = _fit(route, X, Y, z)
    W = model.modulation_tensor()
    errors = {
        "tensor": _rel(W, W_ref),
        "coef": _rel(model.coef_.T, B_ref),
        "modulator_coef": _rel(model.modulator_coef_.T, D_ref),
        "intercept": _rel(model.intercept_, mu_ref),
    }
    assert max(errors.values()) < RTOL, errors
    # the weight is lambda = ||G||, the patterns its singular vectors
    assert model.channel_weights_[0] == pytest.approx(np.linalg.norm(W_ref), rel=RTOL)
    # and the optimum's loss is below that of any other rank-1 G, so the
    # predictions are the reference's
    mu, B, D = mu_ref, B_ref, D_ref
    phi = (X - X.mean(0)) * (z - z.mean(0))
    pred = mu + X @ B + z @ D + phi @ W_ref[:, :, 0]
    assert _rel(model.predict(X, z), pred) < RTOL
    # The recorded loss (squared units of Y; no penalty at alpha = 0) ends at
    # the optimum's residual sum of squares: both the baseline step and the
    # channel step of the last joint sweep, and it never increased.
    rss = float(np.sum((Y - pred) ** 2))
    history = model.loss_history_
    np.testing.assert_allclose(history[-2:], rss, rtol=RTOL)
    assert np.all(np.diff(history) <= 1e-12 * history[0])


def test_reference_is_the_optimum_and_differs_from_near_misses():
    """The reference has power: plausible wrong answers are far from it.

    * an interaction of the uncentred inputs (``x z`` in place of
      ``(x - x_mean)(z - z_mean)``) has the same ``G`` (the difference lies
      in the span of ``[1, x, z]``) but moves ``B`` and ``D``;
    * without the additive term ``D`` the tensor changes;
    * the rank-1 truncation of the least-squares ``G`` (SVD of ``G``, not of
      the fitted values) is a different matrix when ``phi`` is not white.
    Each differs from the reference by orders of magnitude more than ``RTOL``.
    The reference is also a local minimum of the joint loss.
    """
    X, Y, z = _data()
    W_ref, B_ref, D_ref, _ = _reference(X, Y, z)
    W, B, D, _ = _reference(X, Y, z, centre=False)
    assert _rel(W, W_ref) < 1e-10  # same G ...
    assert min(_rel(B, B_ref), _rel(D, D_ref)) > 1e4 * RTOL  # ... another baseline
    assert _rel(_reference(X, Y, z, additive=False)[0], W_ref) > 1e4 * RTOL
    assert _rel(_reference(X, Y, z, truncate_fitted=False)[0], W_ref) > 1e4 * RTOL

    phi = (X - X.mean(0)) * (z - z.mean(0))
    base = np.column_stack([np.ones(T), X, z])

    def loss(G):
        r = Y - phi @ G
        r = r - base @ np.linalg.lstsq(base, r, rcond=None)[0]
        return float(np.sum(r**2))

    rng = np.random.default_rng(1)
    u, s, vt = np.linalg.svd(W_ref[:, :, 0])
    best = loss(W_ref[:, :, 0])
    for _ in range(20):
        da, db = rng.standard_normal(P) * 1e-3, rng.standard_normal(Q) * 1e-3
        assert loss(np.outer(s[0] * u[:, 0] + da, vt[0] + db)) > best


# ----------------------------------------------------------------------------
# Quantities the ALS reports about itself, recomputed from the data. Added for
# mutants that the routes above let through (results/mutation/README.md).
def _operators(X, Y, z):
    from mics.core.als import DataOperator, MomentOperator

    cm = compute_moments(X, Y, z).centered()
    return {"moments": MomentOperator(cm), "data": DataOperator(cm, X, Y, z)}


@pytest.mark.parametrize("solver", ["moments", "data"])
def test_penalties_follow_the_documented_formula(solver):
    """docs/model.md: alpha times the mean per-sample source variance times p + q,
    alpha_channels times the mean per-sample interaction variance times p + q + m."""
    from mics.core.als import penalties

    rng = np.random.default_rng(3)
    X, Y = rng.standard_normal((T, P)) + 1.0, rng.standard_normal((T, Q))
    Z = rng.standard_normal((T, 2)) * [1.0, 3.0] + 0.5 * X[:, :1]
    op = _operators(X, Y, Z)[solver]
    Xc, Zc = X - X.mean(0), Z - Z.mean(0)
    phi = (Xc[:, :, None] * Zc[:, None, :]).reshape(T, -1)
    phi_var = np.mean(np.var(phi, axis=0))  # per sample, centred
    x_var = np.mean(np.var(X, axis=0))
    got = penalties(op, 0.3, 0.7)
    assert got["alpha_B"] == pytest.approx(0.3 * x_var * (P + Q), rel=1e-12)
    assert got["alpha_W"] == pytest.approx(0.7 * phi_var * (P + Q + 2), rel=1e-12)


@pytest.mark.parametrize("solver", ["moments", "data"])
def test_target_block_reports_its_squared_error(solver):
    """The squared error the target block returns (used by the line search) is
    ``||R - Phi W||^2`` at the returned target patterns, penalty excluded."""
    from mics.core.als import _target_block, fit_baseline

    X, Y, z = _data()
    op = _operators(X, Y, z)[solver]
    B, D, _ = fit_baseline(op, min(P, Q), 0.0)
    op.set_baseline(B, D)
    rng = np.random.default_rng(4)
    A, C = rng.standard_normal((P, 2)), rng.standard_normal((1, 2))
    Bm, _, sq_err = _target_block(op, A, C, alpha_W=50.0)
    Xc, zc, Yc = X - X.mean(0), z - z.mean(0), Y - Y.mean(0)
    h = (Xc @ A) * (zc @ C)
    R = Yc - Xc @ B - zc @ D - (h - h.mean(0)) @ Bm.T
    assert sq_err == pytest.approx(float(np.sum(R**2)), rel=1e-10)


def test_channel_by_channel_solve_is_the_exact_ridge_solve():
    """Past ``_JOINT_SOLVE_MAX`` unknowns the factor is solved channel by channel;
    with one channel that is the whole ridge system ``(b^2 N + alpha I) f = g``."""
    from mics.core.als import _JOINT_SOLVE_MAX, _solve_factor

    d = _JOINT_SOLVE_MAX + 10
    rng = np.random.default_rng(5)
    F = rng.standard_normal((d + 20, d))
    N = (F.T @ F)[None, None]
    BtB = np.array([[2.0]])
    g = rng.standard_normal((d, 1))
    got = _solve_factor(N, BtB, g, 3.0, np.zeros((d, 1)))
    want = np.linalg.solve(2.0 * N[0, 0] + 3.0 * np.eye(d), g)
    np.testing.assert_allclose(got, want, rtol=1e-8, atol=1e-12)


def test_moments_with_an_empty_interaction_block_are_refused():
    """Raw moments whose interaction block ``Phi^T Phi`` is all zero (linear-only
    moments in a RawMoments) cannot fit channels: refused, not fitted as K = 0."""
    from dataclasses import replace

    from mics.core.stats import check_interaction

    X, Y, z = _data()
    raw = compute_moments(X, Y, z)
    check_interaction(raw)  # the full moments pass
    G = raw.G.copy()
    G[1:, 1:, 1:, 1:] = 0.0
    with pytest.raises(ValueError, match="no interaction terms"):
        check_interaction(replace(raw, G=G))
    with pytest.raises(ValueError, match="no interaction terms"):
        _estimator().fit_moments(replace(raw, G=G))


def test_chunked_rank_selection_matches_numpy_folds():
    """ReducedRankRegressionCV on Dask input (fold sums: total minus held-out
    block) against the fold losses recomputed in NumPy on the rows."""
    da = pytest.importorskip("dask.array")
    from mics import ReducedRankRegressionCV
    from tests.test_mics import _rrr_reference

    rng = np.random.default_rng(6)
    X = rng.standard_normal((240, 6)) + 2.0
    Y = X @ rng.standard_normal((6, 2)) @ rng.standard_normal((2, 5)) + rng.standard_normal(
        (240, 5)
    )
    model = ReducedRankRegressionCV(ranks=range(5), cv=4).fit(
        da.from_array(X, chunks=(50, 6)), da.from_array(Y, chunks=(50, 5))
    )
    fold_loss = np.empty((5, 4))
    for f, test in enumerate(np.array_split(np.arange(240), 4)):
        train = np.setdiff1d(np.arange(240), test)
        for r in range(5):
            coef, intercept = _rrr_reference(X[train], Y[train], r)
            resid = Y[test] - X[test] @ coef.T - intercept
            fold_loss[r, f] = np.sum(resid**2) / np.sum((Y[test] - Y[test].mean(0)) ** 2)
    np.testing.assert_allclose(model.cv_results_["fold_loss"], fold_loss, rtol=1e-9)
    coef, intercept = _rrr_reference(X, Y, model.rank_)
    np.testing.assert_allclose(model.coef_, coef, rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(model.intercept_, intercept, rtol=1e-9)
