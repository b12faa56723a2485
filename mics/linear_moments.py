"""Linear moments only: what the data-space path needs from the pass over the data.

When the modulator is a population (``m`` in the hundreds) the interaction
scatter ``Phi^T Phi`` has ``(p m)^2`` entries and is never formed; the
data-space operator (:class:`mics.modulation.DataOperator`) works on the
centred data instead. It still needs the linear scatter matrices of
``[x, z]`` and ``y``, and the selection needs them per fold. They are kept
here as their own small blocks -- sums and scatters of ``x``, ``z`` and
``y`` -- so their memory is ``O((p + m + q)^2)``, never ``O((p m)^2)``.

Like :class:`mics.moments.RawMoments` they are raw sums around fixed shifts:
blocks add and subtract (folds are "total minus held-out"), and centring at
the samples' own means is exact (:meth:`RawLinearMoments.centered`).
"""

from __future__ import annotations

from dataclasses import dataclass, fields

import numpy as np

__all__ = ["RawLinearMoments", "linear_moments"]

_CHUNK_BYTES = 32 * 2**20
_SUMS = ("sx", "sz", "sy", "Sxx", "Sxz", "Szz", "Sxy", "Szy", "Syy")


@dataclass
class RawLinearMoments:
    """Uncentred sums of the source, modulator and target around fixed shifts.

    Attributes
    ----------
    n : int
        Number of samples summed.
    x_shift, z_shift, y_shift : ndarray of shape (p,), (m,), (q,)
    sx, sz, sy : ndarray of shape (p,), (m,), (q,)
        Sums of the shifted variables (``x_t - x_shift`` etc.).
    Sxx, Sxz, Szz : ndarray of shape (p, p), (p, m), (m, m)
    Sxy, Szy, Syy : ndarray of shape (p, q), (m, q), (q, q)
        Sums of products of the shifted variables.
    """

    n: int
    x_shift: np.ndarray
    z_shift: np.ndarray
    y_shift: np.ndarray
    sx: np.ndarray
    sz: np.ndarray
    sy: np.ndarray
    Sxx: np.ndarray
    Sxz: np.ndarray
    Szz: np.ndarray
    Sxy: np.ndarray
    Szy: np.ndarray
    Syy: np.ndarray

    @property
    def nbytes(self):
        """Bytes held by the arrays (grows with ``(p + m + q)^2``, not ``(p m)^2``)."""
        return sum(getattr(self, f.name).nbytes for f in fields(self) if f.name != "n")

    def _combine(self, other, sign):
        for name in ("x_shift", "z_shift", "y_shift"):
            if not np.array_equal(getattr(self, name), getattr(other, name)):
                raise ValueError("moments accumulated around different shifts cannot be combined")
        sums = {k: getattr(self, k) + sign * getattr(other, k) for k in _SUMS}
        return RawLinearMoments(
            self.n + sign * other.n, self.x_shift, self.z_shift, self.y_shift, **sums
        )

    def __add__(self, other):
        return self._combine(other, 1)

    def __sub__(self, other):
        return self._combine(other, -1)

    def centered(self):
        """Scatter matrices centred at these samples' own means (exact).

        The interaction moments are ``None``; ``phi_mean`` (the mean of the
        centred interaction ``(x - x_mean)(z - z_mean)``) is ``Sxz / n``.

        Returns
        -------
        mics.moments.CenteredMoments
        """
        from mics.moments import CenteredMoments

        n = self.n
        if n < 2:
            raise ValueError("moments of fewer than two samples cannot be centred")
        dx, dz, dy = self.sx / n, self.sz / n, self.sy / n

        def scatter(S, s_a, d_b):
            # sum (a - da)(b - db)^T = S - s_a d_b^T  (since sum(b) d^T terms cancel)
            return S - np.outer(s_a, d_b)

        Sxz = scatter(self.Sxz, self.sx, dz)
        return CenteredMoments(
            n=n,
            x_mean=self.x_shift + dx,
            z_mean=self.z_shift + dz,
            y_mean=self.y_shift + dy,
            phi_mean=Sxz / n,
            Sxx=scatter(self.Sxx, self.sx, dx),
            Sxz=Sxz,
            Szz=scatter(self.Szz, self.sz, dz),
            Sxy=scatter(self.Sxy, self.sx, dy),
            Szy=scatter(self.Szy, self.sz, dy),
            Syy=scatter(self.Syy, self.sy, dy),
            M=None,
            Sphix=None,
            Sphiz=None,
            Sphiy=None,
        )


def linear_moments(X, Y, Z, x_shift, z_shift, y_shift, chunk_size=None):
    """Accumulate the linear moments in one chunked pass.

    Parameters
    ----------
    X : ndarray of shape (n_samples, p)
    Y : ndarray of shape (n_samples, q)
    Z : ndarray of shape (n_samples, m)
    x_shift, z_shift, y_shift : ndarray of shape (p,), (m,), (q,)
    chunk_size : int, optional
        Rows per chunk (default: about 32 MiB of rows).

    Returns
    -------
    RawLinearMoments
    """
    n, p = X.shape
    m, q = Z.shape[1], Y.shape[1]
    d = p + m + q
    rows = chunk_size or max(256, _CHUNK_BYTES // (8 * d))
    # One Gram of the stacked shifted rows [x, z, y] per chunk: a single
    # BLAS call instead of six, cut into the blocks afterwards.
    S = np.zeros((d, d))
    s = np.zeros(d)
    buf = np.empty((min(rows, max(n, 1)), d))
    for start in range(0, n, rows):
        stop = min(start + rows, n)
        U = buf[: stop - start]
        np.subtract(X[start:stop], x_shift, out=U[:, :p])
        np.subtract(Z[start:stop], z_shift, out=U[:, p : p + m])
        np.subtract(Y[start:stop], y_shift, out=U[:, p + m :])
        S += U.T @ U
        s += U.sum(axis=0)
    ix, iz, iy = slice(0, p), slice(p, p + m), slice(p + m, d)
    return RawLinearMoments(
        n,
        x_shift,
        z_shift,
        y_shift,
        sx=s[ix].copy(),
        sz=s[iz].copy(),
        sy=s[iy].copy(),
        Sxx=S[ix, ix].copy(),
        Sxz=S[ix, iz].copy(),
        Szz=S[iz, iz].copy(),
        Sxy=S[ix, iy].copy(),
        Szy=S[iz, iy].copy(),
        Syy=S[iy, iy].copy(),
    )
