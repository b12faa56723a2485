"""Boundary between labelled (xarray) inputs and the plain-array numerical core.

The estimators follow the nemos pattern: a labelled input is *unwrapped* once at
the public boundary into a ``(T, n)`` NumPy array plus a :class:`LabelInfo`
recording what the rows and columns were; the core never sees xarray; outputs
are *re-wrapped* with the recorded coordinates, so that a pattern matrix comes
back indexed by the user's neuron ids rather than by column position.

NumPy inputs pass through untouched (``info is None``) and every ``wrap_*``
helper returns its array unchanged when it has no labels to attach, so an
estimator can call them unconditionally.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import xarray as xr

__all__ = ["LabelInfo", "unwrap", "wrap_matrix", "wrap_patterns", "wrap_timeseries"]


@dataclass(frozen=True)
class LabelInfo:
    """What an unwrapped DataArray's rows and columns were.

    Attributes
    ----------
    name : str
        Role of the input at the boundary (``"X"``, ``"Y"``, ``"Z"``, ...); used
        to disambiguate dimension names when two inputs meet in one output.
    time_dim : str
        Name of the time dimension.
    time : ndarray of shape (T,) or None
        Time coordinate values (seconds for the ``mics.io`` loaders), or None
        when the input had a time dimension without a coordinate.
    time_coords : dict of str to ndarray
        Other coordinates along the time dimension (e.g. ``trial``).
    feature_dim : str
        Name of the non-time dimension (``"neuron"``, ``"modulator"``, ...).
    features : ndarray of shape (n,)
        Coordinate values along ``feature_dim`` (neuron ids, modulator names).
    feature_coords : dict of str to ndarray
        Other coordinates along the feature dimension (``area``, ``iscell``...).
    attrs : dict
        The DataArray's attributes (sampling rate, source file, units).
    """

    name: str
    time_dim: str
    time: np.ndarray | None
    feature_dim: str
    features: np.ndarray
    time_coords: dict[str, np.ndarray] = field(default_factory=dict)
    feature_coords: dict[str, np.ndarray] = field(default_factory=dict)
    attrs: dict[str, Any] = field(default_factory=dict)

    @property
    def n_features(self) -> int:
        return len(self.features)


def _coords_along(da: xr.DataArray, dim: str) -> dict[str, np.ndarray]:
    """Non-index coordinates that live on ``dim`` only (1-D along it)."""
    return {
        str(k): np.asarray(c.values) for k, c in da.coords.items() if k != dim and c.dims == (dim,)
    }


def _values(data: xr.DataArray) -> Any:
    """The values of a DataArray: a Dask array stays lazy (chunked inputs), else NumPy."""
    from mics.data.chunked import is_chunked

    return data.data if is_chunked(data) else np.asarray(data.values)


def unwrap(data: Any, name: str, *, time_dim: str = "time") -> tuple[Any, LabelInfo | None]:
    """Strip labels from an input, keeping what is needed to put them back.

    Parameters
    ----------
    data : ndarray or xarray.DataArray
        NumPy (or any non-xarray) input is returned untouched. A DataArray may
        have its dimensions in any order: the time dimension is found by name,
        the other dimension is the feature (neuron / modulator) dimension. A
        1-D DataArray over time becomes a single column.
    name : str
        Role of the input (``"X"``, ``"Y"``, ``"Z"``), used in error messages
        and recorded in the returned info.
    time_dim : str, default="time"
        Name of the time dimension.

    Returns
    -------
    array : ndarray of shape (T, n)
        The values, time along rows (``data`` itself for non-xarray input).
    info : LabelInfo or None
        None for non-xarray input.

    Raises
    ------
    TypeError
        For an ``xarray.Dataset`` (a variable must be chosen).
    ValueError
        When the DataArray has no ``time_dim`` or more than two dimensions.
    """
    if isinstance(data, xr.Dataset):
        raise TypeError(
            f"{name} is an xarray.Dataset; pass one of its variables as a DataArray "
            f"(variables: {list(data.data_vars)}), or build inputs with mics.io.build_inputs"
        )
    if not isinstance(data, xr.DataArray):
        return data, None
    if time_dim not in data.dims:
        raise ValueError(
            f"{name} has dimensions {tuple(map(str, data.dims))} but no {time_dim!r} dimension; "
            f"rename the time dimension (da.rename({{'old': {time_dim!r}}})) or pass time_dim="
        )
    if data.ndim > 2:
        raise ValueError(
            f"{name} must be (time, feature); got {data.ndim} dimensions "
            f"{tuple(map(str, data.dims))}. Stack the extra dimensions first, "
            "e.g. da.stack(neuron=('plane', 'roi'))"
        )
    time = np.asarray(data[time_dim].values) if time_dim in data.coords else None
    if data.ndim == 1:
        # A single modulator (running speed, pupil): one column named after the variable.
        feature_dim = "feature"
        features = np.asarray([data.name if data.name is not None else name])
        array = _values(data).reshape(-1, 1)
        feature_coords: dict[str, np.ndarray] = {}
    else:
        feature_dim = str(next(d for d in data.dims if d != time_dim))
        data = data.transpose(time_dim, feature_dim)
        features = (
            np.asarray(data[feature_dim].values)
            if feature_dim in data.coords
            else np.arange(data.sizes[feature_dim])
        )
        array = _values(data)
        feature_coords = _coords_along(data, feature_dim)
    _check_labels(name, time_dim, time, feature_dim, features, data)
    info = LabelInfo(
        name=name,
        time_dim=time_dim,
        time=time,
        feature_dim=feature_dim,
        features=features,
        time_coords=_coords_along(data, time_dim),
        feature_coords=feature_coords,
        attrs=dict(data.attrs),
    )
    return array, info


def _check_labels(name, time_dim, time, feature_dim, features, data) -> None:
    """Refuse labels that would silently mis-assign results.

    Duplicate neuron ids make patterns and predictions ambiguous to index.
    A time coordinate that goes backwards usually means concatenated
    sessions or a wrong sort; blocked folds and circular shifts assume time
    order, so it is refused unless samples carry a ``trial`` coordinate
    (trial-relative clocks restart in every trial).
    """
    uniq, counts = np.unique(features, return_counts=True)
    if np.any(counts > 1):
        dup = uniq[counts > 1]
        raise ValueError(
            f"{name} has duplicate {feature_dim} ids {dup.tolist()[:5]}; every neuron needs "
            f"its own id (e.g. da.assign_coords({feature_dim}=np.arange(n)))."
        )
    if time is None or time.size < 2 or time.dtype.kind not in "iufmM":
        return
    if "trial" in data.coords and data["trial"].dims == (time_dim,):
        return
    step = np.diff(time)
    bad = np.flatnonzero(~(step > step.dtype.type(0)))
    if bad.size:
        i = int(bad[0])
        raise ValueError(
            f"{name}'s {time_dim!r} coordinate is not increasing ({time[i]} then {time[i + 1]} "
            f"at index {i + 1}); sort it (da.sortby({time_dim!r})) or drop repeated samples."
        )


def _feature_coords(info: LabelInfo) -> dict[str, tuple[str, np.ndarray]]:
    dim = info.feature_dim
    coords = {dim: (dim, info.features)}
    coords.update({key: (dim, values) for key, values in info.feature_coords.items()})
    return coords


def _check_len(n: int, info: LabelInfo, what: str) -> None:
    if n != info.n_features:
        raise ValueError(
            f"{what} has {n} entries but {info.name} had {info.n_features} "
            f"{info.feature_dim} labels"
        )


def wrap_patterns(
    array: np.ndarray, info: LabelInfo | None, component_dim: str = "channel"
) -> Any:
    """Label a loading matrix (neurons x components) with the input's feature ids.

    Parameters
    ----------
    array : ndarray of shape (n_features, K)
        E.g. ``source_patterns_`` (p, K) or ``source_subspace_`` (p, rank).
    info : LabelInfo or None
        From :func:`unwrap` of the input whose features index the rows.
    component_dim : str, default="channel"
        Name of the column dimension (``"channel"``, ``"rank"``...).

    Returns
    -------
    DataArray of dims (feature_dim, component_dim), or ``array`` unchanged when
    ``info`` is None.
    """
    if info is None:
        return array
    array = np.asarray(array)
    if array.ndim == 1:
        array = array[:, None]
    _check_len(array.shape[0], info, "pattern matrix")
    dim = info.feature_dim
    coords = _feature_coords(info)
    coords[component_dim] = (component_dim, np.arange(array.shape[1]))
    return xr.DataArray(array, dims=(dim, component_dim), coords=coords)


def wrap_timeseries(
    array: np.ndarray, info_time: LabelInfo | None, info_features: LabelInfo | None
) -> Any:
    """Label a (time, feature) prediction with one input's clock and another's ids.

    Parameters
    ----------
    array : ndarray of shape (T, n)
        E.g. ``predict(X, Z)`` of shape (T, q).
    info_time : LabelInfo or None
        Info of the input that provides the time axis (``X`` at predict time).
    info_features : LabelInfo or None
        Info of the input that provides the column labels (``Y`` seen in fit).

    Returns
    -------
    DataArray of dims (time, feature), or ``array`` unchanged when both infos
    are None. A missing side gets a default integer index.
    """
    if info_time is None and info_features is None:
        return array
    array = np.asarray(array)
    if array.ndim == 1:
        array = array[:, None]
    time_dim = info_time.time_dim if info_time is not None else "time"
    coords: dict[str, tuple[str, np.ndarray]] = {}
    if info_time is not None:
        if info_time.time is not None:
            if len(info_time.time) != array.shape[0]:
                raise ValueError(
                    f"time series has {array.shape[0]} samples but {info_time.name} "
                    f"had {len(info_time.time)}"
                )
            coords[time_dim] = (time_dim, info_time.time)
        for key, values in info_time.time_coords.items():
            coords[key] = (time_dim, values)
    if info_features is not None:
        _check_len(array.shape[1], info_features, "time series")
        feature_dim = info_features.feature_dim
        coords.update(_feature_coords(info_features))
    else:
        feature_dim = "feature"
    return xr.DataArray(array, dims=(time_dim, feature_dim), coords=coords)


def wrap_matrix(array: np.ndarray, row_info: LabelInfo | None, col_info: LabelInfo | None) -> Any:
    """Label a (p, q) matrix such as the communication matrix B(z).

    When the row and column inputs use the same feature dimension name (both
    ``"neuron"``), each dimension is prefixed with its input's role
    (``"X_neuron"``, ``"Y_neuron"``) so that the matrix stays two-dimensional.

    Parameters
    ----------
    array : ndarray of shape (p, q)
    row_info, col_info : LabelInfo or None
        Infos of the inputs indexing rows (source) and columns (target).

    Returns
    -------
    DataArray of dims (row_dim, col_dim), or ``array`` unchanged when both
    infos are None.
    """
    if row_info is None and col_info is None:
        return array
    array = np.asarray(array)
    row_dim = row_info.feature_dim if row_info is not None else "row"
    col_dim = col_info.feature_dim if col_info is not None else "column"
    if row_dim == col_dim:
        row_dim = f"{row_info.name}_{row_dim}" if row_info is not None else "row"
        col_dim = f"{col_info.name}_{col_dim}" if col_info is not None else "column"
        if row_dim == col_dim:  # both inputs had the same role name too
            row_dim, col_dim = f"row_{row_dim}", f"column_{col_dim}"
    coords: dict[str, tuple[str, np.ndarray]] = {}
    for info, dim, n, what in (
        (row_info, row_dim, array.shape[0], "rows"),
        (col_info, col_dim, array.shape[1], "columns"),
    ):
        if info is None:
            continue
        _check_len(n, info, f"matrix {what}")
        coords[dim] = (dim, info.features)
        for key, values in info.feature_coords.items():
            coords[f"{dim}_{key}" if dim != info.feature_dim else key] = (dim, values)
    return xr.DataArray(array, dims=(row_dim, col_dim), coords=coords)
