"""Chunked inputs end to end: selection, estimators from moments, sessions, test, bootstrap.

Every comparison is against the in-memory code on the same data and seed,
to 1e-10 relative: the chunked route must be the same computation, not an
approximation.
"""

import numpy as np
import pytest

da = pytest.importorskip("dask.array")
pytest.importorskip("distributed")

import mics  # noqa: E402
from mics.core.stats import compute_moments  # noqa: E402
from mics.workflows.sessions import fit_each_session  # noqa: E402
from tests._generate import make_mic_data  # noqa: E402

RTOL = 1e-10
# uneven row blocks; fold boundaries fall inside blocks
CHUNKS = (130, 71, 200, 199)


@pytest.fixture(scope="module")
def data():
    X, Y, Z, truth = make_mic_data(T=600, p=12, q=9, m=3, r=2, K=1, weights=(4.0,), seed=11)
    return X, Y, Z, truth


def lazy(*arrays, chunks=CHUNKS):
    return tuple(da.from_array(a, chunks=(chunks,) + (-1,) * (a.ndim - 1)) for a in arrays)


def rel(a, b):
    a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    return np.linalg.norm(a - b) / max(np.linalg.norm(b), 1e-300)


def assert_same_fit(a, b, rtol=RTOL):
    """Same selection, cross-validation curves, parameters and predictions."""
    assert (a.rank_, a.n_channels_) == (b.rank_, b.n_channels_)
    for key in getattr(b, "cv_results_", {}):
        if key.endswith("loss"):
            assert rel(a.cv_results_[key], b.cv_results_[key]) < rtol, key
    for name in ("coef_", "intercept_", "modulator_coef_"):
        assert rel(getattr(a, name), getattr(b, name)) < rtol, name
    assert rel(a.modulation_tensor(), b.modulation_tensor()) < rtol
    np.testing.assert_allclose(a.channel_weights_, b.channel_weights_, rtol=rtol)


def test_scaled_raw_moments_are_moments_of_scaled_data(data):
    X, Y, Z, _ = data
    sz = np.array([2.0, 0.1, 30.0])
    raw = compute_moments(X, Y, Z)
    direct = compute_moments(
        3.0 * X, 0.5 * Y, Z * sz, shifts=(3.0 * raw.x_shift, raw.z_shift * sz, 0.5 * raw.y_shift)
    )
    got = raw.scaled(3.0, sz, 0.5)
    for name in ("x_shift", "z_shift", "y_shift", "G", "Gy", "Syy"):
        np.testing.assert_allclose(
            getattr(got, name),
            getattr(direct, name),
            rtol=1e-12,
            atol=1e-12 * np.abs(getattr(direct, name)).max(),
        )
    # scaling commutes with centring
    np.testing.assert_allclose(got.centered().M, direct.centered().M, rtol=1e-10, atol=1e-9)


@pytest.mark.parametrize("params", [{}, {"gap": 7}, {"cv": 4, "rank": 2}])
def test_chunked_selection_equals_in_memory(data, params):
    X, Y, Z, _ = data
    est = dict(random_state=3, verbose=0, max_rank=4, max_channels=2, **params)
    ref = mics.MICs(**est).fit(X, Y, Z)
    got = mics.MICs(**est).fit(*lazy(X, Y, Z))
    assert got.solver_ == "moments"
    assert_same_fit(got, ref)
    np.testing.assert_allclose(got.predict(X, Z), ref.predict(X, Z), rtol=1e-9)
    assert got.score(X, Y, Z) == pytest.approx(ref.score(X, Y, Z), rel=1e-10)


def test_chunked_selection_with_trials_equals_in_memory(data):
    X, Y, Z, _ = data
    groups = np.repeat(np.arange(30), 20)
    est = dict(random_state=0, verbose=0, max_rank=3, max_channels=2, cv=5)
    ref = mics.MICs(**est).fit(X, Y, Z, groups=groups)
    got = mics.MICs(**est).fit(*lazy(X, Y, Z), groups=groups)
    assert_same_fit(got, ref)


