"""Trial structure: trial ids, trial-blocked folds, trial resampling and trial nulls.

Most recordings are repeated trials concatenated along time. Every
procedure that cuts or reorders time must then keep trials whole:

- cross-validation folds are contiguous blocks of whole trials
  (:class:`TrialBlockedKFold`, built by :func:`cv_splits`);
- the bootstrap draws whole trials with replacement
  (:func:`trial_bootstrap_indices`), stability selection half of them
  without (:func:`trial_subsample_indices`);
- the trial-level null permutes the modulator's trials among trials of the
  same condition, each trial's time course kept
  (:func:`trial_permutation_indices`);
- time lags never reach into the neighbouring trial (:func:`shift_within_trials`).

Trial ids (``groups``) are one label per sample; each trial's samples must be
contiguous in time (trials are concatenated, never interleaved).
"""

from __future__ import annotations

import numbers
from typing import Any

import numpy as np
from sklearn.model_selection import KFold, check_cv

__all__ = [
    "BlockedKFold",
    "TrialBlockedKFold",
    "resolve_cv",
    "check_groups",
    "cv_splits",
    "groups_from_labels",
    "shift_within_trials",
    "trial_bootstrap_indices",
    "trial_subsample_indices",
    "trial_coordinate",
    "trial_permutation_indices",
]


class BlockedKFold(KFold):
    """Contiguous K-fold with an optional gap between training and test blocks.

    Parameters
    ----------
    n_splits : int
        Number of contiguous blocks.
    gap : int
        Samples dropped from the training set on each side of the test block,
        so that autocorrelation does not leak test information into training.
    """

    def __init__(self, n_splits=10, *, gap=0):
        super().__init__(n_splits=n_splits, shuffle=False)
        self.gap = gap

    def split(self, X, y=None, groups=None):
        n = len(X) if not hasattr(X, "shape") else X.shape[0]
        for train, test in super().split(X, y, groups):
            if self.gap:
                lo, hi = test[0] - self.gap, test[-1] + self.gap
                train = train[(train < lo) | (train > hi)]
                if train.size == 0:
                    raise ValueError(f"gap={self.gap} leaves no training samples of {n}.")
            yield train, test


def resolve_cv(cv, n_samples, gap=0):
    """Turn ``cv`` into a splitter, refusing more folds than samples.

    An int gives contiguous folds (never shuffled: samples are time bins).
    """
    if cv is None:
        cv = 10
    if isinstance(cv, numbers.Integral):
        if cv < 2:
            raise ValueError(f"cv must be at least 2 folds, got {cv}.")
        if cv > n_samples:
            raise ValueError(
                f"cv={cv} folds need at least {cv} samples, but only {n_samples} were given."
            )
        return BlockedKFold(int(cv), gap=gap)
    return check_cv(cv)


def check_groups(groups: Any, n_samples: int, name: str = "groups") -> np.ndarray | None:
    """Validate per-sample trial ids and return them as consecutive integer codes.

    Parameters
    ----------
    groups : array-like of shape (n_samples,) or None
        Trial id of every sample (any hashable labels).
    n_samples : int
    name : str
        Argument name used in error messages.

    Returns
    -------
    codes : ndarray of shape (n_samples,) of int, or None
        ``0, 0, ..., 1, 1, ...``: trials numbered in their order in time.

    Raises
    ------
    ValueError
        When the length differs from ``n_samples``, a label is missing, or a
        trial's samples are not contiguous.
    """
    if groups is None:
        return None
    import pandas as pd

    labels = np.asarray(groups)
    if labels.ndim != 1 or labels.shape[0] != n_samples:
        raise ValueError(
            f"{name} must be one trial id per sample, shape ({n_samples},); got {labels.shape}."
        )
    codes, uniques = pd.factorize(labels, use_na_sentinel=True)
    if np.any(codes < 0):
        raise ValueError(f"{name} contains missing trial ids (NaN/None).")
    # factorize numbers labels by first appearance; contiguous trials then give
    # codes that never decrease and step by one at each boundary.
    steps = np.diff(codes)
    if np.any((steps != 0) & (steps != 1)):
        bad = uniques[codes[1:][(steps != 0) & (steps != 1)][0]]
        raise ValueError(
            f"{name}: the samples of trial {bad!r} are not contiguous in time; "
            "trials must be concatenated one after another."
        )
    return codes.astype(np.intp)


def groups_from_labels(groups: Any, *infos: Any, n_samples: int, coord: str = "trial"):
    """Trial ids given explicitly, or else the ``trial`` coordinate of a labelled input.

    Parameters
    ----------
    groups : array-like or None
    *infos : LabelInfo or None
        From :func:`mics.data.labels.unwrap`; the first carrying ``coord`` along
        time supplies the ids.
    n_samples : int
    coord : str

    Returns
    -------
    codes : ndarray of int or None
        As :func:`check_groups`.
    """
    if groups is None:
        for info in infos:
            if info is not None and coord in info.time_coords:
                groups = info.time_coords[coord]
                break
    return check_groups(groups, n_samples)


