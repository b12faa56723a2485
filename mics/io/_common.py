"""Helpers shared by the loaders: data location, lazy imports, clocks."""

from __future__ import annotations

import importlib
import os
from pathlib import Path
from typing import Any

import numpy as np

#: Environment variable naming the folder that holds the example recordings.
DATA_DIR_ENV = "MICS_DATA_DIR"


def data_dir() -> Path | None:
    """Folder of example recordings named by ``$MICS_DATA_DIR``, or None if unset.

    Returns
    -------
    pathlib.Path or None
        The path as given (it is not required to exist; loaders report a
        missing file themselves).
    """
    value = os.environ.get(DATA_DIR_ENV)
    return Path(value).expanduser() if value else None


def require(module: str, purpose: str, package: str | None = None) -> Any:
    """Import an optional dependency or explain how to install it."""
    try:
        return importlib.import_module(module)
    except ImportError as err:  # pragma: no cover - depends on the environment
        raise ImportError(
            f"{purpose} needs the '{package or module}' package: pip install {package or module}"
        ) from err


def existing_file(path: Any, what: str) -> Path:
    path = Path(path).expanduser()
    if path.is_dir():
        raise FileNotFoundError(f"{what}: expected a file but {path} is a folder")
    if not path.is_file():
        raise FileNotFoundError(f"{what}: no such file {path}")
    return path


def check_fs(fs: Any, origin: str) -> float:
    """Validate a sampling rate (Hz); refuse missing and placeholder values."""
    try:
        value = float(np.asarray(fs).squeeze())
    except (TypeError, ValueError):
        raise ValueError(f"the sampling rate from {origin} is not a number: {fs!r}") from None
    if not np.isfinite(value) or value <= 0:
        raise ValueError(
            f"the sampling rate from {origin} is {value!r}, a placeholder rather than a "
            "frame rate; pass the real rate, e.g. fs=30.0 (frames per second)"
        )
    return value


def frame_clock(n_frames: int, fs: float, start: float = 0.0) -> np.ndarray:
    """Frame times in seconds, ``start + k / fs``."""
    return start + np.arange(n_frames) / fs


def with_rate_on_variables(ds: Any) -> Any:
    """Copy ``attrs["fs"]`` onto every variable, so ``ds.F`` alone still knows its rate."""
    for variable in ds.data_vars.values():
        variable.attrs.setdefault("fs", ds.attrs["fs"])
    return ds


#: Names of the per-neuron position coordinates every loader writes (pixels).
POSITION_AXES = ("x", "y", "z")


def weighted_centres(owner: np.ndarray, pixels: np.ndarray, weights: np.ndarray, n: int):
    """Weighted centre of every ROI from a flat list of its pixels.

    Parameters
    ----------
    owner : ndarray of shape (n_pixels,)
        ROI index (0 .. n-1) of each pixel.
    pixels : ndarray of shape (n_pixels, d)
        Pixel coordinates, one column per axis.
    weights : ndarray of shape (n_pixels,)
        Mask weights; negative or non-finite ones count as zero.
    n : int
        Number of ROIs.

    Returns
    -------
    ndarray of shape (n, d)
        Centres of mass; NaN for an ROI with no pixel of positive weight.
    """
    owner = np.asarray(owner, dtype=np.int64)
    pixels = np.asarray(pixels, dtype=float).reshape(owner.size, -1)
    weights = np.asarray(weights, dtype=float).reshape(-1)
    weights = np.where(np.isfinite(weights) & (weights > 0), weights, 0.0)
    total = np.bincount(owner, weights=weights, minlength=n)
    sums = np.column_stack(
        [
            np.bincount(owner, weights=weights * pixels[:, j], minlength=n)
            for j in range(pixels.shape[1])
        ]
    )
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(total[:, None] > 0, sums / total[:, None], np.nan)


def position_coords(centres: np.ndarray, origin: str) -> dict[str, tuple]:
    """``x``, ``y`` (and ``z``) coordinates along ``neuron`` from (n, d) centres in pixels."""
    return {
        axis: (
            "neuron",
            np.asarray(centres[:, j], dtype=float),
            {"units": "pixel", "description": f"ROI centre on the field of view, from {origin}"},
        )
        for j, axis in enumerate(POSITION_AXES[: centres.shape[1]])
    }
