"""suite2p ``plane`` output folders -> xarray.Dataset.

suite2p stores traces as plain ``.npy`` arrays (ROIs x frames), but ``stat.npy``
(per-ROI dicts) and ``ops.npy`` / ``settings.npy`` (run options) are pickled
object arrays. Unpickling can execute arbitrary code, so by default those files
are read with a restricted unpickler that only rebuilds NumPy arrays, dtypes and
scalars and plain builtin containers; anything else is refused with a message
pointing to ``trust=True`` for folders the user vouches for.
"""

from __future__ import annotations

import pickle
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import xarray as xr

from mics.io._common import check_fs, frame_clock, position_coords, with_rate_on_variables

__all__ = ["load_suite2p"]

# The globals a pickled NumPy array / dtype / scalar needs, under both the
# NumPy 1 (numpy.core) and NumPy 2 (numpy._core) module names.
_NUMPY_GLOBALS = {
    (mod, name)
    for core in ("numpy.core", "numpy._core")
    for mod, name in (
        (f"{core}.multiarray", "_reconstruct"),
        (f"{core}.multiarray", "scalar"),
        (f"{core}.numeric", "_frombuffer"),
    )
} | {("numpy", "ndarray"), ("numpy", "dtype")}
_BUILTINS = {
    "dict",
    "list",
    "tuple",
    "set",
    "frozenset",
    "int",
    "float",
    "complex",
    "bool",
    "str",
    "bytes",
    "bytearray",
    "slice",
    "range",
}
_SAFE_GLOBALS = (
    _NUMPY_GLOBALS
    | {("builtins", name) for name in _BUILTINS}
    | {("__builtin__", name) for name in _BUILTINS}  # Python 2 era pickles
    | {("collections", "OrderedDict")}
)


class _RestrictedUnpickler(pickle.Unpickler):
    """Unpickler that resolves only NumPy array machinery and builtin containers."""

    def find_class(self, module: str, name: str) -> Any:
        if (module, name) in _SAFE_GLOBALS or (
            module in ("numpy.dtypes", "numpy") and name.endswith("DType")
        ):
            return super().find_class(module, name)
        raise pickle.UnpicklingError(f"refusing to load {module}.{name}")


def _load_pickled_npy(path: Path, trust: bool) -> Any:
    """Read an object ``.npy`` file; restricted unpickling unless ``trust``."""
    if trust:
        return np.load(path, allow_pickle=True)
    fmt = np.lib.format
    with open(path, "rb") as fh:
        version = fmt.read_magic(fh)
        if version == (1, 0):
            shape, fortran, dtype = fmt.read_array_header_1_0(fh)
        else:
            shape, fortran, dtype = fmt.read_array_header_2_0(fh)
        if not dtype.hasobject:  # a plain array: no pickle involved
            return np.load(path, allow_pickle=False)
        try:
            # latin1 so that Python 2 era pickles of NumPy arrays decode.
            array = _RestrictedUnpickler(fh, encoding="latin1").load()
        except pickle.UnpicklingError as err:
            raise ValueError(
                f"{path.name} holds objects the safe loader does not rebuild ({err}). "
                "If you trust this folder (suite2p output you made), pass trust=True "
                "to unpickle it fully"
            ) from None
    return np.asarray(array).reshape(shape, order="F" if fortran else "C")


def _read_options(folder: Path, trust: bool) -> tuple[dict | None, str | None]:
    """Run options from ``ops.npy`` (suite2p < 1.0) or ``settings.npy`` (>= 1.0)."""
    for filename in ("ops.npy", "settings.npy"):
        path = folder / filename
        if path.is_file():
            options = _load_pickled_npy(path, trust)
            options = options.item() if options.shape == () else options
            if isinstance(options, dict):
                return options, filename
    return None, None


def _traces(folder: Path, name: str) -> np.ndarray | None:
    path = folder / f"{name}.npy"
    if not path.is_file():
        return None
    array = np.load(path, allow_pickle=False)
    if array.ndim != 2:
        raise ValueError(f"{path.name} must be (n_rois, n_frames); got shape {array.shape}")
    return array


