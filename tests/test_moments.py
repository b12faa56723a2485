"""Sufficient statistics: exact centring, additivity over blocks."""

import numpy as np
import pytest

from mics.core.als import MomentOperator
from mics.core.stats import compute_moments


@pytest.fixture
def arrays():
    rng = np.random.default_rng(1)
    X = rng.standard_normal((400, 6)) + 50.0  # large offsets, like raw fluorescence
    Z = rng.standard_normal((400, 2)) - 3.0
    Y = rng.standard_normal((400, 4)) + 10.0
    return X, Y, Z


def _phi_mean(X, Z):
    return ((X - X.mean(0))[:, :, None] * (Z - Z.mean(0))[:, None, :]).mean(0)


def _direct(X, Y, Z):
    Xc, Zc, Yc = X - X.mean(0), Z - Z.mean(0), Y - Y.mean(0)
    Phi = (Xc[:, :, None] * Zc[:, None, :]).reshape(len(X), -1)
    Phic = Phi - Phi.mean(0)
    return Xc, Zc, Yc, Phic


@pytest.mark.parametrize("shifted", ["means", "zero", "far"])
def test_centred_moments_equal_direct_computation(arrays, shifted):
    # Shifts other than the means make every centring term non-zero (the
    # training folds of a selection are centred that way).
    X, Y, Z = arrays
    shifts = {
        "means": None,
        "zero": (np.zeros(6), np.zeros(2), np.zeros(4)),
        "far": (np.full(6, 49.0), np.full(2, -1.0), np.arange(4.0)),
    }[shifted]
    cm = compute_moments(X, Y, Z, chunk_size=37, shifts=shifts).centered()
    Xc, Zc, Yc, Phic = _direct(X, Y, Z)
    p, m = 6, 2
    expected = {
        "M": (cm.M.reshape(p * m, p * m), Phic.T @ Phic),
        "Sphiy": (cm.Sphiy.reshape(p * m, -1), Phic.T @ Yc),
        "Sphix": (cm.Sphix.reshape(p * m, p), Phic.T @ Xc),
        "Sphiz": (cm.Sphiz.reshape(p * m, m), Phic.T @ Zc),
        "Sxx": (cm.Sxx, Xc.T @ Xc),
        "Sxz": (cm.Sxz, Xc.T @ Zc),
        "Szz": (cm.Szz, Zc.T @ Zc),
        "Sxy": (cm.Sxy, Xc.T @ Yc),
        "Szy": (cm.Szy, Zc.T @ Yc),
        "Syy": (cm.Syy, Yc.T @ Yc),
        "x_mean": (cm.x_mean, X.mean(0)),
        "z_mean": (cm.z_mean, Z.mean(0)),
        "y_mean": (cm.y_mean, Y.mean(0)),
        "phi_mean": (cm.phi_mean, _phi_mean(X, Z)),
    }
    for name, (got, want) in expected.items():
        # raw sums around zero shifts of values near 50 cancel to ~1e-10 relative
        np.testing.assert_allclose(got, want, rtol=0, atol=1e-9 * np.abs(want).max(), err_msg=name)
    # the operator's (a, b, i, j) layout is the array itself, not a copy
    assert np.shares_memory(MomentOperator(cm).Mab, cm.M)


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
