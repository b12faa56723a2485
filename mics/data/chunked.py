"""Chunked (Dask) inputs: moments where the data live, fits anywhere.

The MIC model needs only sums over time (:func:`mics.core.compute_moments`),
and sums are additive: the moments of a recording are the sum of the
moments of its row blocks (and of its sessions), and the moments of a
training set are "total minus the held-out block". So the expensive pass
maps over the row blocks of Dask arrays, per-block
:class:`~mics.core.RawMoments` are added by a tree reduction, and the fits,
whose cost does not depend on the number of samples, run on the few
megabytes of the result. The modulation test and the bootstrap repeat this
per shifted or resampled data set; each becomes one Dask graph (its moment
pass, then the fit as a task on the result).

This is the only module that builds Dask graphs. Nothing here schedules
work itself: graphs run on the active Dask scheduler (threads by default,
a ``distributed.Client`` when one exists). The seeds and the order of every
random draw are those of the in-memory code, so a chunked run gives the
same selection, p-value and intervals as the in-memory run (to rounding).
"""

from __future__ import annotations

import functools
import numbers
import operator

import numpy as np

from mics.core.stats import RawLinearMoments, RawMoments, compute_moments

__all__ = [
    "is_chunked",
    "any_chunked",
    "as_dask",
    "moments_from_dask",
    "moments_from_sessions",
    "fold_moments",
    "fold_moments_delayed",
    "residualize",
    "compute_in_batches",
    "worker_config",
]

_SPLIT_EVERY = 8


# ----------------------------------------------------------------------------- inputs
def _as_dask_2d(a, name):
    """A 2-D Dask array (1-D inputs become one column), columns in one chunk."""
    import dask.array as da

    a = da.asarray(a)
    if a.ndim == 1:
        a = a[:, None]
    if a.ndim != 2:
        raise ValueError(f"{name} must be 1-D or 2-D (samples x variables), got {a.ndim}-D.")
    if any(np.isnan(c) for c in a.chunks[0]):
        raise ValueError(
            f"{name} has unknown chunk sizes along time; call `{name}.compute_chunk_sizes()` "
            "first (every array must have known row blocks to be aligned)."
        )
    if len(a.chunks[1]) > 1:
        a = a.rechunk({1: -1})
    return a


def _aligned(X, Y, Z):
    """Dask versions of X, Y, Z sharing X's row blocks, one column block each."""
    X, Y, Z = (_as_dask_2d(a, name) for a, name in ((X, "X"), (Y, "Y"), (Z, "Z")))
    n = X.shape[0]
    for a, name in ((Y, "Y"), (Z, "Z")):
        if a.shape[0] != n:
            raise ValueError(
                f"{name} has {a.shape[0]} samples but X has {n}: all inputs must share "
                "the time axis."
            )
    if n < 1:
        raise ValueError("no samples: X has 0 rows.")
    rows = X.chunks[0]
    Y = Y if Y.chunks[0] == rows else Y.rechunk({0: rows})
    Z = Z if Z.chunks[0] == rows else Z.rechunk({0: rows})
    return X, Y, Z


def _check_shifts(shifts, p, m, q):
    x_shift, z_shift, y_shift = (np.asarray(s, dtype=np.float64).ravel() for s in shifts)
    for s, k, name in ((x_shift, p, "x_shift"), (z_shift, m, "z_shift"), (y_shift, q, "y_shift")):
        if s.shape != (k,):
            raise ValueError(f"{name} must have {k} entries, got {s.shape[0]}.")
    return x_shift, z_shift, y_shift


# Every graph of the chunked paths is built (_blocks) and computed
# (compute_unoptimised) unoptimised. Optimising fuses a slice's getitem tasks
# into aliases under the slice's key names, so a second graph over the same
# sliced arrays (the null data sets of a test, a fit then a test) resubmits
# those keys with another task spec, which distributed reports as able to
# "cause failures and deadlocks". Unoptimised, every graph carries the same
# spec for a key: the same results, and no time lost, since the work is in
# each block's moment pass, not in tasks to fuse.
_UNOPTIMISED = {"optimize_graph": False}


def compute_unoptimised(*collections):
    """``dask.compute`` of the collections, unoptimised (see ``_UNOPTIMISED``)."""
    import dask

    return dask.compute(*collections, **_UNOPTIMISED)


def _blocks(a):
    """The row blocks of a 2-D Dask array as Delayed objects, unoptimised."""
    return a.to_delayed(**_UNOPTIMISED).ravel()


