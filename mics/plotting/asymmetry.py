"""Figure of the headline: source- against target-side reconfiguration, chance-corrected."""

from __future__ import annotations

import numpy as np

from mics.model.decomposition import PARTS
from mics.model.summaries import result_kind
from mics.plotting._layout import readable_categories
from mics.plotting.model import PART_COLORS, PART_LABELS, load_pyplot

__all__ = ["plot_asymmetry"]


def plot_asymmetry(result, axes=None):
    """The four fractions against chance, and the two private sides with the stability margin.

    Parameters
    ----------
    result : xarray.Dataset
        From :func:`mics.asymmetry` (or ``Reconfiguration.asymmetry``).
    axes : sequence of two matplotlib.axes.Axes, optional
        Where to draw; a new figure with two panels when omitted.

    Returns
    -------
    axes : ndarray of two matplotlib.axes.Axes
        Left: one bar per part (reshape, private source, private target,
        new) at its chance-corrected fraction of the modulation energy with
        its interval, the fitted (uncorrected) fraction as an open circle and
        the fraction a noise-fitted channel would take (``chance``) as a grey
        dash: how far each part stands from what noise alone gives. Right:
        private source, private target and their difference, corrected, with
        intervals; 0 dotted, the equivalence margin of target stability
        dashed; the tests' p-values in the title. An undefined result (no
        modulation detected) is drawn as a note, with no estimate.

    Raises
    ------
    ValueError
        If ``result`` is not the Dataset of :func:`mics.asymmetry`.
    """
    if result_kind(result) != "asymmetry":
        raise ValueError("plot_asymmetry draws the Dataset returned by mics.asymmetry.")
    if axes is None:
        _, axes = load_pyplot().subplots(1, 2, figsize=(9.0, 3.4), layout="constrained")
    axes = np.asarray(axes).reshape(-1)
    if axes.size != 2:
        raise ValueError(f"axes must hold two Axes, got {axes.size}.")
    left, right = axes
    status = result.attrs.get("status", "tested")
    if status.startswith("undefined"):
        for ax in axes:
            ax.set_axis_off()
        left.text(0.0, 0.5, f"asymmetry {status}", fontsize=9, wrap=True, va="center")
        return axes
    level = f"{100 * float(result.attrs.get('confidence', 0.95)):g}%"

    frac = np.array([float(result["fraction"].sel(part=p)) for p in PARTS])
    fitted = np.array([float(result["fraction_observed"].sel(part=p)) for p in PARTS])
    bounds = np.array([result["fraction_interval"].sel(part=p).values for p in PARTS])
    x = np.arange(len(PARTS))
    left.bar(x, frac, color=[PART_COLORS[p] for p in PARTS], label="corrected")
    left.vlines(x, bounds[:, 0], bounds[:, 1], color="k", linewidth=1.5, label=f"{level} CI")
    left.plot(x, fitted, "o", mfc="none", mec="k", label="fitted")
    if "chance" in result and np.all(np.isfinite(result["chance"].values)):
        chance = result["chance"].values
        left.hlines(chance, x - 0.4, x + 0.4, color="0.5", linewidth=2, label="noise level")
    left.axhline(0.0, color="k", linewidth=0.6)
    readable_categories([left], [PART_LABELS[p] for p in PARTS])
    left.set_ylim(min(-0.05, np.nanmin(bounds) - 0.02), 1.05)
    left.set_ylabel("fraction of modulation energy")
    left.legend(loc="upper right", fontsize=7, frameon=False)

    rows = [
        ("private source", "private_source"),
        ("private target", "private_target"),
        ("difference", None),
    ]
    for i, (_, part) in enumerate(rows):
        if part is None:
            value = float(result["difference"])
            low, high = (float(v) for v in result["difference_interval"].values)
            raw = float(result["difference_observed"])
        else:
            value = float(result["fraction"].sel(part=part))
            low, high = (float(v) for v in result["fraction_interval"].sel(part=part).values)
            raw = float(result["fraction_observed"].sel(part=part))
        color = PART_COLORS.get(part, "C3") if part else "C3"
        right.errorbar(value, i, xerr=[[value - low], [high - value]], fmt="s", color=color,
                       capsize=3)  # fmt: skip
        right.plot(raw, i, "o", mfc="none", mec="k")
    margin = float(result.attrs.get("margin", np.nan))
    if np.isfinite(margin):
        right.axvline(margin, color="0.3", linestyle="--", linewidth=1)
        right.annotate(f"margin {margin:g}", (margin, 1.35), fontsize=7, color="0.3",
                       ha="left")  # fmt: skip
    right.axvline(0.0, color="k", linestyle=":", linewidth=1)
    right.set_yticks(range(len(rows)), [r[0] for r in rows])
    right.set_ylim(len(rows) - 0.5, -0.5)
    right.set_xlabel("chance-corrected share (open: fitted)")
    p = float(result["p_value"])
    stable = float(result["stable_p_value"])
    right.set_title(f"asymmetry p = {p:.2g}; targets stable p = {stable:.2g}", fontsize=9)
    return axes
