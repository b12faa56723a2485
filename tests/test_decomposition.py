"""Tests of the closed-form decomposition (MODEL.md, section 6).

Models are tiny ``SimpleNamespace`` objects carrying the fitted attributes of
``mics.MICs``, so these tests do not depend on the estimator.
"""

from __future__ import annotations

import itertools
from types import SimpleNamespace

import numpy as np
import pytest
import xarray as xr
from numpy.testing import assert_allclose
from sklearn.exceptions import NotFittedError

from mics.model.decomposition import (
    PARTS,
    communication_matrix,
    decompose,
    decompose_channels,
    delta_communication,
    modulation_split,
    modulator_percentiles,
    state_conditioned_subspaces,
)
from mics.model.summaries import format_decomposition, summarize


def random_orthogonal(n, rng):
    q, r = np.linalg.qr(rng.standard_normal((n, n)))
    return q * np.sign(np.diag(r))


def unit_columns(M):
    return M / np.linalg.norm(M, axis=0)


def random_factors(rng, p=7, q=6, m=3, r=2, K=4):
    U = random_orthogonal(p, rng)[:, :r]
    V = random_orthogonal(q, rng)[:, :r]
    A = unit_columns(rng.standard_normal((p, K)))
    Bm = unit_columns(rng.standard_normal((q, K)))
    C = unit_columns(rng.standard_normal((m, K)))
    lam = np.sort(rng.uniform(0.5, 2.0, K))[::-1]
    return U, V, A, Bm, lam, C


def random_covariance(p, rng):
    L = rng.standard_normal((p, p + 3))
    return L @ L.T / (p + 3)


def dense_tensor(A, Bm, lam, C):
    return np.einsum("k,ik,jk,lk->ijl", lam, A, Bm, C)


def fractions(ds, prefix=""):
    return np.stack([ds[f"{prefix}{part}"].values for part in PARTS])


# ------------------------------------------------------------------------ invariants


@pytest.mark.parametrize("metric", ["euclidean", "covariance"])
def test_fractions_are_in_unit_interval_and_sum_to_one(metric):
    rng = np.random.default_rng(0)
    U, V, A, Bm, lam, C = random_factors(rng)
    cov = random_covariance(U.shape[0], rng)
    ds = decompose_channels(U, V, A, Bm, lam, C, metric=metric, source_covariance=cov)
    per_channel = fractions(ds)
    assert per_channel.shape == (4, lam.size)
    assert np.all((per_channel >= 0) & (per_channel <= 1))
    assert_allclose(per_channel.sum(axis=0), 1.0, rtol=0, atol=1e-12)
    totals = fractions(ds, "total_")
    assert np.all((totals >= 0) & (totals <= 1))
    assert_allclose(totals.sum(), 1.0, rtol=0, atol=1e-12)
    energies = fractions(ds, "energy_")
    assert_allclose(energies.sum(), float(ds.energy_total), rtol=1e-12)


def test_tensor_parts_are_orthogonal_sum_to_w_and_match_the_factor_form():
    rng = np.random.default_rng(1)
    U, V, A, Bm, lam, C = random_factors(rng)
    W = dense_tensor(A, Bm, lam, C)
    split = modulation_split(U, V, W)
    parts = split.parts.values
    assert_allclose(parts.sum(axis=0), W, atol=1e-12)
    for i, j in itertools.combinations(range(4), 2):
        assert abs(np.sum(parts[i] * parts[j])) < 1e-12 * np.sum(W**2)
    assert_allclose(split.energy.sum(), np.sum(W**2), rtol=1e-12)
    assert_allclose(split.energy.values, [np.sum(P**2) for P in parts], rtol=1e-12)
    # Independent route: explicit projectors on the dense tensor.
    PS, PT = U @ U.T, V @ V.T
    reshape = np.einsum("ia,jb,abl->ijl", PS, PT, W)
    assert_allclose(parts[0], reshape, atol=1e-12)
    # The Gram-matrix totals of decompose_channels agree with the dense split.
    ds = decompose_channels(U, V, A, Bm, lam, C)
    assert_allclose(fractions(ds, "total_"), split.fraction.values, atol=1e-12)
    assert_allclose(float(ds.energy_total), np.sum(W**2), rtol=1e-12)


