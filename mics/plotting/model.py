"""Matplotlib figures for a fitted :class:`mics.MICs` model.

Every function takes a fitted model (or, for :func:`plot_decomposition`, the
``xarray.Dataset`` from :meth:`mics.MICs.decompose`) and an optional ``ax`` /
``fig`` / ``axes`` to draw into, and returns what it drew on. Nothing here
calls ``plt.show``.
"""

import numpy as np

from mics.model.decomposition import PARTS
from mics.plotting._layout import keep_apart, make_room, readable_categories
from mics.plotting._names import MAX_NAMED_TICKS, fitted_names, names_or_default

__all__ = [
    "PART_COLORS",
    "PART_LABELS",
    "channel_alignment",
    "plot_channels",
    "plot_cv_curves",
    "plot_decomposition",
    "plot_geometry",
    "plot_loss_history",
    "plot_modulator_patterns",
]

#: Colour of each kind of modulation, shared by all figures.
PART_COLORS = {
    "reshape": "#4C72B0",
    "private_source": "#DD8452",
    "private_target": "#55A868",
    "new": "#C44E52",
}

#: Human-readable name of each kind of modulation.
PART_LABELS = {
    "reshape": "reshape",
    "private_source": "private source",
    "private_target": "private target",
    "new": "new",
}

# Above this many modulator neurons a pattern is drawn sorted by loading
# (a population), not as one stem per named variable.
_MANY_MODULATORS = 30

_CV_KEYS = ("{}", "{}_mean_loss", "{}_sem_loss", "{}_best_index")
_CV_XLABEL = {"rank": "baseline rank", "n_channels": "number of channels"}


def load_pyplot():
    import matplotlib.pyplot as plt

    return plt


def require_fitted(model, *names):
    missing = [name for name in names if not hasattr(model, name)]
    if missing:
        raise ValueError(
            f"{type(model).__name__} has no {', '.join(missing)}; fit the model first."
        )


def cv_curve(ax, x, y, sem, chosen, label, chosen_label):
    """A cross-validation curve: mean +- SEM band and bars, the chosen candidate starred.

    Parameters
    ----------
    ax : matplotlib Axes
    x, y, sem : ndarray of shape (n_candidates,)
        Positions, mean score or loss over folds, and its SEM.
    chosen : int
        Index of the chosen candidate (a star and a dashed vertical line).
    label, chosen_label : str
        Legend entries of the curve and of the star.
    """
    ax.fill_between(x, y - sem, y + sem, color="C0", alpha=0.2, linewidth=0)
    ax.errorbar(x, y, yerr=sem, fmt="none", ecolor="C0", capsize=3)
    ax.plot(x, y, color="C0", marker="o", label=label)
    ax.plot([x[chosen]], [y[chosen]], marker="*", markersize=15, color="C3", linestyle="none",
            label=chosen_label)  # fmt: skip
    ax.axvline(x[chosen], color="C3", linestyle="--", linewidth=1)


def new_axes(ax):
    if ax is None:
        _, ax = load_pyplot().subplots()
    return ax


