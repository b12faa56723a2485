"""The seam: one place that decides how a data set is held, and answers for it.

Everything above this module (the model, the estimators, the workflows)
sees a :class:`Problem` and asks it questions: its sizes and trial ids,
the raw moments of all samples and of each cross-validation fold, the
target with the modulator's additive effect regressed out, the same data
with a shifted, permuted or resampled modulator, and the results of one
function over many such variants. How each answer is computed depends on
how the data are held:

- :class:`ArrayProblem`: NumPy arrays in memory. Moments come from
  :func:`mics.core.compute_moments`; the data-space solver can work on the
  rows themselves; variants are fitted in parallel with joblib.
- :class:`ChunkedProblem`: Dask arrays (or Dask-backed DataArrays), never
  loaded. Moments come from one pass over the row blocks where the data
  live (:mod:`mics.data.chunked`); each variant becomes one Dask graph whose
  fold moments are handed to the function as a :class:`MomentProblem`.
- :class:`MomentProblem`: precomputed raw moments (a total and, for
  selection, per-fold moments), as from :meth:`mics.MICs.fit_moments`.

A new backend is one subclass here. :func:`make_problem` is the only place
that tells them apart.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from mics.data.chunked import any_chunked
from mics.data.folds import check_groups, cv_splits, groups_from_labels
from mics.data.labels import unwrap
from mics.data.validation import (
    check_modulator,
    check_not_constant,
    check_population,
    check_same_length,
)

__all__ = [
    "Problem",
    "ArrayProblem",
    "ChunkedProblem",
    "MomentProblem",
    "make_problem",
    "concatenate_sessions",
]


@dataclass
class Problem:
    """A data set of source ``X``, target ``Y`` and modulator ``Z``, however it is held.

    Attributes
    ----------
    X : array of shape (n_samples, p)
    Y : array of shape (n_samples, q)
    Z : array of shape (n_samples, m) or None
        Without a modulator the model is a reduced-rank regression.
    groups : ndarray of shape (n_samples,) or None
        Trial codes (consecutive integers), when trial ids are known.
    y_1d : bool
        The target was given as one column (predictions are then 1-D).
    labels : tuple of (LabelInfo or None) * 3 or None
        Labels of labelled inputs (neuron ids, modulator names), to re-wrap outputs.
    Z_fitted : array of shape (n_samples, m) or None
        The modulator's prediction from nuisance variables (the session's
        drift, the source), set by :meth:`conditioned`: its null variants
        then shift or permute only the residual ``Z - Z_fitted``.
    """

    X: Any
    Y: Any
    Z: Any
    groups: np.ndarray | None = None
    y_1d: bool = False
    labels: tuple | None = None
    Z_fitted: Any = None
    conditional: Any = None

    #: Whether the rows are in memory (the data-space solver needs them).
    in_memory = True

    @property
    def n_samples(self):
        return self.X.shape[0]

    @property
    def has_modulator(self):
        return self.Z is not None

    @property
    def shape(self):
        """``(n_samples, p, q, m)``."""
        m = 0 if self.Z is None else self.Z.shape[1]
        return self.X.shape[0], self.X.shape[1], self.Y.shape[1], m

    def splits(self, cv, gap=0):
        """Train/test index pairs of ``cv`` (whole trials when trial ids are known)."""
        return list(cv_splits(cv, self.n_samples, gap=gap, groups=self.groups))

    def unlabelled(self):
        """The problem without the inputs' labels (fits of it return plain arrays)."""
        return replace(self, labels=None)

    def with_modulator(self, Z):
        """The same source and target with another modulator (a null data set)."""
        return replace(self, Z=Z)

    def fold_moments(self, splits, interaction=True, keep=True):  # pragma: no cover - abstract
        """Raw moments of all samples and, per fold, of its held-out and excluded rows.

        Parameters
        ----------
        splits : list of (train, test) or None
            None: the total only (``folds`` is then None).
        interaction : bool
            False for linear moments only (:class:`mics.core.RawLinearMoments`).
        keep : bool
            False: hold no fold's moments, but compute each when the fold is
            read (in memory; the same values): with thousands of neurons
            the interaction moments of ``cv`` folds would not fit in memory
            together. Other backends may ignore it.

        Returns
        -------
        total : RawMoments or RawLinearMoments
        folds : sequence of (train, test, test_moments, excluded_moments) or None
        """
        raise NotImplementedError

    def residualized(self, nonlinear=False, extra=None):  # pragma: no cover - abstract
        """The problem with ``Y`` replaced by its residual on ``[1, Z]`` (least squares).

        ``nonlinear=True`` adds hinge functions of each modulator column at its
        quartile-like knots (:func:`mics.core.conditioning.modulator_hinges`):
        a piecewise-linear additive effect of each modulator is regressed out.
        ``extra``: further columns of the design (list of (n_samples, 1)
        arrays, e.g. :meth:`reduced_source_terms`).
        """
        raise NotImplementedError

    def reduced_source_terms(self, k=3, drift_df=1):
        """Columns of a quadratic, drifting source -> target map (:func:`source_terms`).

        The ``k`` leading communicated components of the source (reduced-rank
        regression of this problem's target on its source), their pairwise
        products and, with ``drift_df > 1``, their products with the drift
        basis: a reduced model that absorbs a nonlinear source -> target map
        and a coupling that drifts over the session, which a gate by a
        modulator that the source or the session predicts would otherwise
        take credit for.
        """
        from mics.core.conditioning import (
            communicated_directions,
            drift_basis,
            session_position,
            source_terms,
        )

        total = self._source_target_sums()
        n = total.n
        Sxx = total.Sxx - np.outer(total.sx, total.sx) / n
        Sxy = total.Sxy - np.outer(total.sx, total.sy) / n
        k = min(k, Sxx.shape[0], Sxy.shape[1])
        W = communicated_directions(Sxx, Sxy, n, k)
        components = (self.X - (total.x_shift + total.sx / n)) @ W
        basis = drift_basis(session_position(n, self.groups), drift_df) if drift_df > 1 else None
        return source_terms(components, basis)

    def quadratic_source_terms_count(self, k=3):
        """How many of :meth:`reduced_source_terms` come first as pairwise products."""
        k = min(k, self.shape[1], self.shape[2])
        return k * (k + 1) // 2

    def rolled(self, shift):  # pragma: no cover - abstract
        """The problem with ``Z`` shifted circularly by ``shift`` samples."""
        raise NotImplementedError

    def permuted(self, index):
        """The problem with ``Z`` reordered by ``index`` (a trial permutation).

        After :meth:`conditioned`, only the residual is reordered:
        ``Z_fitted + (Z - Z_fitted)[index]``.
        """
        if self.Z_fitted is None:
            return self.with_modulator(self.Z[index])
        residual = self.Z - self.Z_fitted
        return self.with_modulator(self.Z_fitted + self._unpredicted(residual[index]))

    def _unpredicted(self, v):
        """``v`` minus the conditional fit of it (same design, same penalty).

        The recorded residual ``Z - Z_fitted`` is what the fit leaves: (nearly)
        orthogonal to the drift basis and the source in sample. A permuted or
        shifted residual is not, and its chance correlation with the source
        would enter a null modulator, which the recorded one lacks; taking the
        fit out of it again treats the null copies like the recording (without
        it the test over-rejected where the source predicts most of the
        modulator, ``results/null_families/``).
        """
        fit, G, S = self.conditional
        Xv = S.T @ v if S is not None else None
        gamma, beta = fit.coefficients(G.T @ v, Xv)
        out = v - G @ gamma
        return out - S @ beta if S is not None else out

    def conditioned(self, splits, *, source=True, drift_df=5):
        """The problem whose null variants keep what the source and the drift predict of ``Z``.

        The modulator is split into its prediction from a smooth function of
        the session position (:func:`mics.core.conditioning.drift_basis` with
        ``drift_df`` functions; per trial when trial ids are known) and, with
        ``source``, a ridge regression on the source (penalty chosen on
        ``splits``), and the residual. :meth:`rolled` and :meth:`permuted`
        then move the residual only.

        Parameters
        ----------
        splits : list of (train, test)
            Folds on which the ridge penalty is chosen (the model's folds).
        source : bool
            Condition on the source.
        drift_df : int
            Drift basis functions; 1 conditions on nothing slow (a constant).

        Returns
        -------
        problem : Problem
            With ``Z_fitted`` set.
        fit : mics.core.conditioning.ConditionalFit
            The coefficients and how much of ``Z`` each part predicts.
        """
        from mics.core.conditioning import conditional_ridge, drift_basis, session_position

        if not self.in_memory and not isinstance(self, ChunkedProblem):
            raise ValueError("a problem of moments has no rows to condition the modulator on.")
        n = self.n_samples
        G = drift_basis(session_position(n, self.groups), drift_df)
        S = self._source_design() if source else None
        p = 0 if S is None else S.shape[1]
        total, folds = self._cross_products(G, S, splits)
        units = n if self.groups is None else int(np.unique(self.groups).size)
        fit = conditional_ridge(total, n, folds, G.shape[1], p, use_source=source, n_units=units)
        fitted = G @ fit.coef_drift
        if source:
            fitted = fitted + S @ fit.coef_source
        return replace(self, Z_fitted=fitted, conditional=(fit, G, S)), fit

    def _source_design(self):
        """The source as the modulator's predictor: its samples and, with trials, trial means.

        A trial-level state (arousal, running) is read better from a whole
        trial of source activity than from one sample; a residual that still
        carries it would be permuted away from the source it depends on.
        """
        if self.groups is None or not _TRIAL_MEANS:
            return self.X
        return self._with_trial_means()

    def target_sum_of_squares(self):  # pragma: no cover - abstract
        """``sum(Y ** 2)`` (of a residualised target: its residual sum of squares)."""
        raise NotImplementedError

    def modulator_energy(self):  # pragma: no cover - abstract
        """Per sample, the squares of the modulator's columns summed, each in units of its spread.

        Returns
        -------
        ndarray of shape (n_samples,)
            ``sum_j ((z_j - mean_j) / sd_j) ** 2`` (a constant column adds 0).
        """
        raise NotImplementedError

    def _source_target_sums(self):
        """Sums of the source and target (``RawLinearMoments``-like: ``n``, ``sx``, ``Sxx``...)."""
        total, _ = self.fold_moments(None, interaction=False)
        return total

    def _with_trial_means(self):  # pragma: no cover - abstract
        """``[X, X_bar]``: each sample beside the mean of its trial."""
        raise NotImplementedError

    def _cross_products(self, G, S, splits):
        """``A^T A`` of ``A = [G, S, Z]`` (``S`` the source design, or none): total and folds."""
        parts = [G, self.Z] if S is None else [G, S, self.Z]
        A = np.column_stack([np.asarray(a, dtype=float) for a in parts])
        folds = [(A[test].T @ A[test], len(test)) for _, test in splits]
        return A.T @ A, folds

    def resampled(self, index, groups=None):  # pragma: no cover - abstract
        """Rows ``index`` of every array (a bootstrap draw), with the draw's trial ids."""
        raise NotImplementedError

    def map(
        self,
        func,
        items,
        *,
        splits=None,
        n_jobs=None,
        desc="",
        verbose=0,
        ordered=False,
        total=None,
    ):  # pragma: no cover - abstract
        """``func(problem, *args)`` for each item ``problem`` or ``(problem, *args)`` of ``items``.

        The problems are variants of this one (a shifted modulator, a
        resample). Results come in the order of ``items``, lazily: a caller
        may stop consuming them early (the sequential test). ``splits`` are
        the folds whose moments ``func`` may ask of its problem; ``ordered``
        says the caller may stop early (see :func:`_ordered_results`).
        """
        raise NotImplementedError


