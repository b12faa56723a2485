"""Ground-truth generator for the MIC model (MODEL.md §2).

``simulate`` draws a source population ``X``, a modulator ``Z`` and a target
population ``Y`` from

    y_t = mu + B^T x_t + D^T z_t + sum_k lambda_k (c_k . z_t)(a_k . x_t) b_k + e_t

with a chosen geometry of each multiplicative interaction channel relative
to the baseline communication subspace, and returns the true parameters
under the same names as a fitted :class:`mics.MICs`, so that the recovery
metrics in :mod:`mics.simulation.recovery` accept either.

Signal-to-noise ratios are defined *in sample* and *pooled over target
neurons*: with ``e_t ~ N(0, sigma^2 I)`` and ``sigma^2 = 1``,

- ``baseline_snr = sum_j var_t[(X B)_tj] / (q sigma^2)``,
- ``modulation_snr = sum_j var_t[M_tj] / (q sigma^2)`` where ``M`` is the
  multiplicative term,
- ``additive_snr = sum_j var_t[(Z D)_tj] / (q sigma^2)``,

where ``var_t`` is the sample variance of the generated draw. Scaling by the
realised rather than the population variance makes the ratios exact for
every modulator kind (the variance of a product of a Markov-switching
running state with a correlated source has no simple closed form).
"""

from __future__ import annotations

import numbers
import warnings
from dataclasses import dataclass, field
from typing import NamedTuple

import numpy as np
from scipy import linalg, signal
from sklearn.utils import check_random_state

from mics.core.als import cp_tensor
from mics.core.linalg import canonical_signs

__all__ = ["GroundTruth", "simulate", "GEOMETRIES", "MODULATOR_KINDS", "SHARED_DEFAULTS"]

#: Channel geometries relative to the baseline subspaces (MODEL.md §6).
GEOMETRIES = ("reshape", "private_source", "private_target", "new", "random")
#: Kinds of modulator ``simulate`` can generate.
MODULATOR_KINDS = ("gaussian", "locomotion", "population")

# Where each geometry puts the source (a) and target (b) pattern: "in" the
# baseline subspace, "out" of it (orthogonal complement), or "free".
_PLACEMENT = {
    "reshape": ("in", "in"),
    "private_source": ("out", "in"),
    "private_target": ("in", "out"),
    "new": ("out", "out"),
    "random": ("free", "free"),
}

# Share of each neuron's variance carried by the population's low-dimensional
# latent when `source_dim` is set (and for the "population" modulator):
# cortical populations typically share a sizeable fraction of their variance.
_SHARED_FRACTION = 0.5
# Default running / stationary bout lengths (samples) of the locomotion modulator.
_RUN_BOUT, _STILL_BOUT = 40.0, 60.0
# Relative channel strengths and baseline singular values before SNR scaling:
# descending but not so spread that the weakest component is invisible.
_CHANNEL_DECAY = 0.75
_CALCIUM_DEFAULTS = {"tau": 1.0, "fs": 10.0, "noise": 0.1}
_NOISE_VAR = 1.0
#: Defaults of the ``shared_variability`` option of :func:`simulate`:
#: ``n_factors`` latent factors, ``strength`` the share of each neuron's
#: variance that is shared, ``spatial`` the part of the shared variance that is
#: spatially clustered on the field of view (correlation
#: ``exp(-d^2 / (2 length_scale^2))`` at distance ``d``, the field of view
#: being the unit square), ``populations`` those that share variability
#: (None: source, target noise, and the modulator when it is a population).
SHARED_DEFAULTS = {
    "n_factors": 8,
    "strength": 0.5,
    "spatial": 0.0,
    "length_scale": 0.1,
    "populations": None,
}
_POPULATIONS = ("source", "target", "modulator")


