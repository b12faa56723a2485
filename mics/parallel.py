"""Scale past one machine with Dask: moments where the data live, fit anywhere.

The MIC model needs only the sufficient statistics of
:func:`mics.moments.compute_moments`, and those are sums over time: the
moments of a recording are the sum of the moments of its time blocks (and of
its sessions). So the expensive pass over the data maps over the row blocks
of Dask arrays, the per-block :class:`~mics.moments.RawMoments` are added by a
tree reduction, and the fit itself (whose cost does not depend on the number
of samples) runs on whatever machine holds the few-megabyte result.

Nothing here schedules work itself: the graph is executed by the active Dask
scheduler (the threaded one by default, a ``distributed.Client`` when one
exists, or whatever ``dask.config.set(scheduler=...)`` selects).

Cross-validation, permutation tests and bootstraps are parallelised by
joblib inside ``mics``; under ``joblib.parallel_backend("dask")`` they run on
the Dask cluster too (see ``docs/scaling.md``).
"""

from __future__ import annotations

import functools
import numbers
import operator

import numpy as np
from sklearn.utils import check_random_state

from mics.moments import CenteredMoments, RawMoments, check_interaction, compute_moments

__all__ = [
    "moments_from_dask",
    "moments_from_sessions",
    "fit_from_moments",
    "fit_each_session",
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


# Every graph of the chunked paths is built (_blocks) and computed (_compute)
# unoptimised. Optimising fuses a slice's getitem tasks into aliases under the
# slice's key names, so a second graph over the same sliced arrays (the null
# data sets of a test, a fit then a test) resubmits those keys with another
# task spec, which distributed reports as able to "cause failures and
# deadlocks". Unoptimised, every graph carries the same spec for a key: the
# same results and, measured on ten blocks of 10000 rows, the same time (the
# work is in each block's moment pass, not in tasks to fuse).
_UNOPTIMISED = {"optimize_graph": False}


def _compute(*collections):
    """``dask.compute`` of the collections, unoptimised (see ``_UNOPTIMISED``)."""
    import dask

    return dask.compute(*collections, **_UNOPTIMISED)


def _blocks(a):
    """The row blocks of a 2-D Dask array as Delayed objects, unoptimised."""
    return a.to_delayed(**_UNOPTIMISED).ravel()


def _mean_shifts(X, Y, Z):
    """Column means, computed by Dask (one pass, memory bounded by a block)."""
    return _compute(X.mean(axis=0), Z.mean(axis=0), Y.mean(axis=0))


def _first_block_means(*arrays):
    """Column means of each array's first row block: roughly the means, for one block."""
    return _compute(*(a.blocks[0].mean(axis=0) for a in arrays))


def _first_block_shifts(X, Y, Z):
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
    :func:`~mics.moments.compute_moments` task; the per-block moments are
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
        As in :func:`~mics.moments.compute_moments`; False skips the
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
        shifts = _first_block_shifts(X, Y, Z)
    shifts = _check_shifts(shifts, p, m, q)
    return _compute(_delayed_moments(X, Y, Z, shifts, interaction, split_every))[0]


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


def fit_from_moments(
    raw,
    rank,
    n_channels,
    *,
    alpha=0.05,
    alpha_channels=0.25,
    n_init=3,
    max_iter=200,
    tol=1e-7,
    random_state=None,
):
    """Fit the MIC model from moments alone (no data needed).

    Uses the same relative penalties, random seeding and stages as
    :class:`mics.MICs` with a fixed ``rank`` and ``n_channels`` and the
    moment solver, so ``fit_from_moments(compute_moments(X, Y, Z), r, K,
    random_state=s)`` gives the fit of ``MICs(r, K, random_state=s).fit(X, Y, Z)``.

    Parameters
    ----------
    raw : RawMoments or CenteredMoments
        With the interaction moments (``interaction=True``).
    rank : int
        Baseline rank ``r``.
    n_channels : int
        Number of channels ``K``.
    alpha, alpha_channels : float
        Relative ridge penalties (see :class:`mics.MICs`).
    n_init, max_iter, tol
        As in :class:`mics.MICs`.
    random_state : int, RandomState or None
        Seeds the random restarts exactly as ``MICs`` does.

    Returns
    -------
    MICFit
        Baseline ``coef`` (p, q), ``modulator_coef`` (m, q) and the channels
        in canonical form (for a full estimator, with intercept, predict and
        selection, use :meth:`mics.MICs.fit_moments`). The intercept is
        ``y_mean - x_mean @ coef - z_mean @ modulator_coef
        - target_patterns @ w_mean`` with ``w_mean_k = weights_k *
        a_k^T phi_mean c_k`` (means from ``raw.centered()``).
    """
    from mics.estimators import _check_alpha
    from mics.linear_moments import RawLinearMoments
    from mics.mic_estimator import MICs
    from mics.modulation import MomentOperator, fit_mic_model
    from mics.units import InputScales, restore_fit

    _check_alpha(alpha)
    if isinstance(raw, (RawMoments, RawLinearMoments)):
        check_interaction(raw)  # refuses linear-only moments too
        cm = raw.centered()
    elif isinstance(raw, CenteredMoments):
        cm = raw
        if cm.M is None:
            raise ValueError("these moments hold no interaction terms (M is None).")
    else:
        raise TypeError(f"raw must be RawMoments or CenteredMoments, got {type(raw).__name__}.")
    p, q, m = cm.Sxx.shape[0], cm.Syy.shape[0], cm.Szz.shape[0]
    # The estimator's own checks and penalties, so both routes fit the same model.
    settings = MICs(
        rank,
        n_channels,
        alpha=alpha,
        alpha_channels=alpha_channels,
        n_init=n_init,
        max_iter=max_iter,
        tol=tol,
    )
    settings._check_params(p, q, m)
    # MICs fits in standard units and maps the fit back (see mics.units).
    scales = InputScales.from_moments(cm)
    op = MomentOperator(scales.standardize_moments(cm))
    pen = settings._penalties(op)
    # MICs draws the fit's seed from its random_state the same way.
    seed = check_random_state(random_state).randint(np.iinfo(np.int32).max)
    fit = fit_mic_model(
        op,
        int(rank),
        int(n_channels),
        **pen,
        n_init=n_init,
        max_iter=max_iter,
        tol=tol,
        random_state=seed,
    )
    return restore_fit(fit, scales)


def fit_each_session(estimator, sessions, *, n_jobs=None, verbose=1):
    """Fit a clone of ``estimator`` to every session, sessions in parallel.

    Parameters
    ----------
    estimator : MICs (or any estimator whose ``fit`` takes ``(X, y, Z)``)
    sessions : sequence of (X, y, Z)
        NumPy, Dask or xarray inputs per session.
    n_jobs : int, optional
        Sessions fitted at once (joblib; under ``joblib.parallel_backend("dask")``
        on the cluster). Each fit keeps the estimator's own ``n_jobs``.
    verbose : int

    Returns
    -------
    list of fitted estimators
        In the order of ``sessions``; each clone has the estimator's
        parameters, so the same ``random_state`` seeds every session alike.
    """
    from joblib import Parallel, delayed
    from sklearn.base import clone
    from tqdm import tqdm

    sessions = [tuple(s) for s in sessions]
    for i, s in enumerate(sessions):
        if len(s) != 3:
            raise ValueError(f"session {i} must be an (X, y, Z) triple, got {len(s)} items.")

    def _fit(X, y, Z):
        return clone(estimator).set_params(verbose=0).fit(X, y, Z)

    jobs = (delayed(_fit)(*s) for s in sessions)
    results = Parallel(n_jobs=n_jobs, prefer="threads", return_as="generator")(jobs)
    return list(tqdm(results, total=len(sessions), desc="sessions", disable=not verbose))


def worker_config():
    """Dask configuration for ``distributed`` worker processes that run mics fits.

    ``distributed`` spawns its worker processes with
    ``MALLOC_TRIM_THRESHOLD_=65536``, so that freed memory goes back to the
    system promptly. Setting that variable also turns off glibc's adaptive
    ``mmap`` threshold, after which every temporary array above 128 KiB is
    mapped and unmapped afresh. The ALS sweeps and fold fits create many
    such megabyte-sized temporaries, and they ran about half as fast
    (``results/scaling/README.md``: 87.5 s against 46.5 s for the same five
    null fits in one process, with and without the variable). This
    configuration keeps distributed's other pre-spawn settings (one BLAS
    thread per worker) and drops that one; workers may then hold on to freed
    memory for longer.

    Returns
    -------
    dict
        For :func:`dask.config.set`, applied before the workers start::

            with dask.config.set(mics.parallel.worker_config()):
                cluster = LocalCluster(n_workers=4, threads_per_worker=1)

        For workers started by hand (``dask worker ...``), leave
        ``MALLOC_TRIM_THRESHOLD_`` unset in their environment and the dask
        configuration they read.
    """
    import dask

    env = dict(dask.config.get("distributed.nanny.pre-spawn-environ", default={}) or {})
    env.pop("MALLOC_TRIM_THRESHOLD_", None)
    return {"distributed.nanny.pre-spawn-environ": env}