def load_suite2p(
    folder: str | Path,
    fs: float | None = None,
    *,
    trust: bool = False,
    variables: tuple[str, ...] = ("F", "Fneu", "spks"),
    only_cells: bool = False,
) -> xr.Dataset:
    """Load one suite2p plane folder (``.../suite2p/plane0``).

    Parameters
    ----------
    folder : str or Path
        Folder holding ``F.npy`` and, when present, ``Fneu.npy``, ``spks.npy``,
        ``iscell.npy``, ``stat.npy``, ``ops.npy`` / ``settings.npy``.
    fs : float, optional
        Frame rate per plane (Hz). Required when the folder has no
        ``ops.npy`` / ``settings.npy``; overrides the stored rate when given.
    trust : bool, default=False
        Unpickle ``stat.npy`` / ``ops.npy`` fully. Leave False for folders of
        unknown origin: the restricted loader still reads standard suite2p
        output, built only of arrays, numbers, strings, lists and dicts.
    variables : tuple of str, default=("F", "Fneu", "spks")
        Trace files to load; missing ones are skipped. ``F.npy`` must exist
        in any case: it fixes the number of ROIs and frames.
    only_cells : bool, default=False
        Keep only ROIs classified as cells (``iscell[:, 0] == 1``).

    Returns
    -------
    xarray.Dataset
        Variables (``time``, ``neuron``), float32 as stored: ``F`` (raw ROI
        fluorescence, a.u.), ``Fneu`` (neuropil, a.u.), ``spks`` (deconvolved,
        a.u.). Coordinates: ``time`` (s, frame k at k / fs), ``neuron`` (ROI index
        in suite2p's order), ``iscell`` (bool), ``iscell_prob`` (classifier
        probability), ``med_y`` / ``med_x`` (ROI centre, pixels, from stat),
        the same centre as ``x`` / ``y`` (the names every loader uses for
        positions on the field of view), and ``plane`` when stat gives
        ``iplane`` (combined multi-plane folders).
        Attributes: ``fs`` (Hz), ``source``, ``loader``, ``fs_origin``.

    Raises
    ------
    FileNotFoundError
        If the folder or ``F.npy`` is missing.
    ValueError
        If the frame rate is missing or a placeholder, trace shapes disagree,
        or a pickle holds objects the restricted loader refuses.
    """
    folder = _plane_folder(folder)
    options, options_file = _read_options(folder, trust)
    fs, fs_origin = _frame_rate(fs, options, options_file, folder)
    traces, (n_rois, n_frames) = _trace_files(folder, variables)
    coords: dict[str, Any] = {
        "time": ("time", frame_clock(n_frames, fs), {"units": "s"}),
        "neuron": ("neuron", np.arange(n_rois)),
        **_roi_coords(folder, n_rois, trust),
    }
    data_vars = {
        name: (("time", "neuron"), array.T, {"units": "a.u."}) for name, array in traces.items()
    }
    ds = xr.Dataset(
        data_vars,
        coords=coords,
        attrs={
            "fs": fs,
            "fs_origin": fs_origin,
            "source": str(folder.resolve()),
            "loader": "mics.io.load_suite2p",
        },
    )
    if only_cells:
        if "iscell" not in ds.coords:
            raise ValueError(f"only_cells=True but {folder} has no iscell.npy")
        ds = ds.isel(neuron=ds.iscell.values)
    return with_rate_on_variables(ds)


def _plane_folder(folder: str | Path) -> Path:
    """``folder`` as a path, refused unless it is a suite2p plane folder (holds ``F.npy``)."""
    folder = Path(folder).expanduser()
    if not folder.is_dir():
        raise FileNotFoundError(f"suite2p folder not found: {folder}")
    if not (folder / "F.npy").is_file():
        found = sorted(p.name for p in folder.glob("*.npy"))
        hint = (
            " Pass the plane folder (e.g. suite2p/plane0)." if (folder / "plane0").is_dir() else ""
        )
        raise FileNotFoundError(
            f"no F.npy in {folder} (found {found or 'no .npy files'}); this is not a "
            f"suite2p plane folder.{hint}"
        )
    return folder


