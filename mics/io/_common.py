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