@dataclass
class ArrayProblem(Problem):
    """NumPy arrays in memory."""

    def fold_moments(self, splits, interaction=True, keep=True):
        from mics.core.stats import compute_moments

        X, Y, Z = self.X, self.Y, self.Z
        if splits is None:
            return compute_moments(X, Y, Z, interaction=interaction), None
        n = X.shape[0]
        shifts = (X.mean(axis=0), Z.mean(axis=0), Y.mean(axis=0))
        splits = list(splits)
        folds = _ArrayFolds(self, splits, shifts, interaction)
        if keep:
            folds = list(folds)
        # When the held-out blocks partition the samples (K-fold without a
        # gap), the total is the sum of the blocks: one pass over the data
        # (block by block when the folds are not kept: the same sums).
        tests = np.sort(np.concatenate([t for _, t in splits]))
        if np.array_equal(tests, np.arange(n)):
            total = None
            for fold in folds:
                total = fold[2] if total is None else total + fold[2]
        else:
            total = compute_moments(X, Y, Z, shifts=shifts, interaction=interaction)
        return total, folds

    def target_sum_of_squares(self):
        return float(np.sum(np.asarray(self.Y, dtype=np.float64) ** 2))

    def modulator_energy(self):
        return _standardised_squares(np.asarray(self.Z, dtype=np.float64))

    def residualized(self, nonlinear=False, extra=None):
        from mics.core.conditioning import hinge_knots, modulator_hinges

        n = self.n_samples
        Z = self.Z.reshape(n, -1)
        hinges = modulator_hinges(Z, hinge_knots(Z)) if nonlinear else np.zeros((n, 0))
        design = np.column_stack([np.ones(n), Z, hinges, *(extra or [])])
        Y = self.Y - design @ np.linalg.lstsq(design, self.Y, rcond=None)[0]
        return replace(self, Y=Y)

    def rolled(self, shift):
        if self.Z_fitted is None:
            return self.with_modulator(np.roll(self.Z, shift, axis=0))
        residual = np.roll(self.Z - self.Z_fitted, shift, axis=0)
        return self.with_modulator(self.Z_fitted + self._unpredicted(residual))

    def resampled(self, index, groups=None):
        # a resample is a new data set: its own null would condition afresh
        return replace(
            self,
            X=self.X[index],
            Y=self.Y[index],
            Z=self.Z[index],
            groups=groups,
            Z_fitted=None,
            conditional=None,
        )

    def _with_trial_means(self):
        codes, counts = _trial_codes(self.groups)
        sums = np.zeros((counts.size, self.X.shape[1]))
        np.add.at(sums, codes, self.X)
        return np.hstack([self.X, (sums / counts[:, None])[codes]])

    def map(
        self,
        func,
        items,
        *,
        splits=None,
        n_jobs=None,
        desc="",
        verbose=0,
        ordered=False,
        total=None,
    ):
        from joblib import delayed
        from tqdm import tqdm

        jobs = (delayed(func)(*_args(item)) for item in items)
        results = _ordered_results(jobs, n_jobs, stoppable=ordered)
        if desc:
            results = tqdm(results, total=total, desc=desc, disable=not verbose)
        return results


