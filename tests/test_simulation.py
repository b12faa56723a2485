"""The generator builds what it claims: geometry, SNR, model, dynamics."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import signal, stats

from mics.simulation import GEOMETRIES, GroundTruth, simulate

SMALL = dict(n_samples=400, n_source=30, n_target=25, n_modulators=3, rank=3)


def _autocorr(x, lag):
    x = x - x.mean(axis=0)
    return np.mean(np.sum(x[lag:] * x[:-lag], axis=0) / np.sum(x * x, axis=0))


def _in_span(basis, vectors):
    """Distance of unit vectors from span(basis)."""
    return np.linalg.norm(vectors - basis @ (basis.T @ vectors), axis=0)


def _off_span(basis, vectors):
    """Length of the projection of unit vectors onto span(basis)."""
    return np.linalg.norm(basis.T @ vectors, axis=0)


EXPECTED = {
    # geometry: (source pattern inside span(U)?, target pattern inside span(V)?)
    "reshape": (True, True),
    "private_source": (False, True),
    "private_target": (True, False),
    "new": (False, False),
}


@pytest.mark.parametrize("geometry", list(EXPECTED))
def test_geometry_places_patterns_where_claimed(geometry):
    *_, truth = simulate(**SMALL, n_channels=2, geometry=geometry, random_state=1)
    U, V = truth.source_subspace_, truth.target_subspace_
    A, B = truth.source_patterns_, truth.target_patterns_
    src_in, tgt_in = EXPECTED[geometry]
    src_err = _in_span(U, A) if src_in else _off_span(U, A)
    tgt_err = _in_span(V, B) if tgt_in else _off_span(V, B)
    np.testing.assert_allclose(src_err, 0, atol=1e-10)
    np.testing.assert_allclose(tgt_err, 0, atol=1e-10)
    # ... and not trivially: the other half of the split is the whole vector.
    other = _off_span(U, A) if src_in else _in_span(U, A)
    np.testing.assert_allclose(other, 1, atol=1e-10)
    # Channels sharing a subspace are drawn orthogonal (well separated).
    assert abs(A[:, 0] @ A[:, 1]) < 1e-10
    assert abs(B[:, 0] @ B[:, 1]) < 1e-10
    assert truth.geometry == [geometry, geometry]


def test_random_geometry_is_unconstrained():
    # A uniformly random unit vector in R^p puts a Beta(r/2, (p - r)/2) fraction of
    # its energy in a fixed r-dimensional span: mean r/p (10% of it in span(U) for
    # p = 30, 12% in span(V) for q = 25). Checked over 200 simulations (0.8 s):
    # measured pooled means 0.1014 (source) and 0.1198 (target), KS p-values
    # 0.31 / 0.93 (source, per channel) and 0.19 (target, channel 0). The mean
    # is allowed 4 standard errors (sd / sqrt(400) = 0.0038 source, 0.0044 target).
    p, q, r = SMALL["n_source"], SMALL["n_target"], SMALL["rank"]
    source, target = [], []
    for seed in range(200):
        *_, truth = simulate(**SMALL, n_channels=2, geometry="random", random_state=seed)
        source.append(_off_span(truth.source_subspace_, truth.source_patterns_) ** 2)
        target.append(_off_span(truth.target_subspace_, truth.target_patterns_) ** 2)
    for energy, n in ((np.concatenate(source), p), (np.concatenate(target), q)):
        law = stats.beta(r / 2, (n - r) / 2)
        assert energy.mean() == pytest.approx(r / n, abs=4 * law.std() / np.sqrt(energy.size))
        assert stats.kstest(energy, law.cdf).pvalue > 1e-3


def test_mixed_geometry_per_channel():
    *_, truth = simulate(**SMALL, n_channels=2, geometry=["reshape", "new"], random_state=3)
    U, V = truth.source_subspace_, truth.target_subspace_
    a, b = truth.source_patterns_, truth.target_patterns_
    assert _in_span(U, a[:, :1])[0] < 1e-10 and _in_span(V, b[:, :1])[0] < 1e-10
    assert _off_span(U, a[:, 1:])[0] < 1e-10 and _off_span(V, b[:, 1:])[0] < 1e-10


def test_canonical_form():
    *_, truth = simulate(**SMALL, n_channels=3, geometry="random", random_state=4)
    for patterns in (truth.source_patterns_, truth.target_patterns_, truth.modulator_patterns_):
        np.testing.assert_allclose(np.linalg.norm(patterns, axis=0), 1, atol=1e-12)
    for patterns in (truth.source_patterns_, truth.target_patterns_):
        largest = patterns[np.argmax(np.abs(patterns), axis=0), np.arange(patterns.shape[1])]
        assert np.all(largest > 0)
    lam = truth.channel_weights_
    assert np.all(lam > 0) and np.all(np.diff(lam) < 0)
    U, S, V = truth.source_subspace_, truth.singular_values_, truth.target_subspace_
    np.testing.assert_allclose(U.T @ U, np.eye(3), atol=1e-12)
    np.testing.assert_allclose(V.T @ V, np.eye(3), atol=1e-12)
    assert np.all(U[np.argmax(np.abs(U), axis=0), np.arange(3)] > 0)
    np.testing.assert_allclose((U * S) @ V.T, truth.coef_.T, atol=1e-12)
    assert np.linalg.matrix_rank(truth.coef_) == 3


@pytest.mark.parametrize("kind", ["gaussian", "locomotion", "population"])
def test_model_and_snr_hold_empirically(kind):
    snr = dict(baseline_snr=1.5, modulation_snr=0.4, additive_snr=0.3)
    X, Y, Z, truth = simulate(
        n_samples=20_000,
        n_source=12,
        n_target=10,
        n_modulators=2,
        rank=2,
        n_channels=2,
        geometry="private_source",
        modulator_kind=kind,
        source_dim=4,
        random_state=5,
        **snr,
    )
    # Terms rebuilt from the truth, the modulation from the dense tensor.
    baseline = X @ truth.coef_.T
    additive = Z @ truth.modulator_coef_.T
    modulation = np.einsum("tp,tm,pqm->tq", X, Z, truth.modulation_tensor())
    noise = Y - truth.intercept_ - baseline - additive - modulation
    noise_var = noise.var(axis=0).mean()
    # White N(0, 1) noise: anything left of the signal would inflate this.
    assert noise_var == pytest.approx(truth.noise_var, rel=0.03)
    assert np.abs(np.corrcoef(noise.T, X.T)[:10, 10:]).max() < 0.05
    for term, name in ((baseline, "baseline"), (modulation, "modulation"), (additive, "additive")):
        measured = term.var(axis=0).mean() / noise_var
        assert measured == pytest.approx(snr[f"{name}_snr"], rel=0.03), name
    np.testing.assert_allclose(truth.predict(X, Z), Y - noise, atol=1e-10)


def test_inputs_are_centred_and_modulator_standardised():
    X, _, Z, _ = simulate(**SMALL, modulator_kind="locomotion", random_state=6)
    np.testing.assert_allclose(X.mean(axis=0), 0, atol=1e-12)
    np.testing.assert_allclose(Z.mean(axis=0), 0, atol=1e-12)
    np.testing.assert_allclose(Z.std(axis=0), 1, atol=1e-12)


def test_communication_matrix():
    *_, truth = simulate(**SMALL, n_channels=2, random_state=7)
    z = np.array([0.5, -1.0, 2.0])
    expected = truth.coef_.T + np.tensordot(truth.modulation_tensor(), z, axes=([2], [0]))
    np.testing.assert_allclose(truth.communication_matrix(z), expected, atol=1e-12)
    np.testing.assert_allclose(truth.communication_matrix(np.zeros(3)), truth.coef_.T)
    with pytest.raises(ValueError, match="3 dimensions"):
        truth.communication_matrix([1.0, 2.0])


def test_reproducible_with_random_state():
    first = simulate(**SMALL, modulator_kind="locomotion", random_state=8)
    second = simulate(**SMALL, modulator_kind="locomotion", random_state=np.random.RandomState(8))
    for a, b in zip(first[:3], second[:3], strict=True):
        np.testing.assert_array_equal(a, b)
    np.testing.assert_array_equal(first[3].source_patterns_, second[3].source_patterns_)
    other = simulate(**SMALL, modulator_kind="locomotion", random_state=9)
    assert not np.allclose(first[1], other[1])


def test_directions_do_not_depend_on_n_samples():
    *_, short = simulate(**{**SMALL, "n_samples": 200}, random_state=10)
    *_, long = simulate(**{**SMALL, "n_samples": 800}, random_state=10)
    np.testing.assert_array_equal(short.source_patterns_, long.source_patterns_)
    np.testing.assert_array_equal(short.source_subspace_, long.source_subspace_)


@pytest.mark.parametrize("rho", [0.0, 0.8])
def test_ar1_source_autocorrelation(rho):
    X, *_ = simulate(
        n_samples=20_000, n_source=10, n_target=5, source_autocorr=rho, random_state=11
    )
    assert _autocorr(X, 1) == pytest.approx(rho, abs=0.02)
    assert _autocorr(X, 2) == pytest.approx(rho**2, abs=0.02)


def test_ar1_modulator_autocorrelation():
    _, _, Z, _ = simulate(
        n_samples=20_000, n_source=10, n_target=5, modulator_autocorr=0.9, random_state=12
    )
    assert _autocorr(Z, 1) == pytest.approx(0.9, abs=0.02)
    assert _autocorr(Z, 3) == pytest.approx(0.9**3, abs=0.03)


def test_source_dim_gives_low_dimensional_shared_variance():
    X, *_ = simulate(n_samples=5000, n_source=40, n_target=10, source_dim=3, random_state=13)
    eig = np.linalg.eigvalsh(np.cov(X.T))[::-1]
    # Shared latent: 3 large eigenvalues; private noise variance is 0.5.
    assert eig[2] > 5 * eig[3]
    assert eig[3] == pytest.approx(0.5, rel=0.25)


def test_locomotion_bouts():
    _, _, Z, _ = simulate(
        n_samples=30_000,
        n_source=5,
        n_target=5,
        n_modulators=3,
        modulator_kind="locomotion",
        random_state=14,
    )
    running = Z[:, 0] > Z[:, 0].mean()
    assert np.unique(Z[:, 0]).size == 2
    edges = np.flatnonzero(np.diff(running.astype(int)))
    bouts = np.diff(edges)
    run_bouts = bouts[running[edges[:-1] + 1]]
    still_bouts = bouts[~running[edges[:-1] + 1]]
    assert run_bouts.mean() == pytest.approx(40, rel=0.15)
    assert still_bouts.mean() == pytest.approx(60, rel=0.15)
    # Speed follows running (with ramps), the pupil-like signal more loosely.
    assert np.corrcoef(Z[:, 1], Z[:, 0])[0, 1] > 0.7
    assert np.corrcoef(Z[:, 2], Z[:, 0])[0, 1] > 0.3


def test_locomotion_autocorr_sets_switching():
    _, _, Z, _ = simulate(
        n_samples=30_000,
        n_source=5,
        n_target=5,
        n_modulators=1,
        n_channels=1,
        modulator_kind="locomotion",
        modulator_autocorr=0.9,
        random_state=15,
    )
    assert _autocorr(Z, 1) == pytest.approx(0.9, abs=0.02)


def test_population_modulator_is_low_dimensional():
    _, _, Z, _ = simulate(
        n_samples=5000,
        n_source=5,
        n_target=5,
        n_modulators=20,
        n_channels=2,
        modulator_kind="population",
        random_state=16,
    )
    eig = np.linalg.eigvalsh(np.cov(Z.T))[::-1]
    # A 3-d latent carries half the variance; the private rest is spread thin.
    assert eig[2] > 2 * eig[3]
    assert eig[:3].sum() / eig.sum() == pytest.approx(0.5, abs=0.1)


def test_calcium_observation_model():
    tau, fs, noise = 0.5, 20.0, 0.05
    X, Y, Z, truth = simulate(
        n_samples=4000,
        n_source=8,
        n_target=6,
        n_modulators=2,
        rank=2,
        calcium=dict(tau=tau, fs=fs, noise=noise),
        random_state=17,
    )
    # The truth describes the latent activity ...
    residual = truth.target_rates - truth.predict(truth.source_rates, Z)
    assert residual.var() == pytest.approx(1.0, rel=0.05)
    # ... and the traces are those rates through softplus and the indicator kernel.
    g = np.exp(-1 / (tau * fs))
    clean = signal.lfilter([1 - g], [1, -g], np.log1p(np.exp(truth.source_rates)), axis=0)
    err = X - clean
    assert np.all(np.abs(err[200:].std(axis=0) / clean.std(axis=0) - noise) < 0.01)
    assert _autocorr(X, 1) > _autocorr(truth.source_rates, 1) + 0.5


def test_null_and_no_baseline():
    X, Y, Z, truth = simulate(**SMALL, n_channels=0, random_state=18)
    assert truth.n_channels_ == 0 and truth.source_patterns_.shape == (30, 0)
    assert not truth.modulation_tensor().any()
    *_, truth = simulate(**{**SMALL, "rank": 0}, n_channels=1, geometry="random", random_state=19)
    assert truth.rank_ == 0 and not truth.coef_.any()


def test_kruskal_warning_single_modulator():
    with pytest.warns(UserWarning, match="not identifiable"):
        simulate(**{**SMALL, "n_modulators": 1}, n_channels=2, random_state=0)


@pytest.mark.parametrize(
    "kwargs, match",
    [
        (dict(geometry="sideways"), "unknown geometry"),
        (dict(geometry=["new"]), "one geometry per channel"),
        (dict(geometry="private_source", n_source=3, rank=3), "rank < n_source"),
        (dict(geometry="private_target", n_target=3, rank=3), "rank < n_target"),
        (dict(geometry="reshape", rank=0), "rank >= 1"),
        (dict(rank=7, n_source=5), "exceeds min"),
        (dict(n_channels=9, n_source=5, rank=2), "n_channels=9 exceeds"),
        (dict(modulation_snr=0.0), "set the rank / n_channels to 0"),
        (dict(baseline_snr=-1.0), "non-negative"),
        (dict(source_autocorr=1.0), r"\(-1, 1\)"),
        (dict(modulator_kind="pupil"), "modulator_kind"),
        (dict(modulator_kind="locomotion", modulator_autocorr=-0.5), "running bouts"),
        (dict(calcium=dict(tau=1.0, gain=2)), "unknown calcium option"),
        (dict(source_dim=100), "source_dim"),
        (dict(n_samples=1.5), "n_samples must be an integer"),
    ],
)
def test_invalid_arguments(kwargs, match):
    with pytest.raises(ValueError, match=match):
        simulate(**{"n_samples": 50, "n_channels": 2, **kwargs})


def test_geometry_names_are_exported():
    assert set(GEOMETRIES) == set(EXPECTED) | {"random"}
    assert "GroundTruth(" in repr(simulate(**SMALL, random_state=0)[3])
    assert isinstance(simulate(**SMALL, random_state=0)[3], GroundTruth)


# ----------------------------------------------------------- shared variability
SHARED = dict(n_samples=20000, n_source=40, n_target=30, n_modulators=1, rank=2, n_channels=1)


def test_shared_variability_puts_the_stated_share_of_variance_in_the_factors():
    X, Y, Z, truth = simulate(
        **SHARED, shared_variability=dict(n_factors=4, strength=0.8), random_state=30
    )
    np.testing.assert_allclose(X.var(axis=0), 1.0, atol=0.06)  # unit variance per neuron
    eig = np.linalg.eigvalsh(np.cov(X, rowvar=False))[::-1]
    # four factors carry 0.8 of the variance; private noise spreads the rest evenly
    assert eig[:4].sum() / eig.sum() == pytest.approx(0.8 + 0.2 * 4 / 40, abs=0.03)
    assert eig[4] < 0.3
    noise = Y - truth.predict(X, Z)
    np.testing.assert_allclose(noise.var(axis=0), 1.0, atol=0.06)  # noise_var stays 1
    eig = np.linalg.eigvalsh(np.cov(noise, rowvar=False))[::-1]
    assert eig[:4].sum() / eig.sum() == pytest.approx(0.8 + 0.2 * 4 / 30, abs=0.03)
    assert truth.shared_variability["strength"] == 0.8
    assert truth.shared_variability["populations"] == ("source", "target")


def test_spatial_shared_variability_correlates_neighbours_on_the_field_of_view():
    X, _, _, truth = simulate(
        **{**SHARED, "n_source": 120},
        shared_variability=dict(strength=0.8, spatial=1.0, length_scale=0.1),
        random_state=31,
    )
    xy = truth.source_positions_
    assert xy.shape == (120, 2) and np.all((xy >= 0) & (xy <= 1))
    d = np.linalg.norm(xy[:, None] - xy[None], axis=-1)
    corr = np.corrcoef(X, rowvar=False)
    near = corr[(d > 0) & (d < 0.05)].mean()
    far = corr[d > 0.4].mean()
    # exp(-d^2 / 0.02) times the shared 0.8: about 0.75 near, 0 far
    assert near > 0.6 and abs(far) < 0.03
    assert truth.target_positions_.shape == (30, 2) and truth.modulator_positions_ is None


def test_noise_autocorr_and_the_population_modulator_share_variability():
    X, Y, Z, truth = simulate(
        n_samples=20000, n_source=20, n_target=15, n_modulators=30, rank=2, n_channels=1,
        modulator_kind="population", noise_autocorr=0.6, modulator_autocorr=0.5,
        shared_variability=dict(n_factors=3, strength=0.9), random_state=32,
    )  # fmt: skip
    noise = Y - truth.predict(X, Z)
    assert _autocorr(noise, 1) == pytest.approx(0.6, abs=0.03)
    eig = np.linalg.eigvalsh(np.cov(Z, rowvar=False))[::-1]
    assert eig[:3].sum() / eig.sum() == pytest.approx(0.9 + 0.1 * 3 / 30, abs=0.03)
    assert _autocorr(Z, 1) == pytest.approx(0.5, abs=0.03)
    assert truth.modulator_positions_.shape == (30, 2)
    # white noise without the option: the draws of earlier versions
    X0, Y0, Z0, t0 = simulate(n_samples=4000, n_source=20, n_target=15, random_state=3)
    assert abs(_autocorr(Y0 - t0.predict(X0, Z0), 1)) < 0.05


@pytest.mark.parametrize(
    "kwargs, match",
    [
        (dict(shared_variability=dict(strength=1.0)), "strength"),
        (dict(shared_variability=dict(spatial=1.5)), "spatial"),
        (dict(shared_variability=dict(length_scale=0)), "length_scale"),
        (dict(shared_variability=dict(n_factors=0)), "n_factors"),
        (dict(shared_variability=dict(colour=1)), "unknown"),
        (dict(shared_variability=dict(populations=("modulator",))), "population"),
        (dict(shared_variability=dict(populations=("cortex",))), "unknown"),
        (dict(shared_variability={}, source_dim=2), "source_dim"),
        (dict(noise_autocorr=1.0), "noise_autocorr"),
    ],
)
def test_shared_variability_rejects_bad_settings(kwargs, match):
    with pytest.raises((ValueError, TypeError), match=match):
        simulate(**SMALL, **kwargs)
