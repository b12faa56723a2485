"""Which neurons interact: each channel's loadings with its member neurons highlighted."""

from __future__ import annotations

import numpy as np

from mics.plotting._names import names_or_default
from mics.plotting.model import load_pyplot, require_fitted

__all__ = ["plot_members"]

_ROLES = ("source", "target", "modulator")
# Members named on the axis at most; beyond that only the largest loadings are.
_MAX_NAMED_MEMBERS = 12


def _members_and_names(model, stability, role, P):
    """Member mask (n, K), how it was decided, and the neuron names of one role."""
    n = P.shape[0]
    if stability is not None:
        freq = stability[f"{role}_frequency"]
        members = np.asarray(stability[f"{role}_members"], dtype=bool)
        names = [str(v) for v in np.asarray(freq.coords[role].values)]
        return members, np.asarray(freq, dtype=float), names
    return P != 0, None, names_or_default(model, role, n)


def plot_members(model, stability=None, fig=None, roles=_ROLES):
    """Loadings per channel, member neurons highlighted and labelled.

    For every channel and role (source, target, modulator) the loadings
    are drawn as stems over the neurons; members are coloured and named
    (the largest ones when there are many), non-members grey. Members are
    the neurons with a non-zero weight in a sparse fit
    (``MICs(sparsity=...)``) or, given ``stability``, those selected at its
    threshold, with their selection frequencies drawn as a second trace.

    Parameters
    ----------
    model : mics.MICs
        Fitted, with at least one channel.
    stability : xarray.Dataset, optional
        Of :func:`mics.stability_selection` on this model.
    fig : matplotlib.figure.Figure, optional
        Figure to draw into; a new one when omitted.
    roles : sequence of {"source", "target", "modulator"}
        Columns of the figure.

    Returns
    -------
    fig : matplotlib.figure.Figure
        One row per channel, one column per role.
    """
    require_fitted(model, "channel_weights_", "source_patterns_", "target_patterns_")
    weights = np.asarray(model.channel_weights_, dtype=float).reshape(-1)
    K = weights.size
    if K == 0:
        raise ValueError("the model has no channels: there are no members to plot.")
    unknown = [r for r in roles if r not in _ROLES]
    if unknown or not roles:
        raise ValueError(f"roles must be among {_ROLES}, got {roles!r}.")
    if fig is None:
        fig = load_pyplot().figure(figsize=(4 * len(roles), 2.4 * K + 0.8), layout="constrained")
    axes = fig.subplots(K, len(roles), squeeze=False)
    for j, role in enumerate(roles):
        P = np.asarray(getattr(model, f"{role}_patterns_"), dtype=float)
        members, freq, names = _members_and_names(model, stability, role, P)
        x = np.arange(P.shape[0])
        for k in range(K):
            ax = axes[k, j]
            values, mask = P[:, k], members[:, k]
            ax.axhline(0.0, color="k", linewidth=0.6)
            ax.vlines(x[~mask], 0, values[~mask], color="0.7", linewidth=0.8)
            ax.vlines(x[mask], 0, values[mask], color="C3", linewidth=1.6)
            ax.plot(x[mask], values[mask], "o", color="C3", markersize=3)
            # name the members, largest loadings first when there are many
            order = np.flatnonzero(mask)
            order = order[np.argsort(-np.abs(values[order]), kind="stable")]
            for i in order[:_MAX_NAMED_MEMBERS]:
                ax.annotate(
                    names[i],
                    (x[i], values[i]),
                    textcoords="offset points",
                    xytext=(0, 4 if values[i] >= 0 else -10),
                    ha="center",
                    fontsize="xx-small",
                    color="C3",
                )
            if freq is not None:
                twin = ax.twinx()
                twin.plot(x, freq[:, k], color="C0", linewidth=0.8, alpha=0.7)
                twin.axhline(stability.attrs["threshold"], color="C0", linestyle=":")
                twin.set_ylim(0, 1.05)
                if j == len(roles) - 1:
                    twin.set_ylabel("selection frequency", color="C0")
            ax.set_title(
                f"channel {k} (\u03bb = {weights[k]:.3g}): {role}, {int(mask.sum())} members",
                fontsize="small",
            )
            if j == 0:
                ax.set_ylabel("loading")
        for k in range(K):
            axes[k, j].set_xlim(-0.6, P.shape[0] - 0.4)
        axes[K - 1, j].set_xlabel(f"{role} neuron (index)")
    return fig
