"""Figure of a cross-validated sparsity path (``MICs(sparsity="cv")``)."""

from __future__ import annotations

import numpy as np

from mics.plotting.model import cv_curve, new_axes

__all__ = ["plot_sparsity_path"]

_ROLES = ("source", "target", "modulator")
_ROLE_STYLE = {"source": ("C1", "s"), "target": ("C2", "^"), "modulator": ("C4", "D")}


def plot_sparsity_path(model, ax=None, roles=None):
    """Held-out loss against sparsity, the chosen weight marked, and the member counts.

    Parameters
    ----------
    model : mics.MICs or dict
        Fitted with ``sparsity="cv"`` (or a sequence of candidates), or its
        ``cv_results_``.
    ax : matplotlib.axes.Axes, optional
        Axes for the held-out loss; created when omitted. The member counts
        go on a twin axes sharing its x axis.
    roles : sequence of {"source", "target", "modulator"}, optional
        Whose member counts to draw; default every role with more than one
        neuron (a single modulator is never penalised).

    Returns
    -------
    ax, ax_counts : matplotlib.axes.Axes
        Left axis: the mean held-out NSE over folds with +/- one SEM as
        band and error bars, a dotted line one SEM above the lowest mean
        (the threshold of :func:`mics.model.sparsity_path.one_sem_sparser`),
        the lowest mean as an open circle and the chosen weight (one-SEM rule
        towards sparser fits) as a star on a dashed vertical line. Right
        axis: the mean number of neurons with a non-zero weight in the fold
        fits, per role. The x axis is the candidate weights, spaced evenly
        (the grid starts at 0, the dense fit) and labelled by value.

    Raises
    ------
    ValueError
        If the model or table holds no sparsity path (fit with
        ``sparsity="cv"`` and at least one channel).
    """
    results = model if isinstance(model, dict) else getattr(model, "cv_results_", None)
    if not isinstance(results, dict) or "sparsity" not in results:
        raise ValueError(
            "no sparsity path: fit MICs(sparsity='cv') (or a sequence of candidate "
            "weights) to cross-validate it; cv_results_ then holds 'sparsity'."
        )
    grid = np.asarray(results["sparsity"], dtype=float)
    mean = np.asarray(results["sparsity_mean_loss"], dtype=float)
    if not np.isfinite(mean).any():
        raise ValueError(
            "the sparsity path was not run: no channel was selected (n_channels_ = 0), "
            "so there are no patterns to make sparse."
        )
    sem = np.nan_to_num(np.asarray(results["sparsity_sem_loss"], dtype=float))
    best = int(results["sparsity_best_index"])
    lowest = int(results.get("sparsity_lowest_index", np.nanargmin(mean)))
    x = np.arange(grid.size, dtype=float)  # even spacing: the grid holds 0 and spans decades
    ax = new_axes(ax)
    cv_curve(ax, x, mean, sem, best, "held-out NSE", f"chosen (one SEM, sparser): {grid[best]:g}")
    ax.axhline(mean[lowest] + sem[lowest], color="0.4", linestyle=":", linewidth=1)
    ax.plot(
        [x[lowest]],
        [mean[lowest]],
        marker="o",
        markersize=11,
        markerfacecolor="none",
        markeredgecolor="0.3",
        linestyle="none",
        label=f"lowest: {grid[lowest]:g}",
    )
    ax.set_xticks(x)
    ax.set_xticklabels([f"{g:g}" for g in grid])
    ax.set_xlabel("sparsity (group-lasso weight, relative)")
    ax.set_ylabel("held-out NSE (mean over folds)")
    counts = ax.twinx()
    if roles is None:
        roles = [
            role
            for role in _ROLES
            if np.nanmax(np.asarray(results.get(f"sparsity_fold_n_{role}", [[0]]))) > 1
            or _n_neurons(model, role) > 1
        ]
    for role in roles:
        color, marker = _ROLE_STYLE[role]
        n = np.asarray(results[f"sparsity_n_{role}"], dtype=float)
        counts.plot(
            x,
            n,
            color=color,
            marker=marker,
            linestyle="-",
            linewidth=1,
            alpha=0.8,
            label=f"{role} neurons",
        )
    counts.set_ylabel("neurons with non-zero weight (mean over folds)")
    counts.set_ylim(bottom=0)
    handles, labels = ax.get_legend_handles_labels()
    more, more_labels = counts.get_legend_handles_labels()
    ax.legend(handles + more, labels + more_labels, loc="best", fontsize="small")
    return ax, counts


def _n_neurons(model, role):
    """Neurons of a role in a fitted model (0 for a bare table)."""
    patterns = getattr(model, f"{role}_patterns_", None)
    return 0 if patterns is None else int(np.shape(patterns)[0])
