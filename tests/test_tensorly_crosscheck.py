"""Cross-check of the modulation tensor against an independent implementation.

``tensorly.regression.CPRegressor`` fits ``y_t = <W, X_t>`` (no intercept)
with a CP-rank-K weight tensor by its own alternating least squares, with
loss ``||y - <W, X>||^2 + reg_W * sum_modes ||factor||_F^2``. It supports
tensor outputs: for inputs ``X_t`` of shape (p, m) and outputs ``y_t`` of
shape (q,), the weight tensor has shape (p, m, q) and the output mode is a
CP factor like the others, so the multi-output MIC term
``y_tj = sum_{i,a} W[i, j, a] x_ti z_ta`` is fitted directly (no need for
T*q samples of one-hot input tensors). Its CP penalty is the one of
``fit_mic_model(alpha_W=...)``: ``alpha_W * sum_k (|a_k|^2 + |b_k|^2 + |c_k|^2)``.

What ``mics`` adds that tensorly does not have: centring of everything with
training means, the interaction built from the *centred* source and
modulator, an unpenalised additive modulator effect ``D`` (always fitted)
and the baseline ``B``. The cross-check removes each difference exactly:

1. ``symmetrised`` data: every sample ``(x, z, y)`` is paired with
   ``(2 x_mean - x, z, -y)``. Then the centred source flips sign in the
   pair, so ``sum_t z_t y_t = 0``, ``sum_t z_t phi_t = 0`` and the
   interaction has zero mean *exactly*: ``D``'s optimum is exactly zero for
   every ``W``, and with ``rank=0`` mics solves the same problem as
   CPRegressor on the plain inputs ``(x_t - x_mean) o (z_t - z_mean)`` with
   the centred ``y``. ``Z`` has a non-zero mean, so an interaction built
   from the uncentred modulator would give a different tensor.
2. general data (``D != 0``, ``rank=0``): ``D`` and the intercept are
   unpenalised and enter linearly, so they can be profiled out: the
   problem is CPRegressor on the inputs ``P phi_t`` and outputs ``P y``,
   with ``P`` the projection off ``[1, Z]`` along the time axis (the input
   tensors are then no longer rank one; CPRegressor does not care).
3. general data with a full-rank, unpenalised baseline (``rank = min(p, q)``):
   likewise with ``P`` the projection off ``[1, X, Z]``. This exercises the
   joint (baseline | channels) refinement.

Both fits start from several initialisations (tensorly ``random_state``;
mics ``n_init``) and keep the lowest loss; both are run to tight
tolerances, and the dense tensors must agree to ``RTOL`` (observed: ~1e-8).
``test_crosscheck_has_power`` shows that the comparison would fail if mics
swapped modes, forgot to centre the modulator or dropped ``D``.
"""

import numpy as np
import pytest

tensorly_regression = pytest.importorskip("tensorly.regression")

from mics import MICs  # noqa: E402
from mics.core.als import DataOperator, MomentOperator, fit_mic_model  # noqa: E402
from mics.core.stats import compute_moments  # noqa: E402

T, P, Q, M, K = 300, 6, 4, 2, 2
RTOL = 1e-5  # agreement of the dense tensors (relative Frobenius)
TL_TOL = 1e-12  # tensorly: relative change of ||W|| that stops it
TL_SEEDS = (0, 1, 2)
# With a penalty, CPRegressor needs thousands of sweeps (it never rebalances the
# factor norms between modes), so penalised references use one start (all
# starts reach the same optimum on these problems).
TL_SEEDS_PENALISED = (1,)
REG = 5.0  # absolute CP penalty of the penalised cases (scatter units)
MICS_TOL = 1e-13  # mics: relative loss decrease that stops a stage


def _raw_data(seed=0, additive=False):
    rng = np.random.default_rng(seed)
    A = rng.standard_normal((P, K))
    Bm = rng.standard_normal((Q, K))
    C = rng.standard_normal((M, K))
    L = rng.standard_normal((P, P)) / np.sqrt(P)
    X = rng.standard_normal((T, P)) @ (np.eye(P) + 0.5 * L) + 1.5  # correlated, offset
    Z = rng.standard_normal((T, M)) + np.array([2.0, -1.0])  # the mean must matter
    Xc, Zc = X - X.mean(0), Z - Z.mean(0)
    Y = ((Xc @ A) * (Zc @ C)) @ Bm.T + 0.3 * rng.standard_normal((T, Q)) + 0.7
    if additive:
        Y += Z @ rng.standard_normal((M, Q)) + X @ (0.3 * rng.standard_normal((P, Q)))
    return X, Y, Z


