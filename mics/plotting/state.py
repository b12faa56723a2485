"""Figures of how communication depends on the modulator state.

``plot_state_communication`` compares the effective communication matrix
``B(z)`` at a low and a high value of each modulator (the others held at
their training mean) and the principal angles between the two states'
communication subspaces; ``plot_channel_gain`` draws each channel's gain
``lambda_k c_k . (z - z_mean)`` as one modulator sweeps its observed range.
"""

from __future__ import annotations

import numpy as np
from scipy import linalg

from mics.model.decomposition import modulator_percentiles, state_conditioned_subspaces
from mics.plotting._names import (
    MAX_NAMED_TICKS,
    fitted_names,
    modulator_units,
    names_or_default,
)
from mics.plotting.model import load_pyplot, require_fitted

__all__ = ["plot_state_communication", "plot_channel_gain", "state_angles"]


def _modulator_data(model, Z):
    """Z as a (T, m) array matching the fitted modulators, their names and units."""
    require_fitted(model, "modulator_mean_", "modulator_patterns_", "channel_weights_")
    m = np.asarray(model.modulator_mean_).reshape(-1).size
    if m == 0:
        raise ValueError("the model was fitted without a modulator: there is no state to vary.")
    names = names_or_default(model, "modulator", m)
    if hasattr(Z, "dims") and Z.ndim == 2:
        dim = next(d for d in Z.dims if d != "time")
        given = [str(v) for v in Z[dim].values] if dim in Z.coords else []
        if sorted(given) == sorted(names):  # same modulators: put them in the fitted order
            Z = Z.isel({dim: [given.index(n) for n in names]})
        Z = Z.transpose("time", dim) if "time" in Z.dims else Z
    values = np.asarray(Z, dtype=float)
    values = values.reshape(-1, 1) if values.ndim == 1 else values
    if values.ndim != 2 or values.shape[1] != m:
        raise ValueError(
            f"Z must be the modulator data, shape (n_samples, {m}); got shape {values.shape}."
        )
    return values, names, modulator_units(model, Z, values)


def _select(names, modulators):
    if modulators is None:
        return list(range(len(names)))
    chosen = []
    for item in [modulators] if isinstance(modulators, (str, int)) else modulators:
        if isinstance(item, (int, np.integer)) and not isinstance(item, bool):
            if not 0 <= item < len(names):
                raise ValueError(f"modulators: index {item} out of range for {len(names)}.")
            chosen.append(int(item))
        elif str(item) in names:
            chosen.append(names.index(str(item)))
        else:
            raise ValueError(f"modulators: {item!r} is not one of {names}.")
    return chosen


def state_angles(model, Z, modulator, percentiles=(10, 90), rank=None):
    """Low and high states of one modulator and the angles between their subspaces.

    Parameters
    ----------
    model : mics.MICs
        Fitted with a modulator.
    Z : array-like of shape (n_samples, n_modulators)
        Modulator data (raw units) giving the percentiles.
    modulator : int or str
        Which modulator is set low and high (the others at their mean).
    percentiles : (float, float)
        Low and high percentiles of that modulator.
    rank : int, optional
        Dimension of the state-conditioned subspaces (default the baseline rank).

    Returns
    -------
    readout : xarray.Dataset
        :func:`mics.model.state_conditioned_subspaces` at the two
        states (``state`` = low, high) plus ``source_state_angles`` and
        ``target_state_angles`` (``angle``): principal angles in degrees,
        ascending, between the low- and the high-state subspaces.
    """
    Z, names, _ = _modulator_data(model, Z)
    (j,) = _select(names, [modulator])
    if len(percentiles) != 2:
        raise ValueError(f"percentiles must be (low, high), got {percentiles!r}.")
    mean = np.asarray(model.modulator_mean_, dtype=float).reshape(-1)
    states = modulator_percentiles(Z, percentiles, modulator_mean=mean, names=names)
    keys = list(states)[2 * j : 2 * j + 2]  # the two states of modulator j, low first
    chosen = {f"{names[j]} {'low' if i == 0 else 'high'}": states[k] for i, k in enumerate(keys)}
    if rank is None and int(getattr(model, "rank_", 0)) == 0:
        rank = 1  # no baseline subspace: compare the top dimension of B(z)
    ds = state_conditioned_subspaces(model, chosen, rank=rank)
    source, target = ds["source_subspace"].values, ds["target_subspace"].values
    ds["source_state_angles"] = ("angle_between_states", _angles(source[0], source[1]))
    ds["target_state_angles"] = ("angle_between_states", _angles(target[0], target[1]))
    ds.attrs.update(modulator=names[j], percentiles=list(percentiles))
    return ds


