"""Populations larger than the number of samples: exact coordinates, or principal components.

**The exact reduction.** With ridge penalties, the fitted source patterns
lie in the row space of the centred source ``Xc`` (``T x p``): the loss
depends on a source direction ``a`` only through ``Xc a`` (every moment the
fit uses, the interaction ``(x - x_mean) kron (z - z_mean)`` included, is a
product with centred rows), and the penalty ``||a||^2`` is smallest in the
row space. So when ``p > T`` the source is replaced by its coordinates in an
orthonormal basis ``Q`` (``p x T``) of that row space, ``X Q``, the model is
fitted there and its patterns are mapped back, ``A = Q A~``: the same fit,
to rounding. The same holds for the target (the residual's rows lie in the
row space of the centred ``Y``) and for a modulator population.

What makes it *exactly* the full fit rather than a fit of the same model:

- the input scales are those of the full data (the reduction follows the
  standardisation), and every penalty, the HOSVD start's ridge and the
  joint-solve threshold use the full sizes: the operator carries this
  reduction as its ``embedding`` (:class:`mics.core.MomentOperator`);
- random draws (restarts, sketches) are made in the full space and mapped
  (:meth:`Reduction.draw`). A random target start also enters the first
  sweep through its Gram ``Bm^T Bm``, including its part outside the row
  space; the reduced target therefore carries a few extra coordinates, empty
  of data, that hold that part's Gram (:meth:`Reduction.draw` with
  ``"restart_target"``);
- cross-validation folds: the basis is that of **all** rows, not of a
  fold's training rows. A fold's training rows centred on their own mean are
  differences of rows, so they lie in the row space of the centred full
  data: one basis serves every fold, exactly.

**Principal components** (``source_components=k`` and the like on
:class:`mics.MICs`): the same machinery with the top ``k`` principal
directions as the basis. That is an approximation (reported with the
variance kept); the penalties are still the full problem's, so with ``k``
at the rank of the data it is the exact fit.
"""

from __future__ import annotations

import numbers
from dataclasses import dataclass, replace

import numpy as np
from scipy import linalg

from mics.core.stats import CenteredMoments

__all__ = ["ModeBasis", "Reduction", "plan_reduction", "planned_sizes", "reduce_inputs"]

_MODES = ("source", "target", "modulator")
_PARAM = {
    "source": "source_components",
    "target": "target_components",
    "modulator": "modulator_components",
}


@dataclass
class ModeBasis:
    """Coordinates of one population.

    Attributes
    ----------
    size : int
        Neurons (columns) of the population.
    basis : ndarray of shape (size, k)
        Orthonormal columns; the population's coordinates are ``data @ basis``.
    exact : bool
        The basis spans the row space of the centred data (no approximation).
    variance_kept : float
        Fraction of the centred (standardised) variance in the span of ``basis``.
    extra : int
        Coordinates appended after the ``k`` of the basis, empty of data
        (the target's, which hold the Gram of random starts).
    """

    size: int
    basis: np.ndarray
    exact: bool
    variance_kept: float
    extra: int = 0

    @property
    def n_coordinates(self):
        return self.basis.shape[1] + self.extra

    def up(self, F):
        """Coordinates ``F`` (n_coordinates, k) as neuron weights (size, k)."""
        return self.basis @ F[: self.basis.shape[1]]