def test_dask_backed_xarray_keeps_labels(data):
    xr = pytest.importorskip("xarray")
    X, Y, Z, _ = data
    t = np.arange(len(X))
    Xa = xr.DataArray(
        X,
        dims=("time", "neuron"),
        coords={"time": t, "neuron": [f"s{i}" for i in range(X.shape[1])]},
    ).chunk({"time": 150})
    Ya = xr.DataArray(Y, dims=("time", "neuron"), coords={"time": t}).chunk({"time": 150})
    Za = xr.DataArray(
        Z, dims=("time", "modulator"), coords={"time": t, "modulator": ["run", "pupil", "whisk"]}
    ).chunk({"time": 150})
    ref = mics.MICs(rank=2, n_channels=1, random_state=0, verbose=0).fit(X, Y, Z)
    got = mics.MICs(rank=2, n_channels=1, random_state=0, verbose=0).fit(Xa, Ya, Za)
    assert_same_fit(got, ref)
    assert list(got.modulator_patterns_["modulator"].values) == ["run", "pupil", "whisk"]
    assert list(got.source_patterns_["neuron"].values)[:2] == ["s0", "s1"]


def test_fit_moments_blocks_select_like_fit(data, tmp_path):
    """Leave-one-block-out on block moments is the contiguous K-fold of ``fit``."""
    X, Y, Z, _ = data
    shifts = (X.mean(0), Z.mean(0), Y.mean(0))
    blocks = [
        compute_moments(x, y, z, shifts=shifts)
        for x, y, z in zip(*(np.array_split(a, 5) for a in (X, Y, Z)), strict=True)
    ]
    est = dict(random_state=1, verbose=0, max_rank=4, max_channels=2, cv=5)
    ref = mics.MICs(**est).fit(X, Y, Z)
    got = mics.MICs(**est).fit_moments(blocks)
    assert_same_fit(got, ref)
    # a full estimator: predict, score, decompose, save
    np.testing.assert_allclose(got.predict(X, Z), ref.predict(X, Z), rtol=1e-9)
    dec, dec_ref = got.decompose(), ref.decompose()
    np.testing.assert_allclose(dec["total_new"], dec_ref["total_new"], rtol=1e-8)
    loaded = mics.load(got.to_netcdf(tmp_path / "from_moments.nc"))
    np.testing.assert_allclose(loaded.predict(X, Z), ref.predict(X, Z), rtol=1e-9)


def test_fit_moments_fixed_and_errors(data):
    X, Y, Z, _ = data
    raw = compute_moments(X, Y, Z)
    ref = mics.MICs(rank=2, n_channels=1, random_state=5, verbose=0).fit(X, Y, Z)
    got = mics.MICs(rank=2, n_channels=1, random_state=5, verbose=0).fit_moments(raw)
    assert_same_fit(got, ref)
    with pytest.raises(ValueError, match="at least two blocks"):
        mics.MICs(random_state=0).fit_moments(raw)
    with pytest.raises(ValueError, match="interaction"):
        mics.MICs(rank=1, n_channels=1).fit_moments(_no_interaction(raw))
    with pytest.raises(TypeError, match="RawMoments"):
        mics.MICs(rank=1, n_channels=1).fit_moments(compute_moments(X, Y, Z, interaction=False))
    with pytest.raises(TypeError, match="RawMoments"):
        mics.MICs(rank=1, n_channels=1).fit_moments(X)
    with pytest.raises(ValueError, match="different shifts"):
        other = compute_moments(X, Y, Z, shifts=(X[0], Z[0], Y[0]))
        mics.MICs(rank=1, n_channels=1).fit_moments([raw, other])


def _no_interaction(raw):
    from dataclasses import replace

    G = raw.G.copy()
    G[1:, 1:, 1:, 1:] = 0.0
    return replace(raw, G=G)


def test_chunked_input_errors(data):
    X, Y, Z, _ = data
    Xd, Yd, Zd = lazy(X, Y, Z)
    with pytest.raises(ValueError, match="in memory"):
        mics.MICs(rank=1, n_channels=1, solver="data").fit(Xd, Yd, Zd)
    with pytest.raises(ValueError, match="memory_limit"):
        mics.MICs(rank=1, n_channels=1, memory_limit=1e3).fit(Xd, Yd, Zd)
    with pytest.raises(ValueError, match="modulator"):
        mics.MICs(rank=1).fit(Xd, Yd)
    bad = X.copy()
    bad[400, 3] = np.nan
    with pytest.raises(ValueError, match="NaN"):
        mics.MICs(rank=1, n_channels=1).fit(*lazy(bad, Y, Z))
    with pytest.raises(ValueError, match="samples"):
        mics.MICs(rank=1, n_channels=1).fit(Xd, Yd[:500], Zd)
    with pytest.raises(ValueError, match="constant"):
        mics.MICs(rank=1, n_channels=1).fit(Xd, Yd, da.ones_like(Zd))


