"""From raw calcium traces and behaviour to model-ready time series.

Every function accepts an ``xarray.DataArray`` (the time dimension is found by
name, ``time`` by default; other dimensions are carried along with their
coordinates) and, where it makes sense, a plain NumPy array with **time along
the first axis**, shape (T,) or (T, n) -- the same orientation the estimators
use. Note that suite2p's ``.npy`` files are (n_rois, T): transpose them, or
load them with :func:`mics.io.load_suite2p`, which does it for you.

Typical chain::

    F = subtract_neuropil(ds.F, ds.Fneu, coefficient=0.7)
    dff = delta_f_over_f(F, fs=ds.fs, window_s=60.0)
    speed = align_to_frames(speed_raw, dff.time)  # behaviour on the imaging clock
    dff = zscore(dff)

Trial-structured recordings (e.g. :func:`mics.io.load_park2024`)::

    resid = subtract_condition_means(ds, condition="direction")  # fluctuations
    lagged = lag_embed(resid.activity, lags=3)  # never crosses a trial boundary
"""

from __future__ import annotations

import warnings
from typing import Any, NamedTuple

import numpy as np
import xarray as xr
from scipy import ndimage

from mics.data.validation import check_count

__all__ = [
    "align_to_frames",
    "bin_time",
    "delta_f_over_f",
    "subtract_neuropil",
    "zscore",
]


def _time_axis(x: Any, time_dim: str) -> int:
    if isinstance(x, xr.DataArray):
        if time_dim not in x.dims:
            raise ValueError(
                f"expected a {time_dim!r} dimension, got dimensions {tuple(map(str, x.dims))}"
            )
        return x.get_axis_num(time_dim)
    return 0


def _values(x: Any) -> np.ndarray:
    return np.asarray(x.values if isinstance(x, xr.DataArray) else x, dtype=float)


def _like(x: Any, values: np.ndarray, **attrs: Any) -> Any:
    """Return ``values`` with ``x``'s labels when ``x`` is a DataArray."""
    if isinstance(x, xr.DataArray):
        out = x.copy(data=values)
        out.attrs.update(attrs)
        return out
    return values


def _feature_labels(x: Any, bad: np.ndarray, time_axis: int) -> list:
    """Names of the columns flagged in ``bad`` (reduced over time), for messages."""
    if bad.ndim == 0:
        return []
    if isinstance(x, xr.DataArray) and x.ndim == 2:
        other = x.dims[1 - time_axis]
        if other in x.coords:
            return np.asarray(x[other].values)[bad].tolist()
    return np.flatnonzero(bad).tolist()


def _fs_from(x: Any, fs: float | None) -> float:
    if fs is None and isinstance(x, xr.DataArray):
        fs = x.attrs.get("fs")
    if fs is None:
        raise ValueError(
            "sampling rate unknown: pass fs=<frames per second> (or use a DataArray "
            "with an 'fs' attribute, as the mics.io loaders produce)"
        )
    fs = float(fs)
    if not np.isfinite(fs) or fs <= 0:
        raise ValueError(f"fs must be a positive number of frames per second, got {fs}")
    return fs


def subtract_neuropil(F: Any, Fneu: Any, coefficient: float = 0.7) -> Any:
    """Remove out-of-focus neuropil contamination: ``F - coefficient * Fneu``.

    Parameters
    ----------
    F, Fneu : DataArray or ndarray of the same shape, e.g. (T, n)
        Somatic and surrounding-neuropil fluorescence (a.u.).
    coefficient : float, default=0.7
        Contamination fraction in [0, 1]; 0.7 is the suite2p default.

    Returns
    -------
    Same type and shape as ``F``.
    """
    coefficient = float(coefficient)
    if not 0.0 <= coefficient <= 1.0:
        raise ValueError(f"neuropil coefficient must lie in [0, 1], got {coefficient}")
    if np.shape(F) != np.shape(Fneu):
        raise ValueError(f"F has shape {np.shape(F)} but Fneu has shape {np.shape(Fneu)}")
    if isinstance(F, xr.DataArray) and isinstance(Fneu, xr.DataArray):
        # xarray aligns on coordinates; a silent inner join would drop neurons.
        F, Fneu = xr.align(F, Fneu, join="exact")
        out = F - coefficient * Fneu
        out.attrs = dict(F.attrs, neuropil_coefficient=coefficient)
        return out.rename(F.name)
    out = _values(F) - coefficient * _values(Fneu)
    return _like(F, out, neuropil_coefficient=coefficient)


