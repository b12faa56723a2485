"""One chunked pass over the data -> the sufficient statistics of the MIC model.

Every fitting step needs only sums over time of products of the centred
source ``x``, modulator ``z``, interaction ``phi = x kron z`` and target
``y``. They are collected as the Gram of the augmented Khatri-Rao rows
``kron([1, x], [1, z])`` (which holds the counts, sums, ``X^T X``,
``X^T Z``, ``Z^T Z``, ``Phi^T X``, ``Phi^T Z`` and ``Phi^T Phi`` at once),
its cross-products with ``y``, and ``Y^T Y``.

Raw sums are additive: the moments of a training set are "total minus the
held-out block", and sessions or Dask chunks add. Centring at the training
mean is applied afterwards, exactly, by a multilinear change of basis
(:meth:`RawMoments.centered`), so nothing about the fold is lost.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields

import numpy as np

__all__ = [
    "RawMoments",
    "CenteredMoments",
    "compute_moments",
    "moment_nbytes",
    "check_interaction",
    "RawLinearMoments",
    "linear_moments",
]

_CHUNK_BYTES = 32 * 2**20


def moment_nbytes(n_source, n_modulators, n_target=0):
    """Bytes held by the moments of a problem (the Khatri-Rao Gram dominates)."""
    d = (n_source + 1) * (n_modulators + 1)
    return 8 * (d * d + d * n_target + n_target * n_target)


@dataclass
class RawMoments:
    """Uncentred sums over samples, accumulated around fixed shifts.

    Shifting by (roughly) the mean before summing keeps the later exact
    centring numerically benign for signals with large offsets (raw
    fluorescence).

    Attributes
    ----------
    n : int
        Number of samples summed.
    x_shift, z_shift, y_shift : ndarray of shape (p,), (m,), (q,)
    G : ndarray of shape (p + 1, m + 1, p + 1, m + 1)
        ``sum_t u_t u_t^T`` with ``u_t = kron([1, x_t - x_shift], [1, z_t - z_shift])``.
    Gy : ndarray of shape (p + 1, m + 1, q)
        ``sum_t u_t (y_t - y_shift)^T``.
    Syy : ndarray of shape (q, q)
        ``sum_t (y_t - y_shift)(y_t - y_shift)^T``.
    """

    n: int
    x_shift: np.ndarray
    z_shift: np.ndarray
    y_shift: np.ndarray
    G: np.ndarray
    Gy: np.ndarray
    Syy: np.ndarray
    _shape: tuple = field(default=(), repr=False)

    def _check_compatible(self, other):
        for name in ("x_shift", "z_shift", "y_shift"):
            if not np.array_equal(getattr(self, name), getattr(other, name)):
                raise ValueError("moments accumulated around different shifts cannot be combined")

    def __add__(self, other):
        self._check_compatible(other)
        return RawMoments(
            self.n + other.n,
            self.x_shift,
            self.z_shift,
            self.y_shift,
            self.G + other.G,
            self.Gy + other.Gy,
            self.Syy + other.Syy,
        )

    def __sub__(self, other):
        self._check_compatible(other)
        return RawMoments(
            self.n - other.n,
            self.x_shift,
            self.z_shift,
            self.y_shift,
            self.G - other.G,
            self.Gy - other.Gy,
            self.Syy - other.Syy,
        )

    def scaled(self, x_scale, z_scale, y_scale):
        """Raw moments of ``(x_scale X, Z diag(z_scale), y_scale Y)`` (exact).

        Scaling is a diagonal change of basis on each mode of ``u = kron([1,
        x], [1, z])``, so it commutes with sums over blocks and with
        centring: the moments of standardised data follow from those of the
        raw data without another pass.

        Parameters
        ----------
        x_scale, y_scale : float
        z_scale : ndarray of shape (m,)

        Returns
        -------
        RawMoments
        """
        fx = np.r_[1.0, np.full(self.x_shift.shape, float(x_scale))]
        fz = np.r_[1.0, np.broadcast_to(np.asarray(z_scale, dtype=float), self.z_shift.shape)]
        fu = fx[:, None] * fz[None, :]
        return RawMoments(
            self.n,
            self.x_shift * fx[1:],
            self.z_shift * fz[1:],
            self.y_shift * y_scale,
            self.G * (fu[:, :, None, None] * fu[None, None, :, :]),
            self.Gy * (fu[:, :, None] * y_scale),
            self.Syy * y_scale**2,
        )

    def centered(self):
        """Scatter matrices centred at these samples' own means (exact)."""
        from mics.core.kernels import centre_interaction

        n = self.n
        if n < 2:
            raise ValueError("moments of fewer than two samples cannot be centred")
        G, Gy = self.G, self.Gy
        pt, mt = G.shape[0], G.shape[1]
        p, m = pt - 1, mt - 1
        dx = G[1:, 0, 0, 0] / n
        dz = G[0, 1:, 0, 0] / n
        dy = Gy[0, 0] / n
        # Change of basis [1, x'] -> [1, x' - dx] on each of the four modes:
        # the centred Gram is T G T^T with T = kron(Tx, Tz), where row i >= 1
        # of Tx takes dx_i times row 0 from row i. Every moment but the
        # interaction scatter lies in two thin slices of it, its columns
        # (j, 0) and (0, b): T on the rows of those slices of G, then Tx
        # (resp. Tz) on their last mode. The interaction scatter itself is
        # centred in one pass by a kernel (the NumPy form took four passes
        # over G and a transposed copy).
        cols_x = _rows_centred(G[:, :, :, 0].copy(), dx, dz)  # (pt, mt, pt)
        cols_x[:, :, 1:] -= cols_x[:, :, :1] * dx
        cols_z = _rows_centred(G[:, :, 0, :].copy(), dx, dz)  # (pt, mt, mt)
        cols_z[:, :, 1:] -= cols_z[:, :, :1] * dz
        phi_sum = cols_x[1:, 1:, 0].copy()
        Mab = np.empty((m, m, p, p))
        if p and m:
            G = np.ascontiguousarray(G, dtype=np.float64)
            centre_interaction(G, dx, dz, phi_sum, float(n), Mab)
        Gy = _rows_centred(Gy.copy(), dx, dz)
        # then centre y: subtract (sum of u) outer dy
        Gy -= cols_x[:, :, 0][:, :, None] * dy[None, None, :]
        Syy = self.Syy - n * np.outer(dy, dy)
        return CenteredMoments(
            n=n,
            x_mean=self.x_shift + dx,
            z_mean=self.z_shift + dz,
            y_mean=self.y_shift + dy,
            phi_mean=phi_sum / n,
            Sxx=cols_x[1:, 0, 1:].copy(),
            Sxz=cols_z[1:, 0, 1:].copy(),
            Szz=cols_z[0, 1:, 1:].copy(),
            Sxy=Gy[1:, 0].copy(),
            Szy=Gy[0, 1:].copy(),
            Syy=Syy,
            # a (p, m, p, m) view of the (a, b, i, j) array the operator uses
            M=Mab.transpose(2, 0, 3, 1),
            Sphix=cols_x[1:, 1:, 1:].copy(),
            Sphiz=cols_z[1:, 1:, 1:].copy(),
            Sphiy=Gy[1:, 1:].copy(),
        )