def _frame_rate(
    fs: float | None, options: dict | None, options_file: str | None, folder: Path
) -> tuple[float, str]:
    """The frame rate per plane (Hz) and where it came from: the argument or the options file.

    Warns where the argument overrides a different stored rate, and where the
    stored rate is suite2p's default (many pipelines never set it).
    """
    stored_fs = options.get("fs") if options is not None else None
    if fs is not None:
        fs = check_fs(fs, "the fs argument")
        if stored_fs is not None and not np.isclose(float(stored_fs), fs):
            warnings.warn(
                f"fs={fs} overrides {options_file}['fs']={stored_fs}", UserWarning, stacklevel=3
            )
        return fs, "argument"
    if stored_fs is None:
        raise ValueError(
            f"no frame rate for {folder}: the folder has no ops.npy/settings.npy with 'fs'. "
            "Give the imaging rate per plane, e.g. load_suite2p(folder, fs=30.0)"
        )
    fs = check_fs(stored_fs, f"{options_file}['fs']")
    if fs == 10.0:
        # suite2p's default; many pipelines never set it.
        warnings.warn(
            f"{options_file}['fs'] is 10.0, suite2p's default value; if the acquisition "
            "rate was different, pass fs=<frames per second>",
            UserWarning,
            stacklevel=3,
        )
    return fs, options_file


def _trace_files(
    folder: Path, variables: tuple[str, ...]
) -> tuple[dict[str, np.ndarray], tuple[int, int]]:
    """The trace files asked for that exist (``F`` first), and ``(n_rois, n_frames)`` of F.npy."""
    reference = _traces(folder, "F")
    n_rois, n_frames = reference.shape
    traces = {"F": reference} if "F" in variables else {}
    for name in variables:
        array = _traces(folder, name) if name != "F" else None
        if array is not None:
            traces[name] = array
    for name, array in traces.items():
        if array.shape != (n_rois, n_frames):
            raise ValueError(
                f"{name}.npy has shape {array.shape} but F.npy has {(n_rois, n_frames)}; "
                "the files do not come from the same suite2p run"
            )
    return traces, (n_rois, n_frames)


def _roi_coords(folder: Path, n_rois: int, trust: bool) -> dict[str, tuple]:
    """Per-ROI coordinates: the classifier's ``iscell``, the centres and planes of ``stat``."""
    coords: dict[str, tuple] = {}
    iscell = _traces(folder, "iscell")
    if iscell is not None:
        if iscell.shape[0] != n_rois:
            raise ValueError(f"iscell.npy has {iscell.shape[0]} rows but F.npy has {n_rois} ROIs")
        coords["iscell"] = ("neuron", iscell[:, 0].astype(bool))
        if iscell.shape[1] > 1:
            coords["iscell_prob"] = ("neuron", iscell[:, 1].astype(float))
    if not (folder / "stat.npy").is_file():
        return coords
    stat = _load_pickled_npy(folder / "stat.npy", trust)
    if len(stat) != n_rois:
        raise ValueError(f"stat.npy has {len(stat)} ROIs but F.npy has {n_rois}")
    if all(isinstance(s, dict) and "med" in s for s in stat):
        med = np.array([np.asarray(s["med"], dtype=float) for s in stat])
        coords["med_y"] = ("neuron", med[:, 0], {"units": "pixel"})
        coords["med_x"] = ("neuron", med[:, 1], {"units": "pixel"})
        # The same centre under the names every loader uses (x, y), so that
        # figures of the field of view need not know which pipeline ran.
        coords.update(position_coords(med[:, ::-1], "suite2p stat['med']"))
    if all(isinstance(s, dict) and "iplane" in s for s in stat):
        # Folders that combine planes (suite2p/combined) say which plane each ROI is in.
        coords["plane"] = ("neuron", np.array([int(s["iplane"]) for s in stat]))
    return coords
