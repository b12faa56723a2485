"""NWB optical-physiology files -> xarray.Dataset (through pynwb).

What is read:

- every ``RoiResponseSeries`` of the ophys processing module, inside a
  ``DfOverF`` or ``Fluorescence`` container. Each series is one population; its
  neurons get a ``population`` label (the ROI table's name) and an ``area``
  label (a per-ROI ``area``/``location``/``brain_area`` column of the ROI table
  if there is one, else the imaging plane's ``location``). Two imaging planes
  or two ROI tables standing for two areas thus become one ``neuron``
  dimension that :func:`mics.io.build_inputs` can split by ``area``.
- behavioural ``TimeSeries`` (running speed, pupil...) from the ``behavior``
  processing module and from ``acquisition``, each resampled onto the imaging
  frames with :func:`mics.preprocessing.align_to_frames`.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import xarray as xr

from mics.io._common import (
    check_fs,
    existing_file,
    position_coords,
    require,
    weighted_centres,
    with_rate_on_variables,
)

__all__ = ["load_nwb"]

_AREA_COLUMNS = ("area", "brain_area", "location")


def _series_times(series: Any) -> np.ndarray:
    """Sample times (s) of an NWB TimeSeries: explicit timestamps or start + k / rate."""
    n = series.data.shape[0]
    if series.timestamps is not None:
        return np.asarray(series.timestamps[:], dtype=float)
    rate = check_fs(series.rate, f"the rate of NWB series {series.name!r}")
    start = float(series.starting_time or 0.0)
    return start + np.arange(n) / rate


def _roi_series(nwbfile: Any, module_name: str, kind: str) -> tuple[list, str]:
    """The RoiResponseSeries to load, and which container they came from."""
    if module_name not in nwbfile.processing:
        available = list(nwbfile.processing) or "none"
        raise ValueError(
            f"no {module_name!r} processing module in this NWB file (processing modules: "
            f"{available}); it holds no optical-physiology traces mics can read"
        )
    module = nwbfile.processing[module_name]
    containers: dict[str, list] = {"DfOverF": [], "Fluorescence": []}
    for interface in module.data_interfaces.values():
        kind_name = type(interface).__name__
        if kind_name in containers:
            containers[kind_name].extend(interface.roi_response_series.values())
    if kind == "auto":
        kind = "DfOverF" if containers["DfOverF"] else "Fluorescence"
    if kind not in containers:
        raise ValueError(f"kind must be 'auto', 'DfOverF' or 'Fluorescence', got {kind!r}")
    if not containers[kind]:
        raise ValueError(
            f"the {module_name!r} module has no {kind} RoiResponseSeries "
            f"(interfaces: {list(module.data_interfaces)})"
        )
    return containers[kind], kind


def _roi_labels(series: Any) -> dict[str, np.ndarray]:
    """ROI ids and population / area labels for the columns of one series."""
    region = series.rois
    table = region.table
    rows = np.asarray(region.data[:], dtype=int)
    ids = np.asarray(table.id[:])[rows]
    population = str(table.name)
    plane = getattr(table, "imaging_plane", None)
    area_column = next((c for c in _AREA_COLUMNS if c in (table.colnames or ())), None)
    if area_column is not None:
        area = np.asarray(table[area_column][:], dtype=str)[rows]
    else:
        location = getattr(plane, "location", None) or population
        area = np.full(rows.size, str(location))
    return {
        "roi_id": ids,
        "population": np.full(rows.size, population),
        "area": area,
        "imaging_plane": np.full(rows.size, str(getattr(plane, "name", ""))),
    }


def _mask_columns(records: Any) -> tuple[np.ndarray, np.ndarray]:
    """Pixel coordinates (n_pixels, d) and weights (n_pixels,) of a pixel/voxel mask column.

    The NWB schema stores each pixel as a compound ``(x, y[, z], weight)``.
    """
    records = np.asarray(records)
    if records.dtype.names:
        names = records.dtype.names
        table = np.column_stack([records[name].astype(float) for name in names])
    else:
        table = np.asarray(records, dtype=float).reshape(records.shape[0], -1)
    return table[:, :-1], table[:, -1]


def _roi_centres(table: Any, rows: np.ndarray) -> tuple[np.ndarray | None, str | None]:
    """Centre of every referenced ROI (pixels), from the ROI table's masks.

    Follows the NWB schema: ``pixel_mask`` entries are ``(x, y, weight)``,
    ``voxel_mask`` entries ``(x, y, z, weight)`` and ``image_mask`` has axes
    ``(roi, x, y)``. Returns ``(None, None)`` for a table without masks.
    """
    colnames = tuple(table.colnames or ())
    for column in ("pixel_mask", "voxel_mask"):
        if column in colnames:
            index = table[column]  # a VectorIndex: end offsets into the flat mask list
            ends = np.asarray(index.data[:], dtype=np.int64)
            pixels, weights = _mask_columns(index.target.data[:])
            owner = np.repeat(np.arange(ends.size), np.diff(ends, prepend=0))
            centres = weighted_centres(owner, pixels, weights, ends.size)
            return centres[rows], f"the NWB {column}"
    if "image_mask" in colnames:
        from scipy import ndimage

        data = table["image_mask"].data
        centres = np.full((rows.size, len(data.shape) - 1), np.nan)
        # One ROI at a time: a full stack of image masks can be larger than memory.
        for i, row in enumerate(rows):
            image = np.asarray(data[int(row)], dtype=float)
            image = np.where(np.isfinite(image) & (image > 0), image, 0.0)
            if image.sum() > 0:
                centres[i] = ndimage.center_of_mass(image)
        return centres, "the NWB image_mask"
    return None, None


def _shared_clock(series_list: list) -> np.ndarray:
    """One frame clock for all series; planes must share it to within half a frame."""
    clocks = [_series_times(s) for s in series_list]
    reference = clocks[0]
    for series, clock in zip(series_list[1:], clocks[1:], strict=True):
        if clock.size != reference.size:
            raise ValueError(
                f"RoiResponseSeries {series.name!r} has {clock.size} frames but "
                f"{series_list[0].name!r} has {reference.size}; load them one at a time "
                "(series=...) and align them with mics.preprocessing.align_to_frames"
            )
        frame = np.median(np.diff(reference)) if reference.size > 1 else np.inf
        # Interleaved planes are sampled a fraction of a frame apart: same frames.
        if np.max(np.abs(clock - reference)) >= frame / 2:
            raise ValueError(
                f"RoiResponseSeries {series.name!r} and {series_list[0].name!r} are on "
                "different clocks (more than half a frame apart)"
            )
    return reference


def _behaviour_series(nwbfile: Any, names: Any) -> list:
    """TimeSeries that are behaviour (not imaging) in 'behavior' and acquisition."""
    pynwb = require("pynwb", "reading NWB files")
    behavioural_types = (pynwb.TimeSeries, pynwb.behavior.SpatialSeries)
    candidates: list = []
    containers = list(nwbfile.acquisition.values())
    for module_name in ("behavior", "behaviour"):
        if module_name in nwbfile.processing:
            containers.extend(nwbfile.processing[module_name].data_interfaces.values())
    for obj in containers:
        # BehavioralTimeSeries, PupilTracking, Position... hold their series in a dict.
        children = [obj] if isinstance(obj, pynwb.TimeSeries) else []
        for attr in ("time_series", "spatial_series"):
            children.extend(getattr(obj, attr, {}).values() if hasattr(obj, attr) else [])
        # Exact types only: subclasses (ElectricalSeries, ImageSeries, RoiResponseSeries...)
        # are recordings, not behaviour, and can be huge.
        candidates.extend(ts for ts in children if type(ts) in behavioural_types)
    if names is None:
        return candidates
    by_name = {ts.name: ts for ts in candidates}
    missing = [n for n in names if n not in by_name]
    if missing:
        raise ValueError(
            f"behaviour series {missing} not found; available: {sorted(by_name) or 'none'}"
        )
    return [by_name[n] for n in names]


def load_nwb(
    path: str | Path,
    *,
    kind: str = "auto",
    series: list[str] | None = None,
    behaviour: list[str] | bool | None = None,
    module: str = "ophys",
    max_gap_s: float = 0.5,
) -> xr.Dataset:
    """Load calcium traces and behaviour from an NWB file.

    Parameters
    ----------
    path : str or Path
        The ``.nwb`` file (HDF5 backend).
    kind : {"auto", "DfOverF", "Fluorescence"}, default="auto"
        Which ophys container to read; ``"auto"`` prefers ``DfOverF``.
    series : list of str, optional
        Names of the RoiResponseSeries to load (default: all of ``kind``).
    behaviour : list of str, bool or None, default=None
        Behavioural TimeSeries to load, by name. None or True loads every
        TimeSeries found in the ``behavior`` module and ``acquisition``;
        False or [] loads none.
    module : str, default="ophys"
        Name of the processing module holding the traces.
    max_gap_s : float, default=0.5
        Passed to :func:`mics.preprocessing.align_to_frames` for the behaviour.

    Returns
    -------
    xarray.Dataset
        ``activity`` (``time``, ``neuron``) in the file's units; one variable
        per behavioural series on the imaging clock (dims ``time``, or
        ``time`` and ``<name>_component`` for multi-column series).
        Coordinates: ``time`` (s, on the file's clock), ``neuron``
        (``"<roi table>/<roi id>"``, unique across tables), ``roi_id``,
        ``population``, ``area``, ``imaging_plane``, and when the ROI
        tables hold masks ``x``, ``y`` (``z`` for voxel masks): the ROI's
        weighted centre in pixels, NaN for ROIs of a table without masks.
        They follow the NWB schema (``pixel_mask`` rows are ``(x, y,
        weight)``, ``image_mask`` axes ``(roi, x, y)``); files written with
        (row, column) in those slots give ``x`` and ``y`` swapped. Attributes: ``fs``
        (Hz), ``kind``, ``source``, ``loader``.

    Raises
    ------
    FileNotFoundError
        If the file does not exist.
    ValueError
        If the file is not readable NWB, has no ophys traces, the series are
        on different clocks, or a behaviour clock misses the imaging clock.
    """
    pynwb = require("pynwb", "reading NWB files")
    path = existing_file(path, "NWB file")
    try:
        io = pynwb.NWBHDF5IO(str(path), mode="r")
    except (OSError, ValueError) as err:
        raise ValueError(f"{path} could not be opened as an NWB (HDF5) file: {err}") from None
    with io:
        try:
            nwbfile = io.read()
        except Exception as err:  # hdmf raises many types for malformed files
            raise ValueError(f"{path} is not a readable NWB file: {err}") from None
        roi_series, kind = _roi_series(nwbfile, module, kind)
        if series is not None:
            roi_series = _named(roi_series, series)
        time = _shared_clock(roi_series)
        populations = []
        for s in roi_series:  # a loop, not a comprehension: the warnings' stacklevel
            populations.append(_population(s))
        ds = _activity_dataset(populations, time)
        ds.attrs.update(
            {
                "fs": 1.0 / float(np.median(np.diff(time))) if time.size > 1 else float("nan"),
                "kind": kind,
                "source": str(path.resolve()),
                "loader": "mics.io.load_nwb",
            }
        )
        for name, values in _behaviour_on_frames(nwbfile, behaviour, time, max_gap_s).items():
            ds[name] = values
    return with_rate_on_variables(ds)


def _named(roi_series: list, names: list[str]) -> list:
    """The RoiResponseSeries called ``names``, in that order."""
    by_name = {s.name: s for s in roi_series}
    missing = [n for n in names if n not in by_name]
    if missing:
        raise ValueError(f"RoiResponseSeries {missing} not found; available: {list(by_name)}")
    return [by_name[n] for n in names]


@dataclass(frozen=True)
class _Population:
    """One RoiResponseSeries read: its traces, the labels and centres of its ROIs.

    ``traces`` (n_frames, n_rois) in the file's units; ``labels`` maps
    ``roi_id``, ``population``, ``area`` and ``imaging_plane`` to arrays of
    shape (n_rois,); ``centres`` (n_rois, d) in pixels, or None when its
    ROI table holds no readable masks; ``origin`` says which masks they came
    from; ``unit`` is the series' unit.
    """

    traces: np.ndarray
    labels: dict
    centres: np.ndarray | None
    origin: str | None
    unit: str


def _population(series: Any) -> _Population:
    """Traces, ROI labels and ROI centres of one RoiResponseSeries."""
    data = np.asarray(series.data[:], dtype=float)
    data = data.reshape(data.shape[0], -1)
    labels = _roi_labels(series)
    if data.shape[1] != labels["roi_id"].size:
        raise ValueError(
            f"{series.name!r} has {data.shape[1]} columns but references "
            f"{labels['roi_id'].size} ROIs"
        )
    region = series.rois
    try:
        centres, origin = _roi_centres(region.table, np.asarray(region.data[:], dtype=int))
    except (ValueError, TypeError, KeyError, IndexError) as err:
        # Positions are an extra: masks in an unexpected layout must not
        # keep the traces from loading.
        warnings.warn(
            f"the ROI masks of {region.table.name!r} could not be read ({err}); "
            "its neurons get no x/y positions",
            UserWarning,
            stacklevel=3,
        )
        centres, origin = None, None
    return _Population(data, labels, centres, origin, str(getattr(series, "unit", "")))


def _activity_dataset(populations: list, time: np.ndarray) -> xr.Dataset:
    """``activity`` (time, neuron) of every population side by side, with the ROIs' labels."""
    merged = {
        key: np.concatenate([pop.labels[key] for pop in populations])
        for key in populations[0].labels
    }
    neuron = np.array(
        [f"{p}/{i}" for p, i in zip(merged["population"], merged["roi_id"], strict=True)]
    )
    units = {pop.unit for pop in populations}
    return xr.Dataset(
        {
            "activity": (
                ("time", "neuron"),
                np.concatenate([pop.traces for pop in populations], axis=1),
                {"units": ", ".join(sorted(units))},
            )
        },
        coords={
            "time": ("time", time, {"units": "s"}),
            "neuron": ("neuron", neuron),
            **{key: ("neuron", values) for key, values in merged.items()},
            **_positions(populations),
        },
    )


def _positions(populations: list) -> dict[str, tuple]:
    """``x``, ``y`` (and ``z``) coordinates of every ROI; empty when no table has masks.

    ROI tables without masks (or of another dimensionality) get NaN positions.
    """
    centres = [pop.centres for pop in populations]
    if all(c is None for c in centres):
        return {}
    d = max(c.shape[1] for c in centres if c is not None)
    padded = [
        np.full((pop.traces.shape[1], d), np.nan)
        if pop.centres is None
        else np.pad(pop.centres, ((0, 0), (0, d - pop.centres.shape[1])), constant_values=np.nan)
        for pop in populations
    ]
    found = " and ".join(sorted({pop.origin for pop in populations if pop.origin is not None}))
    return position_coords(np.concatenate(padded), found)


def _behaviour_on_frames(
    nwbfile: Any, behaviour: Any, time: np.ndarray, max_gap_s: float
) -> dict[str, xr.DataArray]:
    """The behavioural series asked for, each resampled onto the imaging frames ``time``."""
    from mics.preprocessing.calcium import align_to_frames

    if behaviour is False:
        return {}
    wanted = _behaviour_series(nwbfile, None if behaviour in (None, True) else behaviour)
    out = {}
    for ts in wanted:
        values = np.asarray(ts.data[:], dtype=float)
        dims = ("time",) if values.ndim == 1 else ("time", f"{ts.name}_component")
        raw = xr.DataArray(
            values,
            dims=dims,
            coords={"time": _series_times(ts)},
            name=ts.name,
            attrs={"units": str(ts.unit), "description": str(ts.description or "")},
        )
        out[ts.name] = align_to_frames(raw, time, max_gap_s=max_gap_s)
    return out