@dataclass
class ChunkedProblem(Problem):
    """Dask arrays, aligned on their row blocks; nothing is loaded."""

    in_memory = False

    def fold_moments(self, splits, interaction=True, keep=True):
        from mics.data.chunked import fold_moments

        if not interaction:
            raise ValueError("chunked inputs are fitted from interaction moments only.")
        return fold_moments(self.X, self.Y, self.Z, splits)

    def xy_fold_sums(self, splits):
        """Sums and scatters of source and target, total and per fold (no modulator).

        Returns
        -------
        total : tuple
        folds : list of (test_sums, excluded_sums)
        shifts : tuple of (x_shift, y_shift)
        """
        from mics.data.chunked import xy_fold_moments

        return xy_fold_moments(self.X, self.Y, splits)

    def target_sum_of_squares(self):
        from mics.data.chunked import compute_unoptimised

        (total,) = compute_unoptimised((self.Y.astype(np.float64) ** 2).sum())
        return float(total)

    def modulator_energy(self):
        from mics.data.chunked import compute_unoptimised

        (energy,) = compute_unoptimised(_standardised_squares(self.Z.astype(np.float64)))
        return np.asarray(energy)

    def residualized(self, nonlinear=False, extra=None):
        import dask.array as da

        from mics.data.chunked import modulator_design, residualize

        design = modulator_design(self.Z) if nonlinear else self.Z
        if extra:
            design = da.concatenate([design, *extra], axis=1)
        # on the target's row blocks (the extra columns come from the source's)
        design = design.rechunk((self.Y.chunks[0], -1))
        return replace(self, Y=residualize(self.Y, design))

    def rolled(self, shift):
        import dask.array as da

        if self.Z_fitted is None:
            return self.with_modulator(da.roll(self.Z, int(shift), axis=0))
        residual = da.roll(self.Z - self.Z_fitted, int(shift), axis=0)
        return self.with_modulator(self.Z_fitted + self._unpredicted(residual))

    def resampled(self, index, groups=None):
        from mics.data.chunked import rows

        X, Y, Z = (rows(a, index) for a in (self.X, self.Y, self.Z))
        return replace(self, X=X, Y=Y, Z=Z, groups=groups, Z_fitted=None, conditional=None)

    def _source_target_sums(self):
        from mics.data.chunked import xy_fold_moments

        total, _, _ = xy_fold_moments(self.X, self.Y, [])
        return total

    def _with_trial_means(self):
        from mics.data.chunked import with_trial_means

        return with_trial_means(self.X, *_trial_codes(self.groups))

    def _cross_products(self, G, S, splits):
        import dask.array as da

        from mics.data.chunked import compute_unoptimised

        chunks = (self.X.chunks[0], G.shape[1])
        parts = [da.from_array(G, chunks=chunks), self.Z]
        A = da.concatenate(parts if S is None else [parts[0], S, parts[1]], axis=1)
        products = [A[test].T @ A[test] for _, test in splits]
        total, *folds = compute_unoptimised(A.T @ A, *products)
        return np.asarray(total), [
            (np.asarray(f), len(t)) for f, (_, t) in zip(folds, splits, strict=True)
        ]

    def map(
        self,
        func,
        items,
        *,
        splits=None,
        n_jobs=None,
        desc="",
        verbose=0,
        ordered=False,
        total=None,
    ):
        import dask

        from mics.data.chunked import (
            compute_in_batches,
            default_batch,
            first_block_shifts,
            fold_moments_delayed,
        )

        # One set of shifts for every variant: they have the same columns,
        # and their moments are centred exactly afterwards.
        shifts = first_block_shifts(self.X, self.Y, self.Z)
        task = dask.delayed(_on_moments, pure=True)
        tasks = (
            task(func, fold_moments_delayed(p.X, p.Y, p.Z, splits, shifts), p.groups, p.y_1d, *a)
            for p, *a in map(_args, items)
        )
        return compute_in_batches(tasks, default_batch(n_jobs), desc, verbose)