@dataclass
class Reduction:
    """How a problem's populations are represented in a fit, and the way back.

    Attributes
    ----------
    sizes : tuple of int
        ``(p, q, m)`` of the full problem.
    modes : dict
        ``{"source" | "target" | "modulator": ModeBasis}`` for the reduced ones.
    means : tuple of ndarray
        Means of the full standardised source, target and modulator.
    """

    sizes: tuple
    modes: dict
    means: tuple

    @property
    def exact(self):
        return all(b.exact for b in self.modes.values())

    @property
    def reduced_sizes(self):
        """``(p, q, m)`` of the coordinates fitted."""
        return tuple(
            self.modes[mode].n_coordinates if mode in self.modes else size
            for mode, size in zip(_MODES, self.sizes, strict=True)
        )

    def draw(self, mode, F):
        """A random draw of the full problem in the fit's coordinates.

        Parameters
        ----------
        mode : {"source", "target", "modulator", "restart_target"}
            "restart_target": a random target start, which keeps its Gram
            (its part outside the basis goes to the extra coordinates);
            the others are used only through products with data and are
            projected.
        F : ndarray of shape (size, k)

        Returns
        -------
        ndarray of shape (n_coordinates, k)
        """
        name = "target" if mode == "restart_target" else mode
        b = self.modes.get(name)
        if b is None:
            return F
        P = b.basis.T @ F
        out = np.zeros((b.n_coordinates, F.shape[1]))
        out[: P.shape[0]] = P
        if mode == "restart_target":
            if F.shape[1] > b.extra:
                raise ValueError(  # pragma: no cover - the plan sizes extra for every fit
                    f"a reduced target holds {b.extra} restart coordinates, not {F.shape[1]}."
                )
            # R^T R = (F - Q Q^T F)^T (F - Q Q^T F): the Gram the start has outside Q
            rest = linalg.qr(F - b.basis @ P, mode="r", check_finite=False)[0]
            out[P.shape[0] : P.shape[0] + rest.shape[0]] = rest[: F.shape[1]]
        return out

    def restore_fit(self, fit):
        """A fit in these coordinates as a fit of the full problem (patterns over neurons).

        Parameters
        ----------
        fit : MICFit
            ``coef`` (p~, q~), ``modulator_coef`` (m~, q~), patterns over the
            coordinates.

        Returns
        -------
        MICFit
            Shapes of the full problem; channels not yet in canonical form
            (:func:`mics.core.scales.restore_fit` puts them there).
        """

        def rows(mode, F):
            b = self.modes.get(mode)
            return F if b is None else b.up(F)

        basis = fit.coef_basis
        return replace(
            fit,
            coef=rows("target", rows("source", fit.coef).T).T,
            modulator_coef=rows("target", rows("modulator", fit.modulator_coef).T).T,
            source_patterns=rows("source", fit.source_patterns),
            target_patterns=rows("target", fit.target_patterns),
            modulator_patterns=rows("modulator", fit.modulator_patterns),
            coef_basis=None if basis is None else rows("target", basis),
        )

    def restore_moments(self, cm):
        """Linear centred moments of the full data from those of the coordinates.

        Exact for the scatters (the centred data lie in the span of an exact
        basis); the means are the full data's own.
        """

        def up(mode, S, axis):
            b = self.modes.get(mode)
            if b is None:
                return S
            return np.moveaxis(b.up(np.moveaxis(S, axis, 0)), 0, axis)

        x_mean, y_mean, z_mean = self.means
        return CenteredMoments(
            n=cm.n,
            x_mean=x_mean,
            z_mean=z_mean,
            y_mean=y_mean,
            phi_mean=up("modulator", up("source", cm.phi_mean, 0), 1),
            Sxx=up("source", up("source", cm.Sxx, 0), 1),
            Sxz=up("modulator", up("source", cm.Sxz, 0), 1),
            Szz=up("modulator", up("modulator", cm.Szz, 0), 1),
            Sxy=up("target", up("source", cm.Sxy, 0), 1),
            Szy=up("target", up("modulator", cm.Szy, 0), 1),
            Syy=up("target", up("target", cm.Syy, 0), 1),
            M=None,
            Sphix=None,
            Sphiz=None,
            Sphiy=None,
        )

    def summary(self):
        """What :attr:`mics.MICs.reduction_` reports: per reduced population, its sizes.

        Flat (``"source_neurons"``, ``"source_coordinates"``,
        ``"source_exact"``, ``"source_variance_kept"``, ...), so a saved
        model keeps every entry as a number.
        """
        out = {}
        for mode, b in self.modes.items():
            out[f"{mode}_neurons"] = int(b.size)
            out[f"{mode}_coordinates"] = int(b.basis.shape[1])
            out[f"{mode}_exact"] = bool(b.exact)
            out[f"{mode}_variance_kept"] = float(b.variance_kept)
        return out


def check_components(params):
    """Refuse a bad ``source_components`` (or target, modulator) setting."""
    for mode in _MODES:
        k = params.get(_PARAM[mode])
        if k is None:
            continue
        if not isinstance(k, numbers.Integral) or isinstance(k, bool) or k < 1:
            raise ValueError(f"{_PARAM[mode]} must be a positive integer or None, got {k!r}.")


