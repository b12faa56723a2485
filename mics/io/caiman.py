"""CaImAn CNMF results saved with ``cnm.save('file.hdf5')`` -> xarray.Dataset.

CaImAn writes its ``Estimates`` and ``CNMFParams`` objects as nested HDF5
groups: ``estimates/C`` (denoised traces), ``estimates/F_dff`` (dF/F, only if
``detrend_df_f`` was run), ``estimates/S`` (deconvolved activity), each of shape
(n_components, n_frames); ``estimates/idx_components`` (indices of accepted
components, after ``evaluate_components``); ``params/data/fr`` (frame rate,
Hz). Attributes that were ``None`` are stored as the string ``"NoneType"``.
Only plain datasets are read (through h5py); nothing is unpickled.
"""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import Any

import numpy as np
import xarray as xr

from mics.io._common import (
    check_fs,
    existing_file,
    frame_clock,
    position_coords,
    require,
    weighted_centres,
    with_rate_on_variables,
)

__all__ = ["load_caiman"]

_TRACES = {
    "C": "denoised calcium traces (a.u.)",
    "F_dff": "dF/F (dimensionless)",
    "S": "deconvolved activity (a.u.)",
}


def _is_none(dataset: Any) -> bool:
    """CaImAn's encoding of None: a scalar string dataset 'NoneType'."""
    if dataset.dtype.kind not in "SOU" or dataset.shape not in ((), (1,)):
        return False
    value = dataset[()]
    value = value.item() if isinstance(value, np.ndarray) else value
    if isinstance(value, bytes):
        value = value.decode(errors="replace")
    return value == "NoneType"


def _read(group: Any, name: str) -> np.ndarray | None:
    if name not in group or not hasattr(group[name], "dtype") or _is_none(group[name]):
        return None
    return np.asarray(group[name][()])


def _footprint_centres(est: Any, n_components: int) -> np.ndarray | None:
    """Centre of mass of every spatial footprint (pixels), as ``(x, y[, z])``.

    ``estimates/A`` is a sparse (n_pixels, n_components) matrix saved as a
    CSC group (``data``, ``indices``, ``indptr``, ``shape``); a pixel's index
    is its position in the frame flattened in Fortran order over
    ``estimates/dims`` = (d1, d2[, d3]), d1 the rows (y) and d2 the columns
    (x) of CaImAn's movies. None when the file has no footprints.
    """
    group = est.get("A")
    dims = _read(est, "dims")
    if not hasattr(group, "keys") or dims is None:  # absent, or saved as None
        return None
    if not all(k in group for k in ("data", "indices", "indptr")):
        return None
    dims = tuple(int(d) for d in np.asarray(dims).ravel())
    data = np.asarray(group["data"][()], dtype=float)
    indices = np.asarray(group["indices"][()], dtype=np.int64)
    indptr = np.asarray(group["indptr"][()], dtype=np.int64)
    if indptr.size != n_components + 1 or (indices.size and indices.max() >= np.prod(dims)):
        # The traces still load as before; only the positions are left out.
        warnings.warn(
            f"estimates/A holds {indptr.size - 1} footprints (dims {dims}) but the traces "
            f"have {n_components} components; the footprints do not match the traces, so "
            "the neurons get no x/y positions",
            UserWarning,
            stacklevel=3,
        )
        return None
    owner = np.repeat(np.arange(n_components), np.diff(indptr))
    rows_cols = np.column_stack(np.unravel_index(indices, dims, order="F"))
    # (row, column[, plane]) -> (x, y[, z]): column is x, row is y.
    pixels = rows_cols[:, [1, 0, *range(2, len(dims))]]
    return weighted_centres(owner, pixels, data, n_components)


def load_caiman(
    path: str | Path, fs: float | None = None, *, accepted_only: bool = False
) -> xr.Dataset:
    """Load CaImAn (CNMF / CNMF-E / OnACID) estimates from an HDF5 file.

    Parameters
    ----------
    path : str or Path
        The ``.hdf5`` file written by ``cnm.save``.
    fs : float, optional
        Frame rate (Hz); overrides ``params/data/fr``, required if it is absent.
    accepted_only : bool, default=False
        Keep only the components listed in ``idx_components``.

    Returns
    -------
    xarray.Dataset
        Variables among ``C``, ``F_dff``, ``S`` (those present), dims
        (``time``, ``neuron``). Coordinates: ``time`` (s), ``neuron``
        (component index), ``iscell`` (bool, True for accepted components;
        all True if the file has no component evaluation), and when the file
        holds the spatial footprints ``estimates/A`` also ``x``, ``y`` (``z``
        for 3-D data): each footprint's centre of mass in pixels, x along
        the image columns and y along its rows. Attributes: ``fs``
        (Hz), ``source``, ``loader``.

    Raises
    ------
    FileNotFoundError
        If the file does not exist.
    ValueError
        If it is not HDF5, lacks the ``estimates`` group or any trace, has
        traces of disagreeing shapes, or no frame rate.
    """
    h5py = require("h5py", "reading CaImAn HDF5 files")
    path = existing_file(path, "CaImAn file")
    try:
        handle = h5py.File(path, "r")
    except OSError as err:
        raise ValueError(f"{path} is not an HDF5 file ({err})") from None
    with handle:
        if "estimates" not in handle:
            raise ValueError(
                f"{path} has no 'estimates' group (top-level keys: {list(handle)}); "
                "expected a file written by CaImAn's cnm.save('....hdf5')"
            )
        est = handle["estimates"]
        traces = {name: _read(est, name) for name in _TRACES}
        traces = {name: a for name, a in traces.items() if a is not None}
        if not traces:
            raise ValueError(f"{path}: estimates holds none of C, F_dff, S")
        idx = _read(est, "idx_components")
        first = next(iter(traces.values()))
        centres = _footprint_centres(est, first.shape[0]) if first.ndim == 2 else None
        stored_fr = None
        if "params" in handle and "data" in handle["params"]:
            stored_fr = _read(handle["params/data"], "fr")

    shape = next(iter(traces.values())).shape
    for name, array in traces.items():
        if array.ndim != 2 or array.shape != shape:
            raise ValueError(
                f"estimates/{name} has shape {array.shape}, expected {shape} "
                "(n_components, n_frames) like the other traces"
            )
    n_components, n_frames = shape
    if fs is not None:
        fs = check_fs(fs, "the fs argument")
    elif stored_fr is not None:
        fs = check_fs(stored_fr, "params/data/fr")
    else:
        raise ValueError(f"{path} stores no frame rate (params/data/fr); pass fs=<Hz>")

    iscell = np.ones(n_components, dtype=bool)
    if idx is not None:
        idx = np.asarray(idx, dtype=int).ravel()
        if idx.size and (idx.min() < 0 or idx.max() >= n_components):
            raise ValueError(f"idx_components refers to components outside 0..{n_components - 1}")
        iscell[:] = False
        iscell[idx] = True
    ds = xr.Dataset(
        {
            name: (("time", "neuron"), array.T, {"description": _TRACES[name]})
            for name, array in traces.items()
        },
        coords={
            "time": ("time", frame_clock(n_frames, fs), {"units": "s"}),
            "neuron": ("neuron", np.arange(n_components)),
            "iscell": ("neuron", iscell),
            **({} if centres is None else position_coords(centres, "CaImAn footprints (A)")),
        },
        attrs={
            "fs": fs,
            "evaluated": int(idx is not None),
            "source": str(path.resolve()),
            "loader": "mics.io.load_caiman",
        },
    )
    ds = with_rate_on_variables(ds)
    return ds.isel(neuron=iscell) if accepted_only else ds
