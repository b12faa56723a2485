"""Artifacts and glitches: find them, then interpolate or drop them in X, Y and Z together.

The detectors are those every fit and test runs at the data seam
(:mod:`mics.data.quality`): artifact frames where most neurons of a
population jump together, single neurons' extreme samples, and modulator
glitches. :func:`find_artifacts` returns what they flag (a
:class:`~mics.data.quality.QualityReport`, drawn by
:func:`mics.plotting.plot_artifacts`); the two helpers here act on it:

- :func:`interpolate_artifacts` replaces each flagged entry by a straight
  line between the nearest unflagged samples of its trial. The time axis is
  kept, so circular shifts, lags and folds see the same samples as before:
  the choice for continuous recordings.
- :func:`drop_artifacts` removes flagged samples from X, Y and Z at once,
  whole trials when trial ids are known (:func:`artifact_mask` gives the
  samples it keeps), so the trial-blocked folds, the trial null and the
  trial bootstrap see only complete trials.

Both accept NumPy arrays and ``xarray.DataArray`` objects with a ``time``
dimension (and a ``trial`` coordinate, which supplies the trial ids), and
return the same kinds, coordinates kept.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from mics.data.folds import check_groups
from mics.data.quality import QualityReport, find_artifacts

__all__ = ["artifact_mask", "drop_artifacts", "find_artifacts", "interpolate_artifacts"]

_ROLES = ("X", "Y", "Z")


def _time_dim(a: Any) -> str | None:
    """The time dimension of a DataArray (``time`` or its first), None for arrays."""
    dims = getattr(a, "dims", None)
    if dims is None or not hasattr(a, "isel"):
        return None
    return "time" if "time" in dims else dims[0]


def _values_2d(a: Any) -> tuple[np.ndarray, bool, tuple]:
    """Values as (n_samples, n_columns) float, whether 1-D, and the time-first order."""
    dim = _time_dim(a)
    if dim is not None:
        order = (dim, *[d for d in a.dims if d != dim])
        values = np.asarray(a.transpose(*order).values, dtype=float)
    else:
        order = ()
        values = np.asarray(a, dtype=float)
    one_d = values.ndim == 1
    return (values[:, None] if one_d else values), one_d, order


def _like(a: Any, values: np.ndarray, one_d: bool, order: tuple) -> Any:
    """``values`` in the form of ``a`` (a DataArray keeps its coordinates and dimension order)."""
    out = values[:, 0] if one_d else values
    if _time_dim(a) is None:
        return out
    return a.transpose(*order).copy(data=out).transpose(*a.dims)


def _report(X, Y, Z, report, groups, thresholds):
    if report is None:
        return find_artifacts(X, Y, Z, groups=groups, thresholds=thresholds)
    if not isinstance(report, QualityReport):
        raise TypeError(f"report must be a QualityReport, got {type(report).__name__}.")
    n = _values_2d(X)[0].shape[0]
    if report.n_samples != n:
        raise ValueError(f"report covers {report.n_samples} samples but X has {n}.")
    return report


def _codes(report, groups, n):
    """Trial codes: ``groups``, else the report's (from a ``trial`` coordinate), else None."""
    if groups is not None:
        return check_groups(groups, n)
    return report.groups


def interpolate_artifacts(
    X: Any,
    Y: Any = None,
    Z: Any = None,
    *,
    report: QualityReport | None = None,
    groups: Any = None,
    thresholds: Any = None,
):
    """Replace flagged entries of X, Y and Z by linear interpolation within their trial.

    Each flagged entry (a whole row of a population for an artifact frame,
    one entry for an extreme sample or a glitch) becomes the straight line
    between the nearest unflagged samples of the same column in the same
    trial; at a trial's edge, the nearest unflagged value. Unflagged entries
    are returned unchanged (bit for bit).

    Parameters
    ----------
    X : array-like or DataArray of shape (n_samples, p)
    Y : array-like or DataArray of shape (n_samples, q), optional
    Z : array-like or DataArray of shape (n_samples, m) or (n_samples,), optional
    report : QualityReport, optional
        What to replace; default :func:`find_artifacts` of the inputs.
    groups : array-like of shape (n_samples,), optional
        Trial ids (default: a ``trial`` coordinate): no line reaches across
        a trial's edge.
    thresholds : QualityThresholds, optional
        For the detection, when ``report`` is not given.

    Returns
    -------
    X, Y, Z
        Of the same kinds and shapes (None where not given).
    """
    report = _report(X, Y, Z, report, groups, thresholds)
    out = []
    for a, role in zip((X, Y, Z), _ROLES, strict=True):
        if a is None:
            out.append(None)
            continue
        values, one_d, order = _values_2d(a)
        codes = _codes(report, groups, values.shape[0])
        mask = report.cell_mask(role, values.shape[1])
        out.append(_like(a, interpolate_within_trials(values, mask, codes), one_d, order))
    return tuple(out)