def plan_reduction(params, n, p, q, m):
    """Which populations a fit of ``n`` samples in memory represents in fewer coordinates.

    A population is reduced exactly when it has more neurons than samples
    (its centred rows span at most ``n`` dimensions), and to principal
    components when the parameters ask for them (``source_components`` ...,
    at fewer components than it has neurons).

    Returns
    -------
    dict or None
        ``{mode: k}``: ``k`` None for the exact reduction, else the number
        of components; None when nothing is reduced.
    """
    plan = {}
    for mode, size in zip(_MODES, (p, q, m), strict=True):
        k = params.get(_PARAM[mode])
        if k is not None and k < min(size, n):
            plan[mode] = int(k)
        elif size > n + (_restart_columns(params) if mode == "target" else 0):
            plan[mode] = None
    return plan or None


def planned_sizes(plan, params, n, p, q, m):
    """``(p, q, m)`` of the coordinates a plan fits (the sizes the solver's cost depends on)."""
    plan = plan or {}
    out = []
    for mode, size in zip(_MODES, (p, q, m), strict=True):
        if mode not in plan:
            out.append(size)
            continue
        k = plan[mode]
        extra = _restart_columns(params) if mode == "target" else 0
        out.append((min(size, n) if k is None else k) + extra)
    return tuple(out)


def _restart_columns(params):
    """Extra target coordinates for the Grams of random starts: the most channels restarted."""
    if not params.get("n_init", 0):
        return 0
    K = params.get("n_channels")
    return int(params.get("max_channels", 0) if K is None else K)


def _exact_basis(Ac):
    """Orthonormal basis of the row space of centred data ``Ac`` (n, d) with d > n.

    A thin QR of ``Ac^T`` (``2 d n^2`` flops, below an SVD's): its ``Q``
    spans the rows; a direction the centring removed (the rank is at most
    ``n - 1``) is kept as one more orthonormal column, which carries no
    data and so no fit. Also returns ``Ac Q = R^T``, the centred
    coordinates, which the QR gives for free.
    """
    Q, R = linalg.qr(Ac.T, mode="economic", check_finite=False)
    return Q, R.T


def _principal_basis(Ac, k):
    """Top ``k`` principal directions of centred data ``Ac`` (n, d) and the variance kept."""
    n, d = Ac.shape
    if n < d:  # through the smaller Gram
        evals, U = linalg.eigh(Ac @ Ac.T, subset_by_index=[n - k, n - 1])
        evals, U = evals[::-1], U[:, ::-1]
        V = Ac.T @ (U / np.sqrt(np.maximum(evals, np.finfo(float).tiny)))
        V, _ = np.linalg.qr(V)  # orthonormal to rounding (the signs do not matter)
    else:
        evals, V = linalg.eigh(Ac.T @ Ac, subset_by_index=[d - k, d - 1])
        evals, V = evals[::-1], V[:, ::-1]
    total = float(np.sum(Ac * Ac))
    kept = float(np.sum(np.maximum(evals, 0.0))) / total if total > 0 else 1.0
    return V, min(kept, 1.0)


def reduce_inputs(plan, params, X, Y, Z):
    """The reduction of standardised in-memory data, and the data in its coordinates.

    Parameters
    ----------
    plan : dict
        From :func:`plan_reduction`.
    params : dict
        The estimator's parameters (for the restart coordinates of the target).
    X, Y, Z : ndarray of shape (n, p), (n, q), (n, m)
        Standardised data.

    Returns
    -------
    reduction : Reduction
    data : tuple of ndarray
        ``X``, ``Y``, ``Z`` in the reduction's coordinates (uncentred: the
        fit centres them, with training means, as it does the full data).
    """
    arrays = {"source": X, "target": Y, "modulator": Z}
    means = tuple(a.mean(axis=0) for a in (X, Y, Z))
    mean_of = dict(zip(_MODES, means, strict=True))
    modes, coordinates = {}, dict(arrays)
    for mode, k in plan.items():
        Ac = arrays[mode] - mean_of[mode]
        if k is None:
            (V, centred), exact, kept = _exact_basis(Ac), True, 1.0
        else:
            V, kept = _principal_basis(Ac, k)
            centred, exact = Ac @ V, False
        del Ac
        extra = _restart_columns(params) if mode == "target" else 0
        modes[mode] = ModeBasis(arrays[mode].shape[1], V, exact, kept, extra)
        # uncentred coordinates (the fit centres with its training means):
        # (a - mean) V + mean V
        c = np.zeros((centred.shape[0], V.shape[1] + extra))
        c[:, : V.shape[1]] = centred + mean_of[mode] @ V
        coordinates[mode] = c
    reduction = Reduction((X.shape[1], Y.shape[1], Z.shape[1]), modes, means)
    return reduction, tuple(coordinates[mode] for mode in _MODES)
