"""numba kernels: the inner loops that BLAS does not already do well.

This module imports only numpy and numba (pynapple's rule), so the rest of
the package stays importable and testable without looking at JIT details.
Every kernel has a pure-NumPy twin in ``tests/test_kernels.py``.

Two kernels are on the hot paths: :func:`khatri_rao_rows` fills the rows
of every chunk of the moment pass (:func:`mics.core.stats.compute_moments`),
and :func:`centre_interaction` centres the interaction scatter of every
fold of a selection and every null shift of the modulation test
(:meth:`mics.core.stats.RawMoments.centered`). Both are memory-bound
rearrangements that NumPy does in several passes with temporaries.

A third, :func:`group_lasso_rows`, is the inner loop of sparse
reduced-rank regression (:mod:`mics.core.sparse_rrr`): cyclic row descent
on a group lasso, one short row update after another, which no BLAS call
does; in Python it was the whole cost of a sparse fit.
:func:`artifact_scores` scores every sample of the data-quality checks
(:mod:`mics.core.robust`): a few passes per column where NumPy makes some
sixty with temporaries.

Everything else is BLAS: the moment pass is one ``syrk`` per chunk of
Khatri-Rao rows, and both contractions of the interaction scatter are
single GEMMs in the (a, b, i, j) layout (``MomentOperator``).
"""

from __future__ import annotations

import numba
import numpy as np


def _jit(func):
    """``njit(cache=True)``, falling back to no cache where none can be written.

    A read-only install (site-packages owned by root, a container image)
    leaves numba no cache locator; it then raises at decoration time, which
    would make ``import mics`` fail.
    """
    try:
        return numba.njit(cache=True, nogil=True)(func)
    except RuntimeError:
        return numba.njit(cache=False, nogil=True)(func)


@_jit
def khatri_rao_rows(X, Z, Y, x_shift, z_shift, y_shift, start, out):
    """Rows ``[kron([1, z'], [1, x']), y']`` of samples ``start:start + len(out)``.

    ``x' = x - x_shift`` (likewise ``z'``, ``y'``), modulator-major: column
    ``a (p + 1) + i`` holds ``x~_i z~_a`` with ``x~ = [1, x']``,
    ``z~ = [1, z']``, and the last ``q`` columns hold ``y'``. One pass that
    reads each sample once and writes its row once; NumPy needs a pass per
    modulator over the source block and a temporary for ``z'``, about
    three times the time at p = 300, m = 3 (a tenth of the moment pass).

    Parameters
    ----------
    X : ndarray of shape (n, p)
    Z : ndarray of shape (n, m)
    Y : ndarray of shape (n, q)
    x_shift, z_shift, y_shift : ndarray of shape (p,), (m,), (q,)
    start : int
        First sample of the chunk.
    out : ndarray of shape (k, (p + 1)(m + 1) + q)
        Receives the rows of samples ``start`` to ``start + k``.
    """
    k = out.shape[0]
    p, m, q = X.shape[1], Z.shape[1], Y.shape[1]
    pt = p + 1
    d = pt * (m + 1)
    for t in range(k):
        s = start + t
        out[t, 0] = 1.0
        for i in range(p):
            out[t, 1 + i] = X[s, i] - x_shift[i]
        for a in range(m):
            za = Z[s, a] - z_shift[a]
            base = (a + 1) * pt
            out[t, base] = za
            for i in range(p):
                out[t, base + 1 + i] = za * out[t, 1 + i]
        for j in range(q):
            out[t, d + j] = Y[s, j] - y_shift[j]


