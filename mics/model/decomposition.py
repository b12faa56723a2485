"""Closed-form decomposition of modulation relative to the communication subspace.

The baseline communication matrix ``B = U S V^T`` (p x q) defines a source
communication subspace span(U) and a target communication subspace span(V).
Projecting the source mode onto span(U) or its complement, and the target
mode onto span(V) or its complement, cuts any modulation into four parts
(MODEL.md, section 6):

============== ============ ============ =====================================
part           source side  target side  reading
============== ============ ============ =====================================
reshape        in span(U)   in span(V)   modulation within the baseline interaction
private_source outside      in span(V)   recruits private source dimensions
private_target in span(U)   outside      recruits private target dimensions
new            outside      outside      opens a new interaction
============== ============ ============ =====================================

The projectors are orthogonal, so the four parts are mutually orthogonal and
their energies add up to the total. This holds for one channel
``a_k o b_k`` (fractions of that channel), for the whole modulation tensor
``W = sum_k lambda_k a_k o b_k o c_k`` (fractions of ``||W||_F^2``) and for
the change of the communication matrix at one modulator state,
``Delta B(z) = sum_k lambda_k (c_k . z) a_k b_k^T``.

The module also gives the state-conditioned readout: the effective matrix
``B(z) = B + Delta B(z)`` at chosen modulator states, its own source and
target subspaces, and their principal angles to the baseline subspaces.

Functions take plain arrays (the functional core) or, for the ``model``
variants, any object (or mapping) carrying the fitted attributes of
:class:`mics.MICs`: ``coef_`` (q, p), ``source_subspace_`` (p, r),
``target_subspace_`` (q, r), ``channel_weights_`` (K,), ``source_patterns_``
(p, K), ``target_patterns_`` (q, K), ``modulator_patterns_`` (m, K) and,
where needed, ``modulator_mean_`` (m,) and ``source_covariance_`` (p, p).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np
import xarray as xr
from scipy import linalg
from sklearn.exceptions import NotFittedError

from mics.core.linalg import orthonormal_svd

__all__ = [
    "PARTS",
    "cross_energies",
    "decompose_channels",
    "decompose",
    "modulation_split",
    "delta_communication",
    "communication_matrix",
    "state_conditioned_subspaces",
    "modulator_percentiles",
    "pattern_states",
]

#: The four kinds of modulation, in display order.
PARTS = ("reshape", "private_source", "private_target", "new")

# Which side of each projector a part keeps: (source in span(U), target in span(V)).
_SIDES = {
    "reshape": (True, True),
    "private_source": (False, True),
    "private_target": (True, False),
    "new": (False, False),
}


_LONG_NAME = {
    "reshape": "fraction within both baseline subspaces",
    "private_source": "fraction in private source x baseline target dimensions",
    "private_target": "fraction in baseline source x private target dimensions",
    "new": "fraction outside both baseline subspaces",
}

_METRICS = ("euclidean", "covariance")


# --------------------------------------------------------------------------- metric


class _SourceMetric:
    """Source-side geometry: whitening map and an orthonormal basis of span(U).

    In the covariance metric, ``<u, v> = u^T Sigma v``. With the symmetric
    square root ``R = Sigma^{1/2}``, that inner product is the Euclidean one
    between ``R u`` and ``R v``, so every computation below runs on whitened
    source vectors and an orthonormal basis ``Q`` of ``R span(U)``; the
    Sigma-orthogonal projector onto span(U) is ``R^{-1} Q Q^T R``.
    """

    def __init__(self, source_subspace, metric, source_covariance, covariance_ridge):
        if metric not in _METRICS:
            raise ValueError(f"metric must be one of {_METRICS}, got {metric!r}.")
        p = source_subspace.shape[0]
        self.metric = metric
        self.ridge_added = 0.0
        if metric == "euclidean":
            self.sqrt = self.inv_sqrt = None
        else:
            if source_covariance is None:
                raise ValueError(
                    'metric="covariance" needs the source covariance Sigma_X (p x p): pass '
                    "source_covariance=..., or fit the model so that it stores "
                    "source_covariance_."
                )
            self.sqrt, self.inv_sqrt, self.ridge_added = _covariance_sqrt(
                source_covariance, p, covariance_ridge
            )
        # orth() rather than trusting U: in the covariance metric R U is not
        # orthonormal, and a slightly non-orthonormal U would bias |P a|^2.
        self.basis = linalg.orth(self.whiten(source_subspace))

    def whiten(self, vectors):
        return vectors if self.sqrt is None else self.sqrt @ vectors

    def unwhiten(self, vectors):
        return vectors if self.inv_sqrt is None else self.inv_sqrt @ vectors


def _covariance_sqrt(cov, p, ridge):
    """Symmetric square root (and inverse) of Sigma_X, ridged when singular.

    A ridge ``ridge * trace(Sigma) / p`` is added only when the smallest
    eigenvalue falls below it (fewer samples than neurons, duplicated or
    silent neurons). Directions without variance then get a tiny isotropic
    one, so patterns living there are still classified (by Euclidean
    geometry within that null space) instead of dividing by zero.
    """
    cov = np.asarray(cov, dtype=float)
    if cov.shape != (p, p):
        raise ValueError(f"source_covariance must have shape ({p}, {p}), got {cov.shape}.")
    if not np.all(np.isfinite(cov)):
        raise ValueError("source_covariance contains NaN or infinite values.")
    eigvals, eigvecs = linalg.eigh((cov + cov.T) / 2)
    level = np.trace(cov) / p
    if level <= 0:
        raise ValueError("source_covariance has no variance (zero trace).")
    floor = ridge * level
    added = 0.0
    if eigvals.min() < floor:
        # Clipping first: tiny negative eigenvalues are rounding noise of a PSD matrix.
        added = floor
        eigvals = np.maximum(eigvals, 0.0) + floor
    root = np.sqrt(eigvals)
    return (eigvecs * root) @ eigvecs.T, (eigvecs / root) @ eigvecs.T, added


def _split_source(metric, vectors):
    """Whitened in-subspace and complement components of source vectors (p, n)."""
    white = metric.whiten(vectors)
    inside = metric.basis @ (metric.basis.T @ white)
    return inside, white - inside


def _split_target(basis, vectors):
    inside = basis @ (basis.T @ vectors)
    return inside, vectors - inside


@dataclass(frozen=True)
class _PatternSplit:
    """Source and target patterns cut by the baseline subspaces.

    ``source[True]`` (p, K) is the (whitened) part of the source patterns in
    span(U), ``source[False]`` the rest; ``target[True]`` and
    ``target[False]`` (q, K) likewise for span(V). Indexed by the sides of
    ``_SIDES``.
    """

    source: dict
    target: dict


def _split_patterns(geometry, target_basis, A, Bm):
    """The source patterns ``A`` and target patterns ``Bm`` cut by the baseline subspaces."""
    a_in, a_out = _split_source(geometry, A)
    b_in, b_out = _split_target(target_basis, Bm)
    return _PatternSplit({True: a_in, False: a_out}, {True: b_in, False: b_out})


def _channel_fractions(split):
    """Each channel's four fractions and its two alignments, from its split patterns.

    The fractions come from the two components' squared norms (not 1 -
    inside), so a nearly-contained pattern keeps its small complement
    accurately.

    Returns
    -------
    fractions : dict
        ``part -> ndarray of shape (K,)`` over :data:`PARTS`.
    source_alignment, target_alignment : ndarray of shape (K,)
    """
    sa_in, sa_out = _sq_norms(split.source[True]), _sq_norms(split.source[False])
    sb_in, sb_out = _sq_norms(split.target[True]), _sq_norms(split.target[False])
    source_alignment = _ratio(sa_in, sa_in + sa_out)
    target_alignment = _ratio(sb_in, sb_in + sb_out)
    s_frac = {True: source_alignment, False: _ratio(sa_out, sa_in + sa_out)}
    t_frac = {True: target_alignment, False: _ratio(sb_out, sb_in + sb_out)}
    fractions = {part: s_frac[s] * t_frac[t] for part, (s, t) in _SIDES.items()}
    return fractions, source_alignment, target_alignment


def _tensor_energies(lam, C, split):
    """``||Pi_part W||^2`` of the whole tensor per part, from K x K Grams.

    ``||sum_k lambda_k x_k o y_k o c_k||^2 = sum_kl lambda_k lambda_l
    <x_k,x_l><y_k,y_l><c_k,c_l>``: the p x q x m tensor is never formed.
    """
    weight_gram = np.outer(lam, lam) * (C.T @ C)
    energies = {}
    for part, (s_side, t_side) in _SIDES.items():
        xs, ys = split.source[s_side], split.target[t_side]
        energies[part] = max(float(np.sum(weight_gram * (xs.T @ xs) * (ys.T @ ys))), 0.0)
    return energies


# ------------------------------------------------------------------ per channel + total


def decompose_channels(
    source_subspace,
    target_subspace,
    source_patterns,
    target_patterns,
    channel_weights,
    modulator_patterns,
    *,
    metric="euclidean",
    source_covariance=None,
    covariance_ridge=1e-8,
):
    """Split each channel, and the whole modulation tensor, into four kinds.

    Parameters
    ----------
    source_subspace : array-like of shape (p, r)
        Orthonormal basis U of the baseline source communication subspace.
    target_subspace : array-like of shape (q, r)
        Orthonormal basis V of the baseline target communication subspace.
    source_patterns : array-like of shape (p, K)
        Source patterns a_k (columns).
    target_patterns : array-like of shape (q, K)
        Target patterns b_k.
    channel_weights : array-like of shape (K,)
        Channel weights lambda_k.
    modulator_patterns : array-like of shape (m, K)
        Modulator patterns c_k; they enter only the whole-tensor split, where
        channels with overlapping modulator patterns add coherently.
    metric : {"euclidean", "covariance"}
        How source directions are measured. ``"euclidean"`` uses the
        neuron-space geometry of the weight vectors. ``"covariance"`` uses
        ``<u, v> = u^T Sigma_X v``, the covariance of the read-outs ``u . x``
        and ``v . x``: ``|P_S a|^2 / |a|^2`` becomes the fraction of the
        variance carried by ``a . x`` that is shared with the communication
        subspace's read-outs ``U^T x``. Prefer it with correlated sources,
        where a pattern orthogonal to U in neuron space may still carry the
        same signal as the communication subspace (and would otherwise be
        called "private"). Target directions stay Euclidean.
    source_covariance : array-like of shape (p, p), optional
        Sigma_X, required by ``metric="covariance"``.
    covariance_ridge : float
        Relative ridge added to a singular Sigma_X (see Notes).

    Returns
    -------
    decomposition : xarray.Dataset
        Per channel (dimension ``channel``, length K): ``channel_weight``,
        ``reshape``, ``private_source``, ``private_target``, ``new``
        (fractions of the channel's own energy; they sum to 1), and
        ``source_alignment`` = |P_S a|^2 / |a|^2, ``target_alignment`` =
        |P_T b|^2 / |b|^2, whose products give the four fractions.
        Whole tensor (scalars): ``total_reshape``, ``total_private_source``,
        ``total_private_target``, ``total_new`` (fractions of ||W||^2,
        summing to 1; NaN when K = 0) and the absolute energies
        ``energy_reshape``, ..., ``energy_total``, and ``total_asymmetry`` =
        ``total_private_source - total_private_target`` in [-1, 1] (positive:
        the modulation reconfigures source patterns more than target
        patterns; its interval and test: :func:`mics.asymmetry`).
        Attributes record the metric, rank, number of channels and the
        dominant kind.

    Notes
    -----
    Per channel, with P_S = U U^T and P_T = V V^T,
    ``reshape = |P_S a|^2 |P_T b|^2``, ``private_source = |P_S' a|^2
    |P_T b|^2``, ``private_target = |P_S a|^2 |P_T' b|^2`` and ``new =
    |P_S' a|^2 |P_T' b|^2`` (for unit-norm patterns; other norms are
    divided out). The whole-tensor energies are computed from K x K Gram
    matrices, never forming the p x q x m tensor. Channels need not be
    orthogonal, so the total is not the weight-averaged channel fractions.

    In the covariance metric P_S is the Sigma_X-orthogonal projector
    ``U (U^T Sigma U)^{-1} U^T Sigma``. A Sigma_X whose smallest eigenvalue
    is below ``covariance_ridge * trace(Sigma) / p`` is ridged by that
    amount (recorded in the ``covariance_ridge_added`` attribute).
    """
    U = _as_matrix(source_subspace, "source_subspace")
    V = _as_matrix(target_subspace, "target_subspace")
    A = _as_matrix(source_patterns, "source_patterns")
    Bm = _as_matrix(target_patterns, "target_patterns")
    C = _as_matrix(modulator_patterns, "modulator_patterns")
    lam = np.asarray(channel_weights, dtype=float).reshape(-1)
    _check_factor_shapes(U, V, A, Bm, C, lam)
    geometry = _SourceMetric(U, metric, source_covariance, covariance_ridge)
    split = _split_patterns(geometry, linalg.orth(V), A, Bm)
    ds = _decomposition_dataset(lam, *_channel_fractions(split), _tensor_energies(lam, C, split))
    ds.attrs.update(
        {
            "title": "MIC decomposition: reshape / private source / private target / new",
            "metric": metric,
            "rank": int(U.shape[1]),
            "n_channels": int(lam.size),
            "dominant": _dominant_label(ds),
            "covariance_ridge_added": geometry.ridge_added,
            "note": "per-channel fractions sum to 1 over the four kinds; total_* are "
            "fractions of the whole tensor energy; see mics.model.summarize",
        }
    )
    return ds


def _decomposition_dataset(lam, fractions, source_alignment, target_alignment, energies):
    """The variables of :func:`decompose_channels`: per channel, then the whole tensor."""
    data_vars = {
        "channel_weight": ("channel", lam, {"long_name": "channel weight lambda_k"}),
    }
    for part in _SIDES:
        data_vars[part] = (
            "channel",
            fractions[part],
            {"long_name": _LONG_NAME[part], "units": "fraction of channel energy"},
        )
    data_vars["source_alignment"] = (
        "channel",
        source_alignment,
        {"long_name": "|P_S a|^2 / |a|^2: share of the source pattern in span(U)"},
    )
    data_vars["target_alignment"] = (
        "channel",
        target_alignment,
        {"long_name": "|P_T b|^2 / |b|^2: share of the target pattern in span(V)"},
    )
    energy_total = sum(energies.values())
    # Energies before the total_* fractions: a Dataset repr shows the first and
    # last few variables, and the whole-tensor fractions are what users look for.
    for part in PARTS:
        data_vars[f"energy_{part}"] = ((), energies[part], {"long_name": f"||W_{part}||^2"})
    data_vars["energy_total"] = ((), energy_total, {"long_name": "||W||^2"})
    for part in PARTS:
        frac = energies[part] / energy_total if energy_total > 0 else np.nan
        data_vars[f"total_{part}"] = (
            (),
            frac,
            {"long_name": f"whole modulation tensor: {_LONG_NAME[part]}", "units": "fraction"},
        )
    # The statistic the method exists for (MODEL.md, section 6): does the state
    # reconfigure which source patterns communicate (private source) more than
    # where in the target they land (private target)? A difference of the two
    # whole-tensor fractions, so it needs no channel alignment across fits.
    asym = (
        (energies["private_source"] - energies["private_target"]) / energy_total
        if energy_total > 0
        else np.nan
    )
    data_vars["total_asymmetry"] = (
        (),
        asym,
        {
            "long_name": "total_private_source - total_private_target: source-side minus "
            "target-side reconfiguration",
            "units": "fraction",
        },
    )
    return xr.Dataset(data_vars, coords={"channel": np.arange(lam.size)})


def cross_energies(
    source_subspace,
    target_subspace,
    first,
    second,
    *,
    metric="euclidean",
    source_covariance=None,
    covariance_ridge=1e-8,
):
    """Energies of the four parts as inner products of two independent estimates of ``W``.

    ``E_part = <Pi_part W_1, Pi_part W_2>`` (Frobenius), with ``Pi_part`` the
    projector of the part (:func:`decompose_channels`). When ``W_1`` and
    ``W_2`` are fitted on disjoint halves of the data their estimation noise
    is independent, so ``E_part`` is free of the noise energy that inflates
    ``||Pi_part W_hat||^2`` (a fitted pattern's noise falls mostly outside
    the baseline subspaces, more so on the side with more neurons): it is a
    chance-corrected energy, which can be slightly negative when the part is
    empty.

    Parameters
    ----------
    source_subspace : array-like of shape (p, r)
    target_subspace : array-like of shape (q, r)
    first, second : tuple of (weights (K,), source (p, K), target (q, K), modulator (m, K))
        The CP factors of the two estimates, in the same units (modulators
        per standard deviation of the same data); their channel counts,
        orders and signs need not match (``W`` is invariant to them).
    metric, source_covariance, covariance_ridge
        As in :func:`decompose_channels`.

    Returns
    -------
    energies : dict
        ``part -> E_part`` over :data:`PARTS`.
    """
    U = _as_matrix(source_subspace, "source_subspace")
    V = _as_matrix(target_subspace, "target_subspace")
    geometry = _SourceMetric(U, metric, source_covariance, covariance_ridge)
    target_basis = linalg.orth(V)
    sides = []
    for lam, A, Bm, C in (first, second):
        split = _split_patterns(
            geometry,
            target_basis,
            _as_matrix(A, "source_patterns"),
            _as_matrix(Bm, "target_patterns"),
        )
        lam = np.asarray(lam, dtype=float).reshape(-1)
        sides.append((lam, split, _as_matrix(C, "modulator_patterns")))
    (l1, x1, c1), (l2, x2, c2) = sides
    weight_gram = np.outer(l1, l2) * (c1.T @ c2)
    return {
        part: float(
            np.sum(weight_gram * (x1.source[s].T @ x2.source[s]) * (x1.target[t].T @ x2.target[t]))
        )
        for part, (s, t) in _SIDES.items()
    }


def decompose(model, metric="euclidean", *, covariance_ridge=1e-8):
    """Closed-form decomposition of a fitted MIC model.

    Parameters
    ----------
    model : fitted :class:`mics.MICs`, or any object / mapping with its attributes
        Uses ``source_subspace_``, ``target_subspace_``, ``source_patterns_``,
        ``target_patterns_``, ``channel_weights_``, ``modulator_patterns_``
        and, for ``metric="covariance"``, ``source_covariance_``.
    metric : {"euclidean", "covariance"}
        See :func:`decompose_channels`.
    covariance_ridge : float
        See :func:`decompose_channels`.

    Returns
    -------
    decomposition : xarray.Dataset
        As :func:`decompose_channels`.
    """
    model_factors = _model_factors(model)
    factors = _per_modulator_sd(model, model_factors)
    covariance = None
    if metric == "covariance":
        covariance = _get(model, "source_covariance_", required=False)
        if covariance is None:
            raise ValueError(
                'metric="covariance" needs the training source covariance, but the model '
                "has no source_covariance_ attribute."
            )
    ds = decompose_channels(
        factors["source_subspace_"],
        factors["target_subspace_"],
        factors["source_patterns_"],
        factors["target_patterns_"],
        factors["channel_weights_"],
        factors["modulator_patterns_"],
        metric=metric,
        source_covariance=covariance,
        covariance_ridge=covariance_ridge,
    )
    # report the model's own weights (the split above used them per modulator s.d.)
    ds["channel_weight"] = ds["channel_weight"].copy(data=model_factors["channel_weights_"])
    return ds


# ------------------------------------------------------------------------ dense split


def modulation_split(
    source_subspace,
    target_subspace,
    W,
    *,
    metric="euclidean",
    source_covariance=None,
    covariance_ridge=1e-8,
):
    """Cut a dense modulation tensor (or matrix) into its four parts.

    Parameters
    ----------
    source_subspace : array-like of shape (p, r)
        Orthonormal basis U of the baseline source subspace.
    target_subspace : array-like of shape (q, r)
        Orthonormal basis V of the baseline target subspace.
    W : array-like of shape (p, q, m) or (p, q)
        Modulation tensor, or a matrix such as Delta B(z).
    metric, source_covariance, covariance_ridge
        See :func:`decompose_channels`.

    Returns
    -------
    split : xarray.Dataset
        ``parts`` with dims (part, source, target[, modulator]): the four
        parts, which sum to W and are mutually orthogonal (in the Frobenius
        inner product, Sigma_X-weighted on the source mode for the
        covariance metric); ``energy`` (part,) their squared norms;
        ``fraction`` (part,) energy / total (NaN if W = 0); scalar
        ``energy_total``.
    """
    U = _as_matrix(source_subspace, "source_subspace")
    V = _as_matrix(target_subspace, "target_subspace")
    W = np.asarray(W, dtype=float)
    if W.ndim not in (2, 3) or W.shape[:2] != (U.shape[0], V.shape[0]):
        raise ValueError(
            f"W must have shape (p, q) or (p, q, m) with p={U.shape[0]}, q={V.shape[0]}; "
            f"got {W.shape}."
        )
    geometry = _SourceMetric(U, metric, source_covariance, covariance_ridge)
    target_basis = linalg.orth(V)
    p = W.shape[0]
    # Energies are measured on the whitened source mode (Sigma-weighted norm);
    # the parts are mapped back so that they still sum to W.
    white = geometry.whiten(W.reshape(p, -1)).reshape(W.shape)
    src_in = np.tensordot(geometry.basis @ geometry.basis.T, white, axes=(1, 0))
    source_sides = {True: src_in, False: white - src_in}
    target_projector = target_basis @ target_basis.T
    parts, energies = [], []
    for part in PARTS:
        s_side, t_side = _SIDES[part]
        half = source_sides[s_side]
        t_in = np.moveaxis(np.tensordot(target_projector, half, axes=(1, 1)), 0, 1)
        piece = t_in if t_side else half - t_in
        energies.append(float(np.sum(piece**2)))
        parts.append(geometry.unwhiten(piece.reshape(p, -1)).reshape(W.shape))
    energies = np.array(energies)
    total = float(energies.sum())
    dims = ("part", "source", "target", "modulator")[: W.ndim + 1]
    ds = xr.Dataset(
        {
            "parts": (dims, np.stack(parts)),
            "energy": ("part", energies),
            "fraction": ("part", energies / total if total > 0 else np.full(4, np.nan)),
            "energy_total": ((), total),
        },
        coords={"part": list(PARTS)},
        attrs={"metric": metric, "rank": int(U.shape[1])},
    )
    return ds


# ------------------------------------------------------------- state-dependent readout


def communication_matrix(model, z, *, centered=False):
    """Effective communication matrix B(z) = B + Delta B(z) at one modulator state.

    Parameters
    ----------
    model : fitted :class:`mics.MICs`, or any object / mapping with its attributes
        Uses ``coef_`` (q, p) for B and the channel factors.
    z : array-like of shape (m,)
        Modulator state, in raw units (``modulator_mean_`` is subtracted)
        unless ``centered=True``.
    centered : bool
        Whether ``z`` is already centred.

    Returns
    -------
    B_z : ndarray of shape (p, q)
    """
    factors = _model_factors(model)
    p, q = factors["source_subspace_"].shape[0], factors["target_subspace_"].shape[0]
    coef = _get(model, "coef_")
    baseline = np.asarray(coef, dtype=float).reshape(q, p).T
    return baseline + _delta_matrix(factors, _centred_state(model, factors, z, centered))


def delta_communication(
    model_or_factors, z, *, centered=False, metric="euclidean", covariance_ridge=1e-8
):
    """Split the change of communication at one modulator state into four parts.

    Delta B(z) = sum_k lambda_k (c_k . z) a_k b_k^T (p x q) is what the
    modulator adds to the baseline at state z; its split says whether, at
    that state, the change stays within the communication subspace or
    recruits private source or target dimensions.

    Parameters
    ----------
    model_or_factors : fitted :class:`mics.MICs`, or any object / mapping with its attributes
        Needs ``source_subspace_``, ``target_subspace_``, ``channel_weights_``,
        ``source_patterns_``, ``target_patterns_``, ``modulator_patterns_``;
        optionally ``modulator_mean_`` (taken as 0 when absent) and, for
        the covariance metric, ``source_covariance_``. Mapping keys may omit
        the trailing underscore.
    z : array-like of shape (m,)
        Modulator state in raw units unless ``centered=True``.
    centered : bool
        Whether ``z`` is already centred.
    metric, covariance_ridge
        See :func:`decompose_channels`.

    Returns
    -------
    split : xarray.Dataset
        As :func:`modulation_split` on Delta B(z), plus ``delta_communication``
        (source, target) = Delta B(z) and ``modulator_state`` (modulator,)
        = the centred z.
    """
    factors = _model_factors(model_or_factors)
    zc = _centred_state(model_or_factors, factors, z, centered)
    delta = _delta_matrix(factors, zc)
    covariance = None
    if metric == "covariance":
        covariance = _get(model_or_factors, "source_covariance_", required=False)
    ds = modulation_split(
        factors["source_subspace_"],
        factors["target_subspace_"],
        delta,
        metric=metric,
        source_covariance=covariance,
        covariance_ridge=covariance_ridge,
    )
    ds["delta_communication"] = (("source", "target"), delta)
    ds["modulator_state"] = ("modulator", zc)
    return ds


def state_conditioned_subspaces(model, states, rank=None, *, centered=False):
    """Communication subspaces of B(z) at chosen modulator states.

    Parameters
    ----------
    model : fitted :class:`mics.MICs`, or any object / mapping with its attributes
        Uses ``coef_``, the subspaces, the channel factors and
        ``modulator_mean_`` (taken as 0 when absent).
    states : mapping of str to array-like of shape (m,), or array-like of shape (n_states, m)
        Modulator states in raw units (e.g. from :func:`modulator_percentiles`)
        unless ``centered=True``. An array gives states named
        ``"state0"``, ``"state1"``, ...
    rank : int, optional
        Dimension of the state-conditioned subspaces; default the baseline
        rank r.
    centered : bool
        Whether the states are already centred.

    Returns
    -------
    readout : xarray.Dataset
        ``source_angles`` and ``target_angles`` (state, angle): principal
        angles in degrees, ascending, between the top-``rank`` source
        (target) subspace of B(z) and the baseline one (min(rank, r) angles;
        from :func:`scipy.linalg.subspace_angles`, which resolves angles near
        zero only to about 1e-6 degrees);
        ``communication_matrix`` (state, source, target) = B(z);
        ``source_subspace`` (state, source, dimension), ``target_subspace``
        (state, target, dimension), ``singular_values`` (state, dimension);
        ``modulator_state`` (state, modulator), the raw states.
    """
    factors = _model_factors(model)
    U, V = factors["source_subspace_"], factors["target_subspace_"]
    p, q, r = U.shape[0], V.shape[0], U.shape[1]
    m = factors["modulator_patterns_"].shape[0]
    rank = r if rank is None else rank
    if not isinstance(rank, (int, np.integer)) or not 1 <= rank <= min(p, q):
        raise ValueError(f"rank must be an integer in [1, min(p, q) = {min(p, q)}], got {rank}.")
    names, Z = _states_table(states, m)
    n_angles = min(rank, r)

    mats, src_bases, tgt_bases, svals, src_angles, tgt_angles = ([] for _ in range(6))
    for z in Z:
        B_z = communication_matrix(model, z, centered=centered)
        U_z, s_z, V_z = orthonormal_svd(B_z, rank)
        mats.append(B_z)
        src_bases.append(U_z)
        tgt_bases.append(V_z)
        svals.append(s_z)
        src_angles.append(_angles_degrees(U_z, U, n_angles))
        tgt_angles.append(_angles_degrees(V_z, V, n_angles))

    coords = {
        "state": names,
        "angle": np.arange(n_angles),
        "dimension": np.arange(rank),
        "source": _neuron_labels(model, "source_subspace_", p),
        "target": _neuron_labels(model, "target_subspace_", q),
        "modulator": np.arange(m),
    }
    angle_attrs = {"units": "degrees", "long_name": "principal angle to the baseline subspace"}
    ds = xr.Dataset(
        {
            "source_angles": (("state", "angle"), np.array(src_angles), angle_attrs),
            "target_angles": (("state", "angle"), np.array(tgt_angles), angle_attrs),
            "communication_matrix": (("state", "source", "target"), np.array(mats)),
            "source_subspace": (("state", "source", "dimension"), np.array(src_bases)),
            "target_subspace": (("state", "target", "dimension"), np.array(tgt_bases)),
            "singular_values": (("state", "dimension"), np.array(svals)),
            "modulator_state": (("state", "modulator"), Z),
        },
        coords=coords,
        attrs={"baseline_rank": int(r), "rank": int(rank), "centered_states": int(centered)},
    )
    return ds


def modulator_percentiles(Z, percentiles=(10, 90), modulator_mean=None, names=None):
    """Modulator states at given percentiles of each modulator, others at their mean.

    Parameters
    ----------
    Z : array-like of shape (n_samples, m) or (n_samples,)
        Modulator values (raw units), e.g. running speed and pupil size.
    percentiles : sequence of float
        Percentiles (0-100) at which each modulator is set in turn.
    modulator_mean : array-like of shape (m,), optional
        Value at which the other modulators are held; default the column
        means of Z. Pass the model's ``modulator_mean_`` so that the other
        modulators sit exactly at the baseline (centred z = 0).
    names : sequence of str of length m, optional
        Modulator names for the state labels; taken from a DataArray's
        second coordinate when available, else ``"z0"``, ``"z1"``, ...

    Returns
    -------
    states : dict of str to ndarray of shape (m,)
        Raw-unit states named ``"<modulator>_p<percentile>"`` (just
        ``"p<percentile>"`` when m = 1), ready for
        :func:`state_conditioned_subspaces`.
    """
    if names is None and isinstance(Z, xr.DataArray) and Z.ndim == 2:
        names = [str(v) for v in Z[Z.dims[1]].values]
    Z = np.asarray(Z, dtype=float)
    Z = Z.reshape(-1, 1) if Z.ndim == 1 else Z
    m = Z.shape[1]
    center = Z.mean(axis=0) if modulator_mean is None else np.asarray(modulator_mean, float)
    if center.shape != (m,):
        raise ValueError(f"modulator_mean must have shape ({m},), got {center.shape}.")
    names = [f"z{j}" for j in range(m)] if names is None else list(names)
    levels = np.percentile(Z, percentiles, axis=0)  # (n_percentiles, m)
    states = {}
    for j in range(m):
        for pct, level in zip(percentiles, levels[:, j], strict=True):
            z = center.copy()
            z[j] = level
            label = f"p{pct:g}" if m == 1 else f"{names[j]}_p{pct:g}"
            states[label] = z
    return states


def pattern_states(model, Z, percentiles=(10, 90)):
    """Modulator states along each channel's modulator pattern.

    With a third population as modulator, setting one neuron at a time to a
    percentile (:func:`modulator_percentiles`) reads the model along
    directions no channel uses. Here the state moves along the modulator
    pattern ``c_k`` instead: ``z = z_mean + g c_k`` with ``g`` a percentile
    of the pattern's gate ``c_k . (z_t - z_mean)`` over the samples, so the
    gate of channel ``k`` takes that percentile's value.

    Parameters
    ----------
    model : mics.MICs or GroundTruth
        Fitted, with ``modulator_patterns_`` (m, K) and ``modulator_mean_``.
    Z : array-like of shape (n_samples, m)
        Modulator values (raw units), e.g. the training data.
    percentiles : sequence of float
        Percentiles (0-100) of each pattern's gate.

    Returns
    -------
    states : dict of str to ndarray of shape (m,)
        Raw-unit states named ``"pattern<k>_p<percentile>"``, ready for
        :func:`state_conditioned_subspaces` and :func:`delta_communication`.
    """
    C = np.asarray(_get(model, "modulator_patterns_"), dtype=float)
    Z = np.asarray(Z, dtype=float)
    Z = Z.reshape(-1, 1) if Z.ndim == 1 else Z
    if Z.shape[1] != C.shape[0]:
        raise ValueError(f"Z has {Z.shape[1]} modulator(s); the model has {C.shape[0]}.")
    center = _get(model, "modulator_mean_", required=False)
    center = Z.mean(axis=0) if center is None else np.asarray(center, dtype=float)
    gates = (Z - center) @ C  # (n_samples, K)
    levels = np.percentile(gates, percentiles, axis=0)  # (n_percentiles, K)
    states = {}
    for k in range(C.shape[1]):
        for pct, g in zip(percentiles, levels[:, k], strict=True):
            states[f"pattern{k}_p{pct:g}"] = center + g * C[:, k]
    return states


# --------------------------------------------------------------------------- reading


# ------------------------------------------------------------------------- asymmetry


# --------------------------------------------------------------------------- helpers


def _dominant_label(ds):
    fractions = {part: float(ds[f"total_{part}"]) for part in PARTS}
    if not np.all(np.isfinite(list(fractions.values()))):
        return "none (no modulation)"
    top = max(PARTS, key=fractions.get)
    return f"{top} ({100 * fractions[top]:.0f}% of ||W||^2)"


def _angles_degrees(A, B, n):
    if n == 0:
        return np.zeros(0)
    # scipy returns them descending; ascending reads "first angle = best-aligned".
    return np.degrees(linalg.subspace_angles(A, B))[::-1][:n]


def _as_matrix(a, name):
    a = np.asarray(a, dtype=float)
    if a.ndim == 1:
        a = a.reshape(-1, 1)
    if a.ndim != 2:
        raise ValueError(f"{name} must be a 2-D array, got shape {a.shape}.")
    if not np.all(np.isfinite(a)):
        raise ValueError(f"{name} contains NaN or infinite values.")
    return a


def _check_factor_shapes(U, V, A, Bm, C, lam):
    p, q, K = U.shape[0], V.shape[0], lam.size
    expected = {
        "target_subspace": (V.shape, (q, U.shape[1])),
        "source_patterns": (A.shape, (p, K)),
        "target_patterns": (Bm.shape, (q, K)),
        "modulator_patterns": (C.shape, (C.shape[0], K)),
    }
    for name, (got, want) in expected.items():
        if got != want:
            raise ValueError(
                f"{name} has shape {got}, expected {want} (p={p} source neurons, q={q} "
                f"target neurons, rank {U.shape[1]}, K={K} channels)."
            )


def _sq_norms(vectors):
    return np.einsum("ik,ik->k", vectors, vectors)


def _ratio(num, den):
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(den > 0, num / np.where(den > 0, den, 1.0), np.nan)


_FACTOR_NAMES = (
    "source_subspace_",
    "target_subspace_",
    "channel_weights_",
    "source_patterns_",
    "target_patterns_",
    "modulator_patterns_",
)


def _get(model, name, required=True):
    """Attribute of a fitted model, or key of a mapping (trailing ``_`` optional)."""
    if isinstance(model, Mapping):
        value = model.get(name, model.get(name.rstrip("_")))
    else:
        value = getattr(model, name, None)
    if value is None and required:
        raise NotFittedError(
            f"{type(model).__name__} has no {name!r}: fit the model first (or pass an "
            "object carrying the fitted attributes)."
        )
    return value


def _model_factors(model):
    factors = {name: _get(model, name) for name in _FACTOR_NAMES}
    factors = {
        name: np.asarray(value, dtype=float).reshape(-1)
        if name == "channel_weights_"
        else _as_matrix(value, name)
        for name, value in factors.items()
    }
    _check_factor_shapes(
        factors["source_subspace_"],
        factors["target_subspace_"],
        factors["source_patterns_"],
        factors["target_patterns_"],
        factors["modulator_patterns_"],
        factors["channel_weights_"],
    )
    return factors


def _per_modulator_sd(model, factors):
    """Channels with the modulator measured in standard deviations, when known.

    The whole-tensor fractions weigh the modulator columns by the tensor's
    entries, which carry each column's units; per standard deviation of each
    modulator (``modulator_scale_`` of a fitted ``MICs``) they do not depend
    on the units (docs/model.md, Units). Per-channel fractions are unaffected.
    """
    scale = _get(model, "modulator_scale_", required=False)
    C = factors["modulator_patterns_"]
    if scale is None or C.size == 0:
        return factors
    C = C * np.asarray(scale, dtype=float).reshape(-1, 1)
    norms = np.linalg.norm(C, axis=0)
    return {
        **factors,
        "modulator_patterns_": C / np.where(norms > 0, norms, 1.0),
        "channel_weights_": factors["channel_weights_"] * norms,
    }


def _centred_state(model, factors, z, centered):
    m = factors["modulator_patterns_"].shape[0]
    z = np.asarray(z, dtype=float).reshape(-1)
    if z.shape != (m,):
        raise ValueError(f"modulator state must have {m} value(s), got shape {z.shape}.")
    if centered:
        return z
    mean = _get(model, "modulator_mean_", required=False)
    return z if mean is None else z - np.asarray(mean, dtype=float).reshape(-1)


def _delta_matrix(factors, zc):
    gains = factors["channel_weights_"] * (factors["modulator_patterns_"].T @ zc)
    return (factors["source_patterns_"] * gains) @ factors["target_patterns_"].T


def _states_table(states, m):
    if isinstance(states, Mapping):
        names = [str(name) for name in states]
        rows = [np.asarray(z, dtype=float).reshape(-1) for z in states.values()]
    else:
        rows = list(np.atleast_2d(np.asarray(states, dtype=float)))
        names = [f"state{i}" for i in range(len(rows))]
    if not rows:
        raise ValueError("states is empty: give at least one modulator state.")
    for name, z in zip(names, rows, strict=True):
        if z.shape != (m,):
            raise ValueError(f"state {name!r} must have {m} value(s), got shape {z.shape}.")
    return names, np.array(rows)


def _neuron_labels(model, name, n):
    value = _get(model, name, required=False)
    if isinstance(value, xr.DataArray) and value.dims[0] in value.coords:
        return value[value.dims[0]].values
    return np.arange(n)


# The text and the accessor moved to mics.model.summaries and mics.model.accessor;
# the old names still resolve here (looked up on first use: no import cycle).
_MOVED = {
    "format_decomposition": "summaries",
    "format_bootstrap": "summaries",
    "format_asymmetry": "summaries",
    "summarize": "summaries",
    "summarize_asymmetry": "summaries",
    "result_kind": "summaries",
    "ResultAccessor": "accessor",
}


def __getattr__(name):
    if name in _MOVED:
        import importlib

        return getattr(importlib.import_module(f"mics.model.{_MOVED[name]}"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