def _angles(A, B):
    # scipy gives them descending; ascending reads "first = best-aligned".
    return np.degrees(linalg.subspace_angles(A, B))[::-1]


def plot_state_communication(model, Z, modulators=None, percentiles=(10, 90), rank=None):
    """Communication at low vs high modulator, with the angles between the two subspaces.

    For each modulator, ``B(z)`` (source x target) is drawn at its low and
    high percentile with the other modulators at their training mean, on one
    shared colour scale, next to the principal angles between the two
    states' source subspaces and between their target subspaces (0 degrees:
    the modulator rescales communication within the same dimensions; large
    angles: it changes which dimensions communicate).

    Parameters
    ----------
    model : mics.MICs
        Fitted with a modulator.
    Z : array-like of shape (n_samples, n_modulators)
        Modulator data in raw units (typically the training Z).
    modulators : int, str or sequence of them, optional
        Modulators to show (indices or names); default all.
    percentiles : (float, float), default=(10, 90)
        Low and high percentiles of each modulator.
    rank : int, optional
        Dimension of the compared subspaces (default the baseline rank).

    Returns
    -------
    fig : matplotlib.figure.Figure
        One row per modulator: ``B(z)`` low, ``B(z)`` high (images, titled
        with the modulator's value and units, as in :func:`plot_channel_gain`), and a
        bar chart of the principal angles (container labels ``"source"``
        and ``"target"``, one bar per angle). See :func:`state_angles` for
        the numbers.
    """
    Zv, names, units = _modulator_data(model, Z)
    rows = _select(names, modulators)
    source_names = fitted_names(model, "source")
    target_names = fitted_names(model, "target")
    plt = load_pyplot()
    fig, axes = plt.subplots(
        len(rows),
        3,
        figsize=(12, 3.6 * len(rows)),
        squeeze=False,
        layout="constrained",
        gridspec_kw={"width_ratios": [1, 1, 0.8]},
    )
    for row, j in zip(axes, rows, strict=True):
        ds = state_angles(model, Zv, j, percentiles, rank)
        mats = ds["communication_matrix"].values
        vmax = float(np.max(np.abs(mats))) or 1.0
        for ax, mat, state, z in zip(
            row[:2], mats, ds["state"].values, ds["modulator_state"].values[:, j], strict=True
        ):
            image = ax.imshow(
                mat, aspect="auto", cmap="RdBu_r", vmin=-vmax, vmax=vmax, interpolation="none"
            )
            pct = percentiles[0] if state.endswith("low") else percentiles[1]
            # two lines: on one, the titles of the two images run into each other
            ax.set_title(f"B(z), {state}:\np{pct:g} = {z:.3g} ({units[j]})")
            _neuron_ticks(ax.set_yticks, source_names, mat.shape[0])
            _neuron_ticks(ax.set_xticks, target_names, mat.shape[1], rotation=90)
            ax.set_ylabel("source neuron")
            ax.set_xlabel("target neuron")
        fig.colorbar(image, ax=list(row[:2]), shrink=0.9, label="communication weight")
        _angle_bars(row[2], ds)
        row[2].set_title(f"{names[j]}: low vs high subspaces")
    return fig