@dataclass(repr=False)
class GroundTruth:
    """True parameters of a simulated data set.

    Field names match the fitted attributes of :class:`mics.MICs`.

    Attributes
    ----------
    rank_ : int
        Rank r of the baseline communication matrix B.
    n_channels_ : int
        Number K of multiplicative interaction channels.
    coef_ : ndarray of shape (n_target, n_source)
        Baseline ``B^T``.
    intercept_ : ndarray of shape (n_target,)
        ``mu``.
    modulator_coef_ : ndarray of shape (n_target, n_modulators)
        Additive modulator effect ``D^T``.
    source_subspace_ : ndarray of shape (n_source, rank_)
        Orthonormal U (the source communication subspace).
    target_subspace_ : ndarray of shape (n_target, rank_)
        Orthonormal V (the target communication subspace).
    singular_values_ : ndarray of shape (rank_,)
        S, descending, with ``B = U diag(S) V^T``.
    channel_weights_ : ndarray of shape (n_channels_,)
        lambda_k > 0, descending.
    source_patterns_ : ndarray of shape (n_source, n_channels_)
    target_patterns_ : ndarray of shape (n_target, n_channels_)
    modulator_patterns_ : ndarray of shape (n_modulators, n_channels_)
        Unit-norm columns; the largest-|.| entry of each source and target
        pattern is positive (the sign lives in the modulator pattern).
    geometry : list of str
        Geometry of each channel (one of :data:`GEOMETRIES`).
    noise_var : float
        Variance of the target noise ``e_t`` per neuron.
    gating_neurons : ndarray of int
        Modulator columns that carry the gating (where ``modulator_patterns_``
        is non-zero), sorted.
    source_members_, target_members_, modulator_members_ : ndarray of bool or None
        Shapes (n_source, n_channels_), (n_target, n_channels_),
        (n_modulators, n_channels_): the neurons that carry each channel
        (non-zero pattern entries). Set when ``simulate`` plants channels on
        subsets of neurons (``source_members`` / ``target_members``).
    source_rates, target_rates : ndarray of shape (n_samples, n_neurons) or None
        With the calcium observation model only: the latent (centred) source
        activity and target activity the parameters above describe; the
        returned ``X``, ``Y`` are then fluorescence traces.
    """

    rank_: int
    n_channels_: int
    coef_: np.ndarray
    intercept_: np.ndarray
    modulator_coef_: np.ndarray
    source_subspace_: np.ndarray
    target_subspace_: np.ndarray
    singular_values_: np.ndarray
    channel_weights_: np.ndarray
    source_patterns_: np.ndarray
    target_patterns_: np.ndarray
    modulator_patterns_: np.ndarray
    geometry: list[str]
    noise_var: float = _NOISE_VAR
    gating_neurons: np.ndarray | None = field(default=None, repr=False)
    source_rates: np.ndarray | None = field(default=None, repr=False)
    target_rates: np.ndarray | None = field(default=None, repr=False)
    source_members_: np.ndarray | None = field(default=None, repr=False)
    target_members_: np.ndarray | None = field(default=None, repr=False)
    modulator_members_: np.ndarray | None = field(default=None, repr=False)
    source_positions_: np.ndarray | None = field(default=None, repr=False)
    target_positions_: np.ndarray | None = field(default=None, repr=False)
    modulator_positions_: np.ndarray | None = field(default=None, repr=False)
    shared_variability: dict | None = field(default=None, repr=False)

    def __repr__(self):
        p, q = self.coef_.shape[1], self.coef_.shape[0]
        m = self.modulator_coef_.shape[1]
        weights = np.array2string(self.channel_weights_, precision=3)
        return (
            f"GroundTruth(n_source={p}, n_target={q}, n_modulators={m}, rank_={self.rank_}, "
            f"n_channels_={self.n_channels_}, channel_weights_={weights}, "
            f"geometry={self.geometry})"
        )

    def modulation_tensor(self):
        """The modulation tensor ``W = sum_k lambda_k a_k o b_k o c_k``.

        Returns
        -------
        W : ndarray of shape (n_source, n_target, n_modulators)
        """
        return cp_tensor(
            self.channel_weights_,
            self.source_patterns_,
            self.target_patterns_,
            self.modulator_patterns_,
        )

    def communication_matrix(self, z):
        """Effective communication matrix at one modulator state.

        Parameters
        ----------
        z : array-like of shape (n_modulators,)
            Modulator state in the centred coordinates of the returned ``Z``
            (``z = 0`` is the average state, where ``B(z) = B``).

        Returns
        -------
        B_z : ndarray of shape (n_source, n_target)
            ``B + sum_k lambda_k (c_k . z) a_k b_k^T``.
        """
        z = np.asarray(z, dtype=float).reshape(-1)
        if z.shape[0] != self.modulator_patterns_.shape[0]:
            raise ValueError(
                f"z has {z.shape[0]} entries but the modulator has "
                f"{self.modulator_patterns_.shape[0]} dimensions."
            )
        gains = self.channel_weights_ * (z @ self.modulator_patterns_)
        return self.coef_.T + (self.source_patterns_ * gains) @ self.target_patterns_.T

    def predict(self, X, Z):
        """Noise-free target activity under the true parameters.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_source)
            Centred source activity (the latent rates under the calcium model).
        Z : array-like of shape (n_samples, n_modulators)
            Centred modulator.

        Returns
        -------
        Y_mean : ndarray of shape (n_samples, n_target)
        """
        X = np.asarray(X, dtype=float)
        Z = np.asarray(Z, dtype=float).reshape(X.shape[0], -1)
        gains = (X @ self.source_patterns_) * (Z @ self.modulator_patterns_)
        return (
            self.intercept_
            + X @ self.coef_.T
            + Z @ self.modulator_coef_.T
            + (gains * self.channel_weights_) @ self.target_patterns_.T
        )


