"""Preprocessing for trial-structured recordings: condition means and time lags.

Re-exported by :mod:`mics.preprocessing`. Both functions accept a plain
array with time along the first axis plus per-sample labels, or a labelled
``xarray`` object whose ``time`` dimension carries ``trial`` (and
``trial_time`` and a condition) coordinates, as
:func:`mics.io.load_park2024` returns; labelled outputs keep every
coordinate along time.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd
import xarray as xr

from mics.data.folds import check_groups, shift_within_trials

__all__ = ["lag_embed", "subtract_condition_means"]


# ------------------------------------------------------------------ condition means
def _labels_along_time(x: Any, label: Any, name: str, time_dim: str, n: int):
    """Per-sample labels: given directly, or a coordinate of a labelled ``x``."""
    if isinstance(label, str):
        if not isinstance(x, xr.DataArray | xr.Dataset):
            raise ValueError(
                f"{name}={label!r} names a coordinate, but x is not an xarray object; "
                f"pass one label per sample instead."
            )
        if label not in x.coords or x[label].dims != (time_dim,):
            raise ValueError(
                f"{name}={label!r} is not a coordinate along {time_dim!r}; coordinates: "
                f"{[str(k) for k, c in x.coords.items() if c.dims == (time_dim,)]}."
            )
        return np.asarray(x[label].values)
    if label is None:
        return None
    values = np.asarray(label)
    if values.shape != (n,):
        raise ValueError(f"{name} must be one label per sample, shape ({n},); got {values.shape}.")
    return values


def _position_in_trial(codes: np.ndarray) -> np.ndarray:
    starts = np.flatnonzero(np.r_[True, codes[1:] != codes[:-1]])
    return np.arange(codes.size) - np.repeat(starts, np.diff(np.r_[starts, codes.size]))


def _train_mask(train: Any, trial_labels: np.ndarray | None, n: int) -> np.ndarray:
    if train is None:
        return np.ones(n, dtype=bool)
    train = np.asarray(train)
    if train.dtype == bool:
        if train.shape != (n,):
            raise ValueError(f"a boolean train mask needs shape ({n},); got {train.shape}.")
        return train
    if trial_labels is None:
        raise ValueError("train= as trial ids needs trial labels (trial=...).")
    unknown = np.setdiff1d(train, trial_labels)
    if unknown.size:
        raise ValueError(f"train names trials that do not exist, e.g. {unknown[:3].tolist()}.")
    return np.isin(trial_labels, train)


def condition_mean_residuals(
    values: np.ndarray, cells: np.ndarray, train: np.ndarray, cell_names: Sequence | None = None
) -> np.ndarray:
    """Subtract from every sample the mean of its cell over the training samples.

    Parameters
    ----------
    values : ndarray of shape (n_samples, n)
    cells : ndarray of shape (n_samples,) of int
        Cell code (condition x time in trial) of each sample, ``0 .. n_cells - 1``.
    train : ndarray of shape (n_samples,) of bool
        Samples whose values form the means.
    cell_names : sequence, optional
        Readable name of each cell, for the error message.

    Returns
    -------
    residuals : ndarray of shape (n_samples, n)
    """
    n_cells = int(cells.max()) + 1
    counts = np.bincount(cells[train], minlength=n_cells)
    if np.any(counts == 0):
        empty = int(np.flatnonzero(counts == 0)[0])
        name = cell_names[empty] if cell_names is not None else empty
        raise ValueError(
            f"condition x trial-time cell {name} has no training trial; "
            "every condition needs training trials at every time in the trial."
        )
    means = pd.DataFrame(values[train]).groupby(cells[train]).mean().to_numpy()
    return values - means[cells]


def subtract_condition_means(
    x: Any,
    condition: Any,
    *,
    trial: Any = "trial",
    trial_time: Any = "trial_time",
    train: Any = None,
    time_dim: str = "time",
) -> Any:
    """Subtract each condition's mean response at each time in the trial.

    For every sample of condition ``c`` at time-in-trial ``t`` the mean of
    all (training) samples with the same ``c`` and ``t`` -- i.e. the mean
    over that condition's trials -- is removed, leaving the trial-to-trial
    fluctuations around the stimulus-driven response (Semedo et al. 2019).

    Parameters
    ----------
    x : ndarray of shape (T,) or (T, n), DataArray or Dataset
        Time along axis 0 for arrays; for xarray the ``time_dim`` dimension
        (a Dataset has every variable along it processed).
    condition : str or array-like of shape (T,)
        Condition of each sample (e.g. grating direction), or the name of a
        coordinate along time of ``x`` (e.g. ``"direction"``).
    trial : str, array-like of shape (T,) or None, default="trial"
        Trial id of each sample, or a coordinate name. Needed for ``train``
        as trial ids and when ``trial_time`` is not available (the position
        in the trial is then the time in trial).
    trial_time : str, array-like of shape (T,) or None, default="trial_time"
        Time in trial of each sample, or a coordinate name; a missing
        coordinate falls back to the position in the trial.
    train : array-like, optional
        Trials whose samples form the means: trial ids (values of ``trial``)
        or a boolean mask of shape (T,). Test trials are then centred with
        means they never contributed to, so cross-validation stays honest.
        None uses all trials.
    time_dim : str, default="time"

    Returns
    -------
    Same type and shape as ``x``; xarray outputs keep every coordinate and
    get the attribute ``condition_means_subtracted``.

    Raises
    ------
    ValueError
        For labels of the wrong length, an unknown coordinate, or a
        (condition, time in trial) cell without training samples.
    """
    is_xr = isinstance(x, xr.DataArray | xr.Dataset)
    if is_xr and time_dim not in x.dims:
        raise ValueError(f"x has no {time_dim!r} dimension; dimensions: {tuple(x.dims)}.")
    n = x.sizes[time_dim] if is_xr else np.shape(x)[0]
    cond = _labels_along_time(x, condition, "condition", time_dim, n)
    if cond is None:
        raise ValueError("condition is required (labels per sample or a coordinate name).")
    if is_xr and isinstance(trial, str) and trial not in x.coords:
        trial = None
    if is_xr and isinstance(trial_time, str) and trial_time not in x.coords:
        trial_time = None
    if not is_xr and isinstance(trial, str) and trial == "trial":
        trial = None  # defaults name coordinates, which plain arrays do not have
    if not is_xr and isinstance(trial_time, str) and trial_time == "trial_time":
        trial_time = None
    trial_labels = _labels_along_time(x, trial, "trial", time_dim, n)
    ttime = _labels_along_time(x, trial_time, "trial_time", time_dim, n)
    if ttime is None:
        if trial_labels is None:
            raise ValueError(
                "the time in trial is unknown: pass trial= (trial ids) or trial_time= "
                "(time in trial) per sample, or use coordinates of those names."
            )
        ttime = _position_in_trial(check_groups(trial_labels, n, "trial"))
    mask = _train_mask(train, trial_labels, n)
    cells_df = pd.DataFrame({"condition": cond, "trial_time": ttime})
    grouped = cells_df.groupby(["condition", "trial_time"], sort=False, dropna=False)
    cells = grouped.ngroup().to_numpy()
    names = [f"(condition={c!r}, trial_time={t!r})" for c, t in grouped.groups]

    def residuals(values: np.ndarray) -> np.ndarray:
        flat = values.reshape(n, -1)
        return condition_mean_residuals(flat, cells, mask, names).reshape(values.shape)

    attrs = {
        "condition_means_subtracted": condition if isinstance(condition, str) else "condition",
        "condition_means_train_samples": int(mask.sum()),
    }
    if isinstance(x, xr.Dataset):
        out = x.copy()
        for name, var in x.data_vars.items():
            if time_dim in var.dims:
                out[name] = _subtract_da(var, residuals, time_dim, attrs)
        out.attrs.update(attrs)
        return out
    if isinstance(x, xr.DataArray):
        return _subtract_da(x, residuals, time_dim, attrs)
    return residuals(np.asarray(x, dtype=float))


def _subtract_da(da: xr.DataArray, residuals, time_dim: str, attrs: dict) -> xr.DataArray:
    order = da.dims
    moved = da.transpose(time_dim, ...)
    out = moved.copy(data=residuals(np.asarray(moved.values, dtype=float)))
    out.attrs.update(attrs)
    return out.transpose(*order)


# ------------------------------------------------------------------ time lags
def _check_lags(lags: Any) -> np.ndarray:
    if isinstance(lags, int | np.integer) and not isinstance(lags, bool):
        if lags < 0:
            raise ValueError(f"lags must be a non-negative int L or a list of ints, got {lags}.")
        return np.arange(int(lags) + 1)
    arr = np.asarray(lags)
    if arr.ndim != 1 or arr.size == 0 or not np.issubdtype(arr.dtype, np.integer):
        raise ValueError(f"lags must be an int L (lags 0..L) or a list of ints, got {lags!r}.")
    if np.unique(arr).size != arr.size:
        raise ValueError(f"lags must not repeat, got {arr.tolist()}.")
    return arr.astype(int)


def lag_embed(x: Any, lags: Any, *, groups: Any = None, time_dim: str = "time") -> Any:
    """Stack delayed copies of ``x`` as extra columns, never across a trial boundary.

    Column block ``j`` holds ``x`` delayed by ``lags[j]`` samples: row ``t``
    has ``x[t - lag]`` when that sample belongs to the same trial, NaN
    otherwise (the first ``lag`` samples of every trial). Drop incomplete
    rows before fitting (``out.dropna("time")``, or
    ``np.isfinite(out).all(axis=1)`` for arrays) and select the same rows of
    the target.

    Parameters
    ----------
    x : ndarray of shape (T,) or (T, n), or DataArray with a ``time_dim``
    lags : int or sequence of int
        ``L`` means lags ``0, 1, ..., L``; a sequence gives the lags
        explicitly (negative lags look ahead).
    groups : array-like of shape (T,), optional
        Trial id of each sample; for a DataArray, its ``trial`` coordinate
        by default. None treats the recording as one trial.
    time_dim : str, default="time"

    Returns
    -------
    ndarray of shape (T, n * n_lags)
        Lag-major columns: all of ``x`` at ``lags[0]``, then at ``lags[1]``...
    or DataArray of dims (``time_dim``, ``<feature>_lag``)
        The new dimension is indexed by (feature, ``lag``) pairs (a
        ``pandas.MultiIndex``, so ``out.sel(lag=2)`` works); coordinates
        along time (``trial``, ``trial_time``...) are kept.
    """
    lag_values = _check_lags(lags)
    if isinstance(x, xr.DataArray):
        return _lag_embed_da(x, lag_values, groups, time_dim)
    values = np.asarray(x, dtype=float)
    if values.ndim == 1:
        values = values[:, None]
    if values.ndim != 2:
        raise ValueError(f"x must be (T,) or (T, n), got shape {values.shape}.")
    codes = check_groups(groups, values.shape[0])
    return np.column_stack([shift_within_trials(values, lag, codes) for lag in lag_values])


def _lag_embed_da(da: xr.DataArray, lag_values: np.ndarray, groups: Any, time_dim: str):
    if time_dim not in da.dims:
        raise ValueError(f"x has no {time_dim!r} dimension; dimensions: {tuple(da.dims)}.")
    if da.ndim == 1:
        da = da.expand_dims(feature=[da.name if da.name is not None else "x"], axis=1)
    if da.ndim != 2:
        raise ValueError(f"x must be (time, feature), got dimensions {tuple(da.dims)}.")
    feature_dim = str(next(d for d in da.dims if d != time_dim))
    da = da.transpose(time_dim, feature_dim)
    if groups is None and "trial" in da.coords and da["trial"].dims == (time_dim,):
        groups = da["trial"].values
    codes = check_groups(groups, da.sizes[time_dim])
    if feature_dim not in da.coords:
        da = da.assign_coords({feature_dim: np.arange(da.sizes[feature_dim])})
    shifted = [
        da.copy(data=shift_within_trials(da.values, lag, codes)).expand_dims(lag=[int(lag)])
        for lag in lag_values
    ]
    stacked = xr.concat(shifted, dim="lag").transpose(time_dim, "lag", feature_dim)
    new_dim = f"{feature_dim}_lag"
    out = stacked.stack({new_dim: ("lag", feature_dim)})
    out.attrs.update(da.attrs)
    out.attrs["lags"] = lag_values.tolist()
    return out
