"""Robust statistics of time series: how far a sample stands out from its own signal.

The numerics behind the data-quality checks (:mod:`mics.data.quality`).
Each column of a block of samples is scored twice:

- **shape**: how far a sample departs from the median of the three samples
  before it *and* from the median of the three after it, in the same
  direction, relative to how fast the signal moves there (the steps beside
  the sample) and overall (a MAD of its steps). A glitch or an artifact
  frame departs from both sides; a step (a running bout starting, a
  stimulus onset) departs from one side only; a calcium transient, which
  rises in one sample and decays over many, departs from its later samples
  by a fraction of its rise; a pupil dilation moves as fast around its peak
  as at it. Medians of three ignore one bad neighbour on each side, so runs
  of two bad samples are still seen from outside.
- **level**: how far the sample lies from the column's median, relative to
  the largest levels the signal itself reaches: the ``k``-th largest
  deviation (``k`` a few dozen samples or 1% of them, more than a handful of
  glitches can fill) and the largest level it holds for three samples in a
  row, which a glitch never does but a running bout or a transient does.
  Signals that are mostly constant (running that is mostly zero, spike
  counts at low rates) fall back on the median of their non-zero deviations.

No statistic reaches across a segment boundary (a trial's edge): trials
need not be contiguous in time. At a segment's edge the one side there is
stands for both.

:func:`artifact_scores` runs as one numba kernel
(:func:`mics.core.kernels.artifact_scores`); the functions beside it are
the definitions in NumPy, from which ``tests/test_kernels.py`` builds the
kernel's twin.
"""

from __future__ import annotations

import warnings

import numpy as np

__all__ = [
    "MAD_TO_SD",
    "artifact_scores",
    "local_steps",
    "robust_scale",
    "segment_starts",
    "side_medians",
    "spike_sizes",
    "step_sizes",
    "sustained_levels",
    "top_levels",
]

#: Factor that makes a median absolute deviation estimate a Gaussian's standard deviation.
MAD_TO_SD = 1.482602218505602
#: Factor that makes a mean absolute deviation estimate a Gaussian's standard deviation.
_MEAN_AD_TO_SD = float(np.sqrt(np.pi / 2))
#: Samples on each side of a sample that its side medians take.
_SIDE = 3
#: Samples in a row that make a level "held" rather than a glitch's.
_HELD = 3
#: The k-th largest deviation is a level scale: k = max(_N_TOP, _TOP_FRACTION * n).
_N_TOP, _TOP_FRACTION = 30, 0.01


class _quiet_nan(warnings.catch_warnings):
    """Silence the RuntimeWarnings of nan-reductions over all-NaN slices."""

    def __enter__(self):
        out = super().__enter__()
        warnings.simplefilter("ignore", RuntimeWarning)
        return out


def robust_scale(a, axis=0):
    """MAD scale of each column about its median; a mean absolute deviation where that is 0.

    Parameters
    ----------
    a : ndarray of shape (n_samples, n_columns)
        NaN entries are ignored.
    axis : int

    Returns
    -------
    scale : ndarray of shape (n_columns,)
        Gaussian-consistent (the standard deviation for normal data); 0 only
        for a constant (or all-NaN) column.
    """
    a = np.moveaxis(np.asarray(a, dtype=float), axis, 0)
    rows = ~np.all(np.isnan(a), axis=tuple(range(1, a.ndim)))
    if not np.isnan(a[rows]).any():
        a = a[rows]  # rows of NaN only (segment starts) dropped: plain medians are faster
    median = np.median if not np.isnan(a).any() else np.nanmedian
    with _quiet_nan(), np.errstate(invalid="ignore"):
        dev = np.abs(a - median(a, axis=0, keepdims=True))
        scale = MAD_TO_SD * median(dev, axis=0)
        fallback = _MEAN_AD_TO_SD * np.nanmean(dev, axis=0)
    scale = np.where(scale > 0, scale, fallback)
    return np.nan_to_num(scale, nan=0.0)


def segment_starts(groups, n_samples):
    """First sample of each contiguous segment (trial); ``[0]`` without trials.

    Parameters
    ----------
    groups : array-like of shape (n_samples,) or None
        A label per sample; a segment is a run of equal labels.
    n_samples : int

    Returns
    -------
    starts : ndarray of int
    """
    if n_samples == 0:
        return np.zeros(0, dtype=np.intp)
    if groups is None:
        return np.zeros(1, dtype=np.intp)
    groups = np.asarray(groups)
    return np.flatnonzero(np.r_[True, groups[1:] != groups[:-1]])