def trial_coordinate(*arrays: Any, coord: str = "trial", time_dim: str = "time"):
    """The ``trial`` coordinate along time of the first labelled input that has one.

    Parameters
    ----------
    *arrays : ndarray or xarray.DataArray
    coord, time_dim : str

    Returns
    -------
    ndarray of shape (n_samples,) or None
    """
    import xarray as xr

    for a in arrays:
        if isinstance(a, xr.DataArray) and coord in a.coords and a[coord].dims == (time_dim,):
            return np.asarray(a[coord].values)
    return None


def _trial_bounds(codes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """First sample and length of each trial (codes as from :func:`check_groups`)."""
    starts = np.flatnonzero(np.r_[True, codes[1:] != codes[:-1]])
    lengths = np.diff(np.r_[starts, codes.size])
    return starts, lengths


class TrialBlockedKFold(KFold):
    """K-fold over contiguous blocks of whole trials.

    The trials (in their order in time) are split into ``n_splits``
    consecutive runs of as equal a number of trials as possible (the first
    ``n_trials % n_splits`` runs get one more, as in ``KFold``); a fold's test
    set is every sample of one run. With equal-length trials and
    ``n_trials`` divisible by ``n_splits`` this is exactly
    ``KFold(shuffle=False)`` on samples.

    Parameters
    ----------
    n_splits : int
    gap : int
        Samples kept out of training on each side of the test block; every
        trial that has a sample inside the gap is dropped whole.
    """

    def __init__(self, n_splits=10, *, gap=0):
        super().__init__(n_splits=n_splits, shuffle=False)
        self.gap = gap

    def split(self, X, y=None, groups=None):
        n = len(X) if not hasattr(X, "shape") else X.shape[0]
        codes = check_groups(groups, n)
        if codes is None:
            raise ValueError("TrialBlockedKFold needs groups= (one trial id per sample).")
        n_trials = int(codes[-1]) + 1 if n else 0
        if n_trials < self.n_splits:
            raise ValueError(
                f"cv={self.n_splits} folds need at least {self.n_splits} trials, "
                f"but groups has {n_trials}."
            )
        starts, lengths = _trial_bounds(codes)
        ends = starts + lengths
        for run in np.array_split(np.arange(n_trials), self.n_splits):
            lo, hi = starts[run[0]], ends[run[-1]]  # test samples [lo, hi)
            test = np.arange(lo, hi)
            keep = (ends <= lo - self.gap) | (starts >= hi + self.gap)
            train = np.concatenate(
                [np.arange(s, e) for s, e in zip(starts[keep], ends[keep], strict=True)]
                or [np.zeros(0, dtype=int)]
            )
            if train.size == 0:
                raise ValueError(f"gap={self.gap} leaves no training trials of {n_trials}.")
            yield train, test


def cv_splits(cv, n_samples, *, gap=0, groups=None):
    """All (train, test) index pairs of a cross-validation, whole trials kept together.

    The single place where folds are built. An int ``cv`` gives contiguous
    blocks of samples (:class:`BlockedKFold`), or contiguous
    blocks of whole trials (:class:`TrialBlockedKFold`) when ``groups`` is
    given; a splitter gets ``groups`` passed to its ``split``.

    Parameters
    ----------
    cv : int, splitter or None
        None means 10.
    n_samples : int
    gap : int
        Samples left out between training and test blocks (int ``cv`` only).
    groups : array-like of shape (n_samples,) or None
        Trial ids.

    Returns
    -------
    splits : list of (ndarray, ndarray)

    Raises
    ------
    ValueError
        When a splitter puts samples of one trial on both sides of a fold.
    """
    codes = check_groups(groups, n_samples)
    if cv is None:
        cv = 10
    if isinstance(cv, numbers.Integral):
        if cv < 2:
            raise ValueError(f"cv must be at least 2 folds, got {cv}.")
        if codes is None:
            splitter = resolve_cv(cv, n_samples, gap=gap)
        else:
            splitter = TrialBlockedKFold(int(cv), gap=gap)
    else:
        splitter = check_cv(cv)
    dummy = np.empty((n_samples, 0))
    splits = [(np.asarray(tr), np.asarray(te)) for tr, te in splitter.split(dummy, groups=codes)]
    if codes is not None:
        for k, (train, test) in enumerate(splits):
            mixed = np.intersect1d(codes[train], codes[test])
            if mixed.size:
                raise ValueError(
                    f"cv splitter puts trial {int(mixed[0])} on both sides of fold {k}; "
                    "use an int cv (contiguous blocks of whole trials) or a group-aware splitter."
                )
    return splits


def shift_within_trials(x: np.ndarray, lag: int, codes: np.ndarray | None) -> np.ndarray:
    """``x`` delayed by ``lag`` samples inside each trial; NaN where that leaves the trial.

    Row ``t`` of the result is row ``t - lag`` of ``x`` when both lie in the
    same trial, NaN otherwise (a negative ``lag`` looks ahead).

    Parameters
    ----------
    x : ndarray of shape (n_samples, n)
    lag : int
    codes : ndarray of shape (n_samples,) or None
        Trial codes (:func:`check_groups`); None treats the recording as one trial.

    Returns
    -------
    shifted : ndarray of shape (n_samples, n), float
    """
    x = np.asarray(x, dtype=float)
    n = x.shape[0]
    out = np.full_like(x, np.nan)
    lag = int(lag)
    if abs(lag) >= n:
        return out
    src = np.arange(n) - lag
    ok = (src >= 0) & (src < n)
    if codes is not None:
        ok[ok] &= codes[src[ok]] == codes[ok]
    out[ok] = x[src[ok]]
    return out


def trial_subsample_indices(codes: np.ndarray, rng: np.random.RandomState):
    """Sample indices of half the trials, drawn without replacement, in time order.

    The subsamples of stability selection (Meinshausen & Buhlmann 2010):
    their bound on false selections holds for subsamples of half the data
    without replacement, not for bootstrap draws (whose duplicated trials
    make every refit select more).

    Parameters
    ----------
    codes : ndarray of shape (n_samples,)
        Trial codes (:func:`check_groups`).
    rng : RandomState

    Returns
    -------
    idx : ndarray of int
        Concatenated samples of ``n_trials // 2`` distinct trials.
    new_codes : ndarray of int, same length
        The kept trials numbered 0, 1, ...
    """
    starts, lengths = _trial_bounds(codes)
    if starts.size < 2:
        raise ValueError("half-sample resampling needs at least two trials.")
    picks = np.sort(rng.choice(starts.size, size=starts.size // 2, replace=False))
    return _trial_samples(starts, lengths, picks)


def _trial_samples(starts, lengths, picks):
    """Samples of the picked trials, concatenated, each pick a new trial id."""
    idx = np.concatenate([np.arange(starts[i], starts[i] + lengths[i]) for i in picks])
    return idx, np.repeat(np.arange(picks.size), lengths[picks])


def trial_bootstrap_indices(codes: np.ndarray, rng: np.random.RandomState):
    """Sample indices of one bootstrap draw of whole trials, with replacement.

    Parameters
    ----------
    codes : ndarray of shape (n_samples,)
        Trial codes (:func:`check_groups`).
    rng : RandomState

    Returns
    -------
    idx : ndarray of int
        Concatenated samples of ``n_trials`` trials drawn with replacement.
    new_codes : ndarray of int, same length
        A fresh trial id per drawn trial (a trial drawn twice is two trials).
    """
    starts, lengths = _trial_bounds(codes)
    picks = rng.randint(0, starts.size, size=starts.size)
    return _trial_samples(starts, lengths, picks)


def _condition_per_trial(codes: np.ndarray, conditions: Any) -> np.ndarray:
    """One condition label per trial, checking it is constant within trials."""
    import pandas as pd

    cond = np.asarray(conditions)
    if cond.shape != codes.shape:
        raise ValueError(
            f"conditions must be one label per sample, shape {codes.shape}; got {cond.shape}."
        )
    cond_codes, _ = pd.factorize(cond)
    starts, lengths = _trial_bounds(codes)
    first = cond_codes[starts]
    if np.any(cond_codes != np.repeat(first, lengths)):
        raise ValueError("conditions must be constant within each trial.")
    return first


def trial_permutation_indices(
    codes: np.ndarray, rng: np.random.RandomState, conditions: Any = None
) -> np.ndarray:
    """Sample indices that permute whole trials among trials of the same condition.

    Trial ``i`` of the result is trial ``pi(i)`` of the input, each trial's
    time course kept, with ``pi`` a uniformly random permutation within each
    condition (and within each trial length, so time courses fit).

    Parameters
    ----------
    codes : ndarray of shape (n_samples,)
        Trial codes (:func:`check_groups`).
    rng : RandomState
    conditions : array-like of shape (n_samples,), optional
        Condition label per sample (constant within a trial); None permutes
        among all trials.

    Returns
    -------
    idx : ndarray of shape (n_samples,)
        ``z[idx]`` is the permuted series.
    """
    starts, lengths = _trial_bounds(codes)
    n_trials = starts.size
    strata = (
        np.zeros(n_trials, dtype=int)
        if conditions is None
        else _condition_per_trial(codes, conditions)
    )
    perm = np.arange(n_trials)
    # Strata: condition x trial length (trials of unequal length cannot swap).
    keys = strata.astype(np.int64) * (int(lengths.max()) + 1) + lengths
    for key in np.unique(keys):
        members = np.flatnonzero(keys == key)
        perm[members] = members[rng.permutation(members.size)]
    return np.concatenate([np.arange(starts[j], starts[j] + lengths[j]) for j in perm])


def n_trial_permutations(codes: np.ndarray, conditions: Any = None) -> float:
    """Number of distinct trial permutations (log10), to warn when it is tiny."""
    from scipy.special import gammaln

    starts, lengths = _trial_bounds(codes)
    strata = (
        np.zeros(starts.size, dtype=int)
        if conditions is None
        else _condition_per_trial(codes, conditions)
    )
    keys = strata.astype(np.int64) * (int(lengths.max()) + 1) + lengths
    _, counts = np.unique(keys, return_counts=True)
    return float(np.sum(gammaln(counts + 1)) / np.log(10))