def _mean_shifts(X, Y, Z):
    """Column means, computed by Dask (one pass, memory bounded by a block)."""
    return compute_unoptimised(X.mean(axis=0), Z.mean(axis=0), Y.mean(axis=0))


def _first_block_means(*arrays):
    """Column means of each array's first row block: roughly the means, for one block."""
    return compute_unoptimised(*(a.blocks[0].mean(axis=0) for a in arrays))


def first_block_shifts(X, Y, Z):
    """Shifts ``(x, z, y)`` for the moment pass: the first row block's means."""
    return _first_block_means(X, Z, Y)


# ----------------------------------------------------------------------------- tasks
def _block_moments(x, y, z, shifts, interaction, index):
    x, y, z = (np.asarray(a, dtype=np.float64) for a in (x, y, z))
    for a, name in ((x, "X"), (y, "Y"), (z, "Z")):
        if not np.all(np.isfinite(a)):
            raise ValueError(f"{name} contains NaN or infinity in row block {index}.")
    return compute_moments(x, y, z, shifts=shifts, interaction=interaction)


def _sum_moments(parts):
    return functools.reduce(operator.add, parts)


def _tree_sum(parts, split_every=_SPLIT_EVERY, combine=_sum_moments):
    """Tree of delayed additions (depth log_k of the block count).

    ``combine`` adds a list of parts (default: ``RawMoments`` by ``+``).
    """
    import dask

    add = dask.delayed(combine, pure=True)
    while len(parts) > 1:
        parts = [add(parts[i : i + split_every]) for i in range(0, len(parts), split_every)]
    return parts[0]


def _delayed_moments(X, Y, Z, shifts, interaction, split_every=_SPLIT_EVERY):
    import dask

    block = dask.delayed(_block_moments, pure=True)
    xs, ys, zs = (_blocks(a) for a in (X, Y, Z))
    parts = [
        block(xb, yb, zb, shifts, interaction, i)
        for i, (xb, yb, zb) in enumerate(zip(xs, ys, zs, strict=True))
    ]
    return _tree_sum(parts, split_every)


# ----------------------------------------------------------------------------- public
def moments_from_dask(X, Y, Z, *, shifts=None, interaction=True, split_every=_SPLIT_EVERY):
    """Raw moments of Dask (or array-like) data, computed block by block.

    Each row block (time chunk) of ``X``, ``Y`` and ``Z`` becomes one
    :func:`~mics.core.compute_moments` task; the per-block moments are
    added by a tree reduction. The graph runs on the active Dask scheduler:
    threads by default, the cluster when a ``distributed.Client`` exists.

    Parameters
    ----------
    X : dask array or array-like of shape (n_samples, p)
        Source activity. Anything :func:`dask.array.asarray` accepts (NumPy,
        Zarr, h5py datasets, ...). Chunk it along time only; column chunks
        are merged (a block must hold every neuron of its time bins).
    Y : dask array or array-like of shape (n_samples, q) or (n_samples,)
        Target activity; re-chunked to ``X``'s row blocks if they differ.
    Z : dask array or array-like of shape (n_samples, m) or (n_samples,)
        Modulator; re-chunked to ``X``'s row blocks if they differ.
    shifts : tuple of (x_shift, z_shift, y_shift), "first_block" or None
        Values subtracted before summing (centring is applied exactly later,
        so they only need to be near the means, for numerical conditioning
        of signals with large offsets). None (default) uses the column means,
        computed first by Dask (so the data are read twice, memory bounded by
        a block); "first_block" uses the means of the first row block (one
        read of the data). Pass explicit shifts to make moments of different
        computations addable.
    interaction : bool, default=True
        As in :func:`~mics.core.compute_moments`; False skips the
        ``((p+1)(m+1))^2`` interaction Gram.
    split_every : int, default=8
        Fan-in of the tree reduction.

    Returns
    -------
    RawMoments
        Equal (up to summation order) to ``compute_moments`` on the
        concatenated arrays with the same shifts.
    """
    if not isinstance(split_every, numbers.Integral) or split_every < 2:
        raise ValueError(f"split_every must be an integer >= 2, got {split_every!r}.")
    X, Y, Z = _aligned(X, Y, Z)
    p, q, m = X.shape[1], Y.shape[1], Z.shape[1]
    if shifts is None:
        shifts = _mean_shifts(X, Y, Z)
    elif isinstance(shifts, str):
        if shifts != "first_block":
            raise ValueError(f"shifts must be a tuple, 'first_block' or None, got {shifts!r}.")
        shifts = first_block_shifts(X, Y, Z)
    shifts = _check_shifts(shifts, p, m, q)
    return compute_unoptimised(_delayed_moments(X, Y, Z, shifts, interaction, split_every))[0]