def _segment_index(starts, n_samples):
    """Segment number of every sample."""
    seg = np.zeros(n_samples, dtype=np.intp)
    seg[np.asarray(starts)[1:]] = 1
    return np.cumsum(seg)


def _shifted(a, k, seg):
    """``out[t] = a[t - k]``, NaN where ``t - k`` lies outside ``t``'s segment (or the array)."""
    n = a.shape[0]
    out = np.full(a.shape, np.nan)
    if k == 0:
        return a.astype(float, copy=True)
    if abs(k) >= n:
        return out
    if k > 0:
        out[k:] = a[:-k]
        out[k:][seg[k:] != seg[:-k]] = np.nan
    else:
        out[:k] = a[-k:]
        out[:k][seg[:k] != seg[-k:]] = np.nan
    return out


def _sorted_present(stack):
    """``stack`` sorted along axis 0 (NaN last) and the number of non-NaN entries."""
    return np.sort(stack, axis=0), np.sum(~np.isnan(stack), axis=0)


def _nan_median(stack):
    """Median along axis 0 of a small stack, NaN taken as missing (NaN where all are)."""
    ordered, count = _sorted_present(stack)
    lo = np.take_along_axis(ordered, np.maximum((count - 1) // 2, 0)[None], axis=0)[0]
    hi = np.take_along_axis(ordered, (count // 2)[None], axis=0)[0] if len(stack) else lo
    return np.where(count > 0, (lo + hi) / 2, np.nan)


def _median_of_three(a, b, c):
    """Elementwise median of three arrays, NaN taken as missing (NaN where all are)."""
    med = np.fmax(np.fmin(a, b), np.fmin(np.fmax(a, b), c))  # exact with no NaN
    missing = np.isnan(a) | np.isnan(b) | np.isnan(c)
    if np.any(missing):
        med[missing] = _nan_median(np.stack([a[missing], b[missing], c[missing]]))
    return med


def side_medians(a, starts):
    """Median of the three samples before and of the three after each sample, within segments.

    Parameters
    ----------
    a : ndarray of shape (n_samples, n_columns)
    starts : ndarray of int
        First sample of each segment (:func:`segment_starts`).

    Returns
    -------
    before, after : ndarray of shape (n_samples, n_columns)
        Medians of the samples there are (fewer near an edge); NaN where a
        sample has none on that side.
    """
    a = np.asarray(a, dtype=float)
    seg = _segment_index(starts, a.shape[0])
    before = _median_of_three(*(_shifted(a, k, seg) for k in range(1, _SIDE + 1)))
    after = _median_of_three(*(_shifted(a, -k, seg) for k in range(1, _SIDE + 1)))
    return before, after


def step_sizes(a, starts):
    """First differences ``a[t] - a[t - 1]`` within segments, NaN at each segment's first sample.

    Parameters
    ----------
    a : ndarray of shape (n_samples, n_columns)
    starts : ndarray of int

    Returns
    -------
    steps : ndarray of shape (n_samples, n_columns)
    """
    a = np.asarray(a, dtype=float)
    steps = np.full(a.shape, np.nan)
    steps[1:] = np.diff(a, axis=0)
    steps[np.asarray(starts, dtype=np.intp)] = np.nan
    return steps


def spike_sizes(a, starts):
    """How far each sample departs from both of its sides, in the same direction.

    ``sign * min(|a - before|, |a - after|)`` where both departures share a
    sign, 0 otherwise (``before``, ``after`` from :func:`side_medians`). At
    a segment's first (last) sample the side there is missing; the departure
    from the nearest sample stands for it, which a ramp or a step running
    into the edge does not leave by much.

    Parameters
    ----------
    a : ndarray of shape (n_samples, n_columns)
    starts : ndarray of int

    Returns
    -------
    spikes : ndarray of shape (n_samples, n_columns)
        Positive for a sample above both sides; 0 for a segment of one sample.
    """
    a = np.asarray(a, dtype=float)
    seg = _segment_index(starts, a.shape[0])
    before, after = side_medians(a, starts)
    left = np.where(np.isnan(before), a - _shifted(a, -1, seg), a - before)
    right = np.where(np.isnan(after), a - _shifted(a, 1, seg), a - after)
    same = np.sign(left) * np.sign(right) > 0
    size = np.where(same, np.sign(left) * np.fmin(np.abs(left), np.abs(right)), 0.0)
    return np.nan_to_num(size, nan=0.0)


def local_steps(a, starts):
    """How fast the signal moves beside each sample, whatever the sample itself does.

    The mean size of the two steps before the sample that do not touch it
    (``a[t-1] - a[t-2]``, ``a[t-2] - a[t-3]``) and of the two after it
    (``a[t+2] - a[t+1]``, ``a[t+3] - a[t+2]``), within the sample's segment;
    the smaller of the two sides, so that one bad sample nearby (which
    makes both steps of its side large) does not hide this one. Where one
    side has no step (a segment's edge), the other side's.

    Parameters
    ----------
    a : ndarray of shape (n_samples, n_columns)
    starts : ndarray of int

    Returns
    -------
    local : ndarray of shape (n_samples, n_columns)
        0 where no such step lies within the segment.
    """
    a = np.asarray(a, dtype=float)
    seg = _segment_index(starts, a.shape[0])
    d = np.abs(step_sizes(a, starts))  # d[t] = |a[t] - a[t-1]|
    with _quiet_nan():
        before = np.nanmean(np.stack([_shifted(d, 1, seg), _shifted(d, 2, seg)]), axis=0)
        after = np.nanmean(np.stack([_shifted(d, -2, seg), _shifted(d, -3, seg)]), axis=0)
    return np.nan_to_num(np.fmin(before, after), nan=0.0)


def top_levels(deviations, n_top=_N_TOP, top_fraction=_TOP_FRACTION):
    """The ``k``-th largest deviation of each column, or the median non-zero one where larger.

    ``k = max(n_top, top_fraction * n_samples)``: a handful of glitches
    cannot reach it. For a mostly constant column (running that is mostly
    zero) the ``k``-th largest is 0, and the median of its non-zero
    deviations says how large its excursions are.

    Parameters
    ----------
    deviations : ndarray of shape (n_samples, n_columns)
        Non-negative.
    n_top : int
    top_fraction : float

    Returns
    -------
    levels : ndarray of shape (n_columns,)
    """
    d = np.nan_to_num(np.asarray(deviations, dtype=float), nan=0.0)
    n = d.shape[0]
    if n == 0:
        return np.zeros(d.shape[1])
    k = int(min(n, max(n_top, np.ceil(top_fraction * n))))
    kth = -np.partition(-d, k - 1, axis=0)[k - 1]
    nonzero = np.zeros(d.shape[1])
    for j in np.flatnonzero(kth == 0):  # only mostly constant columns need it
        positive = d[:, j][d[:, j] > 0]
        nonzero[j] = np.median(positive) if positive.size else 0.0
    return np.maximum(kth, nonzero)


def sustained_levels(deviations, starts, width=_HELD):
    """The largest level each column holds for ``width`` samples in a row, within segments.

    Parameters
    ----------
    deviations : ndarray of shape (n_samples, n_columns)
        Signed; the level held is ``max_t min(deviations[t : t + width])``.
    starts : ndarray of int
    width : int

    Returns
    -------
    levels : ndarray of shape (n_columns,)
        ``-inf`` for a column no segment of which has ``width`` samples.
    """
    d = np.asarray(deviations, dtype=float)
    seg = _segment_index(starts, d.shape[0])
    low = d.copy()
    for k in range(1, width):
        ahead = _shifted(d, -k, seg)
        low = np.fmin(low, np.where(np.isnan(ahead), -np.inf, ahead))
    if low.shape[0] == 0:
        return np.full(d.shape[1], -np.inf)
    return np.max(low, axis=0)


def artifact_scores(a, starts):
    """Shape and level scores of every sample (see the module docstring).

    Computed by one numba kernel (:func:`mics.core.kernels.artifact_scores`);
    its NumPy twin, built from the functions above, is in
    ``tests/test_kernels.py``.

    Parameters
    ----------
    a : ndarray of shape (n_samples, n_columns)
        Finite values.
    starts : ndarray of int
        First sample of each segment (:func:`segment_starts`).

    Returns
    -------
    shape : ndarray of shape (n_samples, n_columns)
        ``|spike| / max(local steps, MAD scale of the steps)``
        (:func:`spike_sizes`, :func:`local_steps`); 0 for constant columns.
    level : ndarray of shape (n_samples, n_columns)
        Deviation from the column's median over the larger of
        :func:`top_levels` and :func:`sustained_levels` on the sample's side
        of the median; 0 where the sample lies on the other side of the
        median from its spike.
    """
    from mics.core.kernels import artifact_scores as kernel

    a = np.ascontiguousarray(a, dtype=np.float64)
    n = a.shape[0]
    shape, level = np.zeros(a.shape), np.zeros(a.shape)
    if n == 0 or a.shape[1] == 0:
        return shape, level
    k = int(min(n, max(_N_TOP, np.ceil(_TOP_FRACTION * n))))
    kernel(a, _segment_index(starts, n), k, _HELD, shape, level)
    return shape, level
