"""A third population as modulator: the data path, its memory, its agreement with the moments."""

import tracemalloc
import warnings

import numpy as np
import pytest

import mics.core.als as modulation
from mics import MICs, simulate
from mics.core.als import DataOperator, _contract_pair, _solve_factor
from mics.core.grams import WeightedGrams
from mics.core.stats import RawLinearMoments, compute_moments
from mics.model.decomposition import pattern_states
from mics.model.solver import choose_solver, choose_solver_for, path_costs


@pytest.fixture(scope="module")
def population():
    # a few sources and targets, a modulator population of 130 neurons:
    # 2 channels x 130 > 256, so the modulator block is solved channel by channel
    return simulate(
        n_samples=400,
        n_source=6,
        n_target=5,
        n_modulators=130,
        rank=2,
        n_channels=2,
        modulator_kind="population",
        modulation_snr=2.0,
        random_state=3,
    )


# ------------------------------------------------------------------ linear moments
def test_linear_moments_are_exact_and_add_over_blocks():
    rng = np.random.default_rng(0)
    X = rng.standard_normal((300, 7)) + 40.0  # offsets: centring must stay exact
    Z = rng.standard_normal((300, 4)) - 2.0
    Y = rng.standard_normal((300, 3)) + 5.0
    total = compute_moments(X, Y, Z, interaction=False, chunk_size=41)
    assert isinstance(total, RawLinearMoments)
    shifts = (total.x_shift, total.z_shift, total.y_shift)
    block = compute_moments(X[50:120], Y[50:120], Z[50:120], shifts=shifts, interaction=False)
    train = (total - block).centered()
    keep = np.r_[0:50, 120:300]
    Xc, Zc, Yc = (a[keep] - a[keep].mean(0) for a in (X, Z, Y))
    for name, ref in [
        ("Sxx", Xc.T @ Xc),
        ("Sxz", Xc.T @ Zc),
        ("Szz", Zc.T @ Zc),
        ("Sxy", Xc.T @ Yc),
        ("Szy", Zc.T @ Yc),
        ("Syy", Yc.T @ Yc),
    ]:
        np.testing.assert_allclose(getattr(train, name), ref, rtol=1e-10, atol=1e-9)
    np.testing.assert_allclose(train.z_mean, Z[keep].mean(0), rtol=1e-12)
    # the interaction's mean (for the intercept) is the centred cross-product / n
    np.testing.assert_allclose(train.phi_mean, Xc.T @ Zc / keep.size, atol=1e-12)
    assert train.M is None
    # and the linear parts equal those of the full moments
    full = compute_moments(X, Y, Z).centered()
    for name in ("Sxx", "Sxz", "Szz", "Sxy", "Szy", "Syy", "phi_mean"):
        np.testing.assert_allclose(getattr(total.centered(), name), getattr(full, name), atol=1e-8)


def test_linear_moments_memory_does_not_grow_with_pm_squared():
    rng = np.random.default_rng(1)
    p, m, q = 50, 40, 10
    X, Z, Y = (rng.standard_normal((64, d)) for d in (p, m, q))
    raw = compute_moments(X, Y, Z, interaction=False)
    d = p + m + q
    # shifts and sums (2 d) plus the six scatter blocks of [x, z, y]: exactly
    blocks = p * p + m * m + q * q + p * m + p * q + m * q
    assert raw.nbytes == 8 * (2 * d + blocks)
    assert raw.nbytes < 8 * (p * m) ** 2 / 300
    cm = raw.centered()
    held = sum(getattr(cm, f).nbytes for f in ("Sxx", "Sxz", "Szz", "Sxy", "Szy", "Syy"))
    assert held == 8 * blocks