def test_tensor_parts_are_orthogonal_in_covariance_metric():
    rng = np.random.default_rng(2)
    U, V, A, Bm, lam, C = random_factors(rng)
    cov = random_covariance(U.shape[0], rng)
    W = dense_tensor(A, Bm, lam, C)
    split = modulation_split(U, V, W, metric="covariance", source_covariance=cov)
    parts = split.parts.values
    assert_allclose(parts.sum(axis=0), W, atol=1e-12)

    def inner(X, Y):  # Sigma_X-weighted on the source mode
        return np.einsum("ijl,ik,kjl->", X, cov, Y)

    for i, j in itertools.combinations(range(4), 2):
        assert abs(inner(parts[i], parts[j])) < 1e-10 * inner(W, W)
    assert_allclose(split.energy.sum(), inner(W, W), rtol=1e-10)
    # Source side in span(U) after projection, complement Sigma-orthogonal to span(U).
    assert_allclose(np.einsum("ia,ijl->ajl", cov @ U, parts[1] + parts[3]), 0, atol=1e-10)
    ds = decompose_channels(U, V, A, Bm, lam, C, metric="covariance", source_covariance=cov)
    assert_allclose(fractions(ds, "total_"), split.fraction.values, atol=1e-10)


def test_matrix_split_has_four_orthogonal_parts():
    rng = np.random.default_rng(3)
    U, V, *_ = random_factors(rng)
    M = rng.standard_normal((U.shape[0], V.shape[0]))
    split = modulation_split(U, V, M)
    assert split.parts.dims == ("part", "source", "target")
    PS, PT = U @ U.T, V @ V.T
    IS, IT = np.eye(len(PS)) - PS, np.eye(len(PT)) - PT
    expected = [PS @ M @ PT, IS @ M @ PT, PS @ M @ IT, IS @ M @ IT]
    assert_allclose(split.parts.values, np.stack(expected), atol=1e-12)
    assert_allclose(split.fraction.sum(), 1.0, atol=1e-12)


# ------------------------------------------------------------- hand-built geometries


def rotated_basis(rng, n):
    """A random orthonormal basis, so that 'in span' is not 'on an axis'."""
    return random_orthogonal(n, rng)


@pytest.mark.parametrize(
    ("part", "source_inside", "target_inside"),
    [
        ("reshape", True, True),
        ("private_source", False, True),
        ("private_target", True, False),
        ("new", False, False),
    ],
)
def test_each_pure_geometry_gives_its_fraction_one(part, source_inside, target_inside):
    rng = np.random.default_rng(4)
    p, q, r, K = 6, 5, 2, 3
    Qs, Qt = rotated_basis(rng, p), rotated_basis(rng, q)
    U, V = Qs[:, :r], Qt[:, :r]
    # Random combinations within span(U) (or its complement), and likewise targets.
    A = unit_columns(
        (Qs[:, :r] if source_inside else Qs[:, r:])
        @ rng.standard_normal(
            (
                r if source_inside else p - r,
                K,
            )
        )
    )
    Bm = unit_columns(
        (Qt[:, :r] if target_inside else Qt[:, r:])
        @ rng.standard_normal(
            (
                r if target_inside else q - r,
                K,
            )
        )
    )
    C = unit_columns(rng.standard_normal((2, K)))
    ds = decompose_channels(U, V, A, Bm, [2.0, 1.0, 0.5], C)
    for other in PARTS:
        expected = 1.0 if other == part else 0.0
        assert_allclose(ds[other].values, expected, atol=1e-12)
        assert_allclose(float(ds[f"total_{other}"]), expected, atol=1e-12)
    assert part in ds.attrs["dominant"]


def test_mixed_channel_matches_hand_computed_fractions():
    # a = cos(30) u + sin(30) u_perp, b = cos(60) v + sin(60) v_perp:
    # |P_S a|^2 = 3/4, |P_T b|^2 = 1/4 -> the products below.
    rng = np.random.default_rng(5)
    Qs, Qt = rotated_basis(rng, 4), rotated_basis(rng, 3)
    U, V = Qs[:, :1], Qt[:, :1]
    th, ph = np.radians(30), np.radians(60)
    a = np.cos(th) * Qs[:, 0] + np.sin(th) * Qs[:, 2]
    b = np.cos(ph) * Qt[:, 0] + np.sin(ph) * Qt[:, 1]
    ds = decompose_channels(U, V, a[:, None], b[:, None], [1.0], [[1.0]])
    expected = {
        "reshape": 0.75 * 0.25,
        "private_source": 0.25 * 0.25,
        "private_target": 0.75 * 0.75,
        "new": 0.25 * 0.75,
    }
    for part, value in expected.items():
        assert_allclose(float(ds[part][0]), value, atol=1e-12)
        assert_allclose(float(ds[f"total_{part}"]), value, atol=1e-12)
    assert_allclose(ds.source_alignment.values, [0.75], atol=1e-12)
    assert_allclose(ds.target_alignment.values, [0.25], atol=1e-12)


