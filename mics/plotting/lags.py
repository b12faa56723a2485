"""Figure of a lag scan (:func:`mics.lag_scan`): communication and modulation vs lag."""

from __future__ import annotations

import numpy as np

from mics.plotting.model import load_pyplot

__all__ = ["plot_lag_scan"]


def plot_lag_scan(scan, axes=None):
    """Cross-validated communication (and modulation) against source lag.

    Parameters
    ----------
    scan : xarray.Dataset
        From :func:`mics.lag_scan`.
    axes : sequence of matplotlib.axes.Axes, optional
        One axes for communication, a second for modulation when the scan
        has it. New axes are created when omitted.

    Returns
    -------
    axes : list of matplotlib.axes.Axes
    """
    if "communication" not in getattr(scan, "data_vars", {}):
        raise ValueError("scan must be the Dataset returned by mics.lag_scan.")
    panels = [("communication", "CV communication (1 - NSE)", "C0")]
    if "modulation" in scan:
        panels.append(("modulation", "CV modulation gain (NSE)", "C3"))
    if axes is None:
        _, axes = load_pyplot().subplots(
            1, len(panels), figsize=(4.5 * len(panels), 3.5), squeeze=False, layout="constrained"
        )
        axes = list(axes.ravel())
    else:
        axes = list(np.atleast_1d(axes).ravel())
        if len(axes) != len(panels):
            raise ValueError(f"expected {len(panels)} axes, got {len(axes)}.")
    seconds = "lag_s" in scan.coords
    x = np.asarray(scan["lag_s" if seconds else "lag"].values, dtype=float)
    for ax, (name, label, color) in zip(axes, panels, strict=True):
        y = np.asarray(scan[name].values, dtype=float)
        sem = np.asarray(scan[f"{name}_sem"].values, dtype=float)
        ax.fill_between(x, y - sem, y + sem, color=color, alpha=0.2, linewidth=0)
        ax.plot(x, y, color=color, marker="o")
        peak = int(np.argmax(y))
        ax.plot([x[peak]], [y[peak]], marker="*", markersize=14, color="k", linestyle="none")
        ax.axvline(0.0, color="0.5", linestyle=":", linewidth=1)
        if name == "modulation":
            ax.axhline(0.0, color="0.5", linewidth=0.8)
        ax.set_xlabel("source lead (s)" if seconds else "source lead (samples)")
        ax.set_ylabel(label)
    return axes
