"""Units of the inputs: the scales ``MICs`` standardises by, and the way back.

The ridge penalties of the MIC model are only meaningful relative to the
data: the channel factors carry ``alpha_W (||a||^2 + ||b||^2 + ||c||^2)``,
which behaves like ``|lambda|^(2/3)`` at the balanced optimum while the data
term scales like ``lambda^2``, so no choice of penalty in the raw units makes
the fit independent of them. ``MICs`` therefore fits on standardised inputs
and maps every fitted quantity back:

- source ``X`` and target ``Y`` are each divided by **one** scalar, the root
  mean per-neuron standard deviation (``sqrt(mean_i var(x_i))``), so the
  relative variances of the neurons, which reduced-rank regression relies on,
  are kept;
- each modulator column is divided by **its own** standard deviation, so a
  modulator set mixing running speed (cm/s) and pupil size (pixels) is not
  weighed by its units.

On data that already have unit (mean) variance the scales are one and
nothing changes. The maps are exact functions of the moments, so a fit from
moments (:func:`mics.model.fit_from_moments`) and a fit from data agree.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from mics.core.als import canonical_channels
from mics.core.stats import CenteredMoments

__all__ = ["InputScales", "scale_moments", "restore_fit"]


@dataclass(frozen=True)
class InputScales:
    """Standardising scales of one data set.

    Attributes
    ----------
    source : float
        Root mean per-neuron standard deviation of ``X`` (units of X).
    target : float
        Same for ``Y`` (units of Y).
    modulator : ndarray of shape (n_modulators,)
        Standard deviation of each modulator column (units of that column).
    """

    source: float
    target: float
    modulator: np.ndarray

    @classmethod
    def from_data(cls, X, Y, Z):
        """Scales of data arrays of shape (n, p), (n, q), (n, m) (population variances)."""
        # np.var's own arithmetic, keeping the means it computes
        means = [a.mean(axis=0) for a in (X, Y, Z)]
        x_var, y_var, z_var = (
            np.mean(np.square(a - mu), axis=0) for a, mu in zip((X, Y, Z), means, strict=True)
        )
        return cls._checked(np.mean(x_var), np.mean(y_var), z_var, *means)

    @classmethod
    def from_moments(cls, cm):
        """The same scales from centred moments (``Sxx / n`` is the population covariance)."""
        n = cm.n
        return cls._checked(
            np.trace(cm.Sxx) / (n * cm.Sxx.shape[0]),
            np.trace(cm.Syy) / (n * cm.Syy.shape[0]),
            np.diag(cm.Szz) / n,
            cm.x_mean,
            cm.y_mean,
            cm.z_mean,
        )

    @classmethod
    def from_raw_moments(cls, raw):
        """The same scales from :class:`~mics.core.RawMoments`, without centring them.

        Only the diagonals are needed: ``var(x_i) = G[i, 0, i, 0] / n - dx_i^2``
        with ``dx`` the mean of the shifted source (about zero when the
        shifts are the means, so nothing cancels), likewise for ``z`` and
        ``y``. Centring the whole Gram for them would cost as much as the
        fit's own centring.
        """
        n, G, Gy = raw.n, raw.G, raw.Gy
        if n < 2:
            raise ValueError(f"at least 2 samples are needed, got {n}.")
        p, m = G.shape[0] - 1, G.shape[1] - 1
        idx_x, idx_z = np.arange(1, p + 1), np.arange(1, m + 1)
        dx, dz, dy = G[1:, 0, 0, 0] / n, G[0, 1:, 0, 0] / n, Gy[0, 0] / n
        return cls._checked(
            np.mean(G[idx_x, 0, idx_x, 0] / n - dx**2),
            np.mean(np.diag(raw.Syy) / n - dy**2),
            G[0, idx_z, 0, idx_z] / n - dz**2,
            raw.x_shift + dx,
            raw.y_shift + dy,
            raw.z_shift + dz,
        )

    @classmethod
    def _checked(cls, x_var, y_var, z_var, x_mean, y_mean, z_mean):
        # Constant means a spread below 1e-12 of the values' magnitude (the
        # mean square, var + mean^2): a constant column that is not exactly
        # representable (0.1) leaves a variance of rounding, not zero.
        def varies(var, mean_square):
            return var > 1e-24 * (var + mean_square)

        for name, var, mean in (("source X", x_var, x_mean), ("target Y", y_var, y_mean)):
            if not varies(var, np.mean(np.square(mean))):
                raise ValueError(f"{name} is constant (every neuron has zero variance).")
        z_var = np.asarray(z_var, dtype=float)
        constant = np.flatnonzero(~varies(z_var, np.square(z_mean)))
        if constant.size:
            raise ValueError(
                f"modulator Z column(s) {constant.tolist()} are constant: a constant "
                "modulator cannot gate anything. Drop those columns."
            )
        return cls(float(np.sqrt(x_var)), float(np.sqrt(y_var)), np.sqrt(z_var))

    def standardize(self, X, Y, Z):
        """``X / source``, ``Y / target`` and ``Z / modulator`` (column-wise)."""
        return X / self.source, Y / self.target, Z / self.modulator

    def standardize_raw_moments(self, raw):
        """Raw moments of the standardised data (exact, see :meth:`RawMoments.scaled`)."""
        return raw.scaled(1 / self.source, 1 / self.modulator, 1 / self.target)

    def standardize_moments(self, cm):
        """Centred moments of the standardised data."""
        return scale_moments(cm, 1 / self.source, 1 / self.target, 1 / self.modulator)

    def restore_moments(self, cm, interaction=True):
        """Centred moments back in the user's units (without ``M`` and the
        other interaction scatters if not ``interaction``: they are large)."""
        return scale_moments(cm, self.source, self.target, self.modulator, interaction)


def scale_moments(cm, sx, sy, sz, interaction=True):
    """Moments of ``(sx X, sy Y, Z diag(sz))`` from those of ``(X, Y, Z)``.

    Parameters
    ----------
    cm : CenteredMoments
    sx, sy : float
        Scalars multiplying source and target.
    sz : ndarray of shape (m,)
        Factors multiplying each modulator column.
    interaction : bool
        If False, the interaction scatters (``M``, ``Sphix``, ``Sphiz``,
        ``Sphiy``) of the result are ``None``.

    Returns
    -------
    CenteredMoments
        Interaction moments stay ``None`` when ``cm`` has none.
    """
    sz = np.asarray(sz, dtype=float)
    xz = sx * sz  # scale of each interaction column phi_(i, a), shape (m,)

    def opt(a, factor):
        return None if a is None or not interaction else a * factor

    return CenteredMoments(
        n=cm.n,
        x_mean=cm.x_mean * sx,
        z_mean=cm.z_mean * sz,
        y_mean=cm.y_mean * sy,
        phi_mean=cm.phi_mean * xz,
        Sxx=cm.Sxx * sx**2,
        Sxz=cm.Sxz * xz,
        Szz=cm.Szz * np.outer(sz, sz),
        Sxy=cm.Sxy * (sx * sy),
        Szy=cm.Szy * (sz[:, None] * sy),
        Syy=cm.Syy * sy**2,
        M=opt(cm.M, xz[None, :, None, None] * xz[None, None, None, :]),
        Sphix=opt(cm.Sphix, xz[None, :, None] * sx),
        Sphiz=opt(cm.Sphiz, xz[None, :, None] * sz[None, None, :]),
        Sphiy=opt(cm.Sphiy, xz[None, :, None] * sy),
    )


def restore_fit(fit, scales):
    """A fit on standardised data, in the user's units.

    ``B`` scales by ``target / source``, ``D`` row ``a`` by ``target /
    modulator_a``; each channel's tensor ``lambda a o b o c`` by ``target /
    (source modulator_a)`` along the modulator mode, after which the
    channels are put back in canonical form (unit patterns, descending
    weights: per-column modulator scales can reorder them). Losses are in
    squared target units.

    Parameters
    ----------
    fit : MICFit
        From :func:`mics.core.fit_mic_model` on standardised data.
    scales : InputScales

    Returns
    -------
    MICFit
    """
    sx, sy, sz = scales.source, scales.target, scales.modulator
    A = fit.source_patterns * (fit.weights * sy / sx)
    C = fit.modulator_patterns / sz[:, None]
    w, A, Bm, C = canonical_channels(A, fit.target_patterns, C)
    return replace(
        fit,
        coef=fit.coef * (sy / sx),
        modulator_coef=fit.modulator_coef * (sy / sz[:, None]),
        weights=w,
        source_patterns=A,
        target_patterns=Bm,
        modulator_patterns=C,
        loss_history=fit.loss_history * sy**2,
        init_losses=fit.init_losses * sy**2,
        baseline_loss=fit.baseline_loss * sy**2,
        coef_basis=None,  # a basis of the standardised coef only
    )