def delta_f_over_f(
    F: Any,
    fs: float | None = None,
    window_s: float = 60.0,
    percentile: float = 8.0,
    method: str = "percentile",
    *,
    sigma_s: float | None = None,
    f0_floor: float | None = None,
    time_dim: str = "time",
) -> Any:
    """Relative fluorescence change ``(F - F0) / F0`` with a running baseline F0.

    Parameters
    ----------
    F : DataArray or ndarray of shape (T,) or (T, n)
        Fluorescence (a.u.), usually after :func:`subtract_neuropil`.
    fs : float, optional
        Frame rate (Hz). Taken from ``F.attrs["fs"]`` when omitted.
    window_s : float, default=60.0
        Length of the running-baseline window (seconds).
    percentile : float, default=8.0
        Percentile of F in the window taken as F0 (``method="percentile"``).
    method : {"percentile", "maximin"}, default="percentile"
        ``"percentile"``: running percentile (``scipy.ndimage.percentile_filter``).
        ``"maximin"``: suite2p's baseline -- Gaussian smoothing, then a running
        minimum followed by a running maximum over the window.
    sigma_s : float, optional
        Gaussian smoothing width (seconds) for ``"maximin"``; defaults to 10
        frames, suite2p's ``sig_baseline``.
    f0_floor : float, optional
        If given, F0 values below this positive floor are raised to it. Without
        it, any F0 <= 0 is an error: dividing by it would give infinite or
        sign-flipped dF/F.
    time_dim : str, default="time"

    Returns
    -------
    Same type and shape as ``F`` (dimensionless). DataArray outputs carry
    ``units="dF/F"`` and the baseline settings in ``attrs``.

    Raises
    ------
    ValueError
        If F contains NaN, or any baseline F0 is not positive and no
        ``f0_floor`` was given (the message names the offending neurons).
    """
    fs = _fs_from(F, fs)
    axis = _time_axis(F, time_dim)
    values = _values(F)
    if np.isnan(values).any():
        raise ValueError("F contains NaN; interpolate or drop those samples before dF/F")
    window = max(int(round(window_s * fs)), 1)
    if method == "percentile":
        if not 0 <= percentile <= 100:
            raise ValueError(f"percentile must lie in [0, 100], got {percentile}")
        size = [1] * values.ndim
        size[axis] = window
        f0 = ndimage.percentile_filter(values, percentile, size=size, mode="nearest")
    elif method == "maximin":
        sigma = 10.0 if sigma_s is None else sigma_s * fs
        f0 = ndimage.gaussian_filter1d(values, sigma, axis=axis, mode="nearest")
        f0 = ndimage.minimum_filter1d(f0, window, axis=axis, mode="nearest")
        f0 = ndimage.maximum_filter1d(f0, window, axis=axis, mode="nearest")
    else:
        raise ValueError(f"method must be 'percentile' or 'maximin', got {method!r}")

    if f0_floor is not None:
        if not f0_floor > 0:
            raise ValueError(f"f0_floor must be positive, got {f0_floor}")
        f0 = np.maximum(f0, f0_floor)
    bad = f0 <= 0
    if bad.any():
        bad_cols = bad.any(axis=axis)
        names = _feature_labels(F, bad_cols, axis)
        shown = ", ".join(map(str, names[:10])) + (" ..." if len(names) > 10 else "")
        raise ValueError(
            f"the running baseline F0 is <= 0 at {int(bad.sum())} samples"
            + (f" in {len(names)} neuron(s) [{shown}]" if names else "")
            + "; dF/F would be infinite or sign-flipped. Drop those neurons (e.g. keep "
            "iscell ROIs, or ones with F > 0), lower the neuropil coefficient, or pass "
            "f0_floor=<smallest baseline you accept>"
        )
    dff = (values - f0) / f0
    return _like(
        F,
        dff,
        units="dF/F",
        baseline_method=method,
        baseline_window_s=float(window_s),
        baseline_percentile=float(percentile),
    )


