"""Park et al. 2024 (Sur lab) trial-structured MATLAB files -> xarray.Dataset.

Each ``*_grat-000_data.mat`` (MATLAB v5, read with ``scipy.io.loadmat``) holds

- ``D``: struct with ``neuron1`` .. ``neuronN``, ``pupil_zscore`` and ``speed``,
  each a cell array of one column per trial (n_trials cells of n_samples values);
  ``speed`` cells are ``uint8`` in trials where the animal stood still (all 0)
  and ``double`` otherwise, so every cell is cast to float;
- ``TE``: struct with ``direction`` (grating direction per trial, degrees),
  ``nTrials`` and ``dt`` (sample interval, s);
- ``t``: sample times relative to stimulus onset (s), -1..2 s at 16 Hz.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import numpy as np
import xarray as xr

from mics.io._common import check_fs, existing_file, with_rate_on_variables

__all__ = ["load_park2024"]


def _trials(cells: Any, name: str, n_trials: int, n_samples: int) -> np.ndarray:
    """Stack a per-trial cell array into (n_trials, n_samples) float64."""
    cells = np.atleast_1d(cells)
    if cells.dtype != object:  # a single numeric matrix instead of a cell array
        array = np.asarray(cells, dtype=float)
    else:
        rows = [np.asarray(c, dtype=float).ravel() for c in cells]
        if {r.size for r in rows} != {n_samples}:
            raise ValueError(
                f"D.{name}: trials have {sorted({r.size for r in rows})} samples, "
                f"expected {n_samples} (the length of t)"
            )
        array = np.stack(rows)
    if array.shape != (n_trials, n_samples):
        raise ValueError(f"D.{name} has shape {array.shape}, expected {(n_trials, n_samples)}")
    return array


def _read_mat(path: Path) -> dict:
    """The variables of a MATLAB v5 file, checked to hold ``D``, ``TE`` and ``t``."""
    from scipy import io as sio

    try:
        mat = sio.loadmat(path, simplify_cells=True)
    except NotImplementedError:
        raise ValueError(
            f"{path} is a MATLAB v7.3 (HDF5) file; this loader expects the v5 files "
            "of Park et al. 2024"
        ) from None
    except (sio.matlab.MatReadError, ValueError, TypeError, OSError) as err:
        raise ValueError(f"{path} is not a readable MATLAB file: {err}") from None
    missing = [key for key in ("D", "TE", "t") if key not in mat]
    if missing:
        raise ValueError(
            f"{path} lacks {missing}; expected the Park et al. 2024 layout (D, TE, t)"
        )
    return mat


def _neuron_keys(D: dict, path: Path) -> list[str]:
    """``D``'s ``neuron<k>`` fields in the order of k, checked that pupil and speed are there."""
    neuron_keys = sorted(
        (k for k in D if re.fullmatch(r"neuron\d+", k)), key=lambda k: int(k[len("neuron") :])
    )
    if not neuron_keys:
        raise ValueError(f"{path}: D has no neuron<k> fields")
    for key in ("pupil_zscore", "speed"):
        if key not in D:
            raise ValueError(f"{path}: D has no {key!r} field")
    return neuron_keys


def load_park2024(path: str | Path) -> xr.Dataset:
    """Load one Park et al. 2024 session (V1 two-photon, drifting gratings).

    Trials are concatenated along ``time``: sample ``k`` of trial ``i`` sits at
    position ``i * n_samples + k``. The recordings between trials are not in
    the files, so ``time`` is a *concatenated-trial clock* (``position / fs``),
    not wall-clock time; use ``trial`` and ``trial_time`` for the real structure
    (e.g. ``ds.groupby("trial")`` or trial-blocked cross-validation).

    Parameters
    ----------
    path : str or Path
        A ``*_grat-000_data.mat`` file.

    Returns
    -------
    xarray.Dataset
        ``activity`` (``time``, ``neuron``) as stored in ``D.neuron<k>``;
        ``pupil`` (``time``, z-scored pupil size from ``D.pupil_zscore``);
        ``speed`` (``time``, running speed from ``D.speed``, float).
        Coordinates along ``time``: ``time`` (s), ``trial`` (0-based),
        ``trial_time`` (s from stimulus onset), ``direction`` (degrees).
        Along ``neuron``: ``neuron`` (k of ``neuron<k>``, 1-based as in the
        file), ``area`` (``"V1"``). Attributes: ``fs`` (Hz), ``n_trials``,
        ``n_samples_per_trial``, ``session``, ``source``, ``loader``.

    Raises
    ------
    FileNotFoundError
        If the file does not exist.
    ValueError
        If it is not a MATLAB v5 file of this layout.
    """
    path = existing_file(path, "Park et al. 2024 .mat file")
    mat = _read_mat(path)
    D, TE = mat["D"], mat["TE"]
    trial_time = np.asarray(mat["t"], dtype=float).ravel()
    n_samples = trial_time.size
    direction = np.asarray(TE["direction"]).ravel()
    n_trials = direction.size
    neuron_keys = _neuron_keys(D, path)

    dt = float(TE["dt"]) if "dt" in TE else float(np.median(np.diff(trial_time)))
    if not np.allclose(np.diff(trial_time), dt):
        raise ValueError(f"{path}: t is not sampled every TE.dt = {dt} s")
    fs = check_fs(1.0 / dt, "TE.dt")

    def flat(name: str) -> np.ndarray:
        return _trials(D[name], name, n_trials, n_samples).ravel()

    activity = np.stack([flat(k) for k in neuron_keys], axis=1)
    n_time = n_trials * n_samples
    trial = np.repeat(np.arange(n_trials), n_samples)
    ds = xr.Dataset(
        {
            "activity": (("time", "neuron"), activity, {"description": "D.neuron<k>"}),
            "pupil": ("time", flat("pupil_zscore"), {"units": "z-score"}),
            "speed": ("time", flat("speed"), {"description": "D.speed (as stored)"}),
        },
        coords={
            "time": (
                "time",
                np.arange(n_time) / fs,
                {"units": "s", "description": "concatenated-trial clock"},
            ),
            "trial": ("time", trial),
            "trial_time": ("time", np.tile(trial_time, n_trials), {"units": "s"}),
            "direction": ("time", direction[trial].astype(float), {"units": "degree"}),
            "neuron": ("neuron", np.array([int(k[len("neuron") :]) for k in neuron_keys])),
            "area": ("neuron", np.full(len(neuron_keys), "V1")),
        },
        attrs={
            "fs": fs,
            "n_trials": n_trials,
            "n_samples_per_trial": n_samples,
            "session": path.name.split("_grat")[0],
            "source": str(path.resolve()),
            "loader": "mics.io.load_park2024",
        },
    )
    return with_rate_on_variables(ds)