def _test_args():
    return dict(n_permutations=7, random_state=4, verbose=0)


@pytest.fixture(scope="module")
def modulation_reference(data):
    X, Y, Z, _ = data
    est = mics.MICs(random_state=0, verbose=0, max_rank=3, max_channels=2)
    return est, mics.test_modulation(est, X, Y, Z, **_test_args())


def test_chunked_modulation_test_equals_in_memory(data, modulation_reference):
    X, Y, Z, _ = data
    est, ref = modulation_reference
    got = mics.test_modulation(est, *lazy(X, Y, Z), **_test_args())
    np.testing.assert_array_equal(got.shifts, ref.shifts)
    np.testing.assert_allclose(got.null_distribution, ref.null_distribution, rtol=0, atol=1e-10)
    assert got.statistic == pytest.approx(ref.statistic, abs=1e-10)
    assert got.p_value == ref.p_value
    assert got.n_channels == ref.n_channels
    # the sequential rule stops at the same shift
    a = mics.test_modulation(est, X, Y, Z, stop_after=1, **_test_args())
    b = mics.test_modulation(est, *lazy(X, Y, Z), stop_after=1, **_test_args())
    assert a.null_distribution.size == b.null_distribution.size
    assert a.p_value == b.p_value


# A distributed scheduler, even in-process, adds task overhead to every fold
# fit: the slowest tests of the suite, so --full runs them (with the other
# slow validations) and the default run leaves them out.
@pytest.mark.slow
def test_distributed_modulation_test_equals_local(data, modulation_reference):
    from distributed import Client, LocalCluster

    X, Y, Z, _ = data
    est, ref = modulation_reference
    with (
        LocalCluster(
            n_workers=2, threads_per_worker=1, processes=False, dashboard_address=":0"
        ) as cluster,
        Client(cluster),
    ):
        got = mics.test_modulation(est, *lazy(X, Y, Z), **_test_args())
        # the sequential rule stops at the same shift and cancels the rest
        stopped = mics.test_modulation(est, *lazy(X, Y, Z), stop_after=1, **_test_args())
    np.testing.assert_allclose(got.null_distribution, ref.null_distribution, rtol=0, atol=1e-10)
    assert got.p_value == ref.p_value
    first = np.flatnonzero(ref.null_distribution >= ref.statistic)
    expected = first[0] + 1 if first.size else ref.null_distribution.size
    assert stopped.null_distribution.size == expected


def test_chunked_trial_null_equals_in_memory(data):
    X, Y, Z, _ = data
    groups = np.repeat(np.arange(30), 20)
    est = mics.MICs(rank=2, random_state=0, verbose=0, max_channels=1, cv=3)
    ref = mics.test_modulation(est, X, Y, Z, groups=groups, **_test_args())
    got = mics.test_modulation(est, *lazy(X, Y, Z), groups=groups, **_test_args())
    assert got.null == "trial"
    np.testing.assert_allclose(got.null_distribution, ref.null_distribution, rtol=0, atol=1e-10)
    np.testing.assert_array_equal(got.permutations, ref.permutations)


def test_chunked_bootstrap_equals_in_memory(data):
    X, Y, Z, _ = data
    model = mics.MICs(rank=2, n_channels=1, random_state=0, verbose=0).fit(X, Y, Z)
    ref = mics.bootstrap_channels(model, X, Y, Z, n_boot=5, random_state=2, verbose=0)
    got = mics.bootstrap_channels(model, *lazy(X, Y, Z), n_boot=5, random_state=2, verbose=0)
    for name in ("channel_weights_draws", "modulator_patterns_draws", "total_new_draws"):
        assert rel(got[name], ref[name]) < 1e-9, name
    np.testing.assert_allclose(got["channel_weights"], ref["channel_weights"], rtol=1e-9)


