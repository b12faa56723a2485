"""Recovery metrics against independent computations and invariances."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
import tensorly as tl

from mics.simulation import simulate
from mics.simulation.recovery import (
    cp_factors,
    detection_rates,
    factor_match_score,
    match_channels,
    relative_tensor_error,
    subspace_angles_deg,
)


@pytest.fixture(scope="module")
def truth():
    *_, truth = simulate(
        n_samples=300,
        n_source=20,
        n_target=15,
        n_modulators=4,
        rank=2,
        n_channels=3,
        geometry="random",
        random_state=0,
    )
    return truth


def _factors(truth):
    return (
        truth.channel_weights_.copy(),
        truth.source_patterns_.copy(),
        truth.target_patterns_.copy(),
        truth.modulator_patterns_.copy(),
    )


def _unit_at_cosine(rng, v, cos):
    """A unit vector whose cosine with unit vector v is exactly `cos`."""
    w = rng.standard_normal(v.size)
    w -= (w @ v) * v
    w /= np.linalg.norm(w)
    return cos * v + np.sqrt(1 - cos**2) * w


def test_identical_scores_one(truth):
    assert factor_match_score(truth, truth) == pytest.approx(1.0)
    assert factor_match_score(truth, truth, weights=True) == pytest.approx(1.0)
    assert relative_tensor_error(truth, truth) == 0.0


def test_invariant_to_permutation_and_sign_moves(truth):
    lam, A, B, C = _factors(truth)
    perm = np.array([2, 0, 1])
    s_a, s_b = np.array([-1.0, 1.0, -1.0]), np.array([-1.0, -1.0, 1.0])
    # Signs flipped in two modes cancel: the tensor is the same.
    flipped = (lam[perm], A[:, perm] * s_a, B[:, perm] * s_b, C[:, perm] * s_a * s_b)
    assert factor_match_score(truth, flipped, weights=True) == pytest.approx(1.0)
    assert relative_tensor_error(truth, flipped) == pytest.approx(0.0, abs=1e-12)
    match = match_channels(truth, flipped)
    np.testing.assert_array_equal(perm[match.estimated_index], match.true_index)
    np.testing.assert_allclose(match.cosines[:, 0], s_a[match.estimated_index])
    # Scaled columns are normalised, their norms moved into the weights.
    scaled = (lam / 6.0, 2.0 * A, 3.0 * B, C)
    assert factor_match_score(truth, scaled, weights=True) == pytest.approx(1.0)
    assert relative_tensor_error(truth, scaled) == pytest.approx(0.0, abs=1e-12)


def test_accepts_tensorly_cp_tensor(truth):
    lam, A, B, C = _factors(truth)
    cp = tl.cp_tensor.CPTensor((lam, [A, B, C]))
    assert factor_match_score(truth, cp) == pytest.approx(1.0)
    np.testing.assert_allclose(tl.cp_to_tensor(cp), truth.modulation_tensor(), atol=1e-12)


def test_perturbed_truth_drops_by_expected_amount(truth):
    rng = np.random.default_rng(1)
    lam, A, B, C = _factors(truth)
    A[:, 0] = _unit_at_cosine(rng, A[:, 0], 0.9)
    C[:, 1] = _unit_at_cosine(rng, C[:, 1], -0.6)  # sign must not matter
    B[:, 2] = _unit_at_cosine(rng, B[:, 2], 0.8)
    expected = (0.9 + 0.6 + 0.8) / 3
    assert factor_match_score(truth, (lam, A, B, C)) == pytest.approx(expected, abs=1e-12)
    lam_hat = lam * np.array([1.0, 0.5, 1.25])
    expected_w = (0.9 * 1.0 + 0.6 * 0.5 + 0.8 * 0.8) / 3
    assert factor_match_score(truth, (lam_hat, A, B, C), weights=True) == pytest.approx(
        expected_w, abs=1e-12
    )


def test_hungarian_matching_is_optimal():
    rng = np.random.default_rng(2)
    K = 4
    true = [rng.standard_normal((n, K)) for n in (6, 5, 3)]
    est = [rng.standard_normal((n, K)) for n in (6, 5, 3)]
    unit = [[f / np.linalg.norm(f, axis=0) for f in fs] for fs in (true, est)]
    sim = np.ones((K, K))
    for f, g in zip(*unit, strict=True):
        sim *= np.abs(f.T @ g)
    best = max(
        sum(sim[i, j] for i, j in enumerate(perm)) for perm in itertools.permutations(range(K))
    )
    assert factor_match_score(tuple(true), tuple(est)) == pytest.approx(best / K, abs=1e-12)


def test_unequal_numbers_of_channels(truth):
    lam, A, B, C = _factors(truth)
    # Two of three found exactly: the missed channel counts as 0.
    assert factor_match_score(truth, (lam[:2], A[:, :2], B[:, :2], C[:, :2])) == pytest.approx(
        2 / 3
    )
    # A spurious fourth channel also costs: 3 of 4.
    rng = np.random.default_rng(3)
    extra = [np.column_stack([f, rng.standard_normal(f.shape[0])]) for f in (A, B, C)]
    assert factor_match_score(truth, (np.append(lam, 1.0), *extra)) == pytest.approx(
        3 / 4, abs=0.05
    )
    empty = (np.zeros(0), np.zeros((20, 0)), np.zeros((15, 0)), np.zeros((4, 0)))
    assert factor_match_score(truth, empty) == 0.0
    assert factor_match_score(empty, empty) == 1.0
    assert relative_tensor_error(truth, empty) == pytest.approx(1.0)
    assert relative_tensor_error(empty, empty) == 0.0


def test_relative_tensor_error_matches_dense(truth):
    rng = np.random.default_rng(4)
    lam, A, B, C = _factors(truth)
    est = (lam * 1.1, A + 0.1 * rng.standard_normal(A.shape), B, -C)
    dense = np.zeros((20, 15, 4))
    dense_hat = np.zeros((20, 15, 4))
    for k in range(3):
        dense += lam[k] * np.multiply.outer(np.multiply.outer(A[:, k], B[:, k]), C[:, k])
        dense_hat += est[0][k] * np.multiply.outer(
            np.multiply.outer(est[1][:, k], est[2][:, k]), est[3][:, k]
        )
    expected = np.sqrt(np.sum((dense - dense_hat) ** 2) / np.sum(dense**2))
    assert relative_tensor_error(truth, est) == pytest.approx(expected, rel=1e-12)
    # Negating one mode negates the tensor: error exactly 2, while the FMS ignores it.
    assert relative_tensor_error(truth, (lam, A, B, -C)) == pytest.approx(2.0)
    assert factor_match_score(truth, (lam, A, B, -C)) == pytest.approx(1.0)


def test_cp_factors_moves_negative_weight_into_modulator(truth):
    lam, A, B, C = _factors(truth)
    w, (A2, B2, C2) = cp_factors((-lam, A, B, C))
    np.testing.assert_allclose(w, lam)
    np.testing.assert_allclose(C2, -C)


def test_mismatched_dimensions_raise(truth):
    lam, A, B, C = _factors(truth)
    with pytest.raises(ValueError, match="source patterns"):
        factor_match_score(truth, (lam, A[:-1], B, C))
    with pytest.raises(ValueError, match="one column per channel"):
        factor_match_score(truth, (lam, A, B[:, :2], C))
    with pytest.raises(TypeError, match="expected an object"):
        factor_match_score(truth, "W")


def test_subspace_angles_deg():
    rng = np.random.default_rng(5)
    basis = np.linalg.qr(rng.standard_normal((10, 4)))[0]
    e1, e2, e3, e4 = basis.T
    U = np.column_stack([e1, e2])
    # Same span, different basis: all angles 0.
    np.testing.assert_allclose(subspace_angles_deg(U, U @ [[1, 2], [3, -1]]), 0, atol=1e-6)
    theta = np.radians([10.0, 35.0])
    U_hat = np.column_stack(
        [
            np.cos(theta[1]) * e1 + np.sin(theta[1]) * e3,
            np.cos(theta[0]) * e2 + np.sin(theta[0]) * e4,
        ]
    )
    np.testing.assert_allclose(subspace_angles_deg(U, U_hat), [10.0, 35.0], atol=1e-8)
    assert subspace_angles_deg(U, np.zeros((10, 0))).shape == (0,)


def test_detection_rates():
    rates = detection_rates([0, 1, 2, 2, 0, 1, 1, 3], [0, 0, 1, 0, 0, 0, 0, 0, 0, 0])
    assert rates.power == pytest.approx(6 / 8)
    assert rates.false_positive_rate == pytest.approx(0.1)
    assert rates.n_signal == 8 and rates.n_null == 10
    lo, hi = rates.false_positive_rate_ci
    # Clopper-Pearson for 1/10: (0.0025, 0.445).
    assert lo == pytest.approx(0.00253, abs=1e-4) and hi == pytest.approx(0.4450, abs=1e-3)
    assert np.isnan(detection_rates([], [0, 1]).power)