@_jit
def centre_interaction(G, dx, dz, phi_sum, n, out):
    """Centred interaction scatter from the raw Khatri-Rao Gram, in one pass.

    With ``T = kron(Tx, Tz)`` the change of basis ``[1, x] -> [1, x - dx]``
    on the source modes (likewise ``z``), the centred Gram is ``T G T^T``,
    and the interaction scatter is its ``(i, a, j, b >= 1)`` block minus
    ``phi_sum phi_sum^T / n``. Each row ``(i, a)`` of ``T G`` needs only its
    own row of ``G`` and three shared ones (``(0, a)``, ``(i, 0)``,
    ``(0, 0)``), and ``T`` acts on the columns within that row, so the
    block is produced row by row, written straight into the (a, b, i, j)
    layout the moment operator contracts in. NumPy needs four full-size
    passes with temporaries and a transposed copy for the same.

    Parameters
    ----------
    G : ndarray of shape (p + 1, m + 1, p + 1, m + 1)
        Raw Gram (:attr:`mics.core.RawMoments.G`), C-contiguous.
    dx : ndarray of shape (p,)
    dz : ndarray of shape (m,)
        Means of the shifted source and modulator (``G[1:, 0, 0, 0] / n``,
        ``G[0, 1:, 0, 0] / n``).
    phi_sum : ndarray of shape (p, m)
        Sum of the centred interaction, ``(T G T^T)[1:, 1:, 0, 0]``.
    n : float
        Number of samples.
    out : ndarray of shape (m, m, p, p)
        Receives ``M[i, a, j, b]`` at ``out[a, b, i, j]``.
    """
    pt, mt = G.shape[0], G.shape[1]
    row = np.empty((pt, mt))
    for i in range(1, pt):
        dxi = dx[i - 1]
        for a in range(1, mt):
            dza = dz[a - 1]
            dxz = dxi * dza
            # row (i, a) of T G
            for j in range(pt):
                for b in range(mt):
                    row[j, b] = (
                        G[i, a, j, b]
                        - dxi * G[0, a, j, b]
                        - dza * G[i, 0, j, b]
                        + dxz * G[0, 0, j, b]
                    )
            # T on its columns, minus the interaction mean
            r00 = row[0, 0]
            ps = phi_sum[i - 1, a - 1] / n
            for b in range(1, mt):
                dzb = dz[b - 1]
                r0b = row[0, b]
                for j in range(1, pt):
                    dxj = dx[j - 1]
                    out[a - 1, b - 1, i - 1, j - 1] = (
                        row[j, b]
                        - dxj * r0b
                        - dzb * row[j, 0]
                        + dxj * dzb * r00
                        - ps * phi_sum[j - 1, b - 1]
                    )


# Sweeps between two Anderson extrapolations of the row descent, and the
# relative ridge on their small least-squares system (the differences of
# late iterates are nearly collinear).
_ANDERSON_DEPTH = 5
_ANDERSON_RIDGE = 1e-12
_TINY = 2.2250738585072014e-308


@_jit
def group_lasso_rows(A, G, half, W, AW, tol, max_sweeps, accelerate):
    """Cyclic row descent for ``min tr(W A W^T) - 2 tr(W G^T) + 2 half sum_u ||W[:, u]||``.

    The inner loop of the W block of sparse reduced-rank regression
    (:mod:`mics.core.sparse_rrr`), on the block of its working set of rows
    (the working set, the strong rules and the optimality check of the rows
    outside are the caller's). Rows of the problem are the *columns* here:
    ``W``, ``G`` and ``A W`` come transposed, as (r, m) arrays, so that the
    update of ``A W`` after a row changes runs along contiguous memory (a
    covariance update: a row costs ``m r``, whatever the number of neurons
    outside the working set).

    Each row update is that row's exact minimiser given the others, the
    group soft-threshold of ``h = G[:, u] - (W A)[:, u] + A[u, u] W[:, u]``,
    so no update raises the objective. With ``accelerate``, every
    ``_ANDERSON_DEPTH`` sweeps the iterates are extrapolated (Anderson
    acceleration of coordinate descent, Bertrand & Massias 2021) and the
    extrapolation is kept only where it lowers the objective. Rows with
    ``A[u, u] <= 0`` (no variance and no ridge) stay zero.

    Parameters
    ----------
    A : ndarray of shape (m, m)
        The working set's block of ``Sxx + alpha I``: symmetric positive
        semi-definite, C-contiguous.
    G : ndarray of shape (r, m)
    half : float
        Half the group-lasso weight (``lam / 2``).
    W : ndarray of shape (r, m)
        Start; receives the solution.
    AW : ndarray of shape (r, m)
        ``W @ A`` at the start; kept up to date.
    tol : float
        Stop after a sweep that moves no entry by more than ``tol`` times
        the largest entry of the rows it leaves non-zero.
    max_sweeps : int
    accelerate : bool

    Returns
    -------
    sweeps : int
    converged : bool
        Whether a sweep met ``tol`` (within ``max_sweeps``).
    """
    r, m = W.shape
    depth = _ANDERSON_DEPTH
    delta = np.empty(r)
    h = np.empty(r)
    hist = np.empty((depth + 1, r, m))
    n_hist = 0
    sweeps = 0
    while sweeps < max_sweeps:
        change = 0.0
        size = 0.0
        for u in range(m):
            d = A[u, u]
            hh = 0.0
            nonzero = False
            for k in range(r):
                h[k] = G[k, u] - AW[k, u] + d * W[k, u]
                hh += h[k] * h[k]
                nonzero = nonzero or W[k, u] != 0.0
            if d <= 0.0 or hh <= half * half:
                if not nonzero:
                    continue
                for k in range(r):
                    delta[k] = -W[k, u]
                    W[k, u] = 0.0
            else:
                s = (1.0 - half / np.sqrt(hh)) / d
                for k in range(r):
                    new = h[k] * s
                    delta[k] = new - W[k, u]
                    W[k, u] = new
                    size = max(size, abs(new))
            for k in range(r):
                dk = delta[k]
                change = max(change, abs(dk))
                if dk != 0.0:
                    row = AW[k]
                    for v in range(m):
                        row[v] += A[u, v] * dk
        sweeps += 1
        if change <= tol * max(size, _TINY):
            return sweeps, True
        if accelerate:
            hist[n_hist % (depth + 1)] = W
            n_hist += 1
            if n_hist >= depth + 1 and (n_hist - 1) % depth == 0:
                _anderson_step(A, G, half, W, AW, hist, n_hist, depth)
    return sweeps, False