def test_patterns_are_normalised_before_splitting():
    rng = np.random.default_rng(6)
    U, V, A, Bm, lam, C = random_factors(rng)
    ref = decompose_channels(U, V, A, Bm, lam, C)
    scaled = decompose_channels(U, V, 3 * A, 0.2 * Bm, lam, C)
    for part in PARTS:
        assert_allclose(scaled[part].values, ref[part].values, atol=1e-12)
        assert_allclose(float(scaled[f"total_{part}"]), float(ref[f"total_{part}"]), atol=1e-12)


def test_whole_tensor_accounts_for_coherent_channels():
    # Two channels each half reshape / half private-source, sharing b and c:
    # their private-source halves cancel, so the tensor is pure reshape (not 50/50).
    rng = np.random.default_rng(7)
    Qs, Qt = rotated_basis(rng, 3), rotated_basis(rng, 3)
    U, V = Qs[:, :1], Qt[:, :1]
    a1 = (Qs[:, 0] + Qs[:, 1]) / np.sqrt(2)
    a2 = (Qs[:, 0] - Qs[:, 1]) / np.sqrt(2)
    A = np.column_stack([a1, a2])
    Bm = np.column_stack([Qt[:, 0], Qt[:, 0]])
    C = np.ones((1, 2))
    ds = decompose_channels(U, V, A, Bm, [1.0, 1.0], C)
    assert_allclose(ds.reshape.values, 0.5, atol=1e-12)
    assert_allclose(ds.private_source.values, 0.5, atol=1e-12)
    assert_allclose(float(ds.total_reshape), 1.0, atol=1e-12)
    assert_allclose(float(ds.total_private_source), 0.0, atol=1e-12)
    assert_allclose(float(ds.energy_total), 2.0, rtol=1e-12)


# ----------------------------------------------------------------- covariance metric


def test_covariance_metric_equals_euclidean_for_isotropic_covariance():
    rng = np.random.default_rng(8)
    U, V, A, Bm, lam, C = random_factors(rng)
    ref = decompose_channels(U, V, A, Bm, lam, C)
    for scale in (1.0, 2.5):
        cov = scale * np.eye(U.shape[0])
        ds = decompose_channels(U, V, A, Bm, lam, C, metric="covariance", source_covariance=cov)
        assert ds.attrs["metric"] == "covariance"
        assert_allclose(fractions(ds), fractions(ref), atol=1e-12)
        assert_allclose(fractions(ds, "total_"), fractions(ref, "total_"), atol=1e-12)


def test_covariance_metric_hand_computed_2d_example():
    # Sources x1, x2 with correlation rho; communication subspace U = e1.
    # The pattern a = e2 is orthogonal to U in neuron space (Euclidean: fully
    # private) but a.x = x2 shares rho^2 of its variance with x1:
    # P a = e1 (e1' S e1)^-1 e1' S e2 = rho e1, |P a|_S^2 = rho^2, |a|_S^2 = 1.
    rho = 0.6
    cov = np.array([[1.0, rho], [rho, 1.0]])
    U = np.array([[1.0], [0.0]])
    V = np.array([[1.0]])
    a = np.array([[0.0], [1.0]])
    b = np.array([[1.0]])
    euclid = decompose_channels(U, V, a, b, [1.0], [[1.0]])
    assert_allclose(float(euclid.reshape[0]), 0.0, atol=1e-12)
    assert_allclose(float(euclid.private_source[0]), 1.0, atol=1e-12)
    ds = decompose_channels(U, V, a, b, [1.0], [[1.0]], metric="covariance", source_covariance=cov)
    assert_allclose(float(ds.reshape[0]), rho**2, atol=1e-12)
    assert_allclose(float(ds.private_source[0]), 1 - rho**2, atol=1e-12)
    assert_allclose(float(ds.total_reshape), rho**2, atol=1e-12)
    assert ds.attrs["covariance_ridge_added"] == 0.0