def _rows_centred(A, dx, dz):
    """``T`` on the two leading modes of ``A`` (shape (p + 1, m + 1, ...)), in place."""
    A[1:] -= dx.reshape((-1,) + (1,) * (A.ndim - 1)) * A[0][None]
    A[:, 1:] -= dz.reshape((1, -1) + (1,) * (A.ndim - 2)) * A[:, 0][:, None]
    return A


@dataclass
class CenteredMoments:
    """Scatter matrices (sums of products of centred variables).

    ``phi`` is the centred interaction ``(x - x_mean) kron (z - z_mean)``,
    itself centred by ``phi_mean``. Shapes: ``Sxx`` (p, p), ``Sxz`` (p, m),
    ``Szz`` (m, m), ``Sxy`` (p, q), ``Szy`` (m, q), ``Syy`` (q, q),
    ``M`` (p, m, p, m), ``Sphix`` (p, m, p), ``Sphiz`` (p, m, m),
    ``Sphiy`` (p, m, q), ``phi_mean`` (p, m). From :meth:`RawMoments.centered`,
    ``M`` is a transposed view of a C-contiguous (m, m, p, p) array, the
    layout :class:`~mics.core.MomentOperator` contracts in.
    """

    n: int
    x_mean: np.ndarray
    z_mean: np.ndarray
    y_mean: np.ndarray
    phi_mean: np.ndarray
    Sxx: np.ndarray
    Sxz: np.ndarray
    Szz: np.ndarray
    Sxy: np.ndarray
    Szy: np.ndarray
    Syy: np.ndarray
    M: np.ndarray | None
    Sphix: np.ndarray | None
    Sphiz: np.ndarray | None
    Sphiy: np.ndarray | None


def check_interaction(raw):
    """Refuse raw moments without interaction terms (``interaction=False``).

    Parameters
    ----------
    raw : RawMoments or RawLinearMoments

    Raises
    ------
    ValueError
        For linear-only moments (``RawLinearMoments``), and for ``RawMoments``
        with source, modulator and samples whose ``Phi^T Phi`` is all zero.
    """
    from mics.core.stats import RawLinearMoments

    if isinstance(raw, RawLinearMoments):
        raise ValueError(
            "these moments hold no interaction terms (computed with interaction=False); "
            "recompute them with interaction=True."
        )
    p, m = raw.G.shape[0] - 1, raw.G.shape[1] - 1
    if p and m and raw.n and not np.any(raw.G[1:, 1:, 1:, 1:]):
        raise ValueError(
            "these moments hold no interaction terms (computed with interaction=False); "
            "recompute them with interaction=True."
        )