def zscore(x: Any, *, time_dim: str = "time", ddof: int = 0) -> Any:
    """Standardise each neuron to zero mean and unit variance over time.

    Parameters
    ----------
    x : DataArray or ndarray of shape (T,) or (T, n)
    time_dim : str, default="time"
    ddof : int, default=0

    Returns
    -------
    Same type and shape as ``x``. Neurons that are constant over time cannot
    be scaled; they come back as zeros and a warning names them (never
    ``inf``/``nan``).
    """
    axis = _time_axis(x, time_dim)
    values = _values(x)
    check_count(ddof, "ddof", 0, max(values.shape[axis] - 1, 0))
    mean = np.nanmean(values, axis=axis, keepdims=True)
    std = np.nanstd(values, axis=axis, ddof=ddof, keepdims=True)
    flat = ~(std > 0)
    if flat.any():
        names = _feature_labels(x, np.squeeze(flat, axis=axis), axis)
        warnings.warn(
            f"{int(flat.sum())} constant trace(s) {names[:10]} have zero variance; "
            "set to 0 after z-scoring",
            UserWarning,
            stacklevel=2,
        )
    out = (values - mean) / np.where(flat, 1.0, std)
    return _like(x, out, units="z-score")


def _first(values: np.ndarray, axis: Any, **kwargs: Any) -> np.ndarray:
    """Value at the first sample of each bin (coarsen passes the bin axis as a tuple)."""
    axis = axis[0] if isinstance(axis, tuple) else axis
    return np.take(values, 0, axis=axis)


def bin_time(x: Any, bin_size: int, *, time_dim: str = "time") -> Any:
    """Average consecutive samples in non-overlapping bins of ``bin_size`` frames.

    Parameters
    ----------
    x : DataArray, Dataset or ndarray (time along axis 0)
    bin_size : int
        Number of frames per bin; an incomplete last bin is dropped.
    time_dim : str, default="time"

    Returns
    -------
    Same type as ``x`` with ``T // bin_size`` samples. For xarray input the
    time coordinate becomes the mean time of each bin, other coordinates
    along time (``trial``, ``direction``) take the value at the bin's first
    sample, and ``attrs["fs"]`` is divided by ``bin_size``.
    """
    if int(bin_size) != bin_size or bin_size < 1:
        raise ValueError(f"bin_size must be a positive whole number of frames, got {bin_size}")
    bin_size = int(bin_size)
    if isinstance(x, xr.DataArray | xr.Dataset):
        if time_dim not in x.dims:
            raise ValueError(f"expected a {time_dim!r} dimension, got {tuple(x.dims)}")
        if x.sizes[time_dim] < bin_size:
            raise ValueError(f"only {x.sizes[time_dim]} samples, fewer than one bin of {bin_size}")
        coord_func = {
            name: ("mean" if name == time_dim else _first)
            for name, c in x.coords.items()
            if time_dim in c.dims
        }
        out = x.coarsen({time_dim: bin_size}, boundary="trim", coord_func=coord_func).mean(
            keep_attrs=True
        )
        if "fs" in x.attrs:
            out.attrs["fs"] = float(x.attrs["fs"]) / bin_size
        out.attrs["bin_size"] = bin_size
        return out
    values = np.asarray(x, dtype=float)
    n_bins = values.shape[0] // bin_size
    if n_bins == 0:
        raise ValueError(f"only {values.shape[0]} samples, fewer than one bin of {bin_size}")
    trimmed = values[: n_bins * bin_size]
    return trimmed.reshape(n_bins, bin_size, *values.shape[1:]).mean(axis=1)


def _times(t: Any, what: str) -> np.ndarray:
    t = np.asarray(t, dtype=float)
    if t.ndim != 1 or t.size == 0:
        raise ValueError(f"{what} must be a non-empty 1-D array of times in seconds")
    if not np.isfinite(t).all():
        raise ValueError(f"{what} contains non-finite times")
    if t.size > 1 and not (np.diff(t) > 0).all():
        raise ValueError(f"{what} must be strictly increasing")
    return t