def test_covariance_metric_ridges_a_singular_covariance():
    # x2 duplicates x1: a = e2 carries exactly the communicated signal.
    cov = np.ones((2, 2))
    U = np.array([[1.0], [0.0]])
    ds = decompose_channels(
        U, [[1.0]], [[0.0], [1.0]], [[1.0]], [1.0], [[1.0]], metric="covariance",
        source_covariance=cov,
    )  # fmt: skip
    assert ds.attrs["covariance_ridge_added"] > 0
    assert np.all(np.isfinite(fractions(ds)))
    assert_allclose(float(ds.reshape[0]), 1.0, atol=1e-6)
    assert_allclose(fractions(ds).sum(), 1.0, atol=1e-12)


def test_covariance_metric_requires_the_covariance():
    rng = np.random.default_rng(9)
    factors = random_factors(rng)
    with pytest.raises(ValueError, match="source_covariance"):
        decompose_channels(*factors, metric="covariance")
    with pytest.raises(ValueError, match="metric must be one of"):
        decompose_channels(*factors, metric="mahalanobis")
    with pytest.raises(ValueError, match="shape"):
        decompose_channels(*factors, metric="covariance", source_covariance=np.eye(3))


# ------------------------------------------------------------------- model wrappers


def fake_model(rng, **overrides):
    U, V, A, Bm, lam, C = random_factors(rng)
    S = np.array([3.0, 1.5])
    attrs = dict(
        coef_=(U * S @ V.T).T,
        source_subspace_=U,
        target_subspace_=V,
        source_patterns_=A,
        target_patterns_=Bm,
        channel_weights_=lam,
        modulator_patterns_=C,
        modulator_mean_=rng.standard_normal(C.shape[0]),
        source_covariance_=random_covariance(U.shape[0], rng),
    )
    attrs.update(overrides)
    return SimpleNamespace(**attrs)


def test_decompose_reads_a_duck_typed_model():
    rng = np.random.default_rng(10)
    model = fake_model(rng)
    args = (
        model.source_subspace_,
        model.target_subspace_,
        model.source_patterns_,
        model.target_patterns_,
        model.channel_weights_,
        model.modulator_patterns_,
    )
    xr.testing.assert_identical(decompose(model), decompose_channels(*args))
    xr.testing.assert_identical(
        decompose(model, metric="covariance"),
        decompose_channels(*args, metric="covariance", source_covariance=model.source_covariance_),
    )
    del model.source_covariance_
    with pytest.raises(ValueError, match="source_covariance_"):
        decompose(model, metric="covariance")
    del model.source_patterns_
    with pytest.raises(NotFittedError, match="source_patterns_"):
        decompose(model)


def test_shape_mismatch_is_reported():
    rng = np.random.default_rng(11)
    U, V, A, Bm, lam, C = random_factors(rng)
    with pytest.raises(ValueError, match="target_patterns"):
        decompose_channels(U, V, A, Bm[:-1], lam, C)


def test_no_channels_gives_nan_totals_and_a_plain_summary():
    rng = np.random.default_rng(12)
    U, V, *_ = random_factors(rng)
    ds = decompose_channels(U, V, np.zeros((7, 0)), np.zeros((6, 0)), [], np.zeros((3, 0)))
    assert ds.sizes["channel"] == 0
    assert np.isnan(float(ds.total_reshape))
    assert "No modulation channels" in summarize(ds)
    assert "total" in format_decomposition(ds)


# --------------------------------------------------------------- state dependence


def two_channel_model(rng):
    """Channel 0 reshapes (inside both subspaces), channel 1 is private-target.

    Modulator 0 gates channel 0, modulator 1 gates channel 1.
    """
    Qs, Qt = rotated_basis(rng, 5), rotated_basis(rng, 4)
    U, V = Qs[:, :2], Qt[:, :2]
    A = np.column_stack([Qs[:, 0], Qs[:, 1]])
    Bm = np.column_stack([Qt[:, 1], Qt[:, 3]])
    return SimpleNamespace(
        coef_=(U * [2.0, 1.0] @ V.T).T,
        source_subspace_=U,
        target_subspace_=V,
        source_patterns_=A,
        target_patterns_=Bm,
        channel_weights_=np.array([2.0, 1.0]),
        modulator_patterns_=np.eye(2),
        modulator_mean_=np.array([0.3, -1.0]),
    )