@_jit
def _anderson_step(A, G, half, W, AW, hist, n_hist, depth):
    """Replace ``W`` by the Anderson extrapolation of the iterates in ``hist`` if it is lower.

    Arrays as :func:`group_lasso_rows` takes them; ``hist`` is a ring
    of the last ``depth + 1`` iterates, the newest at ``(n_hist - 1) %
    (depth + 1)``. ``AW`` is updated with ``W``.
    """
    r, m = W.shape
    order = np.empty(depth + 1, dtype=np.int64)
    for t in range(depth + 1):
        order[t] = (n_hist - depth - 1 + t) % (depth + 1)
    U = np.empty((depth, m * r))
    for t in range(depth):
        U[t] = (hist[order[t + 1]] - hist[order[t]]).ravel()
    C = U @ U.T
    trace = np.trace(C)
    if not trace > 0.0:
        return
    for t in range(depth):
        C[t, t] += _ANDERSON_RIDGE * trace
    z = np.linalg.solve(C, np.ones(depth))
    total = z.sum()
    if total == 0.0 or not np.isfinite(total):
        return
    ext = np.zeros((r, m))
    for t in range(depth):
        ext += (z[t] / total) * hist[order[t + 1]]
    A_ext = ext @ A  # (A is symmetric)
    f_now = 0.0
    f_ext = 0.0
    for u in range(m):
        n_now = 0.0
        n_ext = 0.0
        for k in range(r):
            f_now += W[k, u] * (AW[k, u] - 2.0 * G[k, u])
            f_ext += ext[k, u] * (A_ext[k, u] - 2.0 * G[k, u])
            n_now += W[k, u] * W[k, u]
            n_ext += ext[k, u] * ext[k, u]
        f_now += 2.0 * half * np.sqrt(n_now)
        f_ext += 2.0 * half * np.sqrt(n_ext)
    if f_ext < f_now:
        W[...] = ext
        AW[...] = A_ext


# ----------------------------------------------------------------------------- artifact scores
@_jit
def _median3(a, b, c):
    """Median of three values, NaN taken as missing (NaN when all are)."""
    if np.isnan(a):
        a, c = c, a
    if np.isnan(b):
        b, c = c, b
    if np.isnan(a):
        a, b = b, a
    # now the present values come first
    if np.isnan(a):
        return np.nan
    if np.isnan(b):
        return a
    if np.isnan(c):
        return 0.5 * (a + b)
    return max(min(a, b), min(max(a, b), c))


@_jit
def _at(x, seg, t, s):
    """``x[s]`` when ``s`` lies in ``t``'s segment, else NaN."""
    if s < 0 or s >= x.shape[0] or seg[s] != seg[t]:
        return np.nan
    return x[s]


@_jit
def _mean_present(a, b):
    """Mean of the values that are not NaN (NaN when neither is)."""
    if np.isnan(a):
        return b
    if np.isnan(b):
        return a
    return 0.5 * (a + b)


@_jit
def _held_level(dev, seg, width):
    """Largest ``min(dev[t:t + width])`` over windows inside one segment; -inf if none."""
    n = dev.shape[0]
    best = -np.inf
    for t in range(n - width + 1):
        if seg[t + width - 1] != seg[t]:
            continue
        low = dev[t]
        for k in range(1, width):
            low = min(low, dev[t + k])
        best = max(best, low)
    return best


