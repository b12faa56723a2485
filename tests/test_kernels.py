"""Each numba kernel against its pure-NumPy twin on random inputs."""

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

from mics.core import kernels as _kernels


@pytest.fixture
def rng():
    return np.random.default_rng(7)


@pytest.mark.parametrize("order", ["C", "F"])
@pytest.mark.parametrize("p,m,q", [(5, 3, 2), (1, 1, 1), (4, 2, 3)])
def test_khatri_rao_rows_match_numpy(rng, p, m, q, order):
    n, start, k = 30, 7, 11
    X, Z, Y = (np.asarray(rng.standard_normal((n, c)), order=order) for c in (p, m, q))
    xs, zs, ys = rng.standard_normal(p), rng.standard_normal(m), rng.standard_normal(q)
    out = np.full((k, (p + 1) * (m + 1) + q), np.nan)
    _kernels.khatri_rao_rows(X, Z, Y, xs, zs, ys, start, out)
    rows = slice(start, start + k)
    # twin: kron([1, z'], [1, x']) per sample (modulator-major), then y'
    xt = np.c_[np.ones(k), X[rows] - xs]
    zt = np.c_[np.ones(k), Z[rows] - zs]
    twin = np.c_[np.einsum("ta,ti->tai", zt, xt).reshape(k, -1), Y[rows] - ys]
    np.testing.assert_array_equal(out, twin)


@pytest.mark.parametrize("p,m", [(6, 3), (4, 1), (1, 2)])
def test_centre_interaction_matches_the_dense_change_of_basis(rng, p, m):
    # Twin: the centred Gram as the dense product T G T^T, T = kron(Tx, Tz).
    n = 40
    u = np.einsum(
        "ti,ta->tia",
        np.c_[np.ones(n), rng.standard_normal((n, p)) + 3.0],
        np.c_[np.ones(n), rng.standard_normal((n, m)) - 2.0],
    ).reshape(n, -1)
    G = (u.T @ u).reshape(p + 1, m + 1, p + 1, m + 1)
    dx, dz = G[1:, 0, 0, 0] / n, G[0, 1:, 0, 0] / n
    Tx, Tz = np.eye(p + 1), np.eye(m + 1)
    Tx[1:, 0], Tz[1:, 0] = -dx, -dz
    T = np.kron(Tx, Tz)
    Gc = (T @ G.reshape(T.shape) @ T.T).reshape(G.shape)
    phi_sum = Gc[1:, 1:, 0, 0]
    twin = Gc[1:, 1:, 1:, 1:] - np.einsum("ia,jb->iajb", phi_sum, phi_sum) / n
    out = np.full((m, m, p, p), np.nan)
    _kernels.centre_interaction(G, dx, dz, np.ascontiguousarray(phi_sum), float(n), out)
    tol = 1e-10 * np.abs(G).max()
    np.testing.assert_allclose(out.transpose(2, 0, 3, 1), twin, rtol=0, atol=tol)
    # and it is the scatter of the centred interaction
    xc = u.reshape(n, p + 1, m + 1)[:, 1:, 0] - dx
    zc = u.reshape(n, p + 1, m + 1)[:, 0, 1:] - dz
    phi = (xc[:, :, None] * zc[:, None, :]).reshape(n, -1)
    phi -= phi.mean(0)
    np.testing.assert_allclose(
        out.transpose(2, 0, 3, 1).reshape(p * m, p * m), phi.T @ phi, atol=1e-9 * np.abs(G).max()
    )