def test_delta_communication_splits_the_change_at_a_state():
    model = two_channel_model(np.random.default_rng(13))
    mean = model.modulator_mean_
    a, b = model.source_patterns_, model.target_patterns_
    # Only modulator 0 away from its mean: pure reshape.
    ds = delta_communication(model, mean + [1.5, 0.0])
    assert_allclose(ds.delta_communication.values, 2.0 * 1.5 * np.outer(a[:, 0], b[:, 0]))
    assert_allclose(ds.modulator_state.values, [1.5, 0.0])
    assert_allclose(ds.fraction.sel(part="reshape"), 1.0, atol=1e-12)
    # Only modulator 1: pure private target.
    ds = delta_communication(model, mean + [0.0, -2.0])
    assert_allclose(ds.fraction.sel(part="private_target"), 1.0, atol=1e-12)
    # Both, already centred: energies (2*1)^2 = 4 and (1*1)^2 = 1.
    ds = delta_communication(model, [1.0, 1.0], centered=True)
    assert_allclose(ds.energy.sel(part="reshape"), 4.0, rtol=1e-12)
    assert_allclose(ds.energy.sel(part="private_target"), 1.0, rtol=1e-12)
    assert_allclose(ds.fraction.sel(part="reshape"), 0.8, atol=1e-12)
    with pytest.raises(ValueError, match="2 value"):
        delta_communication(model, [1.0, 2.0, 3.0])


def test_communication_matrix_at_the_mean_is_the_baseline():
    model = two_channel_model(np.random.default_rng(14))
    assert_allclose(communication_matrix(model, model.modulator_mean_), model.coef_.T)
    z = model.modulator_mean_ + [1.0, 2.0]
    a, b = model.source_patterns_, model.target_patterns_
    expected = model.coef_.T + 2.0 * np.outer(a[:, 0], b[:, 0]) + 2.0 * np.outer(a[:, 1], b[:, 1])
    assert_allclose(communication_matrix(model, z), expected, atol=1e-12)


def private_channel_model(rng, private="source"):
    """Rank-2 baseline B = s1 u1 v1' + s2 u2 v2' and one gated channel on (u1, v1).

    ``private="source"``: a = u3, b = v1, so B(z) = (s1 u1 + lam z u3) v1' + s2 u2 v2':
    the source subspace tilts from u1 towards u3 by arctan(lam z / s1) and the
    target subspace is unchanged. ``private="target"`` is the mirror image.
    """
    p, q = 6, 5
    Qs, Qt = rotated_basis(rng, p), rotated_basis(rng, q)
    U, V = Qs[:, :2], Qt[:, :2]
    s = np.array([2.0, 1.0])
    if private == "source":
        a, b = Qs[:, 2], Qt[:, 0]
    else:
        a, b = Qs[:, 0], Qt[:, 2]
    return SimpleNamespace(
        coef_=(U * s @ V.T).T,
        source_subspace_=U,
        target_subspace_=V,
        source_patterns_=a[:, None],
        target_patterns_=b[:, None],
        channel_weights_=np.array([1.5]),
        modulator_patterns_=np.array([[1.0]]),
        modulator_mean_=np.array([0.5]),
    )


@pytest.mark.parametrize("private", ["source", "target"])
def test_state_conditioned_subspaces_tilt_only_the_private_side(private):
    model = private_channel_model(np.random.default_rng(15), private)
    states = {"low": [0.5 - 1.0], "high": [0.5 + 2.0]}
    ds = state_conditioned_subspaces(model, states)
    assert ds.source_angles.dims == ("state", "angle")
    assert list(ds.state.values) == ["low", "high"]
    # Independent value: the tilt of the first singular direction, s1 = 2, lam = 1.5.
    tilt = np.degrees(np.arctan(1.5 * np.array([1.0, 2.0]) / 2.0))
    expected = np.column_stack([np.zeros(2), tilt])  # ascending: [0, tilt]
    moved, fixed = ("source", "target") if private == "source" else ("target", "source")
    # scipy's subspace_angles resolves angles near 0 to ~1e-8 rad (~1e-6 degrees).
    assert_allclose(ds[f"{moved}_angles"].values, expected, atol=1e-5)
    assert_allclose(ds[f"{fixed}_angles"].values, 0.0, atol=1e-5)
    assert_allclose(ds[f"{moved}_angles"].sel(state="high")[1], 56.309932, atol=1e-5)
    # B(z) stored is the baseline plus the gated channel.
    zc = np.array([-1.0, 2.0])
    a, b = model.source_patterns_[:, 0], model.target_patterns_[:, 0]
    for i, gain in enumerate(1.5 * zc):
        assert_allclose(
            ds.communication_matrix.values[i], model.coef_.T + gain * np.outer(a, b), atol=1e-12
        )
    # Reconstruction from the stored subspaces (rank 2 is exact here).
    recon = np.einsum(
        "spd,sd,sqd->spq", ds.source_subspace, ds.singular_values, ds.target_subspace
    )
    assert_allclose(recon, ds.communication_matrix.values, atol=1e-12)