def _fill_short_gaps(t: np.ndarray, v: np.ndarray, max_gap_s: float) -> np.ndarray:
    """Linearly interpolate NaN runs whose bracketing valid samples are <= max_gap_s apart."""
    v = v.copy()
    valid = ~np.isnan(v)
    if valid.all() or valid.sum() < 2:
        return v
    n = v.size
    idx = np.arange(n)
    prev = np.maximum.accumulate(np.where(valid, idx, -1))
    nxt = np.minimum.accumulate(np.where(valid, idx, n)[::-1])[::-1]
    inner = ~valid & (prev >= 0) & (nxt < n)
    gap = np.full(n, np.inf)
    gap[inner] = t[nxt[inner]] - t[prev[inner]]
    short = inner & (gap <= max_gap_s)
    v[short] = np.interp(t[short], t[valid], v[valid])
    return v


def align_to_frames(
    behaviour: Any,
    frame_times: Any,
    *,
    behaviour_times: Any = None,
    max_gap_s: float = 0.5,
    method: str = "auto",
    time_dim: str = "time",
) -> Any:
    """Put a behavioural signal sampled on its own clock onto the imaging frames.

    Parameters
    ----------
    behaviour : DataArray with a ``time_dim`` coordinate (seconds), or ndarray
        of shape (Tb,) or (Tb, k) together with ``behaviour_times``.
    frame_times : array-like of shape (T,), or a DataArray/Dataset whose
        ``time_dim`` coordinate is used
        Imaging frame times (seconds, same clock as the behaviour).
    behaviour_times : array-like of shape (Tb,), optional
        Sample times (seconds) for ndarray ``behaviour``.
    max_gap_s : float, default=0.5
        Runs of NaN (blinks, dropped samples) whose bracketing valid samples
        are at most this far apart are linearly interpolated; longer gaps stay
        NaN on the frames they cover.
    method : {"auto", "mean", "interp"}, default="auto"
        ``"mean"`` averages the behaviour samples falling in each frame's bin
        (edges halfway between frame times) -- right when the behaviour is
        sampled faster than the imaging, since it low-passes instead of
        aliasing. ``"interp"`` linearly interpolates at the frame times --
        right when the behaviour is slower. ``"auto"`` compares the median
        sampling intervals.
    time_dim : str, default="time"

    Returns
    -------
    DataArray of shape (T,) or (T, k) on the ``time`` coordinate
    ``frame_times`` (for DataArray input), else ndarray. Frames with no usable
    behaviour (long gaps, or outside the behaviour recording) are NaN; their
    count is in ``attrs["n_missing_frames"]`` and a warning reports it.

    Raises
    ------
    ValueError
        If the two clocks do not overlap at all, or times are not increasing.
    """
    if isinstance(frame_times, xr.DataArray | xr.Dataset):
        frame_times = frame_times[time_dim].values
    ft = _times(frame_times, "frame_times")
    samples = _behaviour_samples(behaviour, behaviour_times, time_dim)
    name, bt, values = samples.name, samples.times, samples.values

    if bt[-1] < ft[0] or bt[0] > ft[-1]:
        raise ValueError(
            f"the clock of {name!r} ({bt[0]:.3f} to {bt[-1]:.3f} s) does not overlap the "
            f"imaging clock ({ft[0]:.3f} to {ft[-1]:.3f} s); both must be in seconds on the "
            "same clock (e.g. subtract the same session start from both)"
        )
    if method == "auto":
        dt_b = np.median(np.diff(bt)) if bt.size > 1 else np.inf
        dt_f = np.median(np.diff(ft)) if ft.size > 1 else np.inf
        method = "mean" if dt_b < dt_f else "interp"
    if method not in ("mean", "interp"):
        raise ValueError(f"method must be 'auto', 'mean' or 'interp', got {method!r}")

    flat = _on_frames(values.reshape(bt.size, -1), bt, ft, method=method, max_gap_s=max_gap_s)
    out = flat.reshape((ft.size, *values.shape[1:]))

    missing = np.isnan(out).reshape(ft.size, -1).any(axis=1)
    n_missing = int(missing.sum())
    if n_missing:
        warnings.warn(
            f"{n_missing} of {ft.size} imaging frames have no usable {name!r} sample "
            f"(gaps longer than max_gap_s={max_gap_s} s, or outside the behaviour "
            "recording); they are NaN",
            UserWarning,
            stacklevel=2,
        )
    da = samples.da
    if da is None:
        return out
    coords = {
        k: c for k, c in da.coords.items() if time_dim not in c.dims
    }  # keep e.g. column labels
    coords[time_dim] = ft
    result = xr.DataArray(out, dims=da.dims, coords=coords, name=da.name, attrs=dict(da.attrs))
    result[time_dim].attrs["units"] = "s"
    result.attrs.update(alignment=method, n_missing_frames=n_missing, max_gap_s=float(max_gap_s))
    return result