@_jit
def _level_scores(x, seg, spikes, n_top, held, dev, out):
    """Level scores of one column ``x`` of :func:`artifact_scores` into ``out``.

    Deviations from the median, over the largest levels the column reaches
    and holds; a sample scores only where its deviation has the sign of its
    spike (``spikes``). ``dev`` is scratch of the column's length.
    """
    n = x.shape[0]
    centre = np.median(x)
    for t in range(n):
        dev[t] = x[t] - centre
    absdev = np.abs(dev)
    top = np.partition(absdev, n - n_top)[n - n_top]
    if top == 0:  # mostly constant: the median of the non-zero deviations
        nonzero = absdev[absdev > 0]
        if nonzero.size:
            top = np.median(nonzero)
    up = max(_held_level(dev, seg, held), top)
    down = max(_held_level(-dev, seg, held), top)
    for t in range(n):
        d = dev[t]
        if d * spikes[t] > 0:
            bound = up if d > 0 else down
            out[t] = abs(d) / bound if bound > 0 else np.inf
        else:
            out[t] = 0.0


@_jit
def artifact_scores(a, seg, n_top, held, shape, level):
    """Shape and level scores of every sample of every column (``mics.core.robust``).

    A few passes per column and three selections for its medians, where
    NumPy needs some sixty passes with temporaries. The definitions are
    those of :func:`mics.core.robust.artifact_scores`.

    Parameters
    ----------
    a : ndarray of shape (n, p)
        Finite values.
    seg : ndarray of int of shape (n,)
        Segment (trial) number of every sample, non-decreasing.
    n_top : int
        ``k`` of the ``k``-th largest deviation (``1 <= k <= n``).
    held : int
        Samples a level must be held for.
    shape, level : ndarray of shape (n, p)
        Receive the scores.
    """
    n, p = a.shape
    steps = np.empty(n)  # |x[t] - x[t - 1]| within a segment, NaN at its first sample
    signed = np.empty(n)
    spikes = np.empty(n)
    dev = np.empty(n)
    for j in range(p):
        x = a[:, j].copy()
        c = 0
        for t in range(n):
            if t > 0 and seg[t] == seg[t - 1]:
                signed[c] = x[t] - x[t - 1]
                steps[t] = abs(signed[c])
                c += 1
            else:
                steps[t] = np.nan
        sigma = 0.0  # a MAD of the steps (a mean absolute deviation where it is 0)
        if c > 0:
            centre = np.median(signed[:c])
            absdev = np.abs(signed[:c] - centre)
            sigma = 1.482602218505602 * np.median(absdev)
            if not sigma > 0:
                sigma = np.sqrt(np.pi / 2) * np.mean(absdev)
        for t in range(n):
            if t >= 3 and t + 3 < n and seg[t - 3] == seg[t + 3]:
                # inside its segment, three samples each side (most samples)
                a0, a1, a2 = x[t - 3], x[t - 2], x[t - 1]
                before = max(min(a0, a1), min(max(a0, a1), a2))
                a0, a1, a2 = x[t + 1], x[t + 2], x[t + 3]
                after = max(min(a0, a1), min(max(a0, a1), a2))
                left, right = x[t] - before, x[t] - after
                local = min(
                    0.5 * (steps[t - 1] + steps[t - 2]), 0.5 * (steps[t + 2] + steps[t + 3])
                )
            else:
                before = _median3(
                    _at(x, seg, t, t - 3), _at(x, seg, t, t - 2), _at(x, seg, t, t - 1)
                )
                after = _median3(
                    _at(x, seg, t, t + 1), _at(x, seg, t, t + 2), _at(x, seg, t, t + 3)
                )
                # at a segment's edge the nearest sample stands for the missing side
                left = x[t] - (_at(x, seg, t, t + 1) if np.isnan(before) else before)
                right = x[t] - (_at(x, seg, t, t - 1) if np.isnan(after) else after)
                side_b = _mean_present(_at(steps, seg, t, t - 1), _at(steps, seg, t, t - 2))
                side_a = _mean_present(_at(steps, seg, t, t + 2), _at(steps, seg, t, t + 3))
                if np.isnan(side_b):
                    local = 0.0 if np.isnan(side_a) else side_a
                elif np.isnan(side_a):
                    local = side_b
                else:
                    local = min(side_b, side_a)
            spike = 0.0
            if left * right > 0:  # False for NaN
                spike = min(abs(left), abs(right))
                if left < 0:
                    spike = -spike
            spikes[t] = spike
            scale = max(local, sigma)
            if scale > 0:
                shape[t, j] = abs(spike) / scale
            else:
                shape[t, j] = np.inf if spike != 0 else 0.0
        _level_scores(x, seg, spikes, n_top, held, dev, level[:, j])
