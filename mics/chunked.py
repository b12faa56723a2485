"""Chunked (Dask) inputs: selection, tests and bootstraps from block moments.

Every fit of the moment solver needs only sums over time (see
:mod:`mics.moments`), and so does scoring a fold: the moments of a training
set are "total minus the held-out block". A cross-validated selection on a
Dask array is therefore one pass over the data, block by block where the
data live, followed by fits on a few megabytes of moments. The modulation
test and the bootstrap repeat this per shifted or resampled data set; each
of those becomes one Dask graph (the moment pass of that data set, then the
fit as a task on its result), so the whole test runs on the active Dask
scheduler (threads by default, a cluster when a ``distributed.Client``
exists) and nothing in the driver grows with the recording.

The seeds and the order of every random draw are those of the in-memory
code, so a chunked run gives the same selection, p-value and intervals as
the in-memory run with the same ``random_state`` (to rounding).
"""

from __future__ import annotations

import numpy as np

__all__ = ["is_chunked", "fold_moments", "fold_moments_delayed"]


def is_chunked(a):
    """True for a Dask array or an xarray object backed by one."""
    data = getattr(a, "data", None) if _is_xarray(a) else a
    return type(data).__module__.split(".")[0] == "dask" and hasattr(data, "chunks")


def any_chunked(*arrays):
    """True when any input is chunked (then every input is treated lazily)."""
    return any(a is not None and is_chunked(a) for a in arrays)


def _is_xarray(a):
    return type(a).__module__.split(".")[0] == "xarray"


def as_dask(a, name):
    """A 2-D Dask array with one column block (1-D inputs become one column)."""
    from mics.parallel import _as_dask_2d

    return _as_dask_2d(a, name)


def _rows(a, idx):
    """Rows ``idx`` of a Dask array; a slice when contiguous (no re-chunking)."""
    idx = np.asarray(idx)
    if idx.size and np.array_equal(idx, np.arange(idx[0], idx[0] + idx.size)):
        return a[int(idx[0]) : int(idx[0]) + idx.size]
    return a[idx]


def _empty_like(total):
    from mics.moments import RawMoments

    return RawMoments(
        0,
        total.x_shift,
        total.z_shift,
        total.y_shift,
        np.zeros_like(total.G),
        np.zeros_like(total.Gy),
        np.zeros_like(total.Syy),
    )


def _assemble(total, tests, excluded):
    """(total, folds) with folds as :func:`mics.selection._fold_moments` lays them out."""
    folds = []
    for test_m, excl_m in zip(tests, excluded, strict=True):
        test_m = _empty_like(total) if test_m is None else test_m
        folds.append((None, None, test_m, test_m if excl_m is None else excl_m))
    return total, folds


def _moments_of(X, Y, Z, idx, shifts):
    """Delayed moments of rows ``idx`` (all rows when None; None for no rows)."""
    from mics.parallel import _delayed_moments

    if idx is not None:
        if len(idx) == 0:
            return None
        X, Y, Z = _rows(X, idx), _rows(Y, idx), _rows(Z, idx)
    return _delayed_moments(X, Y, Z, shifts, True)


def _fold_graph(n, splits, moments_of, combine):
    """Delayed sums of every fold's held-out and excluded rows, and of all rows.

    Parameters
    ----------
    n : int
    splits : list of (train, test)
    moments_of : callable
        Index array (or None for all rows) -> delayed sums of those rows.
    combine : callable
        Adds a list of sums (for the tree reduction).

    Returns
    -------
    total, tests, excluded
        ``excluded[i]`` is None when fold ``i`` excludes exactly its held-out
        block (no gap). When the held-out blocks partition the samples the
        total is their sum: one pass over the data in all.
    """
    from mics.parallel import _tree_sum

    tests, excluded = [], []
    for train, test in splits:
        test = np.sort(np.asarray(test))
        tests.append(moments_of(test))
        excl = np.setdiff1d(np.arange(n), train, assume_unique=True)
        excluded.append(None if np.array_equal(excl, test) else moments_of(excl))
    covered = np.sort(np.concatenate([t for _, t in splits])) if splits else np.zeros(0)
    if splits and np.array_equal(covered, np.arange(n)):
        total = _tree_sum([t for t in tests if t is not None], combine=combine)
    else:
        total = moments_of(None)
    return total, tests, excluded