def moments_from_sessions(
    sessions, shifts=None, *, demean_sessions=False, interaction=True, split_every=_SPLIT_EVERY
):
    """Pool several recordings into one set of raw moments.

    Parameters
    ----------
    sessions : sequence of (X, Y, Z)
        NumPy or Dask arrays per session (1-D ``Y`` or ``Z`` become one column).
        Every session must have the same columns in the same order.
    shifts : tuple of (x_shift, z_shift, y_shift), "first_block" or None
        As in :func:`moments_from_dask`; None uses the pooled column means.
    demean_sessions : bool, default=False
        Subtract each session's own column means first (lazily), so that
        session offsets (baseline drift of raw fluorescence, a different
        mean arousal) are not mistaken for covariance. The fitted model then
        has one intercept per session, and the modulator acts through its
        deviations from each session's mean.
    interaction : bool, default=True
    split_every : int, default=8

    Returns
    -------
    RawMoments
        The moments of the sessions' concatenation (of the demeaned
        sessions if ``demean_sessions``).

    Notes
    -----
    Pooling fits *one* model to all sessions, which is valid only when

    * the columns are the same variables: the same source and target
      neurons (registered across sessions, in the same order) and the same
      modulator variables in the same units and preprocessing;
    * the communication, its additive modulator effect and the channels are
      the same in every session (no learning or drift between them);
    * the offsets are shared, or removed with ``demean_sessions=True``.

    The sums themselves are exact: pooled moments equal the moments of the
    concatenated data; sessions are also natural cross-validation blocks
    (the moments of the other sessions are ``total - session``).
    """
    sessions = list(sessions)
    if not sessions:
        raise ValueError("no sessions given.")
    import dask.array as da

    triples = []
    for s, triple in enumerate(sessions):
        if len(triple) != 3:
            raise ValueError(f"session {s} must be an (X, Y, Z) triple, got {len(triple)} items.")
        try:
            X, Y, Z = _aligned(*triple)
        except ValueError as err:
            raise ValueError(f"session {s}: {err}") from None
        if demean_sessions:
            X, Y, Z = (a - a.mean(axis=0) for a in (X, Y, Z))
        triples.append((X, Y, Z))
    widths = {(X.shape[1], Y.shape[1], Z.shape[1]) for X, Y, Z in triples}
    if len(widths) > 1:
        raise ValueError(
            "sessions have different numbers of (source, target, modulator) columns: "
            f"{sorted(widths)}; pooled sessions must record the same variables."
        )
    X, Y, Z = (da.concatenate([t[i] for t in triples], axis=0) for i in range(3))
    return moments_from_dask(
        X, Y, Z, shifts=shifts, interaction=interaction, split_every=split_every
    )


def worker_config():
    """Dask configuration for ``distributed`` worker processes that run mics fits.

    ``distributed`` spawns its worker processes with
    ``MALLOC_TRIM_THRESHOLD_=65536``, so that freed memory goes back to the
    system promptly. Setting that variable also turns off glibc's adaptive
    ``mmap`` threshold, after which every temporary array above 128 KiB is
    mapped and unmapped afresh. The ALS sweeps and fold fits create many
    such megabyte-sized temporaries, and they ran about half as fast
    (``benchmarks/README.md``, "distributed's default worker environment",
    the same null fits in one process with and without the variable; the
    cluster runs: ``results/scaling/``). This
    configuration keeps distributed's other pre-spawn settings (one BLAS
    thread per worker) and drops that one; workers may then hold on to freed
    memory for longer.

    Returns
    -------
    dict
        For :func:`dask.config.set`, applied before the workers start::

            with dask.config.set(mics.data.worker_config()):
                cluster = LocalCluster(n_workers=4, threads_per_worker=1)

        For workers started by hand (``dask worker ...``), leave
        ``MALLOC_TRIM_THRESHOLD_`` unset in their environment and the dask
        configuration they read.
    """
    import dask

    env = dict(dask.config.get("distributed.nanny.pre-spawn-environ", default={}) or {})
    env.pop("MALLOC_TRIM_THRESHOLD_", None)
    return {"distributed.nanny.pre-spawn-environ": env}


# ----------------------------------------------------------------------------- folds, tests


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

    return _as_dask_2d(a, name)


def rows(a, idx):
    """Rows ``idx`` of a Dask array; a slice when contiguous (no re-chunking)."""
    idx = np.asarray(idx)
    if idx.size and np.array_equal(idx, np.arange(idx[0], idx[0] + idx.size)):
        return a[int(idx[0]) : int(idx[0]) + idx.size]
    return a[idx]