class _Samples(NamedTuple):
    """A behavioural signal on its own clock, time along the first axis of ``values``."""

    name: str
    times: np.ndarray  # (Tb,) seconds, strictly increasing
    values: np.ndarray  # (Tb, ...) float
    da: xr.DataArray | None  # transposed to time first, for the output's coords; None for arrays


def _behaviour_samples(behaviour: Any, behaviour_times: Any, time_dim: str) -> _Samples:
    """Values and sample times of ``behaviour`` (a DataArray, or an array with its times)."""
    name = "behaviour"
    if isinstance(behaviour, xr.DataArray):
        if time_dim not in behaviour.dims or time_dim not in behaviour.coords:
            raise ValueError(
                f"behaviour DataArray needs a {time_dim!r} coordinate in seconds; "
                f"got dims {tuple(map(str, behaviour.dims))}"
            )
        name = str(behaviour.name) if behaviour.name is not None else name
        da = behaviour.transpose(time_dim, ...)
        bt = _times(da[time_dim].values, f"{name} time coordinate")
        values = np.asarray(da.values, dtype=float)
    else:
        if behaviour_times is None:
            raise ValueError("behaviour_times= (seconds) is needed for a NumPy behaviour array")
        bt = _times(behaviour_times, "behaviour_times")
        values = np.asarray(behaviour, dtype=float)
        da = None
    if values.shape[0] != bt.size:
        raise ValueError(f"{name} has {values.shape[0]} samples but {bt.size} sample times")
    return _Samples(name, bt, values, da)


def _on_frames(
    flat: np.ndarray, bt: np.ndarray, ft: np.ndarray, *, method: str, max_gap_s: float
) -> np.ndarray:
    """Columns of ``flat`` (Tb, k), sampled at ``bt``, onto the frame times ``ft``: (T, k).

    ``method`` is ``"mean"`` (average of the samples in each frame's bin) or
    ``"interp"``; frames without usable samples are NaN.
    """
    out = np.full((ft.size, flat.shape[1]), np.nan)
    if method == "mean":
        half_first = (ft[1] - ft[0]) / 2 if ft.size > 1 else np.inf
        half_last = (ft[-1] - ft[-2]) / 2 if ft.size > 1 else np.inf
        edges = np.concatenate(
            [[ft[0] - half_first], (ft[:-1] + ft[1:]) / 2, [ft[-1] + half_last]]
        )
        frame = np.searchsorted(edges, bt, side="right") - 1
        inside = (frame >= 0) & (frame < ft.size)
    for j in range(flat.shape[1]):
        v = _fill_short_gaps(bt, flat[:, j], max_gap_s)
        valid = ~np.isnan(v)
        if valid.sum() == 0:
            continue
        if method == "mean":
            keep = valid & inside
            sums = np.bincount(frame[keep], weights=v[keep], minlength=ft.size)
            counts = np.bincount(frame[keep], minlength=ft.size)
            with np.errstate(invalid="ignore", divide="ignore"):
                out[:, j] = np.where(counts > 0, sums / np.maximum(counts, 1), np.nan)
        else:
            col = np.interp(ft, bt[valid], v[valid], left=np.nan, right=np.nan)
            # A frame is usable only if both neighbouring behaviour samples are valid:
            # the interpolated validity indicator is then exactly 1.
            support = np.interp(ft, bt, valid.astype(float), left=0.0, right=0.0)
            col[support < 1 - 1e-9] = np.nan
            out[:, j] = col
    return out