def plot_channels(model, fig=None):
    """Each channel's source, target and modulator patterns.

    Source and target patterns are stem plots over neurons; the modulator
    pattern is a bar per modulator on a categorical axis (one tick per
    modulator, named when the model was fitted on a labelled Z, else
    ``z0, z1, ...``). Neurons are labelled by their ids when the inputs
    were labelled and there are at most 30 of them, else by index.

    Parameters
    ----------
    model : mics.MICs
        Fitted model with at least one channel.
    fig : matplotlib.figure.Figure, optional
        Figure to draw into (new axes are added). A new figure is created
        when omitted.

    Returns
    -------
    fig : matplotlib.figure.Figure
        One row per channel and three columns (source, target, modulator
        pattern); each panel is titled with the channel index and weight.

    Raises
    ------
    ValueError
        If the model is not fitted or has no channels.
    """
    require_fitted(model, "channel_weights_", "source_patterns_", "target_patterns_")
    require_fitted(model, "modulator_patterns_")
    weights = np.asarray(model.channel_weights_, dtype=float).reshape(-1)
    K = weights.size
    if K == 0:
        raise ValueError("the model has no modulation channels to plot.")
    patterns = (
        ("source", np.asarray(model.source_patterns_, dtype=float)),
        ("target", np.asarray(model.target_patterns_, dtype=float)),
        ("modulator", np.asarray(model.modulator_patterns_, dtype=float)),
    )
    if fig is None:
        fig = load_pyplot().figure(figsize=(10, 2.2 * K + 0.8), layout="constrained")
    axes = fig.subplots(K, 3, squeeze=False)
    categorical = []  # modulator panels with one named bar per modulator
    sorted_names = []  # (panel, names) of a population's sorted loadings
    for j, (name, P) in enumerate(patterns):
        n = P.shape[0]
        x = np.arange(n)
        labels = fitted_names(model, name)
        for k in range(K):
            ax = axes[k, j]
            values = P[:, k]
            if name == "modulator" and n > _MANY_MODULATORS:
                # a population: loadings sorted, the largest named
                sorted_names.append((ax, _sorted_pattern(ax, values, _modulator_labels(model, n))))
            elif name == "modulator":
                ax.bar(x, values, color=np.where(values >= 0, "C3", "C0"), width=0.6)
                ax.axhline(0.0, color="k", linewidth=0.8)
                ax.set_xlim(-0.6, n - 0.4)
                categorical.append(ax)
            else:
                ax.stem(x, values, basefmt="k-")
                if labels is not None and n <= MAX_NAMED_TICKS:
                    ax.set_xticks(x, labels, rotation=90, fontsize="x-small")
            ax.set_title(f"channel {k} (\u03bb = {weights[k]:.3g}): {name}")
            if j == 0:
                ax.set_ylabel("loading")
        if name != "modulator":
            named = labels is not None and n <= MAX_NAMED_TICKS
            axes[K - 1, j].set_xlabel(f"{name} neuron" + ("" if named else " (index)"))
    m = np.asarray(model.modulator_patterns_).shape[0]
    readable_categories(categorical, names_or_default(model, "modulator", m))
    for ax, names in sorted_names:
        _name_bars(ax, names)
    return fig


def _cv_stage(results, key):
    if key == "rank" and "rank_mean_loss" not in results and "mean_loss" in results:
        # ReducedRankRegressionCV (and MICs fitted without Z) record one stage unprefixed.
        names = ["rank", "mean_loss", "sem_loss", "best_index"]
        return tuple(np.asarray(results[name]) for name in names)
    names = [template.format(key) for template in _CV_KEYS]
    present = [name in results for name in names]
    if not any(present):
        return None
    if not all(present):
        missing = [name for name, ok in zip(names, present, strict=True) if not ok]
        raise KeyError(f"cv_results_ lacks {missing} for the {key!r} stage.")
    return tuple(np.asarray(results[name]) for name in names)


def plot_cv_curves(model, axes=None):
    """Cross-validated performance against rank and number of channels.

    Performance is ``1 - mean NSE`` over folds, drawn with a +/- one SEM band
    and error bars; a dotted line one SEM below the best candidate shows the
    one-SEM rule, and the candidate it selects (the simplest above the line)
    is marked with a star and a dashed vertical line.

    Parameters
    ----------
    model : mics.MICs or mics.ReducedRankRegressionCV
        Model fitted with ``rank=None`` and/or ``n_channels=None`` so that
        ``cv_results_`` holds the selection curves.
    axes : sequence of matplotlib.axes.Axes, optional
        One axes per selection stage that ran (rank first, then channels).
        New axes are created when omitted.

    Returns
    -------
    axes : list of matplotlib.axes.Axes
        The axes drawn on, in the order rank, channels (stages that did not
        run are skipped).

    Raises
    ------
    ValueError
        If the model has no ``cv_results_`` or it contains neither stage, or
        if ``axes`` has the wrong length.
    KeyError
        If a stage is only partly recorded (e.g. ``rank`` without
        ``rank_sem_loss``).
    """
    results = getattr(model, "cv_results_", None)
    if not isinstance(results, dict):
        raise ValueError(
            "the model has no cv_results_; fit with rank=None and/or n_channels=None "
            "to run cross-validated selection."
        )
    stages = [(key, _cv_stage(results, key)) for key in ("rank", "n_channels")]
    stages = [(key, stage) for key, stage in stages if stage is not None]
    if not stages:
        raise ValueError(
            "cv_results_ has neither 'rank' nor 'n_channels' selection results "
            f"(keys: {sorted(results)})."
        )
    if axes is None:
        _, axes = load_pyplot().subplots(
            1, len(stages), figsize=(4.5 * len(stages), 3.5), squeeze=False, layout="constrained"
        )
        axes = list(axes.ravel())
    else:
        axes = list(np.atleast_1d(axes).ravel())
        if len(axes) != len(stages):
            raise ValueError(f"expected {len(stages)} axes, got {len(axes)}.")
    for ax, (key, (candidates, mean_loss, sem_loss, best)) in zip(axes, stages, strict=True):
        x = candidates.astype(float)
        perf = 1.0 - mean_loss.astype(float)
        sem = sem_loss.astype(float)
        best = int(best)
        cv_curve(ax, x, perf, sem, best, "CV performance", f"selected: {candidates[best]}")
        # The one-SEM rule picks the simplest candidate above this line.
        top = int(np.nanargmax(perf))
        threshold = perf[top] - (sem[top] if np.isfinite(sem[top]) else 0.0)
        ax.axhline(threshold, color="0.4", linestyle=":", linewidth=1, label="best - 1 SEM")
        ax.set_xlabel(_CV_XLABEL[key])
        ax.set_ylabel("CV performance (1 - NSE)")
        ax.set_xticks(x)
        ax.legend(loc="best", fontsize="small")
    return axes


