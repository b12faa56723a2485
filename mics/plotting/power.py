"""Figure of a power analysis: detection rate against planted strength."""

from __future__ import annotations

import numpy as np

from mics.plotting.model import new_axes

__all__ = ["plot_power"]


def plot_power(result, ax=None, effect=None):
    """Detection rate of the modulation test against the planted channel strength.

    Parameters
    ----------
    result : mics.workflows.power.PowerAnalysis
        From :func:`mics.power_analysis`.
    ax : matplotlib.axes.Axes, optional
        Axes to draw into; created when omitted.
    effect : ModulationTest, optional
        The real data's test: its effect size and interval are drawn as a
        shaded band on the strength axis, for comparison with the minimum
        detectable effect.

    Returns
    -------
    ax : matplotlib.axes.Axes
        One line with Clopper-Pearson error bars per geometry (x: strength in
        percent of target variance, y: detection rate), a dashed line at the
        target power, a dotted one at ``alpha``, and each minimum detectable
        effect marked by a vertical tick.
    """
    strengths = 100 * np.asarray(result.strengths, dtype=float)
    ax = new_axes(ax)
    for i, geometry in enumerate(result.geometries):
        rates = np.asarray(result.rates[i], dtype=float)
        low, high = np.asarray(result.rate_intervals[i], dtype=float).T
        yerr = np.vstack([rates - low, high - rates])
        line = ax.errorbar(
            strengths, rates, yerr=yerr, marker="o", capsize=3, label=geometry.replace("_", " ")
        )
        mde = float(result.minimum_detectable_effect[i])
        if np.isfinite(mde):
            ax.axvline(100 * mde, color=line[0].get_color(), linestyle=":", linewidth=1)
    ax.axhline(result.target_power, color="0.3", linestyle="--", linewidth=1)
    ax.axhline(result.alpha, color="0.6", linestyle=":", linewidth=1)
    if effect is not None:
        lo, hi = np.asarray(effect.effect_interval, dtype=float)
        if np.isfinite(lo) and np.isfinite(hi):
            ax.axvspan(
                100 * max(lo, 0.0),
                100 * max(hi, 0.0),
                color="C3",
                alpha=0.15,
                label="effect size on the data",
            )
    ax.set_xlabel("planted channel strength (% of target variance)")
    ax.set_ylabel(f"detection rate (p <= {result.alpha:g})")
    ax.set_ylim(-0.03, 1.03)
    ax.set_title(
        f"Power on this recording ({result.n_sims} simulations per point, "
        f"{result.settings.get('n_permutations', '?')} permutations)"
    )
    ax.legend(frameon=False, fontsize="small")
    return ax