def _neuron_ticks(set_ticks, names, n, rotation=0):
    if names is not None and n <= MAX_NAMED_TICKS:
        set_ticks(np.arange(n), names, fontsize="x-small", rotation=rotation)


def _angle_bars(ax, ds):
    n = ds.sizes["angle_between_states"]
    x = np.arange(n)
    for offset, side, color in ((-0.2, "source", "C0"), (0.2, "target", "C1")):
        values = ds[f"{side}_state_angles"].values
        bars = ax.bar(x + offset, values, width=0.4, color=color, label=side)
        # Angles near 0 have no visible bar: print every value.
        ax.bar_label(bars, labels=[f"{v:.0f}\u00b0" for v in values], fontsize="x-small")
    ax.set_xticks(x, [f"{i + 1}" for i in x])
    ax.set_xlabel("principal angle (1 = smallest)")
    ax.set_ylabel("degrees")
    ax.set_ylim(0, 99)  # room above 90 degrees for the value labels
    ax.set_yticks(np.arange(0, 91, 15))
    ax.legend(loc="upper left", fontsize="small", title="subspace")


def plot_channel_gain(model, Z, axes=None, percentiles=(1, 99), n_points=50):
    """Each channel's gain against each modulator.

    The gain of channel k is ``lambda_k c_k . (z - z_mean)``, the factor by
    which the modulator scales the channel's source-to-target drive. Each
    panel sweeps one modulator over its observed range (other modulators at
    their training mean), so a line's slope is ``lambda_k c_jk``: how
    strongly that modulator opens (positive) or closes (negative) the channel.

    Parameters
    ----------
    model : mics.MICs
        Fitted with at least one channel.
    Z : array-like of shape (n_samples, n_modulators)
        Modulator data in raw units, for the swept range.
    axes : sequence of matplotlib.axes.Axes, optional
        One per modulator; created when omitted.
    percentiles : (float, float), default=(1, 99)
        Range of each modulator swept.
    n_points : int, default=50

    Returns
    -------
    fig : matplotlib.figure.Figure
        One panel per modulator (x: modulator value, titled by name and
        labelled with its units: the DataArray's ``units`` attribute, else
        "z-scored" or "input units"), one line per channel labelled
        ``"channel k"``.
    """
    Zv, names, units = _modulator_data(model, Z)
    weights = np.asarray(model.channel_weights_, dtype=float).reshape(-1)
    if weights.size == 0:
        raise ValueError("the model has no modulation channels: no gain to plot.")
    C = np.asarray(model.modulator_patterns_, dtype=float).reshape(len(names), -1)
    mean = np.asarray(model.modulator_mean_, dtype=float).reshape(-1)
    if axes is None:
        _, axes = load_pyplot().subplots(
            1,
            len(names),
            figsize=(4.2 * len(names), 3.4),
            squeeze=False,
            sharey=True,
            layout="constrained",
        )
    axes = list(np.atleast_1d(axes).ravel())
    if len(axes) != len(names):
        raise ValueError(f"expected {len(names)} axes (one per modulator), got {len(axes)}.")
    for j, ax in enumerate(axes):
        lo, hi = np.percentile(Zv[:, j], percentiles)
        z = np.linspace(lo, hi, n_points)
        for k in range(weights.size):
            ax.plot(z, weights[k] * C[j, k] * (z - mean[j]), color=f"C{k}", label=f"channel {k}")
        ax.axhline(0.0, color="0.5", linewidth=0.8)
        ax.axvline(mean[j], color="0.5", linewidth=0.8, linestyle=":")
        ax.set_title(names[j])
        ax.set_xlabel(f"{names[j]} ({units[j]}; training mean dotted)")
    axes[0].set_ylabel(r"channel gain $\lambda_k\, c_k \cdot (z - \bar z)$")
    axes[0].legend(fontsize="small")
    return axes[0].figure