def simulate(
    n_samples=2000,
    n_source=80,
    n_target=60,
    n_modulators=3,
    rank=3,
    n_channels=2,
    geometry="new",
    baseline_snr=1.0,
    modulation_snr=0.5,
    source_dim=None,
    source_autocorr=0.0,
    modulator_autocorr=0.0,
    modulator_kind="gaussian",
    calcium=None,
    random_state=None,
    *,
    additive_snr=0.2,
    n_gating=None,
    source_members=None,
    target_members=None,
    shared_variability=None,
    noise_autocorr=0.0,
):
    """Simulate source, modulator and target activity with known channels.

    Parameters
    ----------
    n_samples : int
        Number of time bins T.
    n_source, n_target, n_modulators : int
        p, q and m.
    rank : int
        Rank r of the baseline communication matrix, ``0 <= r <= min(p, q)``.
    n_channels : int
        Number K of multiplicative interaction channels (0 for none).
    geometry : str or list of str
        Per channel (one string for all), where the source pattern lies
        relative to span(U) and the target pattern relative to span(V):
        ``"reshape"`` (in, in), ``"private_source"`` (orthogonal, in),
        ``"private_target"`` (in, orthogonal), ``"new"`` (both orthogonal) or
        ``"random"`` (unconstrained). Patterns sharing a placement are drawn
        mutually orthogonal when the subspace has room for them.
    baseline_snr : float
        In-sample variance of ``X B`` over noise variance, pooled over target
        neurons. Must be > 0 when ``rank > 0``.
    modulation_snr : float
        Same for the multiplicative term. Must be > 0 when ``n_channels > 0``.
    source_dim : int or None
        If set, X is a ``source_dim``-dimensional latent (half of each
        neuron's variance) plus private noise, so sources are correlated as in
        real populations; if None, sources are independent.
    source_autocorr, modulator_autocorr : float in (-1, 1)
        Lag-1 autocorrelation of AR(1) sources (latents and private noise) and
        of the modulator; for ``modulator_kind="locomotion"``, of the running
        state (the Markov chain's ``1 - P(start) - P(stop)``), where 0 selects
        the default bouts (mean 40 samples running, 60 still).
    modulator_kind : {"gaussian", "locomotion", "population"}
        ``"gaussian"``: independent AR(1) Gaussian processes. ``"locomotion"``:
        column 0 a binary running state with Markov bouts, column 1 (if m > 1)
        a smooth speed that ramps up within bouts and decays after them,
        further columns slow arousal-like (pupil) signals that follow running.
        ``"population"``: a third population of m neurons, a latent of
        dimension ``min(m, 3)`` plus private noise (half of each neuron's
        variance); ``n_gating`` of them carry the gating.
    calcium : dict or None
        Calcium observation model applied to X and Y after Y is generated:
        softplus (non-negative rates), a unit-gain exponential kernel of decay
        ``tau`` (s; default 1.0) at sampling rate ``fs`` (Hz; default 10.0),
        and Gaussian noise of s.d. ``noise`` times each trace's s.d. (default
        0.1). The true parameters then describe the latent activity kept in
        ``truth.source_rates`` and ``truth.target_rates``, not the returned
        traces: fitting the traces measures indicator bias.
    random_state : int, RandomState instance or None
        Parameters are drawn before data, so the true directions do not
        change with ``n_samples``.
    additive_snr : float
        As ``baseline_snr``, for the additive modulator effect ``Z D`` (0: none).
    n_gating : int or None
        Number of modulator columns (drawn at random) that carry the modulator
        patterns, zero on the others. None: all of them, except for
        ``modulator_kind="population"``: ``min(m, max(K, 3, m // 4))``.
    source_members, target_members : float, int or None
        Plant each channel on random source (target) neurons: a fraction in
        (0, 1) of the population or a count (at least 1). The pattern is zero
        off its members and has on them random signs and magnitudes uniform
        in [0.5, 1] before normalisation, so that every member carries a
        visible share (a near-zero weight could not be recovered by any
        method). Needs ``geometry="random"``: a pattern on a few neurons cannot
        also be placed in or out of the baseline subspace. True members:
        ``truth.source_members_``, ``target_members_``, ``modulator_members_``.
        None (default): dense patterns.
    shared_variability : dict or None
        Shared variability as in recorded populations, where a few latent
        factors carry much of the variance and neighbouring neurons share slow
        fluctuations. Keys (defaults in :data:`SHARED_DEFAULTS`): ``n_factors``
        (8) factors per population; ``strength`` (in [0, 1), 0.5) the shared
        part of each neuron's variance; ``spatial`` (in [0, 1], 0) the part of
        that which is spatially clustered, correlating two neurons at distance
        ``d`` by ``exp(-d^2 / (2 length_scale^2))`` on their field of view (the
        unit square; places in ``truth.source_positions_`` and so on);
        ``length_scale`` (> 0, 0.1); ``populations`` that share it (source,
        target noise ``e_t``, and the modulator when
        ``modulator_kind="population"``, replacing its default latent). Each
        shared process has its population's autocorrelation. Factors and places
        are parameters, drawn before the data. Excludes ``source_dim``.
    noise_autocorr : float in (-1, 1), default=0.0
        Lag-1 autocorrelation of the AR(1) target noise, as in calcium
        recordings, whose residuals are autocorrelated over seconds.

    Returns
    -------
    X : ndarray of shape (n_samples, n_source)
        Source activity (centred unless ``calcium`` is set).
    Y : ndarray of shape (n_samples, n_target)
        Target activity.
    Z : ndarray of shape (n_samples, n_modulators)
        Modulator, every column centred and scaled to unit variance.
    truth : GroundTruth
        True parameters, named as the fitted attributes of :class:`mics.MICs`.

    Notes
    -----
    The target noise has variance 1 per neuron, white unless ``noise_autocorr``
    or ``shared_variability`` is set (at their defaults, these and
    ``source_members`` keep the draws of earlier versions). With one
    modulator and more than one channel the CP decomposition is not unique
    (the channels can be rotated into one another); a warning says so
    whenever Kruskal's generic uniqueness condition fails.
    """
    cfg = _check_arguments(
        n_samples=n_samples, n_source=n_source, n_target=n_target, n_modulators=n_modulators,
        rank=rank, n_channels=n_channels, geometry=geometry, baseline_snr=baseline_snr,
        modulation_snr=modulation_snr, additive_snr=additive_snr, source_dim=source_dim,
        source_autocorr=source_autocorr, modulator_autocorr=modulator_autocorr,
        modulator_kind=modulator_kind, calcium=calcium, noise_autocorr=noise_autocorr,
        shared_variability=shared_variability, n_gating=n_gating,
        source_members=source_members, target_members=target_members,
    )  # fmt: skip
    rng = check_random_state(random_state)
    # Parameters (directions) first: they must not depend on n_samples.
    par = _draw_parameters(rng, cfg)
    X, Z = _source_activity(rng, cfg, par), _modulator_activity(rng, cfg, par)
    par, gains = _scale_to_snr(par, X, Z, cfg)
    B, Y = _draw_target(rng, cfg, par, X, Z, gains)
    truth = _ground_truth(cfg, par, B)
    X, Y = _observe(rng, cfg.calcium, X, Y, truth)
    return X, Y, Z, truth