def _empty_like(total):

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
    """(total, folds) with folds as :func:`mics.model.selection._fold_moments` lays them out."""
    folds = []
    for test_m, excl_m in zip(tests, excluded, strict=True):
        test_m = _empty_like(total) if test_m is None else test_m
        folds.append((None, None, test_m, test_m if excl_m is None else excl_m))
    return total, folds


def _moments_of(X, Y, Z, idx, shifts):
    """Delayed moments of rows ``idx`` (all rows when None; None for no rows)."""

    if idx is not None:
        if len(idx) == 0:
            return None
        X, Y, Z = rows(X, idx), rows(Y, idx), rows(Z, idx)
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
        Row blocks aligned (see :func:`mics.data.moments_from_dask`).
    splits : list of (train, test) index arrays, optional
        Cross-validation folds; None for the total moments only.
    shifts : tuple or "first_block"
        Values subtracted before summing (see ``moments_from_dask``); the
        first row block's means cost one block.

    Returns
    -------
    dask.delayed.Delayed
        Evaluates to ``(total, folds)``, ``total`` a
        :class:`~mics.core.RawMoments` and ``folds`` a list of ``(None,
        None, test_moments, excluded_moments)`` (excluded = held out plus
        any gap).
    """
    import dask

    X, Y, Z = _aligned(X, Y, Z)  # a rolled or resampled modulator has other row blocks
    p, q, m = X.shape[1], Y.shape[1], Z.shape[1]
    if isinstance(shifts, str):
        shifts = first_block_shifts(X, Y, Z)
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

    return compute_unoptimised(fold_moments_delayed(X, Y, Z, splits, shifts))[0]


def lazy_inputs(X, Y, Z):
    """Dask versions of X, Y, Z on X's row blocks; whether Y was 1-D."""

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

    shifts = _first_block_means(Z, Y)
    sums = _xy_moments_delayed(Z, Y, None, shifts, names=("Z", "Y"))
    # the regression of Y on Z: Z in the source slot of the linear moments
    (moments,) = compute_unoptimised(sums)
    n, sz, sy, zz, zy = moments.n, moments.sx, moments.sy, moments.Sxx, moments.Sxy
    dz, dy = sz / n, sy / n
    Szz = zz - n * np.outer(dz, dz)
    Szy = zy - n * np.outer(dz, dy)
    beta = np.linalg.lstsq(Szz, Szy, rcond=None)[0]
    z_mean, y_mean = shifts[0] + dz, shifts[1] + dy
    return da.map_blocks(_residual_block, Y, Z, y_mean, z_mean, beta, dtype=np.float64)


def modulator_design(Z):
    """``[Z, hinges of Z]`` lazily: the modulator and its piecewise-linear additive basis.

    The knots are each column's quantiles, from the modulator read once (it
    is small beside the populations); the hinges
    (:func:`mics.core.conditioning.modulator_hinges`) are then formed block
    by block.
    """
    import dask.array as da

    from mics.core.conditioning import hinge_knots, modulator_hinges

    Z = Z.rechunk({1: -1})
    (values,) = compute_unoptimised(Z)
    knots = hinge_knots(np.asarray(values, dtype=np.float64))
    width = int(sum(k.size for k in knots))
    hinges = da.map_blocks(
        modulator_hinges, Z, knots, dtype=np.float64, chunks=(Z.chunks[0], (width,))
    )
    return da.concatenate([Z.astype(np.float64), hinges], axis=1).rechunk({1: -1})


def with_trial_means(X, codes, counts):
    """``[X, X_bar]`` lazily: each row beside its trial's mean (the means from one pass).

    Parameters
    ----------
    X : dask array of shape (n, p)
    codes : ndarray of shape (n,)
        Trial code 0 .. n_trials - 1 of every row.
    counts : ndarray of shape (n_trials,)
    """
    import dask.array as da

    weights = np.zeros((codes.size, counts.size))
    weights[np.arange(codes.size), codes] = 1.0 / counts[codes]
    (means,) = compute_unoptimised(da.from_array(weights, chunks=(X.chunks[0], -1)).T @ X)
    rows = da.from_array(codes, chunks=X.chunks[0])
    bar = rows.map_blocks(
        lambda c: means[c], dtype=np.float64, new_axis=1, chunks=(X.chunks[0], (X.shape[1],))
    )
    return da.concatenate([X, bar], axis=1)


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

    from mics.core.linalg import single_blas_thread

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
                results = compute_unoptimised(*tasks[start : start + batch])
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
    """Linear moments of one row block for reduced-rank regression (no modulator).

    Sums and scatters of ``a = x - x_shift`` and ``b = y - y_shift``, computed
    on new arrays (aligned, see ``residualize``).
    """
    a = np.asarray(x, dtype=np.float64) - x_shift
    b = np.asarray(y, dtype=np.float64) - y_shift
    for v, name in zip((a, b), names, strict=True):
        if not np.all(np.isfinite(v)):
            raise ValueError(f"{name} contains NaN or infinity in row block {index}.")
    p, q = a.shape[1], b.shape[1]
    none = np.zeros(0)
    return RawLinearMoments(
        a.shape[0],
        x_shift,
        none,
        y_shift,
        sx=a.sum(axis=0),
        sz=none,
        sy=b.sum(axis=0),
        Sxx=a.T @ a,
        Sxz=np.zeros((p, 0)),
        Szz=np.zeros((0, 0)),
        Sxy=a.T @ b,
        Szy=np.zeros((0, q)),
        Syy=b.T @ b,
    )