@dataclass
class MomentProblem(Problem):
    """Precomputed raw moments: a total, and per-fold moments for selection.

    ``X``, ``Y`` and ``Z`` are None; ``total`` and ``folds`` answer
    :meth:`fold_moments` (whatever splits are asked for: the folds were
    fixed when the moments were computed).
    """

    total: Any = None
    folds: list | None = None
    in_memory = False

    @property
    def n_samples(self):
        return self.total.n

    @property
    def has_modulator(self):
        return True

    @property
    def shape(self):
        t = self.total
        return t.n, t.x_shift.size, t.y_shift.size, t.z_shift.size

    def splits(self, cv, gap=0):
        return None  # the folds were fixed when the moments were computed

    def fold_moments(self, splits=None, interaction=True, keep=True):
        return self.total, self.folds


#: Whether the conditional null's source design adds each trial's mean (a
#: trial-level state is read from the whole trial; without them the null's
#: residual kept part of what the source predicts, results/null_families/).
_TRIAL_MEANS = True


def _standardised_squares(Z):
    """``sum_j ((z_j - mean_j) / sd_j) ** 2`` per row, for NumPy or Dask ``Z`` (lazy for Dask)."""
    centred = Z - Z.mean(axis=0)
    sd = centred.std(axis=0)
    scale = 1.0 / (sd + (sd == 0))  # a constant column stays 0
    return ((centred * scale) ** 2).sum(axis=1)