def _symmetrised_data(seed=0):
    """Pairs (x, z, y), (2 x_mean - x, z, -y): the optimal D is exactly zero."""
    X, Y, Z = _raw_data(seed)
    Y = Y - Y.mean(0)
    X2 = np.vstack([X, 2 * X.mean(0) - X])
    return X2, np.vstack([Y, -Y]), np.vstack([Z, Z])


def _interaction(X, Z):
    """``(x_t - x_mean) o (z_t - z_mean)``, shape (T, p, m)."""
    return np.einsum("ti,ta->tia", X - X.mean(0), Z - Z.mean(0))


def _project_off(F, *covariates):
    """Residual of each column of ``F`` (flattened past axis 0) on [1, covariates]."""
    G = np.column_stack([np.ones(F.shape[0]), *covariates])
    Qb = np.linalg.qr(G)[0]
    F2 = F.reshape(F.shape[0], -1)
    return (F2 - Qb @ (Qb.T @ F2)).reshape(F.shape)


def _tensorly_fit(inputs, outputs, reg):
    """Best-of-seeds CPRegressor fit; returns W as (p, q, m) and its penalised loss."""
    best = None
    for seed in TL_SEEDS if reg == 0 else TL_SEEDS_PENALISED:
        reg_model = tensorly_regression.CPRegressor(
            K, tol=TL_TOL, reg_W=reg, n_iter_max=20000, random_state=seed, verbose=0
        ).fit(inputs, outputs)
        W = np.asarray(reg_model.weight_tensor_).transpose(0, 2, 1)  # (p, m, q) -> (p, q, m)
        penalty = reg * sum(float(np.sum(f**2)) for f in reg_model.cp_weight_[1])
        loss = _loss(W, inputs, outputs) + penalty
        if best is None or loss < best[1]:
            best = (W, loss)
    return best


def _loss(W, inputs, outputs):
    return float(np.sum((outputs - np.einsum("tia,ija->tj", inputs, W)) ** 2))


def _balanced_penalty(weights, reg):
    """CP penalty of a tensor with per-channel weights at balanced factor norms."""
    return reg * 3 * float(np.sum(np.asarray(weights) ** (2 / 3)))


def _rel(W, W_ref):
    return np.linalg.norm(W - W_ref) / np.linalg.norm(W_ref)


def _mics_fit(X, Y, Z, rank, reg, solver="moments"):
    cm = compute_moments(X, Y, Z).centered()
    op = MomentOperator(cm) if solver == "moments" else DataOperator(cm, X, Y, Z)
    return fit_mic_model(
        op, rank, K, alpha_W=reg, n_init=3, max_iter=5000, tol=MICS_TOL, random_state=0
    )


_CACHE = {}


def _reference(case, reg):
    """(X, Y, Z, tensorly W, tensorly loss, inputs, outputs) for one test case (cached)."""
    key = (case, reg)
    if key not in _CACHE:
        if case == "symmetrised":
            X, Y, Z = _symmetrised_data()
            inputs, outputs = _interaction(X, Z), Y - Y.mean(0)
        elif case == "profiled_D":
            X, Y, Z = _raw_data(additive=True)
            inputs = _project_off(_interaction(X, Z), Z)
            outputs = _project_off(Y, Z)
        elif case == "profiled_full_baseline":
            X, Y, Z = _raw_data(additive=True)
            inputs = _project_off(_interaction(X, Z), X, Z)
            outputs = _project_off(Y, X, Z)
        W, loss = _tensorly_fit(inputs, outputs, reg)
        _CACHE[key] = (X, Y, Z, W, loss, inputs, outputs)
    return _CACHE[key]


