"""Save a fitted :class:`mics.MICs` to netCDF and reopen it, without pickle.

A saved model is an ordinary netCDF file that xarray (or any netCDF reader)
opens: every public fitted attribute (the names ending in ``_``) is one
variable (entries of a dict attribute such as ``cv_results_`` are
``cv_results_.<key>``); labelled attributes keep their coordinates, with
their dimension and coordinate names prefixed by the attribute's name
(``source_patterns_.neuron``) because source and target neurons may share a
dimension name but not their ids. Scalars, hyperparameters and a layout that
says how to rebuild each attribute are JSON strings in the global
attributes, next to a format name and version.

Of the labelled inputs, the neuron / modulator ids and per-neuron
coordinates are kept, with the inputs' scalar attributes; the training time
axis is not (predictions take their clock from the data passed to
``predict``).

Nothing is executed on load: the file holds numbers, strings and JSON only,
so opening a file from someone else is safe. The attributes are serialised
generically, so fitted attributes added later are saved without changes
here.
"""

from __future__ import annotations

import json
import numbers
import os
import warnings
from pathlib import Path

import numpy as np
import xarray as xr
from sklearn.exceptions import NotFittedError
from sklearn.utils.validation import check_is_fitted

from mics._version import __version__
from mics.data.labels import LabelInfo

__all__ = ["FORMAT_NAME", "FORMAT_VERSION", "model_to_dataset", "model_from_dataset", "load"]

#: Value of the ``mics_format`` attribute of every saved model.
FORMAT_NAME = "mics.MICs"
#: Version of the file layout; files with a larger version are refused.
FORMAT_VERSION = 1

_ROLES = ("X", "Y", "Z")
_SEP = "."
# Estimator classes by name, filled by @register (see register).
_ESTIMATORS = {}


def _scalar(value):
    """A JSON-able Python scalar, or None when ``value`` is not a plain scalar."""
    if value is None or isinstance(value, (bool, str)):
        return value
    if isinstance(value, np.bool_):
        return bool(value)
    if isinstance(value, numbers.Integral):
        return int(value)
    if isinstance(value, numbers.Real):
        return float(value)
    return _NOT_SCALAR


_NOT_SCALAR = object()


def _params(model):
    """Hyperparameters as JSON; objects (a CV splitter, a RandomState) are left out."""
    kept, dropped = {}, {}
    for name, value in model.get_params(deep=False).items():
        if isinstance(value, range):
            kept[name] = {"range": [value.start, value.stop, value.step]}
            continue
        if isinstance(value, (list, tuple, np.ndarray)):
            # candidate lists (alpha_channels=[...], sparsity=(...)) are plain
            # numbers: kept, with their container, so a refit chooses among them
            items = [_scalar(v) for v in np.asarray(value, dtype=object).ravel()]
            if np.ndim(value) == 1 and all(v is not _NOT_SCALAR for v in items):
                kind = "tuple" if isinstance(value, tuple) else "list"
                kept[name] = {"sequence": items, "type": kind}
                continue
        plain = _scalar(value)
        if plain is _NOT_SCALAR:
            dropped[name] = repr(value)
        else:
            kept[name] = plain
    if dropped:
        warnings.warn(
            f"hyperparameters {sorted(dropped)} are objects and are not saved; the reopened "
            "model predicts identically but refits with their defaults.",
            UserWarning,
            stacklevel=5,  # the caller of MICs.to_netcdf
        )
    return kept, dropped


def _param_value(stored):
    """A hyperparameter as :func:`_params` stored it (a range or a candidate list decoded)."""
    if isinstance(stored, dict) and "range" in stored:
        return range(*stored["range"])
    if isinstance(stored, dict) and "sequence" in stored:
        return tuple(stored["sequence"]) if stored["type"] == "tuple" else list(stored["sequence"])
    return stored


def _storable(values):
    """Object arrays (ids read by pandas, mixed types) are written as strings."""
    values = np.asarray(values)
    return values.astype(str) if values.dtype == object else values


def _memory_order(value):
    # netCDF stores C order; a fitted array that was a transposed view is put
    # back in Fortran order on load, so BLAS takes the same path and results
    # (B(z), predictions) stay bit-identical rather than equal to rounding.
    array = np.asarray(value)
    return "F" if array.ndim > 1 and not array.flags.c_contiguous else "C"


