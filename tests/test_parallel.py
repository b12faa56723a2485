"""Dask: moments block by block, on threads or a cluster; fits from moments alone."""

import warnings

import numpy as np
import pytest

da = pytest.importorskip("dask.array")
distributed = pytest.importorskip("distributed")

import mics  # noqa: E402
from mics.core.stats import compute_moments  # noqa: E402
from mics.data.chunked import moments_from_dask, moments_from_sessions  # noqa: E402
from mics.model.fit import fit_from_moments  # noqa: E402
from tests._generate import make_mic_data  # noqa: E402

UNEVEN = (97, 250, 3, 300, 150)  # 800 rows in uneven blocks, one of three rows


@pytest.fixture(scope="module")
def arrays():
    rng = np.random.default_rng(3)
    X = rng.standard_normal((800, 6)) + 50.0  # raw-fluorescence-like offsets
    Y = rng.standard_normal((800, 4)) + 10.0
    Z = rng.standard_normal((800, 3)) - 3.0
    return X, Y, Z


@pytest.fixture(scope="module")
def mic_data():
    X, Y, Z, _ = make_mic_data(T=600, p=10, q=8, m=3, r=2, K=2, seed=5)
    return X, Y, Z


@pytest.fixture(scope="module")
def client():
    from distributed import Client, LocalCluster

    with (
        LocalCluster(
            n_workers=2, threads_per_worker=1, processes=False, dashboard_address=None
        ) as cluster,
        Client(cluster) as c,
    ):
        yield c


def _shifts(raw):
    return raw.x_shift, raw.z_shift, raw.y_shift


def assert_moments_equal(a, b, rtol=1e-10):
    assert a.n == b.n
    for name in ("x_shift", "z_shift", "y_shift"):
        np.testing.assert_array_equal(getattr(a, name), getattr(b, name))
    if hasattr(b, "G"):
        names = ("G", "Gy", "Syy")
    else:  # linear moments, kept as their own blocks
        names = ("sx", "sz", "sy", "Sxx", "Sxz", "Szz", "Sxy", "Szy", "Syy")
    # one scale for all blocks (sums around the mean are near zero)
    scale = max(np.abs(getattr(b, name)).max() for name in names)
    for name in names:
        np.testing.assert_allclose(getattr(a, name), getattr(b, name), rtol=0, atol=rtol * scale)


def _dask(X, Y, Z):
    # X in uneven row blocks and split columns; Y, Z chunked differently (re-aligned)
    return (
        da.from_array(X, chunks=(UNEVEN, 4)),
        da.from_array(Y, chunks=(200, -1)),
        da.from_array(Z, chunks=(333, 1)),
    )


def test_dask_moments_equal_numpy_moments(arrays):
    X, Y, Z = arrays
    raw = moments_from_dask(*_dask(X, Y, Z))
    np.testing.assert_allclose(raw.x_shift, X.mean(0), rtol=1e-12)
    assert_moments_equal(raw, compute_moments(X, Y, Z, shifts=_shifts(raw)))
    # and the centred scatter matrices agree with the NumPy defaults
    ref = compute_moments(X, Y, Z).centered()
    cm = raw.centered()
    np.testing.assert_allclose(cm.M, ref.M, atol=1e-9 * np.abs(ref.M).max())
    np.testing.assert_allclose(cm.Sphiy, ref.Sphiy, atol=1e-9 * np.abs(ref.Sphiy).max())


def test_dask_moments_explicit_and_first_block_shifts(arrays):
    X, Y, Z = arrays
    shifts = (np.full(6, 49.0), np.full(3, -2.0), np.full(4, 9.0))
    raw = moments_from_dask(*_dask(X, Y, Z), shifts=shifts, split_every=2)
    assert_moments_equal(raw, compute_moments(X, Y, Z, shifts=shifts))
    first = moments_from_dask(*_dask(X, Y, Z), shifts="first_block")
    np.testing.assert_allclose(first.x_shift, X[:97].mean(0), rtol=1e-12)
    assert_moments_equal(first, compute_moments(X, Y, Z, shifts=_shifts(first)))


def test_dask_linear_moments_and_1d_inputs(arrays):
    X, Y, Z = arrays
    y1, z1 = da.from_array(Y[:, 0], chunks=200), Z[:, 0]
    raw = moments_from_dask(da.from_array(X, chunks=(UNEVEN, 4)), y1, z1, interaction=False)
    ref = compute_moments(X, Y[:, :1], Z[:, :1], shifts=_shifts(raw), interaction=False)
    assert_moments_equal(raw, ref)
    with pytest.raises(ValueError, match="interaction=False"):
        fit_from_moments(raw, 1, 1)


