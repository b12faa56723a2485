"""Figures of the inference results: the modulation test's null and bootstrap intervals."""

from __future__ import annotations

import numpy as np

from mics.model.decomposition import PARTS
from mics.plotting.model import PART_COLORS, PART_LABELS, new_axes
from mics.workflows.inference import format_p_value

__all__ = ["plot_null_distribution", "plot_bootstrap_intervals"]


_VERDICT_WORDS = {
    "gating": "gating detected",
    "pairing": "pairing matters, no gating effect",
    "none": "no modulation detected",
}


def plot_null_distribution(result, ax=None, bins=None):
    """Null distribution of the modulation test with the observed statistic.

    Parameters
    ----------
    result : mics.workflows.ModulationTest
        From :func:`mics.test_modulation`.
    ax : matplotlib.axes.Axes, optional
        Axes to draw into; created when omitted.
    bins : int or sequence, optional
        Histogram bins (``numpy.histogram``); default ``min(30, max(10,
        n_permutations // 5))`` equal bins over the null and the observed
        value.

    Returns
    -------
    ax : matplotlib.axes.Axes
        The null histogram (one ``BarContainer``, counts of null fits), a
        vertical line labelled ``observed`` at ``result.statistic`` and the
        p-value, the null kind and the graded verdict (gating detected, pairing
        only, or not detected: :meth:`ModulationTest.verdict`) in the title.

    Raises
    ------
    ValueError
        If ``result`` has no null distribution.
    """
    null = np.asarray(getattr(result, "null_distribution", []), dtype=float).reshape(-1)
    if null.size == 0:
        raise ValueError(
            "result has no null_distribution; pass the ModulationTest from mics.test_modulation."
        )
    observed = float(result.statistic)
    finite = null[np.isfinite(null)]
    if bins is None:
        bins = min(30, max(10, null.size // 5))
    span = np.append(finite, observed)
    if isinstance(bins, (int, np.integer)):
        bins = np.histogram_bin_edges(span, bins=int(bins))
    ax = new_axes(ax)
    ax.hist(finite, bins=bins, color="0.6", edgecolor="white", label="null fits")
    ax.axvline(observed, color="C3", linewidth=2, label=f"observed = {observed:.3g}")
    low, high = float(bins[0]), float(bins[-1])
    pad = 0.05 * (high - low or 1.0)
    ax.set_xlim(low - pad, high + pad)
    kind = getattr(result, "null", "circular")
    # With n permutations the p-value cannot go below 1 / (n + 1): say so.
    p_text = format_p_value(result.p_value, null.size).replace(" (", "\n(")
    # The verdict graded by the effect size, so the figure says what the sentence says.
    verdict = getattr(result, "verdict", None)
    grade = _VERDICT_WORDS.get(verdict() if callable(verdict) else "", "modulation test")
    ax.set_title(f"{grade}, {kind} null: {p_text}", fontsize="medium")
    ax.set_xlabel("best CV improvement of a channel model over K = 0 (NSE)")
    ax.set_ylabel("null fits")
    ax.legend(loc="upper center", fontsize="small")
    return ax


def plot_bootstrap_intervals(intervals, model=None, ax=None):
    """Bootstrap intervals on the decomposition, per channel and for the whole tensor.

    Parameters
    ----------
    intervals : xarray.Dataset
        From :func:`mics.bootstrap_channels` (variables ``reshape``, ...,
        ``total_*`` with a ``bound`` dimension ``low``/``high``).
    model : mics.MICs or xarray.Dataset, optional
        The fitted model (or its :meth:`~mics.MICs.decompose` Dataset) whose
        fractions are the point estimates; without it the bootstrap median
        is shown.
    ax : matplotlib.axes.Axes, optional
        Axes to draw into; created when omitted.

    Returns
    -------
    ax : matplotlib.axes.Axes
        Groups ``channel 0, ..., channel K-1, total`` along x; in each group
        one bar per kind of modulation (one ``BarContainer`` per kind, in the
        order of :data:`mics.model.PARTS`) at the point estimate and
        a vertical interval line from ``low`` to ``high`` (one
        ``LineCollection`` per kind, labelled ``"<kind> interval"``).

    Raises
    ------
    ValueError
        If ``intervals`` lacks the decomposition bounds.
    """
    missing = [p for p in (*PARTS, *(f"total_{p}" for p in PARTS)) if p not in intervals]
    if missing or "bound" not in intervals.dims:
        raise ValueError(
            "intervals must be the Dataset from mics.bootstrap_channels (with a 'bound' "
            f"dimension and the decomposition variables); missing {missing or ['bound']}."
        )
    K = intervals.sizes.get("channel", 0)
    estimate = _point_estimates(intervals, model)
    x = np.arange(K + 1)
    width = 0.8 / len(PARTS)
    ax = new_axes(ax)
    for i, part in enumerate(PARTS):
        low = np.append(
            intervals[part].sel(bound="low").values, intervals[f"total_{part}"].sel(bound="low")
        )
        high = np.append(
            intervals[part].sel(bound="high").values, intervals[f"total_{part}"].sel(bound="high")
        )
        xi = x + (i - (len(PARTS) - 1) / 2) * width
        ax.bar(
            xi,
            estimate[part],
            width=width,
            color=PART_COLORS[part],
            alpha=0.8,
            label=PART_LABELS[part],
        )
        ax.vlines(xi, low, high, color="k", linewidth=1.5, label=f"{PART_LABELS[part]} interval")
    confidence = intervals.attrs.get("confidence")
    level = f"{100 * float(confidence):.0f}% " if confidence is not None else ""
    n_boot = intervals.attrs.get("n_boot")
    ax.set_xticks(x, [f"channel {k}" for k in range(K)] + ["total"])
    ax.axvline(K - 0.5, color="0.5", linewidth=0.8)
    ax.set_ylim(0, 1)
    ax.set_ylabel("fraction of modulation energy")
    what = "fit" if model is not None else "bootstrap median"
    # the count on a second line: on one, the title is wider than the axes
    ax.set_title(
        f"decomposition: {what} with {level}bootstrap intervals"
        + (f"\n({n_boot} resamples)" if n_boot is not None else "")
    )
    handles, labels = ax.get_legend_handles_labels()
    keep = [i for i, lab in enumerate(labels) if not lab.endswith("interval")]
    ax.legend(
        [handles[i] for i in keep],
        [labels[i] for i in keep],
        loc="upper center",
        bbox_to_anchor=(0.5, -0.1),
        ncol=len(PARTS),
        frameon=False,
    )
    return ax


def _point_estimates(intervals, model):
    """Per part: K channel fractions and the whole-tensor fraction (length K + 1)."""
    if model is None:
        draws = {
            part: np.append(
                np.nanmedian(intervals[f"{part}_draws"].values, axis=0),
                np.nanmedian(intervals[f"total_{part}_draws"].values),
            )
            for part in PARTS
        }
        return draws
    ds = model if hasattr(model, "data_vars") else model.decompose()
    K = intervals.sizes.get("channel", 0)
    if ds.sizes.get("channel", 0) != K:
        raise ValueError(
            f"model has {ds.sizes.get('channel', 0)} channels but the intervals have {K}."
        )
    return {
        part: np.append(np.asarray(ds[part].values, dtype=float), float(ds[f"total_{part}"]))
        for part in PARTS
    }
