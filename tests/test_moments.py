"""Sufficient statistics: exact centring, additivity over blocks."""

import numpy as np
import pytest

from mics.moments import compute_moments


@pytest.fixture
def arrays():
    rng = np.random.default_rng(1)
    X = rng.standard_normal((400, 6)) + 50.0  # large offsets, like raw fluorescence
    Z = rng.standard_normal((400, 2)) - 3.0
    Y = rng.standard_normal((400, 4)) + 10.0
    return X, Y, Z


def _direct(X, Y, Z):
    Xc, Zc, Yc = X - X.mean(0), Z - Z.mean(0), Y - Y.mean(0)
    Phi = (Xc[:, :, None] * Zc[:, None, :]).reshape(len(X), -1)
    Phic = Phi - Phi.mean(0)
    return Xc, Zc, Yc, Phic


def test_centred_moments_equal_direct_computation(arrays):
    X, Y, Z = arrays
    cm = compute_moments(X, Y, Z, chunk_size=37).centered()
    Xc, Zc, Yc, Phic = _direct(X, Y, Z)
    p, m = 6, 2
    np.testing.assert_allclose(cm.M.reshape(p * m, p * m), Phic.T @ Phic, atol=1e-8)
    np.testing.assert_allclose(cm.Sphiy.reshape(p * m, -1), Phic.T @ Yc, atol=1e-8)
    np.testing.assert_allclose(cm.Sphix.reshape(p * m, p), Phic.T @ Xc, atol=1e-8)
    np.testing.assert_allclose(cm.Sphiz.reshape(p * m, m), Phic.T @ Zc, atol=1e-8)
    np.testing.assert_allclose(cm.Sxx, Xc.T @ Xc, atol=1e-8)
    np.testing.assert_allclose(cm.Sxz, Xc.T @ Zc, atol=1e-8)
    np.testing.assert_allclose(cm.Syy, Yc.T @ Yc, atol=1e-8)
    np.testing.assert_allclose(cm.x_mean, X.mean(0))


def test_training_fold_is_total_minus_block(arrays):
    X, Y, Z = arrays
    total = compute_moments(X, Y, Z)
    shifts = (total.x_shift, total.z_shift, total.y_shift)
    block = compute_moments(X[100:180], Y[100:180], Z[100:180], shifts=shifts)
    train = (total - block).centered()
    keep = np.r_[0:100, 180:400]
    Xc, Zc, Yc, Phic = _direct(X[keep], Y[keep], Z[keep])
    np.testing.assert_allclose(train.M.reshape(12, 12), Phic.T @ Phic, atol=1e-8)
    np.testing.assert_allclose(train.Sphiy.reshape(12, -1), Phic.T @ Yc, atol=1e-8)
    # and blocks add back up
    rest = compute_moments(X[keep], Y[keep], Z[keep], shifts=shifts)
    np.testing.assert_allclose((rest + block).G, total.G, atol=1e-8)


def test_linear_only_moments_match_full_ones(arrays):
    X, Y, Z = arrays
    full = compute_moments(X, Y, Z).centered()
    lin = compute_moments(X, Y, Z, interaction=False).centered()
    for name in ("Sxx", "Sxz", "Szz", "Sxy", "Szy", "Syy"):
        np.testing.assert_allclose(getattr(lin, name), getattr(full, name), atol=1e-8)


def test_shift_mismatch_is_refused(arrays):
    X, Y, Z = arrays
    a = compute_moments(X[:200], Y[:200], Z[:200])
    b = compute_moments(X[200:], Y[200:], Z[200:])
    with pytest.raises(ValueError, match="different shifts"):
        a + b