def _chunk_rows(n_cols):
    return max(256, _CHUNK_BYTES // (8 * max(n_cols, 1)))


def compute_moments(X, Y, Z, *, shifts=None, chunk_size=None, interaction=True):
    """Accumulate the raw moments in one chunked pass.

    The Gram of the augmented Khatri-Rao rows ``u = kron([1, x], [1, z])``
    has a structure a plain rank-k update would ignore: the block of
    modulator pair ``(a, b)`` is ``X~^T diag(z~_a z~_b) X~`` (``X~ = [1, x]``)
    and equals the transpose of block ``(b, a)``. Each chunk is laid out
    modulator-major, ``U = [X~ z~_0, ..., X~ z~_m]`` (filled in one pass by
    :func:`mics.core.kernels.khatri_rao_rows`), and its Gram is one threaded
    BLAS ``syrk`` (one triangle). The off-diagonal pair blocks are
    symmetric too, and the ``syrk`` computes them whole: 1.6x the arithmetic
    of the distinct triangles at m = 3. Computing only those takes one
    narrow ``syrk`` per pair, too narrow for the BLAS kernel to reach its
    speed, so the one wide ``syrk`` is as fast (``benchmarks/README.md``,
    "Designs measured and dropped").

    Parameters
    ----------
    X : ndarray of shape (n_samples, p)
    Y : ndarray of shape (n_samples, q)
    Z : ndarray of shape (n_samples, m)
    shifts : tuple of (x_shift, z_shift, y_shift), optional
        Defaults to the column means (cheap first pass). Pass the same shifts
        to make moments of different blocks addable.
    chunk_size : int, optional
        Rows per chunk (default: about 32 MiB of Khatri-Rao rows per chunk).
    interaction : bool
        If False, only the linear moments of ``x``, ``z`` and ``y`` are
        accumulated, as their own small blocks
        (:class:`mics.core.stats.RawLinearMoments`): for the data-space
        path, where ``Phi^T Phi`` would not fit in memory.

    Returns
    -------
    RawMoments or RawLinearMoments
    """
    n, p = X.shape
    if shifts is None:
        shifts = (X.mean(axis=0), Z.mean(axis=0), Y.mean(axis=0))
    x_shift, z_shift, y_shift = (np.ascontiguousarray(s, dtype=np.float64) for s in shifts)
    if not interaction:
        from mics.core.stats import linear_moments

        return linear_moments(X, Y, Z, x_shift, z_shift, y_shift, chunk_size)
    G, Gy, Syy = _interaction_moments(X, Y, Z, x_shift, z_shift, y_shift, chunk_size)
    return RawMoments(n, x_shift, z_shift, y_shift, G, Gy, Syy)


def _interaction_moments(X, Y, Z, x_shift, z_shift, y_shift, chunk_size=None):
    """Raw Khatri-Rao Gram, its cross-products with ``y`` and ``Y^T Y`` (see compute_moments).

    Each chunk's rows ``[u, y]`` (``u`` modulator-major) go through a single
    ``syrk``: the Gram of the joined rows holds ``G``, ``Gy`` and ``Syy`` at
    once, for the same arithmetic as three separate products.
    """
    from mics.core.kernels import khatri_rao_rows

    # native float64 (a no-op for validated data): one compiled kernel, and
    # numba refuses non-native byte orders (big-endian HDF5 data)
    X, Y, Z = (np.asarray(a, dtype=np.float64) for a in (X, Y, Z))
    n, p = X.shape
    m, q = Z.shape[1], Y.shape[1]
    pt, mt = p + 1, m + 1
    d = pt * mt
    S = np.zeros((d + q, d + q))
    rows = min(chunk_size or _chunk_rows(d + q), n)
    buf = np.empty((rows, d + q))
    for start in range(0, n, rows):
        V = buf[: min(rows, n - start)]
        khatri_rao_rows(X, Z, Y, x_shift, z_shift, y_shift, start, V)
        # NumPy hands ``V^T V`` to BLAS ``syrk`` (one triangle, half a GEMM),
        # at the BLAS limit (benchmarks/moments.py times both: MomentPass against BLASReference).
        S += V.T @ V
    G = np.ascontiguousarray(S[:d, :d].reshape(mt, pt, mt, pt).transpose(1, 0, 3, 2))
    Gy = np.ascontiguousarray(S[:d, d:].reshape(mt, pt, q).transpose(1, 0, 2))
    return G, Gy, np.ascontiguousarray(S[d:, d:])


# ---------------------------------------------------------------- linear moments only
# When the modulator is a population (m in the hundreds) the interaction
# scatter has (p m)^2 entries and is never formed; the data-space operator
# works on the centred data and needs only the linear scatters of [x, z]
# and y, per fold. They are kept as their own small blocks, O((p + m + q)^2).
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
        mics.core.CenteredMoments
        """

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