@pytest.mark.parametrize("solver", ["moments", "data"])
@pytest.mark.parametrize("reg", [0.0, REG])
def test_symmetrised_matches_tensorly(solver, reg):
    """D's optimum is exactly zero: mics(rank=0) == CPRegressor on centred x o z."""
    X, Y, Z, W_tl, loss_tl, inputs, outputs = _reference("symmetrised", reg)
    fit = _mics_fit(X, Y, Z, rank=0, reg=reg, solver=solver)
    assert fit.converged
    # the design really makes D vanish (otherwise the comparison would be unfair)
    assert np.abs(fit.modulator_coef).max() < 1e-10 * np.abs(Y).max()
    W = fit.modulation_tensor()
    assert W.shape == (P, Q, M)
    assert _rel(W, W_tl) < RTOL
    # same objective value (mics' factors are balanced, so its penalty is closed form)
    loss = _loss(W, inputs, outputs) + _balanced_penalty(fit.weights, reg)
    assert loss == pytest.approx(loss_tl, rel=1e-9)
    assert fit.loss_history[-1] == pytest.approx(loss, rel=1e-9)


@pytest.mark.parametrize(
    ("case", "rank", "reg"), [("profiled_D", 0, 0.0), ("profiled_full_baseline", min(P, Q), REG)]
)
def test_profiled_matches_tensorly(case, rank, reg):
    """With D (and a full-rank B) profiled out of inputs and outputs, the tensors agree."""
    X, Y, Z, W_tl, loss_tl, inputs, outputs = _reference(case, reg)
    fit = _mics_fit(X, Y, Z, rank=rank, reg=reg)
    assert fit.converged
    assert np.abs(fit.modulator_coef).max() > 0.1  # D really is in play here
    W = fit.modulation_tensor()
    assert _rel(W, W_tl) < RTOL
    loss = _loss(W, inputs, outputs) + _balanced_penalty(fit.weights, reg)
    assert loss == pytest.approx(loss_tl, rel=1e-9)


def test_estimator_matches_tensorly():
    """The public estimator (relative alpha, canonical form) gives the same tensor."""
    # alpha=0: the estimator's penalty is relative to the data, and tensorly's
    # penalised fits are slow; the penalised objective is checked above.
    X, Y, Z, W_tl, _, inputs, _ = _reference("symmetrised", 0.0)
    model = MICs(
        rank=0,
        n_channels=K,
        alpha=0.0,
        alpha_channels=0.0,
        n_init=3,
        max_iter=5000,
        tol=MICS_TOL,
        random_state=0,
    ).fit(X, Y, Z)
    W = model.modulation_tensor()
    assert W.shape == (P, Q, M)
    assert _rel(W, W_tl) < RTOL
    # canonical form: unit-norm patterns, positive weights sorted descending
    np.testing.assert_allclose(np.linalg.norm(model.source_patterns_, axis=0), 1.0)
    assert np.all(np.diff(model.channel_weights_) <= 0) and np.all(model.channel_weights_ > 0)
    # and its predictions are those of tensorly's model (plus the training means)
    pred_tl = np.einsum("tia,ija->tj", inputs, W_tl) + Y.mean(0)
    np.testing.assert_allclose(model.predict(X, Z), pred_tl, atol=1e-5 * np.abs(Y).max())


def test_crosscheck_has_power():
    """Typical mistakes move the tensor by far more than RTOL.

    Tensorly fits of the mistaken models (modulator not centred inside the
    interaction, D dropped, source and modulator modes swapped) are compared
    with the correct one; a mics with any of these bugs would fail above.
    """
    X, Y, Z, W_ok, _, _, _ = _reference("profiled_D", 0.0)
    Xc = X - X.mean(0)
    wrong = {
        "uncentred modulator": (
            _project_off(np.einsum("ti,ta->tia", Xc, Z), Z),
            _project_off(Y, Z),
        ),
        "no additive D": (_interaction(X, Z), Y - Y.mean(0)),
    }
    for name, (inputs, outputs) in wrong.items():
        W_bad, _ = _tensorly_fit(inputs, outputs, 0.0)
        assert _rel(W_bad, W_ok) > 100 * RTOL, name
    # A (p, m) <-> (m, p) mix-up in the Kronecker layout of phi (the same
    # numbers read in the wrong order) gives a different tensor.
    W_mixed = W_ok.transpose(0, 2, 1).reshape(P * M, Q).reshape(M, P, Q).transpose(1, 2, 0)
    assert _rel(W_mixed, W_ok) > 100 * RTOL