def _decomposition_dataset(model_or_dataset):
    if hasattr(model_or_dataset, "data_vars"):
        return model_or_dataset
    if hasattr(model_or_dataset, "decompose"):
        return model_or_dataset.decompose()
    raise TypeError("expected a fitted MICs model or the Dataset returned by decompose().")


def plot_decomposition(model_or_dataset, ax=None):
    """Stacked horizontal bars of the four kinds of modulation per channel.

    Each channel gets one bar split into reshape / private source / private
    target / new (its fractions sum to one); a final ``total`` bar shows the
    whole-tensor fractions ``total_*``.

    Parameters
    ----------
    model_or_dataset : mics.MICs or xarray.Dataset
        A fitted model (``decompose()`` is called with the default metric)
        or the Dataset from :meth:`mics.MICs.decompose`.
    ax : matplotlib.axes.Axes, optional
        Axes to draw into; created when omitted.

    Returns
    -------
    ax : matplotlib.axes.Axes
        Bars are added in the order of :data:`mics.model.PARTS`, one
        ``BarContainer`` per kind (``ax.containers``), with rows
        ``channel 0, ..., channel K-1, total`` from top to bottom.
    """
    ds = _decomposition_dataset(model_or_dataset)
    per_channel = {part: np.asarray(ds[part].values, dtype=float).reshape(-1) for part in PARTS}
    totals = {part: float(ds[f"total_{part}"].values) for part in PARTS}
    K = per_channel[PARTS[0]].size
    labels = [f"channel {k}" for k in range(K)] + ["total"]
    y = np.arange(K + 1)
    ax = new_axes(ax)
    left = np.zeros(K + 1)
    for part in PARTS:
        widths = np.append(per_channel[part], totals[part])
        widths = np.nan_to_num(widths, nan=0.0)
        ax.barh(
            y,
            widths,
            left=left,
            color=PART_COLORS[part],
            edgecolor="white",
            label=PART_LABELS[part],
        )
        left = left + widths
    ax.set_yticks(y, labels)
    ax.set_ylim(K + 0.6, -0.6)  # channel 0 on top, total at the bottom
    if K > 0:
        ax.axhline(K - 0.5, color="0.5", linewidth=0.8)
    ax.set_xlim(0, 1)
    ax.set_xlabel("fraction of modulation energy")
    ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.15), ncol=4, frameon=False)
    return ax


def plot_loss_history(model, ax=None):
    """Penalised training loss after each alternating sweep.

    Parameters
    ----------
    model : mics.MICs
        Fitted model.
    ax : matplotlib.axes.Axes, optional
        Axes to draw into; created when omitted.

    Returns
    -------
    ax : matplotlib.axes.Axes
        One line, x = sweep (1, 2, ...), y = ``model.loss_history_``.
    """
    require_fitted(model, "loss_history_")
    loss = np.asarray(model.loss_history_, dtype=float).reshape(-1)
    ax = new_axes(ax)
    ax.plot(np.arange(1, loss.size + 1), loss, marker="o", markersize=3)
    ax.set_xlabel("sweep")
    ax.set_ylabel("penalised loss")
    ax.set_title("training loss")
    return ax