def _group_lasso_rows_twin(A, G, half, W, AW, tol, max_sweeps, accelerate):
    """NumPy twin of the kernel: the same sweeps in the same order, the same extrapolation."""
    depth = _kernels._ANDERSON_DEPTH
    hist = []
    for sweep in range(1, max_sweeps + 1):
        change = size = 0.0
        for u in range(W.shape[1]):
            h = G[:, u] - AW[:, u] + A[u, u] * W[:, u]
            if A[u, u] <= 0 or h @ h <= half * half:
                if not W[:, u].any():
                    continue
                new = np.zeros_like(h)
            else:
                new = h * ((1 - half / np.sqrt(h @ h)) / A[u, u])
                size = max(size, np.abs(new).max())
            delta = new - W[:, u]
            W[:, u] = new
            change = max(change, np.abs(delta).max())
            AW += np.outer(delta, A[u])
        if change <= tol * max(size, np.finfo(float).tiny):
            return sweep, True
        if accelerate:
            hist = (hist + [W.copy()])[-(depth + 1) :]
            if len(hist) == depth + 1 and (sweep - 1) % depth == 0:
                U = np.array([(b - a).ravel() for a, b in zip(hist[:-1], hist[1:], strict=True)])
                C = U @ U.T.copy()  # (a general product, as the kernel's; U @ U.T is syrk)
                C[np.diag_indices(depth)] += _kernels._ANDERSON_RIDGE * np.trace(C)
                z = np.linalg.solve(C, np.ones(depth))
                ext = sum((zt / z.sum()) * it for zt, it in zip(z, hist[1:], strict=True))
                A_ext = ext @ A

                def f(V, AV):
                    # summed in the kernel's order: the test is a near tie at the end
                    total = 0.0
                    for u in range(V.shape[1]):
                        for k in range(V.shape[0]):
                            total += V[k, u] * (AV[k, u] - 2.0 * G[k, u])
                        total += 2.0 * half * np.sqrt(sum(V[k, u] ** 2 for k in range(V.shape[0])))
                    return total

                if f(ext, A_ext) < f(W, AW):
                    W[...], AW[...] = ext, A_ext
    return max_sweeps, False


@pytest.mark.parametrize("accelerate", [False, True])
@pytest.mark.parametrize("m,r,n", [(30, 2, 20), (12, 1, 40), (25, 3, 60)])
def test_group_lasso_rows_match_numpy(rng, m, r, n, accelerate):
    # A correlated, rank-deficient (n < m) Gram plus a ridge, one row without
    # variance: the kernel's sweeps, extrapolations and stopping sweep are
    # the twin's, and the result is the minimiser (the KKT conditions).
    X = rng.standard_normal((n, m)) @ (np.eye(m) + 0.3 * rng.standard_normal((m, m)))
    X[:, 4] = 0.0
    A = X.T @ X + 0.5 * np.eye(m) * (n < m)
    A[4, 4] = 0.0
    A = np.ascontiguousarray((A + A.T) / 2)
    G = (rng.standard_normal((m, r)) * 3 + X.T @ rng.standard_normal((n, r))).T.copy()
    G[:, 4] = 0.0  # (a neuron without variance correlates with nothing)
    half = float(np.quantile(np.linalg.norm(G, axis=0), 0.4))
    W0 = rng.standard_normal((r, m)) * 0.1
    W0[:, 4] = 0.0
    out = {}
    for name, solve in (("kernel", _kernels.group_lasso_rows), ("twin", _group_lasso_rows_twin)):
        W = W0.copy()
        AW = np.ascontiguousarray(W @ A)
        sweeps, converged = solve(A, G, half, W, AW, 1e-12, 3000, accelerate)
        out[name] = W, AW, sweeps, converged
    (W, AW, sweeps, converged), (Wt, _, sweeps_t, converged_t) = out["kernel"], out["twin"]
    # (the same sweeps up to rounding, which may move the stopping sweep by one)
    assert converged and converged_t and abs(sweeps - sweeps_t) <= 1
    scale = np.abs(Wt).max()
    np.testing.assert_allclose(W, Wt, rtol=0, atol=1e-9 * scale)
    np.testing.assert_allclose(AW, W @ A, rtol=0, atol=1e-9 * np.abs(AW).max())
    # optimality: zero rows within the threshold, others on the group's stationarity
    grad = G - AW  # of -(1/2) the smooth part
    on = np.any(W != 0, axis=0)
    assert 0 < on.sum() < m - 1 and not on[4]
    assert np.all(np.linalg.norm(grad[:, ~on], axis=0) <= half * (1 + 1e-8))
    norms = np.linalg.norm(W[:, on], axis=0)
    np.testing.assert_allclose(grad[:, on], half * W[:, on] / norms, atol=1e-7 * half)