def _add_array(variables, name, value):
    """Store a fitted array or DataArray under ``name``; return its layout entry."""
    if isinstance(value, xr.DataArray):
        prefix = f"{name}{_SEP}"
        renamed = value.rename({k: prefix + str(k) for k in [*value.dims, *value.coords]})
        renamed = renamed.drop_attrs() if hasattr(renamed, "drop_attrs") else renamed
        variables[name] = renamed
        return {
            "kind": "dataarray",
            "dims": [str(d) for d in value.dims],
            "coords": [str(c) for c in value.coords],
            "order": _memory_order(value),
        }
    array = _storable(value)
    variables[name] = xr.Variable([f"{name}{_SEP}dim{i}" for i in range(array.ndim)], array)
    return {"kind": "array", "order": _memory_order(array)}


def _add_labels(variables, info, role):
    """The feature ids (and per-feature coordinates) of one labelled input."""
    dim = f"label{_SEP}{role}"
    variables[dim] = xr.Variable(dim, _storable(info.features))
    coords = []
    for key, values in info.feature_coords.items():
        variables[f"{dim}{_SEP}{key}"] = xr.Variable(dim, _storable(values))
        coords.append(str(key))
    attrs = {k: _scalar(v) for k, v in info.attrs.items()}
    return {
        "name": info.name,
        "time_dim": info.time_dim,
        "feature_dim": info.feature_dim,
        "feature_coords": coords,
        "attrs": {k: v for k, v in attrs.items() if v is not _NOT_SCALAR},
    }


def model_to_dataset(model):
    """Encode a fitted model as an ``xarray.Dataset`` ready for ``to_netcdf``.

    Parameters
    ----------
    model : mics.MICs
        A fitted model (with or without modulator, labelled or not).

    Returns
    -------
    ds : xarray.Dataset
        One variable per fitted array (see the module docstring), and the
        attributes ``mics_format``, ``mics_format_version``, ``mics_version``,
        ``estimator``, ``params``, ``layout`` and ``labels`` (JSON strings).

    Raises
    ------
    sklearn.exceptions.NotFittedError
        If the model is not fitted.
    TypeError
        If a fitted attribute has a type the format cannot hold.
    """

    _check_fitted(model)
    variables, layout = {}, {}
    for name, value in sorted(vars(model).items()):
        if not name.endswith("_") or name.startswith("_"):
            continue
        plain = _scalar(value)
        if plain is not _NOT_SCALAR:
            layout[name] = {"kind": "scalar", "value": plain}
        elif isinstance(value, dict):
            entries = {}
            for key, item in value.items():
                item_plain = _scalar(item)
                if item_plain is not _NOT_SCALAR:
                    entries[str(key)] = {"kind": "scalar", "value": item_plain}
                else:
                    entries[str(key)] = _add_array(variables, f"{name}{_SEP}{key}", item)
            layout[name] = {"kind": "dict", "entries": entries}
        elif isinstance(value, (np.ndarray, xr.DataArray, list, tuple)):
            layout[name] = _add_array(variables, name, value)
        else:
            raise TypeError(
                f"fitted attribute {name} of type {type(value).__name__} cannot be saved."
            )
    labels = {}
    for role, info in zip(_ROLES, model.input_labels or (), strict=False):
        if info is not None:
            labels[role] = _add_labels(variables, info, role)
    params, dropped = _params(model)
    ds = xr.Dataset(variables)
    ds.attrs = {
        "mics_format": FORMAT_NAME,
        "mics_format_version": np.int32(FORMAT_VERSION),
        "mics_version": __version__,
        "estimator": type(model).__name__,
        "params": json.dumps(params),
        "params_not_saved": json.dumps(dropped),
        "layout": json.dumps(layout),
        "labels": json.dumps(labels),
        "y_1d": np.int8(model.target_is_1d),
        "title": f"fitted {type(model).__name__} model (reopen with mics.load)",
    }
    return ds


def _read_array(ds, name, entry):
    values = np.asarray(ds[name].values, order=entry.get("order", "C"))
    if entry["kind"] == "array":
        return values
    prefix = f"{name}{_SEP}"
    da = ds[name]
    keep = {prefix + c for c in entry["coords"]}
    da = da.drop_vars([c for c in da.coords if c not in keep])
    da = da.rename({prefix + k: k for k in [*entry["dims"], *entry["coords"]]})
    return xr.DataArray(values, dims=da.dims, coords=da.coords)


def _read_labels(ds, meta):
    infos = []
    for role in _ROLES:
        if role not in meta:
            infos.append(None)
            continue
        entry = meta[role]
        dim = f"label{_SEP}{role}"
        infos.append(
            LabelInfo(
                name=entry["name"],
                time_dim=entry["time_dim"],
                time=None,
                feature_dim=entry["feature_dim"],
                features=np.asarray(ds[dim].values),
                feature_coords={
                    key: np.asarray(ds[f"{dim}{_SEP}{key}"].values)
                    for key in entry["feature_coords"]
                },
                attrs=dict(entry["attrs"]),
            )
        )
    return tuple(infos) if any(i is not None for i in infos) else None