def _trial_codes(groups):
    """Trial codes 0 .. n_trials - 1 and the samples per trial."""
    _, codes = np.unique(groups, return_inverse=True)
    return codes, np.bincount(codes)


class _ArrayFolds(Sequence):
    """Fold moments of arrays in memory, computed each time a fold is read.

    ``folds[i]`` is ``(train, test, test_moments, excluded_moments)``, as
    :meth:`Problem.fold_moments` returns them; reading the folds one after
    the other holds one fold's moments at a time, whatever the number of
    folds (each read costs a pass over that fold's rows: about one pass over
    the data per stage of a selection).
    """

    def __init__(self, problem, splits, shifts, interaction):
        self.problem, self.splits = problem, splits
        self.shifts, self.interaction = shifts, interaction

    def __len__(self):
        return len(self.splits)

    def __getitem__(self, i):
        if isinstance(i, slice):
            return [self[j] for j in range(*i.indices(len(self)))]
        from mics.core.stats import compute_moments

        X, Y, Z = self.problem.X, self.problem.Y, self.problem.Z
        train, test = self.splits[i]
        excluded = np.setdiff1d(np.arange(X.shape[0]), train, assume_unique=True)
        kw = {"shifts": self.shifts, "interaction": self.interaction}
        test_m = compute_moments(X[test], Y[test], Z[test], **kw)
        if np.array_equal(excluded, np.sort(test)):
            excl_m = test_m
        else:
            excl_m = compute_moments(X[excluded], Y[excluded], Z[excluded], **kw)
        return train, test, test_m, excl_m