# --------------------------------------------------------------------- checks


class _Config(NamedTuple):
    """:func:`simulate`'s arguments, checked (sizes, SNRs, autocorrelations, structure)."""

    T: int
    p: int
    q: int
    m: int
    r: int
    K: int
    geometries: list
    baseline_snr: float
    modulation_snr: float
    additive_snr: float
    rho_x: float
    rho_z: float
    rho_e: float
    modulator_kind: str
    calcium: dict | None
    source_dim: int | None
    shared: dict | None
    n_gating: int
    n_src_members: int
    n_tgt_members: int


def _check_arguments(
    *,
    n_samples,
    n_source,
    n_target,
    n_modulators,
    rank,
    n_channels,
    geometry,
    baseline_snr,
    modulation_snr,
    additive_snr,
    source_dim,
    source_autocorr,
    modulator_autocorr,
    modulator_kind,
    calcium,
    noise_autocorr,
    shared_variability,
    n_gating,
    source_members,
    target_members,
):
    """Check :func:`simulate`'s arguments; their order fixes which error a caller sees first."""
    T = check_int(n_samples, "n_samples", minimum=2)
    p = check_int(n_source, "n_source", minimum=1)
    q = check_int(n_target, "n_target", minimum=1)
    m = check_int(n_modulators, "n_modulators", minimum=1)
    r = check_int(rank, "rank", minimum=0)
    K = check_int(n_channels, "n_channels", minimum=0)
    if r > min(p, q):
        raise ValueError(f"rank={r} exceeds min(n_source, n_target) = {min(p, q)}.")
    if min(p, q) < K:
        raise ValueError(
            f"n_channels={K} exceeds min(n_source, n_target) = {min(p, q)}: channels "
            "could not have distinct source and target patterns."
        )
    geometries = _check_geometry(geometry, K, r, p, q)
    _check_snr(baseline_snr, "baseline_snr", required=r > 0, what="rank > 0")
    _check_snr(modulation_snr, "modulation_snr", required=K > 0, what="n_channels > 0")
    _check_snr(additive_snr, "additive_snr", required=False, what="")
    rho_x = check_autocorr(source_autocorr, "source_autocorr")
    rho_z = check_autocorr(modulator_autocorr, "modulator_autocorr")
    if modulator_kind not in MODULATOR_KINDS:
        raise ValueError(
            f"modulator_kind={modulator_kind!r} is not one of {list(MODULATOR_KINDS)}."
        )
    if modulator_kind == "locomotion" and rho_z < 0:
        raise ValueError("running bouts need modulator_autocorr >= 0.")
    calcium = _check_calcium(calcium)
    rho_e = check_autocorr(noise_autocorr, "noise_autocorr")
    source_dim, shared, n_gating, n_src_members, n_tgt_members = _check_structure(
        p, q, m, K, geometries, source_dim=source_dim, shared_variability=shared_variability,
        modulator_kind=modulator_kind, n_gating=n_gating, source_members=source_members,
        target_members=target_members,
    )  # fmt: skip
    return _Config(
        T, p, q, m, r, K, geometries, baseline_snr, modulation_snr, additive_snr,
        rho_x, rho_z, rho_e, modulator_kind, calcium, source_dim, shared, n_gating,
        n_src_members, n_tgt_members,
    )  # fmt: skip


def _ground_truth(cfg, par, B):
    """The :class:`GroundTruth` of the drawn (SNR-scaled) parameters, with its structure."""
    truth = GroundTruth(
        rank_=cfg.r,
        n_channels_=cfg.K,
        coef_=B.T,
        intercept_=par.mu,
        modulator_coef_=par.D.T,
        source_subspace_=par.U,
        target_subspace_=par.V,
        singular_values_=par.S,
        channel_weights_=par.lam,
        source_patterns_=par.A,
        target_patterns_=par.Bpat,
        modulator_patterns_=par.C,
        geometry=list(cfg.geometries),
        gating_neurons=par.gating,
    )
    members = bool(cfg.n_src_members or cfg.n_tgt_members)
    _record_structure(truth, members, par.layout, cfg.shared)
    return truth


def _record_structure(truth, members, layout, shared):
    """Add the member masks and the shared-variability layout to ``truth`` (when simulated)."""
    if members:
        truth.source_members_ = truth.source_patterns_ != 0
        truth.target_members_ = truth.target_patterns_ != 0
        truth.modulator_members_ = truth.modulator_patterns_ != 0
    if layout is not None:
        truth.shared_variability = {**shared, "populations": tuple(shared["populations"])}
        for pop, lay in layout.items():
            setattr(truth, f"{pop}_positions_", lay["positions"])