# --------------------------------------------------------------- weighted Grams
def test_weighted_grams_match_numpy_twin():
    rng = np.random.default_rng(2)
    T, d, K = 200, 9, 3
    F = rng.standard_normal((T, d))
    F -= F.mean(0)
    V = rng.standard_normal((T, K))
    twin = np.empty((K, K, d, d))
    for k in range(K):
        for l in range(K):
            a, b = F * V[:, [k]], F * V[:, [l]]
            twin[k, l] = (a - a.mean(0)).T @ (b - b.mean(0))
    N = WeightedGrams(F, V)
    f = rng.standard_normal(d)
    # a diagonal block's products with vectors come from the scaled rows (the
    # warm-started solves of the data path), without forming the block
    np.testing.assert_allclose(N.times(1, f), twin[1, 1] @ f, rtol=1e-12)
    assert N._diagonal == [None] * K
    np.testing.assert_allclose(np.asarray(N), twin, rtol=1e-12, atol=1e-10)
    np.testing.assert_allclose(N.times(1, f), twin[1, 1] @ f, rtol=1e-12)  # now the formed block
    np.testing.assert_allclose(N[0, 2] @ f, twin[0, 2] @ f, rtol=1e-12, atol=1e-10)
    np.testing.assert_allclose(N[1, 1], twin[1, 1], rtol=1e-12, atol=1e-10)
    U = rng.standard_normal((d, K))
    np.testing.assert_allclose(
        _contract_pair(N, U), _contract_pair(twin, U), rtol=1e-12, atol=1e-10
    )
    # the channel-by-channel solve gives the same factor from lazy or full blocks
    BtB = np.eye(K) + 0.3
    rhs = rng.standard_normal((d, K))
    # force the channel-by-channel update (it is chosen by K d)
    limit = modulation._JOINT_SOLVE_MAX
    try:
        modulation._JOINT_SOLVE_MAX = 0
        a = _solve_factor(N, BtB, rhs, 0.5, U)
        b = _solve_factor(twin, BtB, rhs, 0.5, U)
    finally:
        modulation._JOINT_SOLVE_MAX = limit
    np.testing.assert_allclose(a, b, rtol=1e-10)


# --------------------------------------------------------------- the two paths
def _fit(X, Y, Z, solver, **kw):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return MICs(solver=solver, random_state=4, verbose=0, **kw).fit(X, Y, Z)


@pytest.mark.parametrize("sketched_start", [False, True])
def test_data_and_moment_paths_agree_on_a_population_modulator(
    population, sketched_start, monkeypatch
):
    # the sketched start (large p m q) is computed by both operators alike
    if sketched_start:
        monkeypatch.setattr(modulation, "_EXACT_INIT_MAX", 0)
    X, Y, Z, truth = population
    a = _fit(X, Y, Z, "moments", rank=2, n_channels=2)
    b = _fit(X, Y, Z, "data", rank=2, n_channels=2)
    assert (a.solver_, b.solver_) == ("moments", "data")
    Wa, Wb = a.modulation_tensor(), b.modulation_tensor()
    assert np.linalg.norm(Wa - Wb) / np.linalg.norm(Wa) < 1e-8
    np.testing.assert_allclose(a.coef_, b.coef_, rtol=1e-8, atol=1e-10 * np.abs(a.coef_).max())
    np.testing.assert_allclose(a.loss_history_, b.loss_history_, rtol=1e-10)
    np.testing.assert_allclose(a.intercept_, b.intercept_, rtol=1e-8, atol=1e-10)
    # and from either start the strongest channel's modulator pattern is found
    # (400 samples for 130 modulator neurons: 0.83; a random direction gives ~0.1)
    cos = abs(a.modulator_patterns_[:, 0] @ truth.modulator_patterns_[:, 0])
    assert cos > 0.75


def test_data_and_moment_paths_agree_on_selection():
    X, Y, Z, _ = simulate(
        n_samples=360,
        n_source=8,
        n_target=6,
        n_modulators=12,
        rank=2,
        n_channels=1,
        modulator_kind="population",
        modulation_snr=2.0,
        random_state=5,
    )
    kw = dict(cv=4, max_rank=3, max_channels=2)
    a = _fit(X, Y, Z, "moments", **kw)
    b = _fit(X, Y, Z, "data", **kw)
    for key in ("rank_fold_loss", "n_channels_fold_loss"):
        np.testing.assert_allclose(a.cv_results_[key], b.cv_results_[key], rtol=1e-8)
    assert (a.rank_, a.n_channels_) == (b.rank_, b.n_channels_) == (2, 1)
    Wa, Wb = a.modulation_tensor(), b.modulation_tensor()
    assert np.linalg.norm(Wa - Wb) / np.linalg.norm(Wa) < 1e-8