def test_pooled_sessions_equal_concatenated_centred_fit(data):
    X, Y, Z, _ = data
    cuts = [(0, 180), (180, 420), (420, 600)]
    offsets = [(0.0, 0.0, 0.0), (40.0, -7.0, 3.0), (-15.0, 2.0, -1.0)]
    sessions = [
        (X[a:b] + ox, Y[a:b] + oy, Z[a:b] + oz)
        for (a, b), (ox, oy, oz) in zip(cuts, offsets, strict=True)
    ]
    centred = [np.concatenate([s[j] - s[j].mean(0) for s in sessions]) for j in range(3)]
    est = dict(random_state=2, verbose=0, max_rank=3, max_channels=2)
    ref = mics.MICs(**est).fit(*centred)
    pooled = mics.MICs(**est).fit_sessions(sessions)
    chunked = mics.MICs(**est).fit_sessions([lazy(*s, chunks=70) for s in sessions])
    assert_same_fit(pooled, ref)
    assert_same_fit(chunked, ref, rtol=1e-9)
    np.testing.assert_array_equal(pooled.session_lengths_, [180, 240, 180])
    # session offsets are removed, not fitted: without them the fit is the same
    plain = [(X[a:b], Y[a:b], Z[a:b]) for a, b in cuts]
    assert_same_fit(mics.MICs(**est).fit_sessions(plain), ref, rtol=1e-9)
    # ... while plain concatenation of the offset sessions fits something else
    naive = mics.MICs(**est).fit(*(np.concatenate([s[j] for s in sessions]) for j in range(3)))
    assert rel(naive.coef_, ref.coef_) > 1e-3
    with pytest.raises(ValueError, match="session 1"):
        mics.MICs().fit_sessions([sessions[0], (X[:10], Y[:9], Z[:10])])


def test_labelled_sessions_pool_like_arrays(data):
    xr = pytest.importorskip("xarray")
    X, Y, Z, _ = data
    cuts = [(0, 250), (250, 600)]

    def labelled(a, dim, start, offset):
        # (neuron, time) order on purpose: samples are counted along "time"
        da_ = xr.DataArray(a + offset, dims=("time", dim), coords={"time": np.arange(*start)})
        return da_.transpose(dim, "time")

    sessions = [
        (
            labelled(X[a:b], "neuron", (a, b), 5.0 * i),
            labelled(Y[a:b], "neuron", (a, b), -2.0 * i),
            labelled(Z[a:b], "modulator", (a, b), 1.0 * i),
        )
        for i, (a, b) in enumerate(cuts)
    ]
    est = dict(rank=2, n_channels=1, random_state=0, verbose=0)
    got = mics.MICs(**est).fit_sessions(sessions)
    ref = mics.MICs(**est).fit_sessions([(X[a:b], Y[a:b], Z[a:b]) for a, b in cuts])
    assert_same_fit(got, ref, rtol=1e-9)
    np.testing.assert_array_equal(got.session_lengths_, [250, 350])


def test_fit_each_session_equals_separate_fits(data):
    X, Y, Z, _ = data
    sessions = [(X[:300], Y[:300], Z[:300]), lazy(X[300:], Y[300:], Z[300:], chunks=100)]
    est = mics.MICs(rank=2, n_channels=1, random_state=0, verbose=0)
    fits = fit_each_session(est, sessions, n_jobs=2, verbose=0)
    for fit, s in zip(fits, sessions, strict=True):
        ref = mics.MICs(rank=2, n_channels=1, random_state=0, verbose=0).fit(
            *(np.asarray(a) for a in s)
        )
        assert_same_fit(fit, ref, rtol=1e-9)