def test_state_conditioned_subspaces_accepts_arrays_and_rank():
    model = private_channel_model(np.random.default_rng(16))
    ds = state_conditioned_subspaces(model, [[0.5], [2.5]], rank=1)
    assert list(ds.state.values) == ["state0", "state1"]
    assert ds.sizes["angle"] == 1 and ds.sizes["dimension"] == 1
    # Top-1 source direction of B(z) vs the 2-D baseline span: it lies in the
    # plane (u1, u3), tilted by the same angle from span(u1, u2).
    assert_allclose(ds.source_angles.values[:, 0], [0.0, np.degrees(np.arctan(1.5))], atol=1e-5)
    with pytest.raises(ValueError, match="rank"):
        state_conditioned_subspaces(model, [[0.5]], rank=7)


def test_modulator_percentiles_sets_one_modulator_at_a_time():
    rng = np.random.default_rng(17)
    Z = rng.gamma(2.0, size=(500, 2))
    states = modulator_percentiles(Z)
    assert list(states) == ["z0_p10", "z0_p90", "z1_p10", "z1_p90"]
    assert_allclose(states["z0_p90"], [np.percentile(Z[:, 0], 90), Z[:, 1].mean()])
    assert_allclose(states["z1_p10"], [Z[:, 0].mean(), np.percentile(Z[:, 1], 10)])
    held = modulator_percentiles(Z, (50,), modulator_mean=[7.0, 8.0])
    assert_allclose(held["z1_p50"], [7.0, np.median(Z[:, 1])])
    labelled = xr.DataArray(Z, dims=("time", "behaviour"), coords={"behaviour": ["run", "pupil"]})
    assert "pupil_p90" in modulator_percentiles(labelled)
    single = modulator_percentiles(Z[:, 0], (25, 75))
    assert list(single) == ["p25", "p75"]
    assert_allclose(single["p75"], [np.percentile(Z[:, 0], 75)])


# ------------------------------------------------------------------------- reading


def private_source_dominated():
    rng = np.random.default_rng(18)
    Qs, Qt = rotated_basis(rng, 4), rotated_basis(rng, 3)
    A = np.column_stack([Qs[:, 2], Qs[:, 0]])
    Bm = np.column_stack([Qt[:, 0], Qt[:, 0]])
    C = np.eye(2)  # orthogonal modulator patterns: energies 4 and 1
    return decompose_channels(Qs[:, :2], Qt[:, :2], A, Bm, [2.0, 1.0], C)


def test_format_and_summarize_read_the_decomposition():
    ds = private_source_dominated()
    assert_allclose(float(ds.total_private_source), 0.8, atol=1e-12)
    table = format_decomposition(ds)
    assert "priv.src" in table and "0.800" in table and "1.000" in table
    text = summarize(ds)
    assert text.startswith("Modulation is mostly private source: 80% of the")
    assert "reshape 20%" in text
    assert "CI" not in text

    quantiles = xr.concat(
        [ds[[f"total_{p}" for p in PARTS]] * 0.9, ds[[f"total_{p}" for p in PARTS]] * 1.05],
        dim=xr.DataArray([0.025, 0.975], dims="quantile", name="quantile"),
    )
    text = summarize(ds, quantiles)
    assert "private source: 80% (95% CI 72-84%) of" in text
    assert "reshape 20% (95% CI 18-21%)" in text

    flat = xr.Dataset({"total_private_source_low": 0.6, "total_private_source_high": 0.9})
    assert "private source: 80% (CI 60-90%)" in summarize(ds, flat)
    bound = ds[["total_reshape"]].expand_dims(bound=2) * xr.DataArray([0.5, 1.5], dims="bound")
    assert "reshape 20% (CI 10-30%)" in summarize(ds, bound)