def test_data_path_loss_history_never_increases(population):
    X, Y, Z, _ = population
    est = _fit(X, Y, Z, "data", rank=2, n_channels=3, alpha_channels=0.01)
    h = est.loss_history_
    assert h.size > 5
    assert np.all(np.diff(h) <= 1e-12 * np.abs(h[:-1]))


def test_data_path_memory_does_not_grow_with_pm_squared():
    p, q, m, T = 60, 8, 60, 300
    X, Y, Z, _ = simulate(
        n_samples=T, n_source=p, n_target=q, n_modulators=m, rank=1, n_channels=1,
        modulator_kind="population", random_state=6,
    )  # fmt: skip
    pm_squared = 8 * ((p + 1) * (m + 1)) ** 2  # what the moment path would hold (110 MB)
    data = 8 * T * (p + q + m)
    est = MICs(rank=1, n_channels=1, solver="data", max_iter=20, random_state=0, verbose=0)
    tracemalloc.start()
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            est.fit(X, Y, Z)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    # copies of the data, a few scaled rows and the (p, m, q) start: small
    # against (pm)^2, and bounded by a multiple of the data plus p m q.
    assert peak < 12 * data + 4 * 8 * p * m * q
    assert peak < pm_squared / 10
    # the operator keeps nothing of size (pm)^2 either
    cm = compute_moments(X, Y, Z, interaction=False).centered()
    op = DataOperator(cm, X, Y, Z)
    sizes = [v.nbytes for v in vars(op).values() if isinstance(v, np.ndarray)]
    assert max(sizes) == 8 * T * max(p, q, m)


def test_auto_solver_chooses_by_cost_and_memory():
    # a behavioural modulator and many samples: the moments pay for their pass
    assert choose_solver(20000, 60, 40, 3, memory_limit=2e9) == "moments"
    # a modulator population: (pm)^2 moments cost more than sweeping the data
    assert choose_solver(3000, 60, 40, 100, memory_limit=2e9, n_fits=41, n_folds=10) == "data"
    # and whatever the cost, moments beyond the memory limit are refused
    assert choose_solver(20000, 60, 40, 3, memory_limit=1e4) == "data"
    costs = path_costs(20000, 300, 100, 200)
    assert costs["moments"][1] > 2e10 > 2e9 > costs["data"][1]
    assert choose_solver_for(MICs().get_params(), 3000, 60, 100, 40) == "data"
    assert choose_solver_for(MICs().get_params(), 3000, 60, 3, 40) == "moments"


def test_auto_solver_picks_the_path_measured_faster():
    # Times measured by studies/performance/solver_choice.py (results/solver_choice/
    # solver_choice.txt) on the Semedo sample's shape (T=4000, p=79, q=31):
    # the capped selection of the studies took 5.95 s on the moments and 1.92 s
    # on the data at m=31 (auto used to pick the moments), 0.44 s and 0.87 s at
    # m=10; the default selection took 1.10 s and 12.03 s at m=3, 133.7 s and
    # 34.1 s at m=60.
    capped = dict(rank=2, cv=5, max_channels=2, n_init=1, max_iter=50)
    assert choose_solver_for(MICs(**capped).get_params(), 4000, 79, 31, 31) == "data"
    assert choose_solver_for(MICs(**capped).get_params(), 4000, 79, 10, 31) == "moments"
    assert choose_solver_for(MICs(rank=2).get_params(), 4000, 79, 3, 31) == "moments"
    assert choose_solver_for(MICs(rank=2).get_params(), 4000, 79, 60, 31) == "data"
    # fewer sweeps a fit leave less time for the moment pass to pay back
    few = path_costs(4000, 79, 31, 10, n_fits=11, max_iter=20)
    many = path_costs(4000, 79, 31, 10, n_fits=11)
    assert few["moments"][0] < many["moments"][0] and few["data"][0] < many["data"][0]
    saved_data = many["data"][0] - few["data"][0]
    assert saved_data > many["moments"][0] - few["moments"][0] > 0