@pytest.mark.parametrize("params", [{}, {"alpha": 5.0, "cv": 4}])
def test_chunked_reduced_rank_cv_equals_in_memory(data, params):
    X, Y, _, _ = data
    X = X.copy()
    X[:, 4] = 3.0  # a constant neuron: dropped in every fold, as in memory
    ref = mics.ReducedRankRegressionCV(ranks=range(6), **params).fit(X, Y)
    got = mics.ReducedRankRegressionCV(ranks=range(6), **params).fit(*lazy(X, Y))
    assert got.rank_ == ref.rank_
    np.testing.assert_allclose(
        got.cv_results_["fold_loss"], ref.cv_results_["fold_loss"], rtol=1e-10
    )
    assert rel(got.coef_, ref.coef_) < RTOL
    assert rel(got.intercept_, ref.intercept_) < RTOL
    assert np.all(got.coef_[:, 4] == 0)
    groups = np.repeat(np.arange(40), 15)
    ref = mics.ReducedRankRegressionCV(ranks=range(4), cv=5).fit(X, Y[:, 0], groups=groups)
    got = mics.ReducedRankRegressionCV(ranks=range(4), cv=5).fit(*lazy(X, Y[:, 0]), groups=groups)
    np.testing.assert_allclose(
        got.cv_results_["mean_loss"], ref.cv_results_["mean_loss"], rtol=1e-10
    )
    assert np.ndim(got.coef_) == 1 and np.isscalar(got.intercept_)


def test_worker_config_drops_malloc_trim_only():
    import os

    import dask
    from distributed import Client, LocalCluster

    from mics.data.chunked import worker_config

    config = worker_config()["distributed.nanny.pre-spawn-environ"]
    default = dask.config.get("distributed.nanny.pre-spawn-environ")
    assert "MALLOC_TRIM_THRESHOLD_" in default  # what distributed sets by default
    assert "MALLOC_TRIM_THRESHOLD_" not in config
    assert {k: v for k, v in default.items() if k != "MALLOC_TRIM_THRESHOLD_"} == config
    with (
        dask.config.set(worker_config()),
        LocalCluster(
            n_workers=1, threads_per_worker=1, processes=True, dashboard_address=":0"
        ) as cluster,
        Client(cluster) as client,
    ):
        env = client.run(
            lambda: (os.environ.get("MALLOC_TRIM_THRESHOLD_"), os.environ.get("OMP_NUM_THREADS"))
        )
    assert list(env.values()) == [(None, str(default["OMP_NUM_THREADS"]))]


@pytest.mark.parametrize("gap", [0, 7])
def test_chunked_selection_reads_each_row_once(data, monkeypatch, gap):
    """Without a gap the held-out blocks partition the rows: the total is their sum."""
    import dask

    import mics.data.chunked

    X, Y, Z, _ = data
    rows = []
    block, xy_block = mics.data.chunked._block_moments, mics.data.chunked._xy_block

    def counting(x, *args):
        rows.append(len(x))
        return block(x, *args)

    def counting_xy(x, *args):
        rows.append(len(x))
        return xy_block(x, *args)

    monkeypatch.setattr(mics.data.chunked, "_block_moments", counting)
    monkeypatch.setattr(mics.data.chunked, "_xy_block", counting_xy)
    with dask.config.set(scheduler="sync"):
        mics.MICs(rank=2, max_channels=1, cv=5, gap=gap, random_state=0, verbose=0).fit(
            *lazy(X, Y, Z)
        )
        n_mic = sum(rows)
        rows.clear()
        mics.ReducedRankRegressionCV(ranks=range(3), cv=5).fit(*lazy(X, Y))
    # held-out blocks once each (their sum is the total); with a gap, each fold's
    # excluded rows (its block and the gap on both sides) once more
    extra = (
        0
        if gap == 0
        else sum(min(i * 120 + 120 + gap, 600) - max(i * 120 - gap, 0) for i in range(5))
    )
    assert n_mic == 600 + extra
    assert sum(rows) == 600  # ReducedRankRegressionCV has no gap


