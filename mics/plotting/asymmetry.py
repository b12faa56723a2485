"""Figure of the asymmetry statistic: source- against target-side reconfiguration."""

from __future__ import annotations

import numpy as np

from mics.model.decomposition import PARTS, result_kind
from mics.plotting._layout import readable_categories
from mics.plotting.model import PART_COLORS, PART_LABELS, load_pyplot

__all__ = ["plot_asymmetry"]


def plot_asymmetry(result, axes=None, bins=None):
    """The four fractions with intervals, and the bootstrap distribution of the difference.

    Parameters
    ----------
    result : xarray.Dataset
        From :func:`mics.asymmetry`.
    axes : sequence of two matplotlib.axes.Axes, optional
        Where to draw the fractions and the difference; a new figure with
        two panels when omitted.
    bins : int or sequence, optional
        Histogram bins of the bootstrap differences (default 20 equal bins
        over their range; the axis still shows 0).

    Returns
    -------
    axes : ndarray of two matplotlib.axes.Axes
        Left: one bar per part (reshape, private source, private target,
        new; fractions of the modulation energy) with its percentile
        interval. Right: histogram of the bootstrap differences
        ``private_source - private_target``, the observed difference
        (``observed``), its interval (shaded) and 0 (dotted), with the
        p-value in the title.

    Raises
    ------
    ValueError
        If ``result`` is not the Dataset of :func:`mics.asymmetry`.
    """
    if result_kind(result) != "asymmetry":
        raise ValueError("plot_asymmetry draws the Dataset returned by mics.asymmetry.")
    if axes is None:
        _, axes = load_pyplot().subplots(1, 2, figsize=(8.0, 3.2), layout="constrained")
    axes = np.asarray(axes).reshape(-1)
    if axes.size != 2:
        raise ValueError(f"axes must hold two Axes, got {axes.size}.")
    left, right = axes
    level = f"{100 * float(result.attrs.get('confidence', 0.95)):g}%"

    frac = np.array([float(result["fraction"].sel(part=p)) for p in PARTS])
    bounds = np.array([result["fraction_interval"].sel(part=p).values for p in PARTS])
    x = np.arange(len(PARTS))
    left.bar(x, frac, color=[PART_COLORS[p] for p in PARTS])
    left.vlines(x, bounds[:, 0], bounds[:, 1], color="k", linewidth=1.5, label=f"{level} CI")
    left.set_ylim(0, 1.05)
    left.set_ylabel("fraction of modulation energy")
    left.legend(loc="upper right", fontsize=8, frameon=False)

    draws = np.asarray(result["difference_draws"].values, dtype=float)
    observed = float(result["difference"])
    low, high = (float(v) for v in result["difference_interval"].values)
    if bins is None:
        # bins over the draws only: spread over [0, observed] a tight bootstrap is one bar
        bins = np.histogram_bin_edges(draws, bins=20)
    right.hist(draws, bins=bins, color="0.6", edgecolor="white", label="bootstrap")
    right.axvspan(low, high, color="C0", alpha=0.15, label=f"{level} CI")
    right.axvline(observed, color="C3", linewidth=2, label=f"observed = {observed:+.2f}")
    right.axvline(0.0, color="k", linestyle=":", linewidth=1)
    right.set_xlabel("private source - private target")
    right.set_ylabel("resamples")
    p = float(result["p_value"])
    n = int(result.attrs.get("n_boot", draws.size))
    p_text = f"p < {2 / n:.2g}" if p == 0 else f"p = {p:.2g}"
    right.set_title(f"source vs target reconfiguration: {p_text}", fontsize=9)
    right.legend(loc="best", fontsize=8, frameon=False)
    readable_categories([left], [PART_LABELS[p] for p in PARTS])
    return axes