def fold_moments_delayed(X, Y, Z, splits=None, shifts="first_block"):
    """One Dask graph for the total moments and every fold's held-out moments.

    Parameters
    ----------
    X, Y, Z : dask arrays of shape (n, p), (n, q), (n, m)
        Row blocks aligned (see :func:`mics.parallel.moments_from_dask`).
    splits : list of (train, test) index arrays, optional
        Cross-validation folds; None for the total moments only.
    shifts : tuple or "first_block"
        Values subtracted before summing (see ``moments_from_dask``); the
        first row block's means cost one block.

    Returns
    -------
    dask.delayed.Delayed
        Evaluates to ``(total, folds)``, ``total`` a
        :class:`~mics.moments.RawMoments` and ``folds`` a list of ``(None,
        None, test_moments, excluded_moments)`` (excluded = held out plus
        any gap).
    """
    import dask

    from mics.parallel import _aligned, _check_shifts, _first_block_shifts, _sum_moments

    X, Y, Z = _aligned(X, Y, Z)  # a rolled or resampled modulator has other row blocks
    p, q, m = X.shape[1], Y.shape[1], Z.shape[1]
    if isinstance(shifts, str):
        shifts = _first_block_shifts(X, Y, Z)
    shifts = _check_shifts(shifts, p, m, q)
    total, tests, excluded = _fold_graph(
        X.shape[0],
        list(splits or []),
        lambda idx: _moments_of(X, Y, Z, idx, shifts),
        _sum_moments,
    )
    return dask.delayed(_assemble, pure=True)(total, tests, excluded)


def fold_moments(X, Y, Z, splits=None, shifts="first_block"):
    """:func:`fold_moments_delayed`, computed on the active Dask scheduler."""
    from mics.parallel import _compute

    return _compute(fold_moments_delayed(X, Y, Z, splits, shifts))[0]


def lazy_inputs(X, Y, Z):
    """Dask versions of X, Y, Z on X's row blocks; whether Y was 1-D."""
    from mics.parallel import _aligned

    y_1d = getattr(Y, "ndim", 2) == 1
    X, Y, Z = _aligned(X, Y, Z)
    return X, Y, Z, y_1d


def residualize(Y, Z):
    """``Y`` minus its least-squares fit on ``[1, Z]``, lazily (coefficients from moments).

    The in-memory test regresses the additive modulator effect out of the
    target before shifting; this is the same regression from ``Z^T Z`` and
    ``Z^T Y`` summed block by block (memory bounded by a block), in float64.

    Every block's arithmetic runs in one of our tasks on arrays the task
    makes itself. ``distributed`` can hand a task a block (or a constant)
    that starts at any byte, and NumPy then skips BLAS and its vectorised
    loops, which sum in another order: with Dask's own ``Z.T @ Y`` the same
    data gave null statistics that differed in the last digits with the
    number of workers, and from run to run on two.

    Parameters
    ----------
    Y : dask array of shape (n, q)
    Z : dask array of shape (n, m), on Y's row blocks

    Returns
    -------
    dask array of shape (n, q), float64
    """
    import dask.array as da

    from mics.parallel import _compute, _first_block_means

    shifts = _first_block_means(Z, Y)
    sums = _xy_moments_delayed(Z, Y, None, shifts, names=("Z", "Y"))
    n, sz, sy, zz, zy, _ = _compute(sums)[0]
    dz, dy = sz / n, sy / n
    Szz = zz - n * np.outer(dz, dz)
    Szy = zy - n * np.outer(dz, dy)
    beta = np.linalg.lstsq(Szz, Szy, rcond=None)[0]
    z_mean, y_mean = shifts[0] + dz, shifts[1] + dy
    return da.map_blocks(_residual_block, Y, Z, y_mean, z_mean, beta, dtype=np.float64)


def _residual_block(y, z, y_mean, z_mean, beta):
    """``y - y_mean - (z - z_mean) beta`` for one row block, on new (aligned) arrays."""
    out = np.asarray(y, dtype=np.float64) - y_mean
    out -= (np.asarray(z, dtype=np.float64) - z_mean) @ np.array(beta, dtype=np.float64)
    return out


def compute_in_batches(tasks, batch, desc, verbose):
    """Compute delayed tasks, results in submission order.

    On a ``distributed`` cluster a sliding window of ``batch`` tasks is kept
    in flight; on a local scheduler they are computed ``batch`` at a time.
    A consumer that stops iterating (the sequential test) stops the
    computation (pending tasks are cancelled).

    Parameters
    ----------
    tasks : iterable of dask.delayed.Delayed
    batch : int
        Tasks in flight at once.
    desc : str
        Progress-bar label.
    verbose : int

    Yields
    ------
    Each task's result, in order.
    """
    from tqdm import tqdm

    from mics._linalg import single_blas_thread
    from mics.parallel import _compute

    tasks = list(tasks)
    client = _client()
    if client is not None:
        yield from _windowed(client, tasks, batch, desc, verbose)
        return
    bar = tqdm(total=len(tasks), desc=desc, disable=not verbose)
    try:
        for start in range(0, len(tasks), batch):
            # A threaded scheduler runs several fits at once in this process:
            # one BLAS thread each (a cluster's worker processes set their own).
            with single_blas_thread():
                results = _compute(*tasks[start : start + batch])
            for r in results:
                bar.update()
                yield r
    finally:
        bar.close()