# --------------------------------------------------------------- simulation
def test_population_modulator_gates_through_a_subset_of_neurons():
    X, Y, Z, truth = simulate(
        n_samples=4000,
        n_source=10,
        n_target=8,
        n_modulators=40,
        n_channels=2,
        modulator_kind="population",
        random_state=7,
    )
    C = truth.modulator_patterns_
    gating = truth.gating_neurons
    assert gating.size == 10  # m // 4
    off = np.setdiff1d(np.arange(40), gating)
    assert np.all(C[off] == 0)
    np.testing.assert_allclose(np.linalg.norm(C[gating], axis=0), 1.0)
    # Z is a correlated population: a 3-d latent carries half the variance
    eig = np.linalg.eigvalsh(np.cov(Z.T))[::-1]
    assert eig[:3].sum() / eig.sum() == pytest.approx(0.5, abs=0.1)
    # other modulator kinds keep every column gating unless told otherwise
    *_, t2 = simulate(n_samples=50, n_modulators=5, n_channels=1, random_state=7)
    np.testing.assert_array_equal(t2.gating_neurons, np.arange(5))
    with pytest.raises(ValueError, match="n_gating"):
        simulate(n_samples=50, n_modulators=5, n_gating=6)


def test_population_modulator_patterns_are_recovered():
    X, Y, Z, truth = simulate(
        n_samples=3000,
        n_source=20,
        n_target=15,
        n_modulators=60,
        rank=2,
        n_channels=1,
        modulator_kind="population",
        modulation_snr=1.0,
        random_state=8,
    )
    est = _fit(X, Y, Z, "data", rank=2, n_channels=1, alpha_channels=0.01)
    for name in ("source_patterns_", "target_patterns_", "modulator_patterns_"):
        cos = abs(float(getattr(est, name)[:, 0] @ getattr(truth, name)[:, 0]))
        assert cos > 0.95, (name, cos)
    # states along the fitted modulator pattern move the gate by its percentiles
    states = pattern_states(est, Z, percentiles=(10, 90))
    gates = (Z - est.modulator_mean_) @ est.modulator_patterns_[:, 0]
    lo, hi = states["pattern0_p10"], states["pattern0_p90"]
    np.testing.assert_allclose((lo - est.modulator_mean_) @ est.modulator_patterns_[:, 0],
                               np.percentile(gates, 10))  # fmt: skip
    # and B(z) changes between them by exactly the channel's rank-one term
    g_lo, g_hi = np.percentile(gates, [10, 90])
    dB = est.communication_matrix(hi) - est.communication_matrix(lo)
    expected = (
        (g_hi - g_lo)
        * est.channel_weights_[0]
        * np.outer(est.source_patterns_[:, 0], est.target_patterns_[:, 0])
    )
    np.testing.assert_allclose(dB, expected, rtol=1e-10, atol=1e-12)


# --------------------------------------------------------------- figures
def test_modulator_patterns_drawn_over_labelled_neurons():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import xarray as xr

    from mics import plotting

    X, Y, Z, truth = simulate(
        n_samples=800, n_source=6, n_target=5, n_modulators=40, rank=1, n_channels=1,
        modulator_kind="population", modulation_snr=2.0, random_state=9,
    )  # fmt: skip
    ids = [f"m{j:02d}" for j in range(40)]
    Zl = xr.DataArray(Z, dims=("time", "neuron"), coords={"neuron": ids})
    est = _fit(X, Y, Zl, "data", rank=1, n_channels=1)
    c = np.asarray(est.modulator_patterns_)[:, 0]
    (ax,) = plotting.plot_modulator_patterns(est, n_labels=5)
    heights = np.array([bar.get_height() for bar in ax.patches])
    np.testing.assert_allclose(heights, np.sort(c)[::-1])
    named = {t.get_text() for t in ax.texts}
    assert named == {ids[j] for j in np.argsort(-np.abs(c))[:5]}
    # the largest loadings sit on neurons that really gate
    assert {int(n[1:]) for n in named} <= set(truth.gating_neurons.tolist())
    # plot_channels draws the modulator column the same way for a population
    fig = plotting.plot_channels(est)
    assert len(fig.axes[2].patches) == 40
    plt.close("all")