def channel_alignment(model):
    """Squared alignment of each channel's patterns with the baseline subspaces.

    Parameters
    ----------
    model : mics.MICs
        Fitted model.

    Returns
    -------
    source_alignment, target_alignment : ndarray of shape (n_channels,)
        ``|U^T a_k|^2 / |a_k|^2`` and ``|V^T b_k|^2 / |b_k|^2`` with U, V
        orthonormal bases of the baseline source and target subspaces (1 =
        inside the subspace, 0 = orthogonal to it). Zero when the rank is 0.
    """
    require_fitted(model, "source_subspace_", "target_subspace_")
    require_fitted(model, "source_patterns_", "target_patterns_")
    return (
        _alignment(model.source_subspace_, model.source_patterns_),
        _alignment(model.target_subspace_, model.target_patterns_),
    )


def _alignment(subspace, patterns):
    P = np.asarray(patterns, dtype=float)
    P = P.reshape(P.shape[0], -1)
    S = np.asarray(subspace, dtype=float)
    S = S.reshape(S.shape[0], -1)
    norms = np.sum(P**2, axis=0)
    if S.shape[1] == 0:
        return np.zeros(P.shape[1])
    Q, _ = np.linalg.qr(S)
    inside = np.sum((Q.T @ P) ** 2, axis=0)
    with np.errstate(invalid="ignore", divide="ignore"):
        out = np.where(norms > 0, inside / np.where(norms > 0, norms, 1.0), 0.0)
    return np.clip(out, 0.0, 1.0)


def plot_geometry(model, ax=None):
    """Where each channel sits relative to the baseline communication subspace.

    For channel k the x coordinate is ``|U^T a_k|^2`` (share of its source
    pattern inside the baseline source subspace) and the y coordinate is
    ``|V^T b_k|^2`` (share of its target pattern inside the baseline target
    subspace), both in [0, 1] for unit-norm patterns. The quadrants split at
    0.5 are labelled: reshape (both inside), private source (source outside,
    target inside), private target (source inside, target outside) and new
    (both outside).

    Parameters
    ----------
    model : mics.MICs
        Fitted model.
    ax : matplotlib.axes.Axes, optional
        Axes to draw into; created when omitted.

    Returns
    -------
    ax : matplotlib.axes.Axes
        One point per channel (a single scatter collection, marker area
        proportional to the channel weight), annotated ``"channel k"``.
    """
    require_fitted(model, "channel_weights_")
    x, y = channel_alignment(model)
    weights = np.asarray(model.channel_weights_, dtype=float).reshape(-1)
    from matplotlib.patches import Rectangle

    ax = new_axes(ax)
    corners = {
        "reshape": (0.75, 0.75),
        "private_source": (0.25, 0.75),
        "private_target": (0.75, 0.25),
        "new": (0.25, 0.25),
    }
    for part, (cx, cy) in corners.items():
        x0, y0 = cx - 0.25, cy - 0.25
        ax.add_patch(
            Rectangle((x0, y0), 0.5, 0.5, color=PART_COLORS[part], alpha=0.12, linewidth=0)
        )
        ax.text(
            cx,
            cy,  # quadrant centres: points sit at corners and edges, labels stay clear
            PART_LABELS[part],
            ha="center",
            va="center",
            color=PART_COLORS[part],
            fontweight="bold",
        )
    ax.axvline(0.5, color="0.6", linewidth=0.8, linestyle=":")
    ax.axhline(0.5, color="0.6", linewidth=0.8, linestyle=":")
    if weights.size:
        sizes = 40 + 160 * weights / max(float(weights.max()), np.finfo(float).tiny)
    else:
        sizes = np.zeros(0)
    ax.scatter(x, y, s=sizes, color="k", zorder=3, clip_on=False)
    # Labels point inwards, so they stay inside the axes.
    up, down = [], []
    for k, (xk, yk) in enumerate(zip(x, y, strict=True)):
        dx = -10 if xk > 0.5 else 10
        dy = -12 if yk > 0.5 else 12
        label = ax.annotate(
            f"channel {k}",
            (xk, yk),
            xytext=(dx, dy),
            textcoords="offset points",
            fontsize="small",
            ha="right" if xk > 0.5 else "left",
            va="center",
            bbox={"boxstyle": "round,pad=0.15", "fc": "white", "ec": "none", "alpha": 0.8},
        )
        (down if yk > 0.5 else up).append(label)
    ax.set_xlim(-0.04, 1.04)
    ax.set_ylim(-0.04, 1.04)
    ax.set_aspect("equal")
    ax.set_xlabel(r"source alignment $|U^\top a|^2$")
    ax.set_ylabel(r"target alignment $|V^\top b|^2$")
    ax.set_title("channel geometry")
    # Pure geometries pile up in a corner: a label that would cover another
    # moves further in, one line at a time.
    keep_apart(up, [(0.0, 12.0 * i) for i in range(len(up) + 1)])
    keep_apart(down, [(0.0, -12.0 * i) for i in range(len(down) + 1)])
    return ax