def _client():
    """The active ``distributed`` client, or None (threaded scheduler)."""
    try:
        from distributed import default_client

        return default_client()
    except (ImportError, ValueError):
        return None


def _windowed(client, tasks, window, desc, verbose):
    """Results in order from a sliding window of ``window`` tasks on a cluster.

    A new task is submitted as soon as the oldest one is collected, so the
    workers never wait for a whole batch; at most ``window`` data sets' fold
    moments are held at once (a submission of all tasks at once could run
    every moment pass before any fit and hold them all).
    """
    import itertools
    from collections import deque

    from tqdm import tqdm

    from mics.parallel import _UNOPTIMISED

    pending = iter(tasks)
    queue = deque(client.compute(t, **_UNOPTIMISED) for t in itertools.islice(pending, window))
    bar = tqdm(total=len(tasks), desc=desc, disable=not verbose)
    try:
        while queue:
            result = queue.popleft().result()
            following = next(pending, None)
            if following is not None:
                queue.append(client.compute(following, **_UNOPTIMISED))
            bar.update()
            yield result
    finally:
        for future in queue:
            future.cancel()
        bar.close()


def default_batch(n_jobs=None):
    """Tasks in flight: ``2 * n_jobs`` when given, else twice the active cluster's
    workers, else twice the CPUs (a second task per worker hides scheduling gaps)."""
    import os

    if n_jobs is not None and n_jobs > 0:
        return 2 * int(n_jobs)
    client = _client()
    if client is not None:
        return 2 * max(1, len(client.scheduler_info()["workers"]))
    return 2 * (os.cpu_count() or 1)


# ----------------------------------------------------------------------------- RRR
def _xy_block(x, y, x_shift, y_shift, index, names=("X", "Y")):
    """Sums of one row block for reduced-rank regression: ``n, sum a, sum b, a^T a, a^T b, b^T b``
    with ``a = x - x_shift``, ``b = y - y_shift`` (new arrays: aligned, see ``residualize``)."""
    a = np.asarray(x, dtype=np.float64) - x_shift
    b = np.asarray(y, dtype=np.float64) - y_shift
    for v, name in zip((a, b), names, strict=True):
        if not np.all(np.isfinite(v)):
            raise ValueError(f"{name} contains NaN or infinity in row block {index}.")
    return (a.shape[0], a.sum(axis=0), b.sum(axis=0), a.T @ a, a.T @ b, b.T @ b)


def _add_xy(parts):
    parts = [p for p in parts if p is not None]
    return tuple(sum(vals) for vals in zip(*parts, strict=True))


def _xy_moments_delayed(X, Y, idx, shifts, names=("X", "Y")):
    """Delayed :func:`_xy_block` sums of rows ``idx`` (all when None; None for no rows)."""
    import dask

    from mics.parallel import _blocks, _tree_sum

    if idx is not None:
        if len(idx) == 0:
            return None
        X, Y = _rows(X, idx), _rows(Y, idx)
    block = dask.delayed(_xy_block, pure=True)
    parts = [
        block(xb, yb, *shifts, i, names)
        for i, (xb, yb) in enumerate(zip(_blocks(X), _blocks(Y), strict=True))
    ]
    return _tree_sum(parts, combine=_add_xy)


def xy_fold_moments(X, Y, splits):
    """Reduced-rank-regression sums of all samples and of every fold's excluded/held-out rows.

    Parameters
    ----------
    X, Y : dask arrays of shape (n, p), (n, q), row blocks aligned
    splits : list of (train, test)

    Returns
    -------
    total : tuple
        ``(n, sum a, sum b, a^T a, a^T b, b^T b)`` around the first block's means.
    folds : list of (test_sums, excluded_sums)
        The same sums per fold (``None`` for an empty set).
    shifts : tuple of ndarray
        ``(x_shift, y_shift)``.
    """
    from mics.parallel import _compute, _first_block_means

    shifts = _first_block_means(X, Y)
    total, tests, excluded = _fold_graph(
        X.shape[0], list(splits), lambda idx: _xy_moments_delayed(X, Y, idx, shifts), _add_xy
    )
    total, tests, excluded = _compute(total, tests, excluded)
    folds = [(t, t if e is None else e) for t, e in zip(tests, excluded, strict=True)]
    return total, folds, shifts
