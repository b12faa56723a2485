"""One recording -> the three model inputs (source X, target Y, modulator Z)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import xarray as xr

__all__ = ["build_inputs"]


def _activity(data: Any, variable: str | None, time_dim: str, neuron_dim: str) -> xr.DataArray:
    if isinstance(data, xr.DataArray):
        da = data
    elif isinstance(data, xr.Dataset):
        if variable is not None:
            if variable not in data:
                raise ValueError(f"variable {variable!r} not in dataset ({list(data.data_vars)})")
            da = data[variable]
        else:
            candidates = [
                name for name, v in data.data_vars.items() if set(v.dims) == {time_dim, neuron_dim}
            ]
            if len(candidates) != 1:
                raise ValueError(
                    "choose the activity variable with variable=... "
                    f"(candidates over ({time_dim}, {neuron_dim}): {candidates or 'none'})"
                )
            da = data[candidates[0]]
        da = da.assign_attrs({**data.attrs, **da.attrs})
    else:
        raise TypeError(f"expected an xarray Dataset or DataArray, got {type(data).__name__}")
    if set(da.dims) != {time_dim, neuron_dim}:
        raise ValueError(
            f"activity must have dims ({time_dim!r}, {neuron_dim!r}); got {tuple(da.dims)}"
        )
    return da.transpose(time_dim, neuron_dim)


def _select(da: xr.DataArray, selector: Any, role: str, neuron_dim: str) -> xr.DataArray:
    """Neurons matching every ``{coordinate: value(s)}`` pair, or a list of neuron ids."""
    if isinstance(selector, Mapping):
        if not selector:
            raise ValueError(
                f"{role}: the selection is empty; give {{coordinate: value}} pairs "
                "(e.g. {'area': 'V1'}) or a list of neuron ids"
            )
        mask = np.ones(da.sizes[neuron_dim], dtype=bool)
        for coord, wanted in selector.items():
            if coord not in da.coords or da[coord].dims != (neuron_dim,):
                along = [str(k) for k, c in da.coords.items() if c.dims == (neuron_dim,)]
                raise ValueError(
                    f"{role}: no coordinate {coord!r} along {neuron_dim!r} (available: {along})"
                )
            values = np.atleast_1d(np.asarray(wanted))
            hit = np.isin(da[coord].values, values)
            if not hit.any():
                present = np.unique(da[coord].values)
                raise ValueError(
                    f"{role}: no neuron has {coord} in {values.tolist()} "
                    f"(values present: {present.tolist()[:20]})"
                )
            mask &= hit
        if not mask.any():
            raise ValueError(f"{role}: no neuron matches all of {dict(selector)}")
        return da.isel({neuron_dim: mask})
    ids = np.atleast_1d(np.asarray(selector))
    if ids.size == 0:
        raise ValueError(f"{role}: the list of neuron ids is empty")
    uniq, counts = np.unique(ids, return_counts=True)
    if np.any(counts > 1):
        raise ValueError(f"{role}: neuron ids {uniq[counts > 1].tolist()[:20]} are listed twice")
    absent = np.setdiff1d(ids, da[neuron_dim].values)
    if absent.size:
        raise ValueError(f"{role}: neuron ids {absent.tolist()[:20]} not in the data")
    return da.sel({neuron_dim: ids})


def _modulator(data: Any, item: Any, index: int, time_dim: str) -> xr.DataArray:
    if isinstance(item, str):
        if not isinstance(data, xr.Dataset) or item not in data.data_vars:
            available = list(data.data_vars) if isinstance(data, xr.Dataset) else []
            raise ValueError(
                f"modulator {item!r} not found; pass a Dataset holding it "
                f"(variables: {available}) or the DataArray itself"
            )
        item = data[item]
    if not isinstance(item, xr.DataArray):
        raise TypeError(f"a modulator must be a variable name or a DataArray, not {type(item)}")
    name = str(item.name) if item.name is not None else f"modulator{index}"
    if time_dim not in item.dims:
        raise ValueError(f"modulator {name!r} has no {time_dim!r} dimension ({item.dims})")
    if item.ndim == 1:
        return item.expand_dims(modulator=[name], axis=1)
    if item.ndim == 2:
        other = next(d for d in item.dims if d != time_dim)
        labels = item[other].values if other in item.coords else range(item.sizes[other])
        stacked = item.transpose(time_dim, other).rename({other: "modulator"})
        stacked = stacked.drop_vars("modulator", errors="ignore")
        return stacked.assign_coords(modulator=[f"{name}_{v}" for v in labels])
    raise ValueError(f"modulator {name!r} must be 1-D or 2-D over time, got dims {item.dims}")


def _check_clock(reference: xr.DataArray, other: xr.DataArray, name: str, time_dim: str) -> None:
    n_ref, n_other = reference.sizes[time_dim], other.sizes[time_dim]
    if n_ref != n_other:
        raise ValueError(
            f"modulator {name!r} has {n_other} samples but the activity has {n_ref} frames; "
            "put it on the imaging clock first with mics.preprocessing.align_to_frames"
        )
    if time_dim in reference.coords and time_dim in other.coords:
        a, b = reference[time_dim].values, other[time_dim].values
        same = np.array_equal(a, b) if a.dtype.kind not in "fc" else np.allclose(a, b)
        if not same:
            raise ValueError(
                f"modulator {name!r} has as many samples as the activity but a different "
                f"clock ({b[0]}..{b[-1]} vs {a[0]}..{a[-1]}); align it with "
                "mics.preprocessing.align_to_frames"
            )


def _check_axes(activity: xr.DataArray, time_dim: str, neuron_dim: str) -> None:
    """Unique neuron ids and a time axis that moves forward (or trials that restart it)."""
    if activity.sizes[time_dim] == 0:
        raise ValueError(f"the activity has no samples along {time_dim!r}")
    if neuron_dim in activity.coords:
        ids, counts = np.unique(activity[neuron_dim].values, return_counts=True)
        if np.any(counts > 1):
            raise ValueError(
                f"the activity has duplicate {neuron_dim} ids {ids[counts > 1].tolist()[:10]}; "
                "selections by id would be ambiguous"
            )
    if time_dim in activity.coords and "trial" not in activity.coords:
        t = activity[time_dim].values
        if (
            t.size > 1
            and t.dtype.kind in "iufmM"
            and not np.all(np.diff(t) > np.diff(t).dtype.type(0))
        ):
            raise ValueError(
                f"the {time_dim!r} coordinate is not increasing; sort the recording "
                f"(ds.sortby({time_dim!r})) or drop repeated frames"
            )


def build_inputs(
    data: xr.Dataset | xr.DataArray,
    source: Mapping[str, Any] | Sequence[Any],
    target: Mapping[str, Any] | Sequence[Any],
    modulators: Sequence[str | xr.DataArray] | str | xr.DataArray | None = None,
    *,
    variable: str | None = None,
    dropna: bool = False,
    allow_overlap: bool = False,
    time_dim: str = "time",
    neuron_dim: str = "neuron",
) -> tuple[xr.DataArray, xr.DataArray, xr.DataArray | None]:
    """Split one recording into source X, target Y and modulator Z on a common clock.

    Parameters
    ----------
    data : Dataset or DataArray
        A loader's output (e.g. :func:`load_nwb`), or an activity DataArray
        (``time``, ``neuron``) -- then modulators must be given as DataArrays.
    source, target : dict or sequence
        ``{coordinate: value or list of values}`` matched against coordinates
        along ``neuron`` (e.g. ``{"area": "V1"}``, ``{"iscell": True}``);
        several keys must all match. A sequence selects neuron ids directly.
    modulators : str, DataArray, or list of them, optional
        Variable names in ``data`` (``["speed", "pupil"]``) or DataArrays over
        ``time``; 2-D modulators contribute one column per component.
    variable : str, optional
        Activity variable of a Dataset when there are several (``"F"``, ``"spks"``).
    dropna : bool, default=False
        Drop time points where X, Y or Z has a NaN (behaviour gaps). Without
        it, NaNs are an error.
    allow_overlap : bool, default=False
        Allow a neuron to be in both source and target (normally a mistake:
        it would predict itself).
    time_dim, neuron_dim : str

    Returns
    -------
    X : DataArray of shape (T, p), dims (time, neuron)
    Y : DataArray of shape (T, q), dims (time, neuron)
    Z : DataArray of shape (T, m), dims (time, modulator), or None without modulators

    Raises
    ------
    ValueError
        On empty or overlapping selections, unknown names, modulators on another
        clock or of another length, or NaNs without ``dropna=True``.
    """
    activity = _activity(data, variable, time_dim, neuron_dim)
    _check_axes(activity, time_dim, neuron_dim)
    X = _select(activity, source, "source", neuron_dim)
    Y = _select(activity, target, "target", neuron_dim)
    shared = np.intersect1d(X[neuron_dim].values, Y[neuron_dim].values)
    if shared.size and not allow_overlap:
        raise ValueError(
            f"{shared.size} neuron(s) are in both source and target (e.g. {shared[:5].tolist()}); "
            "choose disjoint populations or pass allow_overlap=True"
        )

    Z = None
    if modulators is not None:
        items = [modulators] if isinstance(modulators, str | xr.DataArray) else list(modulators)
        columns, units = [], []
        for index, item in enumerate(items):
            column = _modulator(data, item, index, time_dim)
            units += [str(column.attrs.get("units", ""))] * column.sizes["modulator"]
            _check_clock(activity, column, str(column.modulator.values[0]), time_dim)
            # Take the activity's clock verbatim so that float round-off cannot misalign.
            if time_dim in activity.coords:
                column = column.assign_coords({time_dim: activity[time_dim].values})
            columns.append(column.reset_coords(drop=True).astype(float))
        if not columns:
            raise ValueError("modulators is empty; pass None for no modulator")
        Z = xr.concat(columns, dim="modulator").transpose(time_dim, "modulator")
        if time_dim in activity.coords:
            Z = Z.assign_coords({time_dim: activity[time_dim]})
        Z.name = "Z"
        Z.attrs = {"fs": activity.attrs["fs"]} if "fs" in activity.attrs else {}
        if any(units):
            # each modulator keeps its own units (running speed in cm/s, pupil in
            # pixels...): the figures label their axes with them
            Z = Z.assign_coords(units=("modulator", units))

    bad = np.isnan(X.values).any(axis=1) | np.isnan(Y.values).any(axis=1)
    if Z is not None:
        bad |= np.isnan(Z.values).any(axis=1)
    if bad.any():
        if not dropna:
            raise ValueError(
                f"{int(bad.sum())} of {bad.size} time points have NaN in the source, target "
                "or modulators (e.g. behaviour gaps); pass dropna=True to drop them"
            )
        keep, dropped = ~bad, {"n_dropped_nan": int(bad.sum())}
        X = X.isel({time_dim: keep}).assign_attrs(dropped)
        Y = Y.isel({time_dim: keep}).assign_attrs(dropped)
        Z = Z.isel({time_dim: keep}).assign_attrs(dropped) if Z is not None else None
    return X.rename("X"), Y.rename("Y"), Z