def _args(item):
    return item if isinstance(item, tuple) else (item,)


def _on_moments(func, moments, groups, y_1d, *args):
    """Run ``func`` on a variant of a chunked problem, given its computed fold moments."""
    total, folds = moments
    return func(
        MomentProblem(None, None, None, groups, y_1d, None, total=total, folds=folds), *args
    )


def _ordered_results(jobs, n_jobs, stoppable):
    """Results of joblib ``jobs`` in submission order, lazily.

    A run that may stop early (the sequential test) runs whole batches of
    ``4 * n_jobs`` jobs, one ``Parallel`` call each on the same workers:
    dropping a joblib result generator mid-way aborts it, which kills the
    loky worker processes and makes the next call pay for new ones (a new
    interpreter importing numpy, scipy and numba each time). At most a batch
    of fits beyond the stopping point is wasted, and which fits are used
    does not change.
    """
    from joblib import Parallel, effective_n_jobs

    if not stoppable or effective_n_jobs(n_jobs) == 1:
        yield from Parallel(n_jobs=n_jobs, return_as="generator")(jobs)
        return
    batch = 4 * effective_n_jobs(n_jobs)
    with Parallel(n_jobs=n_jobs) as parallel:
        while chunk := list(itertools.islice(jobs, batch)):
            yield from parallel(chunk)


def make_problem(X, y, Z=None, *, groups=None, validate=None, quality=None):
    """The :class:`Problem` of the inputs: labels unwrapped, checked, in memory or chunked.

    Every entry point of the package (fits, tests, bootstraps, power
    analyses, chunked inputs) builds its data set here, so the data-quality
    check runs here, once per call (:mod:`mics.data.quality`): artifact
    frames, single extreme samples and modulator glitches are named in a
    :class:`~mics.data.quality.DataQualityWarning`.

    Parameters
    ----------
    X : array-like, Dask array or DataArray of shape (n_samples, p)
        Source activity.
    y : array-like, Dask array or DataArray of shape (n_samples, q) or (n_samples,)
        Target activity.
    Z : array-like, Dask array or DataArray of shape (n_samples, m) or (n_samples,), optional
        Modulator.
    groups : array-like of shape (n_samples,), optional
        Trial ids; taken from a ``trial`` coordinate of labelled inputs when not given.
    validate : callable, optional
        ``validate(X, y) -> (X, Y, y_1d)`` for in-memory source and target
        (an estimator's own check, which records ``n_features_in_``); by
        default each is checked as a population.
    quality : {"warn", "raise", "ignore"}, bool, QualityThresholds or None
        The data-quality check: warn about what it finds (default), raise a
        ValueError, or skip it (``"ignore"`` or False); thresholds make it
        warn with those. None: the settings of
        :func:`mics.data.quality.quality_checks` (warn, default thresholds,
        unless changed).

    Returns
    -------
    ArrayProblem or ChunkedProblem
        Chunked when any input is a Dask array (then every input is treated
        lazily). Arrays are float64; ``Z`` is 2-D.
    """
    X, ix = unwrap(X, "X")
    y, iy = unwrap(y, "Y")
    Z, iz = unwrap(Z, "Z") if Z is not None else (None, None)
    labels = (ix, iy, iz) if any(i is not None for i in (ix, iy, iz)) else None
    if any_chunked(X, y, Z):
        from mics.data.chunked import as_dask, lazy_inputs

        if y is None:
            raise ValueError("the target y is None; pass the target population.")
        if Z is None:
            y_1d = getattr(y, "ndim", 2) == 1
            X, Y = as_dask(X, "X"), as_dask(y, "y")
            if Y.shape[0] != X.shape[0]:
                raise ValueError(
                    f"source X has {X.shape[0]} samples but target y has {Y.shape[0]}: "
                    "both must share the time axis."
                )
            Y = Y if Y.chunks[0] == X.chunks[0] else Y.rechunk({0: X.chunks[0]})
        else:
            X, Y, Z, y_1d = lazy_inputs(X, y, Z)
        n = X.shape[0]
        if n < 2:
            raise ValueError(f"at least 2 samples are needed, got {n}.")
        codes = check_groups(groups_from_labels(groups, ix, iy, iz, n_samples=n), n)
        problem = ChunkedProblem(X, Y, Z, codes, y_1d, labels)
        return _checked(problem, groups, quality)
    if validate is not None:
        X, Y, y_1d = validate(X, y)
    else:
        if y is None:
            raise ValueError("the target y is None; pass the target population.")
        X, _ = check_population(X, "source X")
        Y, y_1d = check_population(y, "target Y", allow_1d=True)
        check_same_length(**{"source X": X, "target Y": Y})
        # before any residualisation: a constant target minus its fit on [1, Z]
        # is rounding, which no later check can tell from a signal
        check_not_constant(X, "source X")
        check_not_constant(Y, "target Y")
    n = X.shape[0]
    codes = check_groups(groups_from_labels(groups, ix, iy, iz, n_samples=n), n)
    if Z is not None:
        Z = check_modulator(Z, n)  # also checks the shared time axis
    return _checked(ArrayProblem(X, Y, Z, codes, y_1d, labels), groups, quality)