# A distributed scheduler, even in-process, adds task overhead to every fold
# fit: the slowest tests of the suite, so --full runs them (with the other
# slow validations) and the default run leaves them out.
@pytest.mark.slow
def test_repeated_graphs_on_the_same_arrays_keep_their_keys(data):
    # Blocks are handed to the fits through ``to_delayed``. Optimised, it
    # fuses a slice's getitem tasks into aliases under the slice's own key
    # names, so a second graph over the same sliced arrays resubmits those
    # keys with another task spec; distributed warns that this "can cause
    # failures and deadlocks". Unoptimised, every graph carries the same spec.
    import logging

    from distributed import Client, LocalCluster

    class Collect(logging.Handler):
        def __init__(self):
            super().__init__(logging.WARNING)
            self.messages = []

        def emit(self, record):
            self.messages.append(record.getMessage())

    X, Y, Z, _ = data
    collect = Collect()
    logger = logging.getLogger("distributed.scheduler")
    logger.addHandler(collect)
    try:
        with (
            LocalCluster(
                n_workers=1, threads_per_worker=2, processes=False, dashboard_address=":0"
            ) as cluster,
            Client(cluster),
        ):
            Xd, Yd, Zd = lazy(X, Y, Z)
            est = mics.MICs(rank=2, max_channels=1, cv=3, random_state=0, verbose=0)
            runs = [
                mics.test_modulation(est, Xd[:401], Yd[:401], Zd[:401], **_test_args())
                for _ in range(2)
            ]
    finally:
        logger.removeHandler(collect)
    assert not [m for m in collect.messages if "run_spec" in m], collect.messages[:1]
    np.testing.assert_array_equal(runs[0].null_distribution, runs[1].null_distribution)


def _misaligned(a, offset=4):
    """A copy of ``a`` starting ``offset`` bytes past an 8-byte boundary.

    ``distributed`` can hand a task such a block (an unpickled frame at any
    byte); NumPy then skips BLAS and its vectorised loops for it.
    """
    buf = np.empty(a.nbytes + 16, dtype=np.uint8)
    start = (-buf.ctypes.data) % 8 + offset
    out = buf[start : start + a.nbytes].view(a.dtype).reshape(a.shape)
    out[...] = a
    assert not out.flags.aligned
    return out


def test_residualized_target_does_not_depend_on_block_alignment():
    # The test's additive regression must give the same bits however its
    # blocks and constants sit in memory: with Dask's own Z.T @ Y the null
    # statistics differed in the last digits with the number of workers
    # (blocks moved between workers arrive at any byte). Each block task
    # must work on arrays it makes itself; sizes where NumPy uses BLAS and
    # its vectorised sums when the arrays are aligned.
    from mics.data.chunked import _residual_block, _xy_block, residualize

    rng = np.random.default_rng(3)
    Y = rng.standard_normal((400, 40))
    Z = rng.standard_normal((400, 3)) + 2.0
    y_mean, z_mean = Y.mean(0), Z.mean(0)
    beta = rng.standard_normal((3, 40))
    want = _residual_block(Y, Z, y_mean, z_mean, beta)
    got = _residual_block(*(_misaligned(a) for a in (Y, Z, y_mean, z_mean, beta)))
    np.testing.assert_array_equal(got, want)
    want = _xy_block(Z, Y, z_mean, y_mean, 0)
    got = _xy_block(*(_misaligned(a) for a in (Z, Y, z_mean, y_mean)), 0)
    for name in ("sx", "sy", "Sxx", "Sxy", "Syy"):
        np.testing.assert_array_equal(getattr(got, name), getattr(want, name))
    # and the whole is the least-squares residual on [1, Z]
    lazy_res = residualize(*lazy(Y, Z, chunks=(130, 170, 100)))
    design = np.column_stack([np.ones(len(Z)), Z])
    ls = Y - design @ np.linalg.lstsq(design, Y, rcond=None)[0]
    np.testing.assert_allclose(lazy_res.compute(), ls, rtol=0, atol=1e-12 * np.abs(Y).max())


def test_residualized_target_same_bits_on_worker_processes():
    # Between worker processes, blocks travel as frames that can start at
    # any byte. With Dask's own products this regression gave other bits on
    # two workers than on one process (every time, at this size); the test
    # statistics inherited the difference. Now the same bits.
    from distributed import Client, LocalCluster

    from mics.data.chunked import residualize

    rng = np.random.default_rng(0)
    Y = rng.standard_normal((20000, 100))
    Z = rng.standard_normal((20000, 3)) + 1.0

    def run():
        return residualize(*lazy(Y, Z, chunks=2000)).compute()

    local = run()
    with (
        LocalCluster(
            n_workers=2, threads_per_worker=1, processes=True, dashboard_address=":0"
        ) as cluster,
        Client(cluster),
    ):
        np.testing.assert_array_equal(run(), local)