def test_dask_input_errors(arrays):
    X, Y, Z = arrays
    with pytest.raises(ValueError, match="share the time axis"):
        moments_from_dask(X, Y[:-1], Z)
    with pytest.raises(ValueError, match="NaN"):
        Xn = X.copy()
        Xn[500, 2] = np.nan
        moments_from_dask(
            da.from_array(Xn, chunks=(UNEVEN, -1)), Y, Z, shifts=_shifts(compute_moments(X, Y, Z))
        )
    with pytest.raises(ValueError, match="x_shift"):
        moments_from_dask(X, Y, Z, shifts=(np.zeros(2), np.zeros(3), np.zeros(4)))
    with pytest.raises(ValueError, match="split_every"):
        moments_from_dask(X, Y, Z, split_every=1)


def test_distributed_client_gives_same_moments(arrays, client):
    X, Y, Z = arrays
    raw = moments_from_dask(*_dask(X, Y, Z))
    assert_moments_equal(raw, compute_moments(X, Y, Z, shifts=_shifts(raw)))


def test_sessions_sum_to_concatenated_moments(arrays):
    X, Y, Z = arrays
    cuts = [(0, 300), (300, 310), (310, 800)]
    sessions = [
        (X[a:b], Y[a:b], Z[a:b]) if i % 2 == 0 else tuple(da.from_array(v[a:b]) for v in (X, Y, Z))
        for i, (a, b) in enumerate(cuts)
    ]
    raw = moments_from_sessions(sessions)
    np.testing.assert_allclose(raw.x_shift, X.mean(0), rtol=1e-12)
    assert_moments_equal(raw, compute_moments(X, Y, Z, shifts=_shifts(raw)))
    # per-session demeaning equals the moments of the demeaned concatenation
    dm = moments_from_sessions(sessions, demean_sessions=True)
    Xd, Yd, Zd = (np.concatenate([v[a:b] - v[a:b].mean(0) for a, b in cuts]) for v in (X, Y, Z))
    assert_moments_equal(dm, compute_moments(Xd, Yd, Zd, shifts=_shifts(dm)), rtol=1e-9)
    with pytest.raises(ValueError, match="different numbers"):
        moments_from_sessions([(X, Y, Z), (X[:, :3], Y, Z)])
    with pytest.raises(ValueError, match="session 1"):
        moments_from_sessions([(X, Y, Z), (X, Y[:5], Z)])


@pytest.mark.parametrize("n_init", [0, 3])
def test_fit_from_dask_moments_equals_mics(mic_data, n_init):
    X, Y, Z = mic_data
    est = mics.MICs(2, 2, n_init=n_init, random_state=7, verbose=0).fit(X, Y, Z)
    assert est.solver_ == "moments"
    raw = moments_from_dask(*(da.from_array(v, chunks=(150, -1)) for v in (X, Y, Z)))
    fit = fit_from_moments(raw, 2, 2, n_init=n_init, random_state=7)
    W, W_ref = fit.modulation_tensor(), est.modulation_tensor()
    assert np.linalg.norm(W - W_ref) <= 1e-8 * np.linalg.norm(W_ref)
    np.testing.assert_allclose(fit.coef, est.coef_.T, rtol=0, atol=1e-8 * np.abs(est.coef_).max())
    np.testing.assert_allclose(fit.weights, est.channel_weights_, rtol=1e-8)
    # the intercept recipe of the docstring reproduces the estimator's
    cm = raw.centered()
    w_mean = np.einsum(
        "k,ik,ia,ak->k", fit.weights, fit.source_patterns, cm.phi_mean, fit.modulator_patterns
    )
    intercept = (
        cm.y_mean
        - cm.x_mean @ fit.coef
        - cm.z_mean @ fit.modulator_coef
        - fit.target_patterns @ w_mean
    )
    np.testing.assert_allclose(intercept, est.intercept_, atol=1e-8)


def test_fit_from_moments_validates(mic_data):
    X, Y, Z = mic_data
    raw = compute_moments(X, Y, Z)
    with pytest.raises(ValueError, match="rank"):
        fit_from_moments(raw, 99, 1)
    with pytest.raises(ValueError, match="n_channels"):
        fit_from_moments(raw, 1, -1)
    with pytest.raises(ValueError, match="alpha"):
        fit_from_moments(raw, 1, 1, alpha=-1.0)
    with pytest.raises(TypeError):
        fit_from_moments(X, 1, 1)
    # centred moments are accepted as they are
    a = fit_from_moments(raw.centered(), 1, 1, random_state=0)
    b = fit_from_moments(raw, 1, 1, random_state=0)
    np.testing.assert_allclose(a.modulation_tensor(), b.modulation_tensor())


def test_joblib_dask_backend_cross_validation(mic_data, client):
    import joblib

    X, Y, Z = mic_data
    params = dict(
        rank=2, n_channels=None, cv=3, max_channels=2, max_iter=20, random_state=0, verbose=0
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # max_iter=20: convergence warnings expected
        local = mics.MICs(**params).fit(X, Y, Z)
        with joblib.parallel_backend("dask"):
            remote = mics.MICs(**params).fit(X, Y, Z)
    np.testing.assert_allclose(
        remote.cv_results_["n_channels_fold_loss"],
        local.cv_results_["n_channels_fold_loss"],
        rtol=1e-12,
    )
    assert remote.n_channels_ == local.n_channels_