def _add_xy(parts):
    return functools.reduce(operator.add, [p for p in parts if p is not None])


def _xy_moments_delayed(X, Y, idx, shifts, names=("X", "Y")):
    """Delayed :func:`_xy_block` sums of rows ``idx`` (all when None; None for no rows)."""
    import dask

    if idx is not None:
        if len(idx) == 0:
            return None
        X, Y = rows(X, idx), rows(Y, idx)
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
    total : RawLinearMoments
        Around the first block's means, with no modulator (``m = 0``).
    folds : list of (test_moments, excluded_moments)
        The same per fold.
    shifts : tuple of ndarray
        ``(x_shift, y_shift)``.
    """

    shifts = _first_block_means(X, Y)
    total, tests, excluded = _fold_graph(
        X.shape[0], list(splits), lambda idx: _xy_moments_delayed(X, Y, idx, shifts), _add_xy
    )
    total, tests, excluded = compute_unoptimised(total, tests, excluded)
    folds = [(t, t if e is None else e) for t, e in zip(tests, excluded, strict=True)]
    return total, folds, shifts


# ----------------------------------------------------------------------------- row blocks
def map_row_blocks(func, *arrays, blocks=None, min_rows=1):
    """``func(offset, *blocks)`` for every row block of the arrays, in one pass.

    Dask inputs (any of them) are mapped where their row blocks live: one
    task per block, computed together; in-memory inputs are cut into the
    row ranges ``blocks``. The one place that tells the two apart for
    block-wise statistics (the data-quality checks).

    Parameters
    ----------
    func : callable
        Called with the block's first row and the block of each array, as a
        2-D float array (None for an array that is None); must return
        something small.
    *arrays : arrays of shape (n_samples,) or (n_samples, k), or None
    blocks : list of (start, stop), optional
        Row ranges of in-memory inputs; default one block.
    min_rows : int
        Dask row blocks smaller than this are merged with their neighbours
        first (lazily), so a statistic of a block sees enough rows.

    Returns
    -------
    list
        ``func``'s results in row order.
    """
    if not any_chunked(*arrays):
        arrays = [None if a is None else np.asarray(a, dtype=np.float64) for a in arrays]
        arrays = [a[:, None] if a is not None and a.ndim == 1 else a for a in arrays]
        n = next(a.shape[0] for a in arrays if a is not None)
        blocks = [(0, n)] if blocks is None else blocks
        return [
            func(int(lo), *(None if a is None else a[lo:hi] for a in arrays)) for lo, hi in blocks
        ]
    import dask

    arrays = [None if a is None else _as_dask_2d(a, "input") for a in arrays]
    present = [a for a in arrays if a is not None]
    rows_ = present[0].chunks[0]
    if len(rows_) > 1 and min(rows_) < min_rows:
        merged, run = [], 0
        for size in rows_:
            run += size
            if run >= min_rows:
                merged.append(run)
                run = 0
        if run:
            if merged:
                merged[-1] += run
            else:
                merged.append(run)
        rows_ = tuple(merged)
    arrays = [
        None if a is None else (a if a.chunks[0] == rows_ else a.rechunk({0: rows_}))
        for a in arrays
    ]
    offsets = np.r_[0, np.cumsum(rows_)[:-1]].astype(int)
    parts = [[None] * len(rows_) if a is None else list(_blocks(a)) for a in arrays]
    task = dask.delayed(func, pure=True)
    tasks = [task(int(o), *(b[i] for b in parts)) for i, o in enumerate(offsets)]
    return list(compute_unoptimised(*tasks))