def _modulator_labels(model, m):
    """Neuron ids of a labelled modulator (DataArray patterns), else 0..m-1."""
    C = model.modulator_patterns_
    dims = getattr(C, "dims", ())
    if dims and dims[0] in getattr(C, "coords", {}):
        return [str(v) for v in C[dims[0]].values]
    return [str(j) for j in range(m)]


def _sorted_pattern(ax, values, labels, n_labels=8):
    """A population pattern: loadings sorted by value, the largest |.| named."""
    order = np.argsort(values)[::-1]
    ranks = np.arange(values.size)
    ax.bar(ranks, values[order], width=1.0, color="0.35")
    ax.axhline(0.0, color="k", lw=0.8)
    names = [
        ax.annotate(
            labels[order[i]],
            (ranks[i], values[order][i]),
            fontsize=7,
            rotation=90,
            ha="center",
            va="bottom" if values[order][i] >= 0 else "top",
        )
        for i in np.argsort(-np.abs(values[order]))[:n_labels]
    ]
    ax.set_xlabel("modulator neuron (sorted by loading)")
    return names


def _name_bars(ax, names):
    """The names of :func:`_sorted_pattern` inside the axes, those that would touch left out."""
    make_room(ax, names)
    keep_apart(names)


def plot_modulator_patterns(model, ax=None, n_labels=8):
    """Modulator patterns of a population modulator, drawn over its neurons.

    Each channel's pattern ``c_k`` is shown as its neurons' loadings sorted
    from largest to smallest, with the ``n_labels`` largest in magnitude
    named (neuron ids from a labelled ``Z``, else column indices). Suited to
    a third population as modulator, where a bar per named variable is
    unreadable.

    Parameters
    ----------
    model : mics.MICs
        Fitted model with at least one channel.
    ax : matplotlib.axes.Axes or sequence of Axes, optional
        One axes per channel; new ones when omitted.
    n_labels : int
        Neurons named per channel.

    Returns
    -------
    axes : list of matplotlib.axes.Axes
        One per channel, titled with the channel index and weight.
    """
    require_fitted(model, "channel_weights_", "modulator_patterns_")
    weights = np.asarray(model.channel_weights_, dtype=float).reshape(-1)
    C = np.asarray(model.modulator_patterns_, dtype=float)
    K = weights.size
    if K == 0:
        raise ValueError("the model has no modulation channels to plot.")
    if ax is None:
        _, axes = load_pyplot().subplots(
            K, 1, figsize=(8, 2.4 * K), squeeze=False, layout="constrained"
        )
        axes = list(axes[:, 0])
    else:
        axes = list(np.atleast_1d(ax))
        if len(axes) != K:
            raise ValueError(f"ax must hold one axes per channel ({K}), got {len(axes)}.")
    labels = _modulator_labels(model, C.shape[0])
    names = []
    for k, a in enumerate(axes):
        names.append(_sorted_pattern(a, C[:, k], labels, n_labels))
        a.set_title(f"channel {k} (\u03bb = {weights[k]:.3g}): modulator pattern")
        a.set_ylabel("loading")
    for a, drawn in zip(axes, names, strict=True):
        _name_bars(a, drawn)
    return axes