def test_summary_says_when_nothing_dominates():
    rng = np.random.default_rng(19)
    Qs, Qt = rotated_basis(rng, 4), rotated_basis(rng, 4)
    A = np.column_stack([Qs[:, 0], Qs[:, 2], Qs[:, 0], Qs[:, 2]])
    Bm = np.column_stack([Qt[:, 0], Qt[:, 0], Qt[:, 2], Qt[:, 2]])
    ds = decompose_channels(Qs[:, :2], Qt[:, :2], A, Bm, [1.2, 1.0, 1.0, 1.0], np.eye(4))
    assert summarize(ds).startswith(
        "No single kind of modulation dominates; the largest is reshape: 3"
    )


def test_decompose_matches_a_hand_computation_on_a_tiny_model():
    """decompose() against numbers worked out by hand, not against decompose_channels.

    p = q = m = 2, r = 1, U = V = e1. Channel 0: a = e1 (inside), b = e2 (outside),
    so it is all private_target. Channel 1: a = (0.6, 0.8), b = (0.8, 0.6): the
    source pattern has 0.36 of its energy in span(U), the target pattern 0.64 in
    span(V). Modulator patterns e1, e2 with modulators' s.d. 2 and 0.5, so per s.d.
    the channels weigh 1.5 * 2 = 3 and 1.0 * 0.5 = 0.5, energies 9 and 0.25; the
    modulator patterns are orthogonal, so the whole-tensor energies add by channel.
    """
    e1, e2 = np.array([1.0, 0.0]), np.array([0.0, 1.0])
    model = SimpleNamespace(
        source_subspace_=e1[:, None],
        target_subspace_=e1[:, None],
        source_patterns_=np.column_stack([e1, [0.6, 0.8]]),
        target_patterns_=np.column_stack([e2, [0.8, 0.6]]),
        channel_weights_=np.array([1.5, 1.0]),
        modulator_patterns_=np.column_stack([e1, e2]),
        modulator_scale_=np.array([2.0, 0.5]),
    )
    ds = decompose(model)
    hand = {  # channel 1: source in 0.36 / out 0.64, target in 0.64 / out 0.36
        "reshape": [0.0, 0.36 * 0.64],
        "private_source": [0.0, 0.64 * 0.64],
        "private_target": [1.0, 0.36 * 0.36],
        "new": [0.0, 0.64 * 0.36],
    }
    for part, values in hand.items():
        assert_allclose(ds[part].values, values, rtol=0, atol=1e-15)
        total = (9.0 * values[0] + 0.25 * values[1]) / 9.25
        assert float(ds[f"total_{part}"]) == pytest.approx(total, rel=1e-14)
        assert float(ds[f"energy_{part}"]) == pytest.approx(9.25 * total, rel=1e-14)
    assert_allclose(ds.source_alignment.values, [1.0, 0.36], atol=1e-15)
    assert_allclose(ds.target_alignment.values, [0.0, 0.64], atol=1e-15)
    assert_allclose(ds.channel_weight.values, [1.5, 1.0])  # the model's own weights

    # Overlapping modulator patterns add coherently: with c = e1 for both channels
    # (and no rescaling) the dense tensor W is formed and each of its four parts
    # projected explicitly with P_S = P_T = e1 e1^T and the complements.
    model.modulator_patterns_ = np.column_stack([e1, e1])
    del model.modulator_scale_
    ds = decompose(model)
    W = np.einsum(
        "k,ik,jk,lk->ijl",
        model.channel_weights_,
        model.source_patterns_,
        model.target_patterns_,
        model.modulator_patterns_,
    )
    P_in, P_out = np.diag([1.0, 0.0]), np.diag([0.0, 1.0])
    side = {True: P_in, False: P_out}
    sides = {
        "reshape": (True, True),
        "private_source": (False, True),
        "private_target": (True, False),
        "new": (False, False),
    }
    for part, (s, t) in sides.items():
        energy = np.sum(np.einsum("ai,bj,ijl->abl", side[s], side[t], W) ** 2)
        assert float(ds[f"energy_{part}"]) == pytest.approx(energy, rel=1e-12, abs=1e-15)
        assert float(ds[f"total_{part}"]) == pytest.approx(energy / np.sum(W**2), abs=1e-14)
