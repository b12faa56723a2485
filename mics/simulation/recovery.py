"""How well a fit recovers a known truth (MODEL.md §7).

Every function takes the true and the estimated model in any of these forms,
so a :class:`mics.simulation.GroundTruth` and a fitted :class:`mics.MICs`
can be compared directly:

- an object with the fitted-attribute names ``channel_weights_``,
  ``source_patterns_``, ``target_patterns_``, ``modulator_patterns_``;
- a tuple of factor matrices ``(A, B, C)`` of shapes (p, K), (q, K), (m, K)
  (weights are then the products of the column norms);
- a tuple ``(weights, A, B, C)`` or ``(weights, [A, B, C])`` (the latter is
  tensorly's ``CPTensor``).

Columns need not be unit norm or in canonical form: they are normalised
here, and signs are ignored (a sign can move between modes without changing
the tensor).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy import linalg, stats
from scipy.optimize import linear_sum_assignment

from mics.core.als import cp_tensor

__all__ = [
    "ChannelMatch",
    "DetectionRates",
    "cp_factors",
    "modulation_tensor",
    "match_channels",
    "factor_match_score",
    "relative_tensor_error",
    "subspace_angles_deg",
    "detection_rates",
]


def cp_factors(model):
    """Equivalent CP form with non-negative weights and unit-norm patterns.

    Parameters
    ----------
    model : object or tuple
        See the module docstring for the accepted forms.

    Returns
    -------
    weights : ndarray of shape (K,)
        Non-negative channel weights.
    factors : list of 3 ndarrays of shapes (p, K), (q, K), (m, K)
        Source, target and modulator patterns with unit-norm columns (zero
        columns stay zero, with weight 0). Column norms and the sign of a
        negative weight are absorbed so that the tensor is unchanged.
    """
    weights, factors = _raw_factors(model)
    norms = [np.linalg.norm(f, axis=0) for f in factors]
    safe = [np.where(n > 0, n, 1.0) for n in norms]
    factors = [f / n for f, n in zip(factors, safe, strict=True)]
    weights = weights * np.prod(norms, axis=0)
    factors[2] = factors[2] * np.where(weights < 0, -1.0, 1.0)
    return np.abs(weights), factors


def _raw_factors(model):
    """Weights and factor matrices as given, as float arrays of consistent shape."""
    if hasattr(model, "source_patterns_"):
        weights = model.channel_weights_
        factors = [model.source_patterns_, model.target_patterns_, model.modulator_patterns_]
    elif hasattr(model, "factors") and hasattr(model, "weights"):  # tensorly CPTensor
        weights, factors = model.weights, list(model.factors)
    elif isinstance(model, (tuple, list)) and len(model) == 3:
        weights, factors = None, list(model)
    elif isinstance(model, (tuple, list)) and len(model) == 4:
        weights, factors = model[0], list(model[1:])
    elif isinstance(model, (tuple, list)) and len(model) == 2 and len(model[1]) == 3:
        weights, factors = model[0], list(model[1])
    else:
        raise TypeError(
            "expected an object with source_patterns_, target_patterns_, "
            "modulator_patterns_ and channel_weights_, or a tuple (A, B, C), "
            "(weights, A, B, C) or (weights, [A, B, C])."
        )
    factors = [np.asarray(f, dtype=float) for f in factors]
    # A single channel may come as a vector (one column).
    factors = [f.reshape(-1, 1) if f.ndim == 1 else f for f in factors]
    n_channels = {f.shape[1] for f in factors}
    if len(n_channels) != 1 or any(f.ndim != 2 for f in factors):
        raise ValueError(
            "factor matrices must be 2-D with one column per channel, got shapes "
            f"{[f.shape for f in factors]}."
        )
    (K,) = n_channels
    weights = np.ones(K) if weights is None else np.asarray(weights, dtype=float).reshape(K)
    return weights, factors


@dataclass
class ChannelMatch:
    """Optimal one-to-one matching of estimated channels to true channels.

    Attributes
    ----------
    true_index, estimated_index : ndarray of shape (n_matched,)
        Matched pairs: true channel ``true_index[i]`` goes with estimated
        channel ``estimated_index[i]``; ``n_matched = min(K_true, K_hat)``.
    similarity : ndarray of shape (n_matched,)
        Congruence of each pair (product of |cosines|, times the weight
        agreement if requested), in [0, 1].
    cosines : ndarray of shape (n_matched, 3)
        Signed cosines of the source, target and modulator patterns of each
        pair: multiply an estimated pattern by the sign to align it.
    n_true, n_estimated : int
        K_true and K_hat.
    """

    true_index: np.ndarray
    estimated_index: np.ndarray
    similarity: np.ndarray
    cosines: np.ndarray
    n_true: int
    n_estimated: int

    @property
    def score(self):
        """Sum of pair similarities over max(K_true, K_hat); 1 if both are 0."""
        n = max(self.n_true, self.n_estimated)
        return 1.0 if n == 0 else float(self.similarity.sum() / n)


def match_channels(true, estimated, weights=False):
    """Match estimated channels to true ones by the Hungarian algorithm.

    The similarity of true channel i and estimated channel j is
    ``|cos(a_i, â_j)| |cos(b_i, b̂_j)| |cos(c_i, ĉ_j)|``, times
    ``1 - |lambda_i - λ̂_j| / max(lambda_i, λ̂_j)`` if ``weights``; the
    matching maximises the summed similarity.

    Parameters
    ----------
    true, estimated : object or tuple
        Models of the modulation (see the module docstring).
    weights : bool
        Whether the channel weights must agree too.

    Returns
    -------
    match : ChannelMatch
    """
    lam, (A, B, C) = cp_factors(true)
    lam_hat, (A_hat, B_hat, C_hat) = cp_factors(estimated)
    for name, f, f_hat in (("source", A, A_hat), ("target", B, B_hat), ("modulator", C, C_hat)):
        if f.shape[0] != f_hat.shape[0]:
            raise ValueError(
                f"{name} patterns have {f.shape[0]} entries in the truth but "
                f"{f_hat.shape[0]} in the estimate."
            )
    cos = np.stack([A.T @ A_hat, B.T @ B_hat, C.T @ C_hat])
    sim = np.prod(np.abs(cos), axis=0)
    if weights:
        sim = sim * _weight_agreement(lam[:, None], lam_hat[None, :])
    rows, cols = linear_sum_assignment(sim, maximize=True)
    return ChannelMatch(
        true_index=rows,
        estimated_index=cols,
        similarity=sim[rows, cols],
        cosines=cos[:, rows, cols].T,
        n_true=lam.size,
        n_estimated=lam_hat.size,
    )


def _weight_agreement(lam, lam_hat):
    largest = np.maximum(lam, lam_hat)
    with np.errstate(invalid="ignore", divide="ignore"):
        agreement = 1.0 - np.abs(lam - lam_hat) / largest
    return np.where(largest > 0, agreement, 1.0)


def factor_match_score(true, estimated, weights=False):
    """Factor match score (congruence) between true and estimated channels.

    Channels are matched one-to-one by the Hungarian algorithm on the product
    of |cosines| of their source, target and modulator patterns; the score is
    the summed similarity of the matched pairs divided by
    ``max(K_true, K_hat)``. Unmatched channels (a missed true channel or a
    spurious estimated one) therefore count as 0, so the score is 1 only
    when the number of channels is right too. Two models without channels
    score 1.

    Parameters
    ----------
    true, estimated : object or tuple
        A :class:`~mics.simulation.GroundTruth`, a fitted :class:`mics.MICs`,
        or factor matrices (see the module docstring).
    weights : bool
        Multiply each pair's similarity by
        ``1 - |lambda - λ̂| / max(lambda, λ̂)``.

    Returns
    -------
    score : float in [0, 1]
        Invariant to channel order and to sign flips within a channel.

    See Also
    --------
    match_channels : the matching itself.
    """
    return match_channels(true, estimated, weights=weights).score


def modulation_tensor(model):
    """Dense modulation tensor ``W = sum_k lambda_k a_k o b_k o c_k``.

    Parameters
    ----------
    model : object or tuple
        See the module docstring; signs and norms are kept.

    Returns
    -------
    W : ndarray of shape (p, q, m)
    """
    weights, (A, B, C) = _raw_factors(model)
    return cp_tensor(weights, A, B, C)


def relative_tensor_error(true, estimated):
    """Relative Frobenius error of the modulation tensor.

    Parameters
    ----------
    true, estimated : object or tuple
        Models of the modulation (see the module docstring); unlike the
        factor match score this is sensitive to signs and weights.

    Returns
    -------
    error : float
        ``||W - W_hat||_F / ||W||_F``: 0 for a perfect estimate, 1 for an
        estimate of zero. 0 if both tensors are zero and ``inf`` if only the
        true one is.
    """
    W = modulation_tensor(true)
    W_hat = modulation_tensor(estimated)
    if W.shape != W_hat.shape:
        raise ValueError(f"tensor shapes differ: {W.shape} vs {W_hat.shape}.")
    norm = np.linalg.norm(W)
    diff = np.linalg.norm(W - W_hat)
    if norm == 0:
        return 0.0 if diff == 0 else np.inf
    return float(diff / norm)


def subspace_angles_deg(U_true, U_hat):
    """Principal angles between two subspaces, in degrees.

    Parameters
    ----------
    U_true : array-like of shape (n, r)
    U_hat : array-like of shape (n, r_hat)
        Bases (need not be orthonormal) of the true and estimated subspaces,
        e.g. ``truth.source_subspace_`` and ``model.source_subspace_``.

    Returns
    -------
    angles : ndarray of shape (min(r, r_hat),)
        Sorted from smallest to largest; 0 means a shared direction, 90 an
        orthogonal one. Empty if either subspace is.
    """
    U_true = np.asarray(U_true, dtype=float)
    U_hat = np.asarray(U_hat, dtype=float)
    if U_true.shape[0] != U_hat.shape[0]:
        raise ValueError(
            f"subspaces live in different spaces: {U_true.shape[0]} vs {U_hat.shape[0]} rows."
        )
    if min(U_true.shape[1], U_hat.shape[1]) == 0:
        return np.zeros(0)
    return np.sort(np.degrees(linalg.subspace_angles(U_true, U_hat)))


@dataclass
class DetectionRates:
    """Power and false-positive rate of "is there a MIC?" (K_hat > 0).

    Attributes
    ----------
    power, false_positive_rate : float
        Fractions of simulations with K_hat > 0, with and without true
        modulation (NaN when no simulation of that kind was given).
    power_ci, false_positive_rate_ci : tuple of float
        95% Clopper-Pearson intervals.
    n_signal, n_null : int
        Numbers of simulations.
    """

    power: float
    false_positive_rate: float
    power_ci: tuple[float, float]
    false_positive_rate_ci: tuple[float, float]
    n_signal: int
    n_null: int


def detection_rates(n_channels_hat_with_signal, n_channels_hat_null, confidence_level=0.95):
    """Power and false-positive rate of channel detection.

    Parameters
    ----------
    n_channels_hat_with_signal : array-like of int, shape (n_signal,)
        Selected K_hat in simulations with true modulation.
    n_channels_hat_null : array-like of int, shape (n_null,)
        Selected K_hat in simulations without modulation.
    confidence_level : float
        Of the Clopper-Pearson intervals.

    Returns
    -------
    rates : DetectionRates
    """
    power, power_ci, n_signal = _rate(n_channels_hat_with_signal, confidence_level)
    fpr, fpr_ci, n_null = _rate(n_channels_hat_null, confidence_level)
    return DetectionRates(power, fpr, power_ci, fpr_ci, n_signal, n_null)


def _rate(n_channels_hat, confidence_level):
    k = np.asarray(n_channels_hat).reshape(-1)
    if k.size == 0:
        return np.nan, (np.nan, np.nan), 0
    if np.any(k < 0):
        raise ValueError("numbers of channels must be non-negative.")
    hits = int(np.count_nonzero(k > 0))
    ci = stats.binomtest(hits, k.size).proportion_ci(confidence_level, method="exact")
    return hits / k.size, (float(ci.low), float(ci.high)), int(k.size)