def test_import_works_from_a_read_only_install(tmp_path):
    # A read-only package directory and no writable home: numba has no cache
    # locator; importing the kernels must still work (falling back to no cache).
    pkg = tmp_path / "ro"
    pkg.mkdir()
    src = Path(_kernels.__file__).read_text()
    (pkg / "ro_kernels.py").write_text(src)
    os.chmod(pkg / "ro_kernels.py", 0o444)
    os.chmod(pkg, 0o555)
    code = textwrap.dedent(
        """
        import ro_kernels
        add_one = ro_kernels._jit(lambda x: x + 1.0)
        print(add_one(3.0))
        """
    )
    # /dev/null/x can never be created, even by root (CI runs as root, for whom
    # chmod alone does not stop writes).
    env = dict(os.environ, PYTHONPATH=str(pkg), HOME=str(pkg), NUMBA_CACHE_DIR="/dev/null/x")
    env.pop("XDG_CACHE_HOME", None)
    try:
        out = subprocess.run(
            [sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120
        )
    finally:
        os.chmod(pkg, 0o755)
    assert out.returncode == 0, out.stderr
    assert float(out.stdout.strip()) == 4.0


def _artifact_scores_twin(a, starts):
    """NumPy twin of ``kernels.artifact_scores``, from the functions of ``mics.core.robust``."""
    from mics.core import robust

    spikes = robust.spike_sizes(a, starts)
    scale = np.maximum(
        robust.local_steps(a, starts), robust.robust_scale(robust.step_sizes(a, starts))
    )
    with np.errstate(divide="ignore", invalid="ignore"):
        shape = np.where(scale > 0, np.abs(spikes) / scale, np.where(spikes != 0, np.inf, 0.0))
        dev = a - np.median(a, axis=0)
        top = robust.top_levels(np.abs(dev))
        up = np.maximum(robust.sustained_levels(dev, starts), top)
        down = np.maximum(robust.sustained_levels(-dev, starts), top)
        level = np.where(dev > 0, dev / up, -dev / down)
    level = np.where(np.sign(dev) * np.sign(spikes) > 0, level, 0.0)
    return shape, np.nan_to_num(level, nan=0.0, posinf=np.inf)


@pytest.mark.parametrize("segments", [1, 7, 40])
def test_artifact_scores_match_numpy(rng, segments):
    from mics.core.robust import artifact_scores, segment_starts

    n = 400
    a = rng.standard_normal((n, 9)).cumsum(axis=0)
    a[:, 1] = rng.poisson(0.3, n)  # mostly zero counts
    a[:, 2] = 0.0
    a[::37, 2] = rng.exponential(size=a[::37, 2].shape)  # sparse events: a zero MAD
    a[:, 3] = 1.5  # constant
    a[rng.choice(n, 5, replace=False), 4] += 200.0  # glitches
    a[:, 5] = np.repeat(rng.standard_normal(n // 20), 20)  # steps
    cuts = np.sort(rng.choice(np.arange(1, n), segments - 1, replace=False))
    groups = np.zeros(n, dtype=int)
    for c in cuts:
        groups[c:] += 1
    starts = segment_starts(groups, n)
    shape, level = artifact_scores(a, starts)
    want_shape, want_level = _artifact_scores_twin(a, starts)
    np.testing.assert_allclose(shape, want_shape, rtol=1e-13, atol=0)
    np.testing.assert_allclose(level, want_level, rtol=1e-13, atol=0)
    assert np.isfinite(shape[:, 4]).all() and shape[:, 4].max() > 10  # the glitches score
