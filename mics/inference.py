"""Is modulation there, and how sure are we? Permutation tests and bootstraps.

Calcium signals are autocorrelated, so neither test may shuffle samples:
the circular null shifts the whole modulator time series relative to
source and target (keeping every autocorrelation intact but breaking their
alignment), and the bootstrap resamples contiguous blocks of time. For
trial-structured recordings (``groups``) the trial null permutes the
modulator's trials among trials of the same condition (each trial's time
course kept), and the bootstrap draws whole trials.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass

import numpy as np
from joblib import Parallel, delayed, effective_n_jobs
from scipy.optimize import linear_sum_assignment
from sklearn.base import clone
from sklearn.utils import check_random_state
from tqdm import tqdm

from mics._validation import check_count, check_fraction, check_population, check_same_length
from mics.trials import trial_bootstrap_indices, trial_permutation_indices

__all__ = ["ModulationTest", "test_modulation", "bootstrap_channels"]


@dataclass
class ModulationTest:
    """Result of :func:`test_modulation`.

    Attributes
    ----------
    statistic : float
        Largest cross-validated NSE improvement of a model with channels
        over the baseline-plus-additive-modulator model, among the channel
        counts ``K >= 1`` the estimator scored (``K = 1 .. max_channels``
        with ``channel_search="grid"``; up to the first count that stops
        improving with the default sequential search); negative when every
        channel model predicts worse.
    selected_improvement : float
        Improvement of the model the one-SEM rule selected (0 when it
        selected no channel).
    null_distribution : ndarray of shape (n_permutations,)
    p_value : float
        ``(1 + #{null >= statistic}) / (1 + n_permutations)``.
    n_channels : int
        Channels selected on the real data.
    shifts : ndarray of shape (n_permutations,)
        Circular shifts (samples) of the circular null; empty for the trial null.
    null : str
        Which null was used: ``"circular"`` or ``"trial"``.
    permutations : ndarray of shape (n_permutations, n_trials) or None
        For the trial null, the trial each null trial's modulator came from.
    """

    statistic: float
    selected_improvement: float
    null_distribution: np.ndarray
    p_value: float
    n_channels: int
    shifts: np.ndarray
    null: str = "circular"
    permutations: np.ndarray | None = None

    def __repr__(self):
        return (
            f"ModulationTest(statistic={self.statistic:.4g}, p_value={self.p_value:.4g}, "
            f"n_channels={self.n_channels}, n_permutations={self.null_distribution.size}, "
            f"null={self.null!r})"
        )


def _check_data(X, Y, Z):
    """Finite arrays on one time axis (Z, and Y when 1-D, keep their shape)."""
    Xv, _ = check_population(X, "source X")
    Yv, _ = check_population(Y, "target Y", allow_1d=True)
    Zv, _ = check_population(Z, "modulator Z", allow_1d=True)
    check_same_length(**{"source X": Xv, "target Y": Yv, "modulator Z": Zv})
    return Xv, np.asarray(Y, dtype=float), np.asarray(Z, dtype=float)


def _improvement(estimator, X, Y, Z, groups=None, cv_only=False):
    """Best CV improvement of a channel model over K=0 (baseline with additive Z).

    The improvement of the *selected* model is zero whenever the one-SEM
    rule picks K=0, so its null distribution is a spike at zero and the
    p-value would only restate the selection. The best improvement over
    ``K >= 1`` is continuous, and the same procedure applied to shifted data
    gives its null. ``cv_only`` skips the final fit on all samples, which a
    null statistic does not use (the returned model then has
    ``cv_results_`` only).
    """
    model = clone(estimator).set_params(n_channels=None, verbose=0, n_jobs=1)
    model._cv_only = cv_only
    model.fit(X, Y, Z, groups=groups)
    return _best_gain(model), model


def _best_gain(model):
    """CV loss of K = 0 minus the best CV loss over the scored K >= 1 (the test statistic)."""
    loss = model.cv_results_["n_channels_mean_loss"]
    return float(loss[0] - np.min(loss[1:]))


def _lazy_data(X, Y, Z):
    """Chunked inputs as aligned Dask arrays (labels dropped; Z always 2-D)."""
    from mics._labels import unwrap
    from mics.chunked import lazy_inputs

    X, Y, Z = (unwrap(a, name)[0] for a, name in ((X, "X"), (Y, "Y"), (Z, "Z")))
    X, Y, Z, _ = lazy_inputs(X, Y, Z)
    return X, Y, Z


def _roll_lazy(Z, shift, axis=0):
    import dask.array as da

    return da.roll(Z, int(shift), axis=axis)


def _improvement_from_moments(estimator, moments):
    """:func:`_improvement` of one data set given its fold moments (a Dask task)."""
    model = clone(estimator).set_params(n_channels=None, verbose=0, n_jobs=1)
    model._cv_only = True
    total, folds = moments
    model._fit_raw_moments(total, folds, False)
    return _best_gain(model), None


def _chunked_nulls(fixed, X, Y, Z, nulls, groups, n_jobs):
    """Null statistics of chunked data: per shifted data set, one Dask graph
    (its fold moments, then the selection as a task on them)."""
    import dask

    from mics.chunked import compute_in_batches, default_batch, fold_moments_delayed
    from mics.parallel import _first_block_shifts
    from mics.trials import cv_splits

    splits = cv_splits(fixed.cv, X.shape[0], gap=fixed.gap, groups=groups)
    # One set of shifts for every null data set: the shifted modulator has
    # the same columns, and the moments are centred exactly afterwards.
    shifts = _first_block_shifts(X, Y, Z)
    task = dask.delayed(_improvement_from_moments, pure=True)
    tasks = (task(fixed, fold_moments_delayed(X, Y, Zs, splits, shifts)) for Zs in nulls)
    return compute_in_batches(tasks, default_batch(n_jobs), "null data sets", 0)


# pytest would collect a module-level function named test_*; say it is not a test.
def test_modulation(
    estimator,
    X,
    Y,
    Z,
    *,
    n_permutations=100,
    min_shift=None,
    groups=None,
    conditions=None,
    null=None,
    n_jobs=None,
    verbose=1,
    random_state=None,
    stop_after=None,
):
    """Permutation test for the presence of modulation (circular or trial null).

    The circular null shifts the modulator in time relative to source and
    target, which keeps every autocorrelation and breaks any gating. The
    trial null (trial-structured recordings) gives each trial the modulator
    time course of another trial of the same condition, which keeps the
    within-trial autocorrelation and any stimulus-locked modulator response
    and breaks the trial-to-trial pairing. Either way the additive effect
    of the modulator on the target is first regressed out (with the true
    alignment) so that the null differs from the data in the gating only.
    Cross-validation folds hold out whole trials when trial ids are known.

    Parameters
    ----------
    estimator : MICs
        Its ``rank`` is fixed to the rank selected on the real data for the
        null fits (the shift does not touch the source-target relation).
        Its ``channel_search`` decides which channel counts the statistic
        looks at: with "sequential" (the default) K = 2 only if K = 1
        improved on K = 0, with "grid" every K up to ``max_channels``. Both
        tests are exact; "grid" costs more on null data and keeps the power
        against gating that needs two channels to beat none
        (``results/park2024/channel_search.md``).
    X : array-like of shape (n_samples, n_source)
    Y : array-like of shape (n_samples, n_target)
    Z : array-like of shape (n_samples, n_modulators) or (n_samples,)
    n_permutations : int
    min_shift : int, optional
        Smallest circular shift in samples; choose it longer than the
        autocorrelation of the signals. Defaults to a tenth of the samples.
        Circular null only.
    groups : array-like of shape (n_samples,), optional
        Trial id of every sample; taken from a ``trial`` coordinate of a
        labelled input when not given.
    conditions : array-like of shape (n_samples,) or str, optional
        Condition of every sample (constant within a trial, e.g. grating
        direction), or the name of such a coordinate of a labelled input:
        the trial null permutes trials within conditions. None permutes
        among all trials (only valid when nothing stimulus-locked is left,
        e.g. after :func:`mics.preprocessing.subtract_condition_means`).
    null : {"circular", "trial"}, optional
        Default: ``"trial"`` when trial ids are known, else ``"circular"``.
    n_jobs : int, optional
        Parallel null fits (joblib; use a Dask backend to spread them out).
    verbose : int
    random_state : int or RandomState
    stop_after : int, optional
        Sequential Monte-Carlo test (Besag & Clifford 1991): the shifts are
        evaluated in their drawn order and the test stops as soon as
        ``stop_after`` null statistics reach the observed one, with the exact
        p-value ``stop_after / L`` (``L`` shifts evaluated). A clearly null
        result then costs about ``stop_after / p`` fits instead of
        ``n_permutations``; when fewer than ``stop_after`` exceedances occur
        the test runs to the end and the p-value is the usual one, so small
        p-values are exactly those of the full test. Off by default
        (``None``: all shifts run). ``shifts`` and ``null_distribution``
        then hold the evaluated shifts only.

    Returns
    -------
    ModulationTest
    """
    from mics.chunked import any_chunked
    from mics.trials import check_groups, trial_coordinate

    rng = check_random_state(random_state)
    n_permutations = check_count(n_permutations, "n_permutations", 1)
    if stop_after is not None:
        stop_after = check_count(stop_after, "stop_after", 1)
    if groups is None:
        groups = trial_coordinate(X, Y, Z)
    if isinstance(conditions, str):
        conditions = _coordinate(conditions, X, Y, Z)
    chunked = any_chunked(X, Y, Z)
    if chunked:
        X, Y, Z = _lazy_data(X, Y, Z)
    else:
        X, Y, Z = _check_data(X, Y, Z)
    n = X.shape[0]
    groups = check_groups(groups, n)
    null = _check_null(null, groups)
    if null == "circular":
        if min_shift is None:
            min_shift = max(1, n // 10)
        if n < 2:
            raise ValueError(f"a circular-shift test needs at least 2 samples, got {n}.")
        min_shift = check_count(min_shift, "min_shift", 1, n // 2)
    # The null hypothesis is "no gating", not "no modulator effect at all": the
    # additive effect of Z on the target is a nuisance to keep. Shifting Z
    # would also destroy it, leave more residual variance to every null fit,
    # make channel models overfit more there and the observed statistic look
    # large (an anti-conservative test). So the additive effect is removed
    # once, with the real alignment, before anything is shifted (as
    # Freedman & Lane permute under the reduced model).
    if chunked:
        from mics.chunked import residualize

        Y = residualize(Y, Z)
    else:
        design = np.column_stack([np.ones(n), Z.reshape(n, -1)])
        Y = np.asarray(Y, dtype=float)
        Y = Y - design @ np.linalg.lstsq(design, Y, rcond=None)[0]
    observed, model = _improvement(estimator, X, Y, Z, groups)
    res = model.cv_results_
    selected = float(
        res["n_channels_mean_loss"][0] - res["n_channels_mean_loss"][res["n_channels_best_index"]]
    )
    fixed = clone(estimator).set_params(rank=model.rank_)
    roll = _roll_lazy if chunked else np.roll
    if null == "circular":
        shifts = rng.randint(min_shift, n - min_shift + 1, size=n_permutations)
        nulls = (roll(Z, s, axis=0) for s in shifts)
        perms = None
    else:
        shifts = np.zeros(0, dtype=int)
        idxs = [trial_permutation_indices(groups, rng, conditions) for _ in range(n_permutations)]
        starts = np.flatnonzero(np.r_[True, groups[1:] != groups[:-1]])
        perms = np.array([groups[i[starts]] for i in idxs]).reshape(n_permutations, -1)
        nulls = (Z[i] for i in idxs)
    if chunked:
        results = _chunked_nulls(fixed, X, Y, Z, nulls, groups, n_jobs)
    else:
        jobs = (delayed(_improvement)(fixed, X, Y, Zs, groups, True) for Zs in nulls)
        results = _ordered_results(jobs, n_jobs, stoppable=stop_after is not None)
    null_dist = _collect_null(results, observed, n_permutations, stop_after, verbose)
    shifts = shifts[: null_dist.size]
    if perms is not None:
        perms = perms[: null_dist.size]
    p = _monte_carlo_p_value(null_dist, observed, n_permutations, stop_after)
    return ModulationTest(
        observed, selected, null_dist, float(p), model.n_channels_, shifts, null, perms
    )


test_modulation.__test__ = False


def _ordered_results(jobs, n_jobs, stoppable):
    """Results of joblib ``jobs`` in submission order, lazily.

    A test that may stop early runs whole batches of ``4 * n_jobs`` jobs,
    one ``Parallel`` call each on the same workers: dropping a joblib result
    generator mid-way aborts it, which kills the loky worker processes and
    makes the next test pay for new ones (a new interpreter importing numpy,
    scipy and numba each time). At most a batch of fits beyond the stopping
    point is wasted, and which fits are used does not change.
    """
    if not stoppable or effective_n_jobs(n_jobs) == 1:
        yield from Parallel(n_jobs=n_jobs, return_as="generator")(jobs)
        return
    batch = 4 * effective_n_jobs(n_jobs)
    with Parallel(n_jobs=n_jobs) as parallel:
        while chunk := list(itertools.islice(jobs, batch)):
            yield from parallel(chunk)


def _collect_null(results, observed, n_permutations, stop_after, verbose):
    """Null statistics in the shifts' order, stopping after ``stop_after`` exceedances.

    Results are consumed in submission order, so where the sequential test
    stops does not depend on ``n_jobs``.
    """
    null = []
    exceed = 0
    bar = tqdm(results, total=n_permutations, desc="permutations", disable=not verbose)
    for r in bar:
        null.append(r[0])
        exceed += r[0] >= observed
        if stop_after is not None and exceed >= stop_after:
            break
    bar.close()
    return np.asarray(null, dtype=float)


def _monte_carlo_p_value(null, observed, n_permutations, stop_after):
    """``(1 + #{null >= observed}) / (1 + n)``, or Besag-Clifford's ``h / L`` when stopped early.

    Parameters
    ----------
    null : ndarray of shape (L,)
        Null statistics evaluated (``L <= n_permutations``).
    observed : float
    n_permutations : int
    stop_after : int or None
        ``h`` of the sequential test.

    Returns
    -------
    p_value : float
    """
    exceed = int(np.sum(null >= observed))
    if stop_after is not None and exceed >= stop_after:
        return stop_after / null.size
    return (1 + exceed) / (1 + n_permutations)


def _check_null(null, groups):
    if null is None:
        return "circular" if groups is None else "trial"
    if null not in ("circular", "trial"):
        raise ValueError(f"null must be 'circular' or 'trial', got {null!r}.")
    if null == "trial" and groups is None:
        raise ValueError(
            "null='trial' needs trial ids: pass groups= or labelled inputs with a 'trial' "
            "coordinate."
        )
    return null


def _coordinate(name, *arrays):
    """A named coordinate along time of the first labelled input that has it."""
    from mics.trials import trial_coordinate

    values = trial_coordinate(*arrays, coord=name)
    if values is None:
        raise ValueError(
            f"conditions={name!r} names no coordinate along 'time' of the labelled inputs."
        )
    return values


def _block_indices(n, block_length, rng):
    starts = rng.randint(0, n - block_length + 1, size=int(np.ceil(n / block_length)))
    return np.concatenate([np.arange(s, s + block_length) for s in starts])[:n]


def _align(reference, model):
    """Permutation and signs matching a bootstrap fit's channels to the reference."""
    # np.asarray: a reference fitted on labelled inputs has DataArray patterns.
    sim = (
        (np.asarray(reference.source_patterns_).T @ model.source_patterns_)
        * (np.asarray(reference.target_patterns_).T @ model.target_patterns_)
        * (np.asarray(reference.modulator_patterns_).T @ model.modulator_patterns_)
    )
    rows, cols = linear_sum_assignment(-np.abs(sim))
    order = np.empty(reference.n_channels_, dtype=int)
    order[rows] = cols
    return order


def _boot_fit(estimator, X, Y, Z, idx, seed, groups=None):
    m = clone(estimator).set_params(random_state=seed, verbose=0, n_jobs=1)
    return m.fit(X[idx], Y[idx], Z[idx], groups=groups)


def _boot_from_moments(estimator, moments, seed):
    """:func:`_boot_fit` given the resample's moments (a Dask task)."""
    m = clone(estimator).set_params(random_state=seed, verbose=0, n_jobs=1)
    total, _ = moments
    return m._fit_raw_moments(total, None, False)


def _chunked_boot_fits(fixed, X, Y, Z, draws_idx, seeds, n_jobs, verbose):
    """Bootstrap fits of chunked data: each resample's moments where the data
    live, its fit as a task on them (fixed rank and channels need no folds)."""
    import dask

    from mics.chunked import _rows, compute_in_batches, default_batch, fold_moments_delayed
    from mics.parallel import _first_block_shifts

    shifts = _first_block_shifts(X, Y, Z)
    task = dask.delayed(_boot_from_moments, pure=True)
    tasks = (
        task(fixed, fold_moments_delayed(*(_rows(a, i) for a in (X, Y, Z)), None, shifts), s)
        for (i, _), s in zip(draws_idx, seeds, strict=True)
    )
    return compute_in_batches(tasks, default_batch(n_jobs), "bootstrap", verbose)


def bootstrap_channels(
    model,
    X,
    Y,
    Z,
    *,
    n_boot=100,
    block_length=None,
    groups=None,
    confidence=0.95,
    n_jobs=None,
    verbose=1,
    random_state=None,
):
    """Block-bootstrap confidence intervals for the channels of a fitted model.

    Each resample concatenates contiguous blocks (whole trials when trial
    ids are known) drawn with replacement,
    refits with the model's ranks fixed, and aligns its channels to the
    full-data fit (Hungarian matching on the product of |cosines|); the
    patterns' signs are matched too.

    Parameters
    ----------
    model : fitted MICs
    X, Y, Z : array-like
        The data the model was fitted on.
    n_boot : int
    block_length : int, optional
        Samples per block; default ``sqrt(n_samples)``, rounded. Ignored
        when trials are resampled.
    groups : array-like of shape (n_samples,), optional
        Trial id of every sample: each resample then draws ``n_trials`` whole
        trials with replacement. Taken from a ``trial`` coordinate of a
        labelled input when not given.
    confidence : float
    n_jobs, verbose, random_state
        As in :func:`test_modulation`.

    Returns
    -------
    xarray.Dataset
        ``channel_weights``, ``source_patterns``, ``target_patterns``,
        ``modulator_patterns``, the per-channel decomposition fractions
        (``reshape``, ...) and the whole-tensor ones (``total_reshape``, ...),
        each with a ``bound`` dimension (``low``, ``high``); the raw draws as
        ``*_draws`` with a ``boot`` dimension. Attribute ``resampling`` is
        ``"trial"`` or ``"block"``. Pass it as ``intervals`` to
        :func:`mics.decomposition.summarize`.
    """
    import xarray as xr

    from mics.decomposition import decompose
    from mics.trials import check_groups, trial_coordinate

    rng = check_random_state(random_state)
    n_boot = check_count(n_boot, "n_boot", 1)
    check_fraction(confidence, "confidence")
    from mics.chunked import any_chunked

    if groups is None:
        groups = trial_coordinate(X, Y, Z)
    chunked = any_chunked(X, Y, Z)
    X, Y, Z = _lazy_data(X, Y, Z) if chunked else _check_data(X, Y, Z)
    n = X.shape[0]
    groups = check_groups(groups, n)
    if groups is None:
        if block_length is None:
            block_length = max(1, int(round(np.sqrt(n))))
        block_length = check_count(block_length, "block_length", 1, n)
    fixed = clone(model).set_params(rank=model.rank_, n_channels=model.n_channels_)
    seeds = rng.randint(np.iinfo(np.int32).max, size=n_boot)
    if groups is None:
        draws_idx = [(_block_indices(n, block_length, rng), None) for _ in range(n_boot)]
    else:
        block_length = None
        draws_idx = [trial_bootstrap_indices(groups, rng) for _ in range(n_boot)]
    if chunked:
        fits = list(_chunked_boot_fits(fixed, X, Y, Z, draws_idx, seeds, n_jobs, verbose))
    else:
        jobs = (
            delayed(_boot_fit)(fixed, X, Y, Z, i, s, g)
            for (i, g), s in zip(draws_idx, seeds, strict=True)
        )
        fits = list(
            tqdm(
                Parallel(n_jobs=n_jobs, return_as="generator")(jobs),
                total=n_boot,
                desc="bootstrap",
                disable=not verbose,
            )
        )
    draws = {k: [] for k in ("w", "a", "b", "c", "frac", "total")}
    parts = ("reshape", "private_source", "private_target", "new")
    for f in fits:
        order = _align(model, f)
        a = f.source_patterns_[:, order]
        b = f.target_patterns_[:, order]
        c = f.modulator_patterns_[:, order]
        sa = np.sign(np.sum(a * np.asarray(model.source_patterns_), axis=0))
        sb = np.sign(np.sum(b * np.asarray(model.target_patterns_), axis=0))
        draws["w"].append(f.channel_weights_[order])
        draws["a"].append(a * sa)
        draws["b"].append(b * sb)
        draws["c"].append(c * sa * sb)
        dec = decompose(f)
        draws["frac"].append([dec[p].values[order] for p in parts])
        draws["total"].append([float(dec[f"total_{p}"]) for p in parts])
    ds = xr.Dataset(
        {
            "channel_weights": (("boot", "channel"), np.asarray(draws["w"])),
            "source_patterns": (("boot", "source", "channel"), np.asarray(draws["a"])),
            "target_patterns": (("boot", "target", "channel"), np.asarray(draws["b"])),
            "modulator_patterns": (("boot", "modulator", "channel"), np.asarray(draws["c"])),
        }
    )
    frac = np.asarray(draws["frac"])  # (boot, part, channel)
    total = np.asarray(draws["total"])  # (boot, part)
    for i, p in enumerate(parts):
        ds[p] = (("boot", "channel"), frac[:, i])
        ds[f"total_{p}"] = ("boot", total[:, i])
    lo, hi = (1 - confidence) / 2, 1 - (1 - confidence) / 2
    # Intervals carry the decomposition's own variable names with a `bound`
    # dimension, so `mics.decomposition.summarize(model.decompose(), out)`
    # reports them; the draws stay available with a `_draws` suffix.
    bounds = ds.quantile([lo, hi], dim="boot").rename(quantile="bound")
    out = bounds.assign_coords(bound=["low", "high"])
    out = xr.merge([out, ds.rename({k: f"{k}_draws" for k in ds.data_vars})])
    out.attrs.update(
        confidence=confidence,
        n_boot=n_boot,
        block_length=-1 if block_length is None else block_length,
        resampling="block" if groups is None else "trial",
    )
    return out