def interpolate_within_trials(values, mask, groups=None):
    """Linear interpolation of the masked entries of each column, within trials.

    Parameters
    ----------
    values : ndarray of shape (n_samples, n_columns)
    mask : ndarray of bool of shape (n_samples, n_columns)
        Entries to replace.
    groups : ndarray of shape (n_samples,), optional
        Trial codes; None for one continuous recording.

    Returns
    -------
    ndarray of shape (n_samples, n_columns)
        A copy; a column whose trial is masked throughout takes the median
        of its unmasked samples there (of all its samples if none).
    """
    values = np.array(values, dtype=float)
    mask = np.asarray(mask, dtype=bool)
    if values.shape != mask.shape:
        raise ValueError(f"mask has shape {mask.shape} but values {values.shape}.")
    n = values.shape[0]
    codes = np.zeros(n, dtype=np.intp) if groups is None else np.asarray(groups)
    for j in np.flatnonzero(mask.any(axis=0)):
        column, bad = values[:, j], mask[:, j]
        good_all = column[~bad]
        for trial in np.unique(codes[bad]):
            rows = np.flatnonzero(codes == trial)
            ok = rows[~bad[rows]]
            fill = rows[bad[rows]]
            if ok.size:
                column[fill] = np.interp(fill, ok, column[ok])
            else:
                column[fill] = np.median(good_all) if good_all.size else np.median(column)
        values[:, j] = column
    return values


def artifact_mask(
    X: Any,
    Y: Any = None,
    Z: Any = None,
    *,
    report: QualityReport | None = None,
    groups: Any = None,
    thresholds: Any = None,
    whole_trials: bool = True,
) -> np.ndarray:
    """The samples to keep: True outside flagged samples (and, with trials, outside their trials).

    Parameters
    ----------
    X, Y, Z, report, groups, thresholds
        As :func:`interpolate_artifacts`.
    whole_trials : bool, default=True
        With trial ids, drop every sample of a trial that holds a flagged
        sample (the folds, the trial null and the trial bootstrap need
        complete trials); False drops the flagged samples alone.

    Returns
    -------
    keep : ndarray of bool of shape (n_samples,)
    """
    report = _report(X, Y, Z, report, groups, thresholds)
    bad = report.mask()
    codes = _codes(report, groups, bad.size)
    if whole_trials and codes is not None and bad.any():
        bad = np.isin(codes, codes[bad])
    return ~bad


def drop_artifacts(
    X: Any,
    Y: Any = None,
    Z: Any = None,
    *,
    report: QualityReport | None = None,
    groups: Any = None,
    thresholds: Any = None,
    whole_trials: bool = True,
):
    """Remove flagged samples from X, Y and Z together (whole trials when trial ids are known).

    Parameters
    ----------
    X, Y, Z, report, groups, thresholds, whole_trials
        As :func:`artifact_mask`.

    Returns
    -------
    X, Y, Z
        The kept samples, of the same kinds (a DataArray keeps its
        coordinates, ``trial`` among them); None where not given.
    groups : ndarray of shape (n_kept,) or None
        The kept samples' trial ids (``groups`` as given, or the ``trial``
        coordinate), to pass on as ``groups=``.

    Notes
    -----
    Without trial ids the kept samples are joined end to end; a circular
    shift or a lag then runs across each join. For continuous recordings
    prefer :func:`interpolate_artifacts`, which keeps the time axis.
    """
    report = _report(X, Y, Z, report, groups, thresholds)
    keep = artifact_mask(X, report=report, groups=groups, whole_trials=whole_trials)
    out = []
    for a in (X, Y, Z):
        if a is None:
            out.append(None)
        elif _time_dim(a) is not None:
            out.append(a.isel({_time_dim(a): keep}))
        else:
            out.append(np.asarray(a)[keep])
    labels = np.asarray(groups) if groups is not None else report.trial_labels
    return (*out, None if labels is None else np.asarray(labels)[keep])