def _check_structure(p, q, m, K, geometries, *, source_dim, shared_variability,
                     modulator_kind, n_gating, source_members, target_members):  # fmt: skip
    """:func:`simulate`'s checks of the source's structure, the gating neurons and the members."""
    if source_dim is not None:
        source_dim = check_int(source_dim, "source_dim", minimum=1)
        if source_dim > p:
            raise ValueError(f"source_dim={source_dim} exceeds n_source={p}.")
    shared = _check_shared(shared_variability, modulator_kind)
    if shared is not None and source_dim is not None and "source" in shared["populations"]:
        raise ValueError(
            "source_dim and shared_variability both set the source's shared variance: "
            "give one (shared_variability's n_factors plays the part of source_dim)."
        )
    if n_gating is None:
        n_gating = min(m, max(K, 3, m // 4)) if modulator_kind == "population" else m
    n_gating = check_int(n_gating, "n_gating", minimum=1)
    if n_gating > m:
        raise ValueError(f"n_gating={n_gating} exceeds n_modulators={m}.")
    _warn_if_not_identifiable(K, p, q, m)
    n_src_members = _check_members(source_members, "source_members", p)
    n_tgt_members = _check_members(target_members, "target_members", q)
    if (n_src_members or n_tgt_members) and any(g != "random" for g in geometries):
        raise ValueError(
            "source_members / target_members need geometry='random': a pattern on a "
            "subset of neurons cannot also be placed in or out of the baseline subspace."
        )
    return source_dim, shared, n_gating, n_src_members, n_tgt_members


def _check_members(value, name, n):
    """Number of member neurons of a population of ``n`` (0: the option is off)."""
    if value is None:
        return 0
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise ValueError(f"{name} must be a fraction in (0, 1) or a count, got {value!r}.")
    if isinstance(value, numbers.Integral) or value >= 1:
        count = int(value)
        if count != value or not 1 <= count <= n:
            raise ValueError(f"{name}={value!r} must be a count between 1 and {n}.")
        return count
    if not 0 < value < 1:
        raise ValueError(f"{name} must be a fraction in (0, 1) or a count, got {value!r}.")
    return max(1, int(round(value * n)))


def _member_patterns(rng, n, K, n_members):
    """Unit patterns (n, K), each on ``n_members`` random neurons with weights of similar size."""
    patterns = np.zeros((n, K))
    for k in range(K):
        members = rng.choice(n, size=n_members, replace=False)
        weights = rng.uniform(0.5, 1.0, n_members) * rng.choice([-1.0, 1.0], n_members)
        patterns[members, k] = weights / np.linalg.norm(weights)
    return patterns


def check_int(value, name, minimum):
    if not isinstance(value, numbers.Integral) or isinstance(value, bool) or value < minimum:
        raise ValueError(f"{name} must be an integer >= {minimum}, got {value!r}.")
    return int(value)


def _check_snr(value, name, required, what):
    if not isinstance(value, numbers.Real) or not np.isfinite(value) or value < 0:
        raise ValueError(f"{name} must be a finite non-negative number, got {value!r}.")
    if required and value == 0:
        raise ValueError(
            f"{name}=0 with {what}: set the rank / n_channels to 0 instead for no such term."
        )


def check_autocorr(value, name):
    if not isinstance(value, numbers.Real) or not -1.0 < value < 1.0:
        raise ValueError(f"{name} must lie in (-1, 1), got {value!r}.")
    return float(value)


def _check_geometry(geometry, K, r, p, q):
    geometries = [geometry] * K if isinstance(geometry, str) else list(geometry)
    if len(geometries) != K:
        raise ValueError(
            f"geometry lists {len(geometries)} channel(s) but n_channels={K}; give one "
            "geometry per channel or a single string."
        )
    for k, g in enumerate(geometries):
        if g not in _PLACEMENT:
            raise ValueError(
                f"unknown geometry {g!r} for channel {k}; choose from {list(GEOMETRIES)}."
            )
        src, tgt = _PLACEMENT[g]
        for place, dim, pop in ((src, p, "source"), (tgt, q, "target")):
            if place == "in" and r == 0:
                raise ValueError(
                    f"geometry {g!r} puts the {pop} pattern inside the baseline subspace, "
                    "which needs rank >= 1."
                )
            if place == "out" and r >= dim:
                raise ValueError(
                    f"geometry {g!r} puts the {pop} pattern orthogonal to the baseline "
                    f"subspace, which needs rank < n_{pop} (rank={r}, n_{pop}={dim})."
                )
    return geometries


def _check_calcium(calcium):
    if calcium is None:
        return None
    if not isinstance(calcium, dict):
        raise TypeError(f"calcium must be a dict or None, got {type(calcium).__name__}.")
    unknown = set(calcium) - set(_CALCIUM_DEFAULTS)
    if unknown:
        raise ValueError(
            f"unknown calcium option(s) {sorted(unknown)}; known: {sorted(_CALCIUM_DEFAULTS)}."
        )
    params = {**_CALCIUM_DEFAULTS, **calcium}
    for key in ("tau", "fs"):
        if not params[key] > 0:
            raise ValueError(f"calcium {key} must be > 0, got {params[key]!r}.")
    if not params["noise"] >= 0:
        raise ValueError(f"calcium noise must be >= 0, got {params['noise']!r}.")
    return params


def _check_shared(shared, modulator_kind):
    """``shared_variability`` with every key filled in, or None."""
    if shared is None:
        return None
    if not isinstance(shared, dict):
        raise TypeError(f"shared_variability must be a dict or None, got {type(shared).__name__}.")
    unknown = set(shared) - set(SHARED_DEFAULTS)
    if unknown:
        raise ValueError(
            f"unknown shared_variability option(s) {sorted(unknown)}; "
            f"known: {sorted(SHARED_DEFAULTS)}."
        )
    out = {**SHARED_DEFAULTS, **shared}
    out["n_factors"] = check_int(out["n_factors"], "shared_variability n_factors", minimum=1)
    for key, top in (("strength", 1.0), ("spatial", 1.0)):
        value = out[key]
        closed = key == "spatial"
        if (
            not isinstance(value, numbers.Real)
            or isinstance(value, bool)
            or not (0 <= value <= top if closed else 0 <= value < top)
        ):
            interval = "[0, 1]" if closed else "[0, 1)"
            raise ValueError(f"shared_variability {key} must lie in {interval}, got {value!r}.")
        out[key] = float(value)
    scale = out["length_scale"]
    if not isinstance(scale, numbers.Real) or not np.isfinite(scale) or scale <= 0:
        raise ValueError(f"shared_variability length_scale must be > 0, got {scale!r}.")
    out["length_scale"] = float(scale)
    pops = out["populations"]
    if pops is None:
        pops = ("source", "target") + (("modulator",) if modulator_kind == "population" else ())
    pops = (pops,) if isinstance(pops, str) else tuple(pops)
    for pop in pops:
        if pop not in _POPULATIONS:
            raise ValueError(
                f"shared_variability populations: unknown {pop!r}; choose from "
                f"{list(_POPULATIONS)}."
            )
    if "modulator" in pops and modulator_kind != "population":
        raise ValueError(
            "shared_variability in the modulator needs modulator_kind='population' "
            f"(got {modulator_kind!r}): only a population of neurons shares variability."
        )
    out["populations"] = pops
    return out


def _warn_if_not_identifiable(K, p, q, m):
    # Kruskal: generic k-ranks min(dim, K) must sum to at least 2K + 2.
    if K >= 2 and min(p, K) + min(q, K) + min(m, K) < 2 * K + 2:
        warnings.warn(
            f"{K} channels with {m} modulator dimension(s) violate Kruskal's uniqueness "
            "condition: the channels are not identifiable (only their sum is).",
            UserWarning,
            stacklevel=5,
        )


# ----------------------------------------------------------------- parameters


def _random_orthonormal(rng, n, k):
    """Haar-distributed n x k matrix with orthonormal columns."""
    if k == 0:
        return np.zeros((n, 0))
    Q, R = linalg.qr(rng.standard_normal((n, k)), mode="economic")
    return Q * np.sign(np.diag(R))


def _random_directions(rng, n, k):
    """k unit vectors in R^n: orthonormal when k <= n, otherwise independent."""
    if k <= n:
        return _random_orthonormal(rng, n, k)
    G = rng.standard_normal((n, k))
    return G / np.linalg.norm(G, axis=0)


def _place_patterns(rng, basis, placements):
    """Unit patterns inside span(basis), in its complement, or anywhere.

    Parameters
    ----------
    basis : ndarray of shape (n, r)
        Orthonormal baseline subspace.
    placements : list of {"in", "out", "free"}

    Returns
    -------
    patterns : ndarray of shape (n, len(placements))
    """
    n = basis.shape[0]
    patterns = np.zeros((n, len(placements)))
    spaces = {"in": basis, "out": linalg.null_space(basis.T), "free": np.eye(n)}
    for place, space in spaces.items():
        idx = [k for k, pl in enumerate(placements) if pl == place]
        if idx:
            # Drawn as one block so that channels sharing a subspace are orthogonal.
            patterns[:, idx] = space @ _random_directions(rng, space.shape[1], len(idx))
    return patterns


class _Parameters(NamedTuple):
    """The true parameters of :func:`simulate` (before and after SNR scaling)."""

    U: np.ndarray
    V: np.ndarray
    S: np.ndarray
    A: np.ndarray
    Bpat: np.ndarray
    C: np.ndarray
    gating: np.ndarray
    lam: np.ndarray
    D: np.ndarray
    mu: np.ndarray
    loadings: np.ndarray | None
    layout: dict | None


def _draw_parameters(rng, cfg):
    """Draw every parameter, in a fixed order, before any data (unit scale, no SNR yet)."""
    p, q, m, r = cfg.p, cfg.q, cfg.m, cfg.r
    U = _random_orthonormal(rng, p, r)
    V = _random_orthonormal(rng, q, r)
    # Same sign convention as the fitted subspaces (the sign moves to V).
    sign_u = canonical_signs(U)
    U, V = U * sign_u, V * sign_u
    S = np.linspace(1.0, 0.5, r) if r > 1 else np.ones(r)
    A, Bpat, C, gating = _draw_channels(rng, cfg, U, V)
    lam = _CHANNEL_DECAY ** np.arange(cfg.K, dtype=float)
    D = rng.standard_normal((m, q))
    mu = rng.standard_normal(q)
    loadings = None
    if cfg.source_dim is not None:
        loadings = rng.standard_normal((p, cfg.source_dim)) / np.sqrt(cfg.source_dim)
    # Drawn only when asked for (after every other parameter), so that the
    # default simulations keep their draws.
    layout = None
    if cfg.shared is not None:
        sizes = {"source": p, "target": q, "modulator": m}
        placed = ("source", "target")
        placed += ("modulator",) if cfg.modulator_kind == "population" else ()
        layout = {pop: _shared_layout(rng, sizes[pop], cfg.shared) for pop in placed}
    return _Parameters(U, V, S, A, Bpat, C, gating, lam, D, mu, loadings, layout)


def _draw_channels(rng, cfg, U, V):
    """Source, target and modulator patterns (canonical signs) and the gating neurons."""
    m, K, n_gating = cfg.m, cfg.K, cfg.n_gating
    A = _place_patterns(rng, U, [_PLACEMENT[g][0] for g in cfg.geometries])
    Bpat = _place_patterns(rng, V, [_PLACEMENT[g][1] for g in cfg.geometries])
    if n_gating == m:
        gating = np.arange(m)
        C = _random_directions(rng, m, K)
    else:
        gating = np.sort(rng.choice(m, size=n_gating, replace=False))
        C = np.zeros((m, K))
        C[gating] = _random_directions(rng, n_gating, K)
    # Drawn only when asked for, so dense simulations keep their draws.
    if cfg.n_src_members:
        A = _member_patterns(rng, cfg.p, K, cfg.n_src_members)
    if cfg.n_tgt_members:
        Bpat = _member_patterns(rng, cfg.q, K, cfg.n_tgt_members)
    sign_a, sign_b = canonical_signs(A), canonical_signs(Bpat)
    return A * sign_a, Bpat * sign_b, C * (sign_a * sign_b), gating


def _scale_to_snr(par, X, Z, cfg):
    """Parameters with S, D and lambda scaled to the in-sample SNRs, and the channel gains."""
    baseline = (X @ par.U) * par.S @ par.V.T
    S = par.S * _snr_scale(baseline, cfg.baseline_snr)
    additive = Z @ par.D
    D = par.D * _snr_scale(additive, cfg.additive_snr)
    gains = (X @ par.A) * (Z @ par.C)
    lam = par.lam * _snr_scale((gains * par.lam) @ par.Bpat.T, cfg.modulation_snr)
    return par._replace(S=S, D=D, lam=lam), gains


def _snr_scale(signal_part, snr):
    """Factor that brings the pooled in-sample variance of a term to snr * noise var."""
    power = signal_part.var(axis=0).mean()
    if snr == 0 or power == 0:
        return 0.0 if snr == 0 else 1.0
    return np.sqrt(snr * _NOISE_VAR / power)


# ----------------------------------------------------------------------- data


def ar1_series(rng, n_samples, n_series, coef):
    """Stationary AR(1) processes with unit variance and lag-1 autocorrelation `coef`."""
    innovations = rng.standard_normal((n_samples, n_series))
    start = rng.standard_normal((1, n_series))
    # Starting from a stationary draw avoids a burn-in transient.
    out, _ = signal.lfilter(
        [np.sqrt(1.0 - coef**2)], [1.0, -coef], innovations, axis=0, zi=coef * start
    )
    return out


def _latent_population(rng, n_samples, loadings, coef):
    """Low-dimensional shared latent plus private noise (each half the variance)."""
    n_neurons, dim = loadings.shape
    latent = ar1_series(rng, n_samples, dim, coef)
    private = ar1_series(rng, n_samples, n_neurons, coef)
    return (
        np.sqrt(_SHARED_FRACTION) * latent @ loadings.T + np.sqrt(1.0 - _SHARED_FRACTION) * private
    )


def _shared_layout(rng, n_neurons, shared):
    """Places on the field of view, factor loadings and the spatial mixing of one population.

    Returns
    -------
    dict
        ``positions`` (n, 2) uniform in the unit square; ``loadings``
        (n, n_factors) with unit rows, so the factors give every neuron the
        same shared variance; ``spatial`` (n, k) with ``spatial @ spatial.T``
        the spatial correlation matrix (unit diagonal).
    """
    positions = rng.uniform(0.0, 1.0, size=(n_neurons, 2))
    loadings = rng.standard_normal((n_neurons, shared["n_factors"]))
    loadings /= np.linalg.norm(loadings, axis=1, keepdims=True)
    dist2 = np.sum((positions[:, None, :] - positions[None, :, :]) ** 2, axis=-1)
    kernel = np.exp(-dist2 / (2.0 * shared["length_scale"] ** 2))
    w, V = np.linalg.eigh(kernel)
    keep = w > 1e-10 * w[-1]
    spatial = V[:, keep] * np.sqrt(w[keep])
    # the discarded eigenvalues are round-off: restore the unit diagonal exactly
    spatial /= np.linalg.norm(spatial, axis=1, keepdims=True)
    return {"positions": positions, "loadings": loadings, "spatial": spatial}


def _shared_population(rng, n_samples, layout, shared, coef):
    """Factors, spatially clustered fluctuations and private noise (unit variance per neuron)."""
    n_neurons = layout["positions"].shape[0]
    strength, spatial = shared["strength"], shared["spatial"]
    out = np.sqrt(1.0 - strength) * ar1_series(rng, n_samples, n_neurons, coef)
    if strength * (1.0 - spatial) > 0:
        factors = ar1_series(rng, n_samples, layout["loadings"].shape[1], coef)
        out += np.sqrt(strength * (1.0 - spatial)) * factors @ layout["loadings"].T
    if strength * spatial > 0:
        field_ = ar1_series(rng, n_samples, layout["spatial"].shape[1], coef)
        out += np.sqrt(strength * spatial) * field_ @ layout["spatial"].T
    return out


def _source_activity(rng, cfg, par):
    """Centred source activity: shared variability, a low-dimensional latent, or independent."""
    if par.layout is not None and "source" in cfg.shared["populations"]:
        X = _shared_population(rng, cfg.T, par.layout["source"], cfg.shared, cfg.rho_x)
    elif par.loadings is None:
        X = ar1_series(rng, cfg.T, cfg.p, cfg.rho_x)
    else:
        X = _latent_population(rng, cfg.T, par.loadings, cfg.rho_x)
    # Sample-centred inputs make the parameters exactly those of the model
    # the estimator fits (it centres with training means).
    X -= X.mean(axis=0)
    return X


def _modulator_activity(rng, cfg, par):
    """Z-scored modulator: a population sharing variability, or one of ``MODULATOR_KINDS``."""
    if par.layout is not None and "modulator" in cfg.shared["populations"]:
        Z = _shared_population(rng, cfg.T, par.layout["modulator"], cfg.shared, cfg.rho_z)
    else:
        Z = _simulate_modulator(rng, cfg.T, cfg.m, cfg.modulator_kind, cfg.rho_z)
    return (Z - Z.mean(axis=0)) / Z.std(axis=0)


def _draw_target(rng, cfg, par, X, Z, gains):
    """Baseline matrix ``B`` and the target ``Y`` of the model equation (draws the noise)."""
    noise = _target_noise(rng, cfg, par.layout)
    B = (par.U * par.S) @ par.V.T
    Y = par.mu + X @ B + Z @ par.D + (gains * par.lam) @ par.Bpat.T + noise
    return B, Y


def _observe(rng, calcium, X, Y, truth):
    """X and Y as returned: the activity, or (keeping it in ``truth``) calcium traces of it."""
    if calcium is not None:
        truth.source_rates, truth.target_rates = X, Y
        X = _calcium_traces(rng, X, **calcium)
        Y = _calcium_traces(rng, Y, **calcium)
    return X, Y


def _target_noise(rng, cfg, layout):
    """Target noise ``e_t`` of variance ``_NOISE_VAR``: shared, AR(1) or white."""
    if layout is not None and "target" in cfg.shared["populations"]:
        return np.sqrt(_NOISE_VAR) * _shared_population(
            rng, cfg.T, layout["target"], cfg.shared, cfg.rho_e
        )
    if cfg.rho_e != 0:
        return np.sqrt(_NOISE_VAR) * ar1_series(rng, cfg.T, cfg.q, cfg.rho_e)
    return rng.normal(scale=np.sqrt(_NOISE_VAR), size=(cfg.T, cfg.q))


def _simulate_modulator(rng, n_samples, m, kind, coef):
    if kind == "gaussian":
        return ar1_series(rng, n_samples, m, coef)
    if kind == "population":
        dim = min(m, 3)
        loadings = rng.standard_normal((m, dim)) / np.sqrt(dim)
        return _latent_population(rng, n_samples, loadings, coef)
    return _locomotion(rng, n_samples, m, coef)


def _locomotion(rng, n_samples, m, coef):
    """Running state (Markov bouts), speed and slow arousal-like signals."""
    if coef > 0:
        # Split the total switching rate 1 - rho so that running fills the same
        # share of time as with the default bouts.
        occupancy = _RUN_BOUT / (_RUN_BOUT + _STILL_BOUT)
        p_stop, p_start = (1 - coef) * (1 - occupancy), (1 - coef) * occupancy
    else:
        p_stop, p_start = 1.0 / _RUN_BOUT, 1.0 / _STILL_BOUT
    occupancy = p_start / (p_start + p_stop)
    for _ in range(100):
        running = _markov_states(rng, n_samples, p_start, p_stop, occupancy)
        if 0 < running.sum() < n_samples:
            break
    else:
        raise ValueError(
            f"n_samples={n_samples} is too short for the running bouts: every draw was "
            "all running or all still."
        )
    columns = [running]
    if m > 1:
        # Speed ramps up and down around bout edges and fluctuates within a bout.
        vigour = np.exp(0.3 * ar1_series(rng, n_samples, 1, 0.95)[:, 0])
        speed = signal.lfilter([0.2], [1.0, -0.8], running * vigour)
        columns.append(speed)
    for _ in range(2, m):
        # Pupil-like: a slow low-pass of running plus its own slow fluctuations.
        pupil = signal.lfilter([0.05], [1.0, -0.95], running) / occupancy
        columns.append(pupil + 0.5 * ar1_series(rng, n_samples, 1, 0.95)[:, 0])
    return np.column_stack(columns)


def _markov_states(rng, n_samples, p_start, p_stop, occupancy):
    """Two-state Markov chain drawn as alternating geometric bouts."""
    running = rng.random_sample() < occupancy
    state = np.empty(n_samples)
    t = 0
    while t < n_samples:
        length = rng.geometric(p_stop if running else p_start)
        state[t : t + length] = running
        t += length
        running = not running
    return state


def _calcium_traces(rng, activity, tau, fs, noise):
    """Softplus rates -> unit-gain exponential indicator kernel -> noisy fluorescence."""
    rates = np.logaddexp(0.0, activity)
    decay = np.exp(-1.0 / (tau * fs))
    traces, _ = signal.lfilter([1.0 - decay], [1.0, -decay], rates, axis=0, zi=decay * rates[:1])
    scale = noise * traces.std(axis=0)
    return traces + rng.standard_normal(traces.shape) * scale