def _check_format(ds, source):
    fmt = ds.attrs.get("mics_format")
    if fmt != FORMAT_NAME:
        raise ValueError(
            f"{source} is not a model saved by mics (no mics_format={FORMAT_NAME!r} attribute); "
            "save models with MICs.to_netcdf(path)."
        )
    version = ds.attrs.get("mics_format_version")
    try:
        version = int(version)
    except (TypeError, ValueError):
        raise ValueError(f"{source} has an unreadable mics_format_version {version!r}.") from None
    if version > FORMAT_VERSION:
        raise ValueError(
            f"{source} was written in mics model format version {version} by mics "
            f"{ds.attrs.get('mics_version', '?')}; this mics reads versions up to "
            f"{FORMAT_VERSION}. Upgrade mics to open it."
        )
    if version < 1:
        raise ValueError(f"{source} has an invalid mics_format_version {version}.")


def model_from_dataset(ds, source="dataset"):
    """Rebuild a fitted model from the Dataset of :func:`model_to_dataset`.

    Parameters
    ----------
    ds : xarray.Dataset
    source : str
        How to name the input in error messages (e.g. the file path).

    Returns
    -------
    model : mics.MICs

    Raises
    ------
    ValueError
        If ``ds`` is not a saved mics model, or was written in a newer format.
    """
    _check_format(ds, source)
    MICs = _ESTIMATORS.get(ds.attrs.get("estimator"))
    if MICs is None:
        raise ValueError(f"{source} holds a {ds.attrs.get('estimator')!r}, not a MICs model.")
    params = json.loads(ds.attrs["params"])
    params = {k: _param_value(v) for k, v in params.items()}
    known = MICs().get_params(deep=False)
    unknown = sorted(set(params) - set(known))
    if unknown:
        warnings.warn(
            f"{source} sets hyperparameters {unknown} that this mics does not have; ignored.",
            UserWarning,
            stacklevel=3,
        )
    model = MICs(**{k: v for k, v in params.items() if k in known})
    for name, entry in json.loads(ds.attrs["layout"]).items():
        if entry["kind"] == "scalar":
            value = entry["value"]
        elif entry["kind"] == "dict":
            value = {
                key: item["value"]
                if item["kind"] == "scalar"
                else _read_array(ds, f"{name}{_SEP}{key}", item)
                for key, item in entry["entries"].items()
            }
        else:
            value = _read_array(ds, name, entry)
        setattr(model, name, value)
    model.restore_inputs(
        _read_labels(ds, json.loads(ds.attrs.get("labels", "{}"))),
        bool(int(ds.attrs.get("y_1d", 0))),
    )
    return model


def register(cls):
    """Class decorator: the estimator class that :func:`load` rebuilds for its name.

    Persistence sits below the estimator it saves, so it learns the class
    from the class itself rather than importing it.
    """
    _ESTIMATORS[cls.__name__] = cls
    return cls


def save(model, path):
    """Write a fitted model to a netCDF file (see :meth:`mics.MICs.to_netcdf`)."""
    ds = model_to_dataset(model)
    ds.to_netcdf(path, engine="netcdf4")
    return Path(path)


def load(path):
    """Reopen a model saved with :meth:`mics.MICs.to_netcdf`.

    Parameters
    ----------
    path : str or path-like
        A netCDF file written by ``MICs.to_netcdf``.

    Returns
    -------
    model : mics.MICs
        Fitted, with its hyperparameters, labels (neuron ids, modulator
        names) and every fitted attribute restored: ``predict``, ``score``,
        ``decompose``, ``communication_matrix`` and the figures of
        :mod:`mics.plotting` give what the saved model gave.

    Raises
    ------
    FileNotFoundError
        If ``path`` does not exist.
    ValueError
        If the file is not netCDF, not a saved mics model, or was written in
        a newer format version than this mics reads.
    """
    path = Path(os.fspath(path))
    if not path.is_file():
        raise FileNotFoundError(f"no model file at {path}.")
    try:
        with xr.open_dataset(path, engine="netcdf4") as opened:
            ds = opened.load()
    except (OSError, ValueError) as err:
        raise ValueError(
            f"{path} is not a netCDF file written by MICs.to_netcdf ({err})."
        ) from None
    return model_from_dataset(ds, source=str(path))


def _check_fitted(model):
    try:
        check_is_fitted(model)
    except NotFittedError:
        raise NotFittedError(
            f"This {type(model).__name__} is not fitted: fit it before saving."
        ) from None