def _checked(problem, groups, quality):
    """The problem, after the data-quality check of its inputs (:mod:`mics.data.quality`)."""
    from mics.data.quality import check_inputs

    check_inputs(
        problem.X,
        problem.Y,
        problem.Z,
        groups=problem.groups,
        labels=problem.labels,
        trial_labels=None if groups is None else np.asarray(groups),
        quality=quality,
    )
    return problem


def _is_dataarray(a):
    return type(a).__name__ == "DataArray"


def _n_time(a):
    """Samples of an input: its ``time`` dimension when labelled, else its rows."""
    if _is_dataarray(a) and "time" in a.dims:
        return a.sizes["time"]
    return len(a)


def _centred(a, name, session):
    """A session's array minus its own column means (finite values checked)."""
    a = np.asarray(a, dtype=np.float64)
    if not np.all(np.isfinite(a)):
        raise ValueError(f"session {session}: {name} contains NaN or infinity.")
    if a.shape[0] < 2:
        raise ValueError(f"session {session}: {name} has fewer than 2 samples.")
    return a - a.mean(axis=0)


def concatenate_sessions(sessions):
    """Several recordings as one, each centred on its own means.

    Parameters
    ----------
    sessions : sequence of (X, y, Z)
        NumPy, Dask or xarray arrays per session (labelled ones along ``time``).

    Returns
    -------
    joined : list of 3 arrays
        The centred sessions concatenated along time: Dask when any session
        is chunked (lazily centred), DataArrays when every source is
        labelled, else NumPy.
    lengths : ndarray of shape (n_sessions,)
        Samples per session.
    """
    sessions = [tuple(s) for s in sessions]
    if not sessions:
        raise ValueError("no sessions given.")
    for i, s in enumerate(sessions):
        if len(s) != 3 or any(a is None for a in s):
            raise ValueError(f"session {i} must be an (X, y, Z) triple of arrays.")
    parts = list(zip(*sessions, strict=True))
    lengths = []
    for i, s in enumerate(sessions):
        nx, ny, nz = (_n_time(a) for a in s)
        if len({nx, ny, nz}) > 1:
            raise ValueError(
                f"session {i}: X, y and Z have {nx}, {ny} and {nz} samples; "
                "they must share the time axis."
            )
        lengths.append(nx)
    if any(any_chunked(*s) for s in sessions):
        import dask.array as da

        from mics.data.chunked import as_dask

        joined = []
        for arrays, name in zip(parts, ("X", "y", "Z"), strict=True):
            cols = [as_dask(unwrap(a, name)[0], name) for a in arrays]
            cat = da.concatenate([a - a.mean(axis=0) for a in cols], axis=0)
            one_d = all(getattr(a, "ndim", 2) == 1 for a in arrays)
            joined.append(cat[:, 0] if one_d else cat)
    elif all(_is_dataarray(a) for a in parts[0]):
        import xarray as xr

        joined = [
            xr.concat([a - a.mean("time") for a in arrays], dim="time", join="exact")
            for arrays in parts
        ]
    else:
        joined = [
            np.concatenate([_centred(a, name, i) for i, a in enumerate(arrays)])
            for arrays, name in zip(parts, ("X", "y", "Z"), strict=True)
        ]
    return joined, np.asarray(lengths)
