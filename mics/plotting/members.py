"""Which neurons interact: each channel's loadings with its member neurons highlighted."""

from __future__ import annotations

import warnings
from typing import NamedTuple

import numpy as np

from mics.plotting._layout import keep_apart
from mics.plotting._names import ROLE_INDEX, names_or_default
from mics.plotting.model import load_pyplot, require_fitted

__all__ = ["plot_member_biplot", "plot_members", "plot_members_fov"]

_ROLES = ("source", "target", "modulator")
# Members named on the axis at most; beyond that only the largest loadings are.
_MAX_NAMED_MEMBERS = 12


def _channel_weights(model):
    """Channel weights (K,) of a fitted model; raises when it has no channel to draw."""
    require_fitted(model, "channel_weights_", "source_patterns_", "target_patterns_")
    weights = np.asarray(model.channel_weights_, dtype=float).reshape(-1)
    if weights.size == 0:
        raise ValueError("the model has no channels: there are no members to plot.")
    return weights


def _check_roles(roles):
    """Raise unless ``roles`` is a non-empty sequence of known roles."""
    unknown = [r for r in roles if r not in _ROLES]
    if unknown or not roles:
        raise ValueError(f"roles must be among {_ROLES}, got {roles!r}.")


def _panel_axes(ax, n, *, expected, share=False):
    """One row of ``n`` axes: new ones (4.5 in squares), or those of ``ax`` checked.

    ``expected`` says in the error how many axes were due and why.
    """
    if ax is None:
        shared = {"sharex": True, "sharey": True} if share else {}
        _, axes = load_pyplot().subplots(
            1, n, figsize=(4.5 * n, 4.5), squeeze=False, layout="constrained", **shared
        )
        return list(axes[0])
    axes = list(np.atleast_1d(ax))
    if len(axes) != n:
        raise ValueError(f"ax must hold {expected}, got {len(axes)}.")
    return axes


def _finish_panel(ax, labels, **legend):
    """Draw the legend, then move the member names off every other text (legend included)."""
    ax.legend(fontsize="x-small", loc="best", **legend)
    keep_apart(labels, _LABEL_SHIFTS)


def _members_and_names(model, stability, role, P):
    """Member mask (n, K), selection frequencies (or None) and the neuron names of one role.

    ``stability`` is a :func:`mics.stability_selection` result (members and
    frequencies) or a :func:`mics.member_neurons` result (members at its
    false-discovery rate, no frequencies).
    """
    n = P.shape[0]
    if stability is not None:
        mask = stability[f"{role}_members"]
        members = np.asarray(mask, dtype=bool)
        names = [str(v) for v in np.asarray(mask.coords[role].values)]
        if f"{role}_frequency" not in stability:
            return members, None, names
        return members, np.asarray(stability[f"{role}_frequency"], dtype=float), names
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
    stability : xarray.Dataset or MemberNeurons, optional
        Of :func:`mics.stability_selection` on this model (members at its
        threshold, frequencies drawn), or of :func:`mics.member_neurons`
        (members at its false-discovery rate).
    fig : matplotlib.figure.Figure, optional
        Figure to draw into; a new one when omitted.
    roles : sequence of {"source", "target", "modulator"}
        Columns of the figure.

    Returns
    -------
    fig : matplotlib.figure.Figure
        One row per channel, one column per role.
    """
    weights = _channel_weights(model)
    K = weights.size
    _check_roles(roles)
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


# ------------------------------------------------------------------ field of view
# Coordinates the mics.io loaders write for a neuron's place on the field of
# view (pixels); med_x/med_y are suite2p's names in files saved before x/y.
_POSITION_COORDS = (("x", "y"), ("med_x", "med_y"))
_PLANE_COORDS = ("plane", "imaging_plane")
_ROLE_MARKERS = {"source": "o", "target": "^", "modulator": "s"}


def _role_coords(model, role):
    """Per-neuron coordinates (name -> values) the model kept for one role, and attrs."""
    labels = getattr(model, "input_labels", None)
    info = None if labels is None or len(labels) <= ROLE_INDEX[role] else labels[ROLE_INDEX[role]]
    if info is not None:
        return dict(info.feature_coords), dict(info.attrs)
    pattern = getattr(model, f"{role}_patterns_", None)
    if pattern is not None and hasattr(pattern, "dims"):
        dim = pattern.dims[0]
        coords = {
            str(k): np.asarray(c.values) for k, c in pattern.coords.items() if c.dims == (dim,)
        }
        return coords, dict(pattern.attrs)
    return {}, {}


def _fitted_positions(model, role, n):
    """(n, 2) x/y of one role's neurons from the coordinates it was fitted with, or None."""
    coords, _ = _role_coords(model, role)
    for x_name, y_name in _POSITION_COORDS:
        if x_name in coords and y_name in coords:
            xy = np.column_stack([coords[x_name], coords[y_name]]).astype(float)
            if xy.shape[0] == n:
                return xy
    return None


def _same_field(model, roles):
    """True when every role's neurons come from one recording and one imaging plane."""
    origins, planes = set(), []
    for role in roles:
        coords, attrs = _role_coords(model, role)
        if not attrs.get("source"):
            return False
        origins.add(str(attrs["source"]))
        name = next((c for c in _PLANE_COORDS if c in coords), None)
        planes.append(None if name is None else frozenset(np.asarray(coords[name]).tolist()))
    return len(origins) == 1 and len(set(planes)) == 1


def _positions_of(model, role, n, positions):
    """Positions of one role: given explicitly, else the fitted coordinates, else None."""
    if positions is not None and role in positions:
        xy = np.asarray(positions[role], dtype=float)
        if xy.ndim != 2 or xy.shape != (n, 2):
            raise ValueError(
                f"positions[{role!r}] must have shape ({n}, 2): one (x, y) per {role} "
                f"neuron in the order the model was fitted on; got {xy.shape}."
            )
        return xy, False
    xy = _fitted_positions(model, role, n)
    return xy, xy is not None


def _name_points(ax, names, xy, values, members, colour):
    """Label the members, the largest |values| first, at most _MAX_NAMED_MEMBERS.

    Returns the labels, largest first, for :func:`keep_apart` once the axes
    are complete (their legend drawn).
    """
    order = np.flatnonzero(members)
    order = order[np.argsort(-np.abs(values[order]), kind="stable")]
    return [
        ax.annotate(
            names[i],
            tuple(xy[i]),
            textcoords="offset points",
            xytext=(3, 3),
            fontsize="xx-small",
            color=colour,
        )
        for i in order[:_MAX_NAMED_MEMBERS]
    ]


#: Where a member's name that would cover another text goes instead (points
#: from its place up and to the right of its point): below, above, further
#: below; beside its point every time, else it is left out.
_LABEL_SHIFTS = ((0.0, 0.0), (0.0, -10.0), (0.0, 8.0), (0.0, -18.0))


def plot_members_fov(
    model, positions=None, stability=None, roles=None, ax=None, same_field=None, annotate=True
):
    """Member neurons on the field of view, coloured by channel.

    Every neuron of a role is a point at its position on the imaging field
    (grey for neurons in no channel); the members of channel ``k`` are drawn
    over it in colour ``C{k}``, later channels smaller so that a neuron in
    several channels shows as nested rings. Members are the neurons with a
    non-zero weight in a sparse fit (``MICs(sparsity=...)``) or, given
    ``stability``, those selected at its threshold.

    Positions come from the ``x`` / ``y`` coordinates (pixels) that the
    :mod:`mics.io` loaders put on the neuron dimension (suite2p ``stat``
    centres, NWB ``PlaneSegmentation`` masks, CaImAn footprints), which a
    model fitted on those DataArrays keeps; or they are passed explicitly.
    Neurons of several imaging planes are drawn in one panel (their x/y are
    in each plane's pixels).

    Parameters
    ----------
    model : mics.MICs
        Fitted, with at least one channel.
    positions : dict of str to array-like of shape (n, 2), optional
        ``{"source": (p, 2), "target": (q, 2), "modulator": (m, 2)}``:
        (x, y) of each neuron in the fitted order; a role given here
        overrides the fitted coordinates. NaN marks a neuron without a place
        (it is not drawn).
    stability : xarray.Dataset or MemberNeurons, optional
        Of :func:`mics.stability_selection` on this model: members are the
        neurons selected at its threshold; or of :func:`mics.member_neurons`:
        the members at its false-discovery rate.
    roles : sequence of {"source", "target", "modulator"}, optional
        Populations to draw. Default: every population with positions.
    ax : matplotlib.axes.Axes or sequence of Axes, optional
        One axes per panel (one per role, or one in all when
        ``same_field``); new ones when omitted.
    same_field : bool, optional
        Draw all roles in one panel (markers: source circles, target
        triangles, modulator squares) because they were imaged in the same
        field. Default: True when every role's DataArray came from the same
        recording (``attrs["source"]``) and the same imaging plane(s), else
        one panel per role.
    annotate : bool, default=True
        Write the neuron ids of the members (the largest loadings first, at
        most 12 per channel and role).

    Returns
    -------
    axes : list of matplotlib.axes.Axes
        One per panel. The member points of channel ``k`` and role ``r`` are
        the collection with gid ``"r:members:k"``, the others ``"r:others"``.

    Raises
    ------
    ValueError
        If the model has no channels, a role is unknown or has no
        positions, or ``positions`` has the wrong shape.
    """
    K = _channel_weights(model).size
    layers = _fov_layers(model, roles, positions, K)
    if same_field is None:
        same_field = len(layers) > 1 and _same_field(model, [d.role for d in layers])
    n_panels = 1 if same_field else len(layers)
    axes = _panel_axes(ax, n_panels, expected=f"{n_panels} axes (one per panel)")

    labels = {id(a): [] for a in axes}
    for j, layer in enumerate(layers):
        a = axes[0 if same_field else j]
        members, _, names = _members_and_names(model, stability, layer.role, layer.P)
        labels[id(a)] += _draw_fov_layer(
            a, layer, members, names, n_channels=K, same_field=same_field, annotate=annotate
        )
        if not same_field or j == 0:
            _fov_frame(a, layer.from_loader)
        a.set_title(
            "members on the field of view" if same_field else f"{layer.role} neurons",
            fontsize="small",
        )
    for a in axes:
        _finish_panel(a, labels[id(a)], markerscale=0.8)
    return axes


class _FovLayer(NamedTuple):
    """One role on the field of view: its patterns (n, K) and positions (n, 2)."""

    role: str
    P: np.ndarray
    xy: np.ndarray
    from_loader: bool  # positions are the loader's pixels, not given explicitly


def _fov_layers(model, roles, positions, K):
    """The roles to draw, each with its positions, after checking ``roles`` and ``positions``.

    Roles left to the default are skipped without positions; roles asked for raise.
    """
    if positions is not None and not isinstance(positions, dict):
        raise ValueError(
            "positions must be a dict such as {'source': xy_source, 'target': xy_target}, "
            "each an array of shape (n_neurons, 2) holding x and y."
        )
    present = [
        r for r in _ROLES if np.asarray(getattr(model, f"{r}_patterns_", np.empty((0, K)))).size
    ]
    explicit = roles is not None
    roles = list(present if roles is None else roles)
    _check_roles(roles)
    extra = sorted(set(positions or ()) - set(_ROLES))
    if extra:
        raise ValueError(f"positions has keys {extra}; use 'source', 'target', 'modulator'.")
    layers = []
    for role in roles:
        P = np.asarray(getattr(model, f"{role}_patterns_"), dtype=float)
        xy, from_loader = _positions_of(model, role, P.shape[0], positions)
        if xy is None:
            if explicit:
                raise ValueError(_no_positions_message(role, P.shape[0]))
            continue
        layers.append(_FovLayer(role, P, xy, from_loader))
    if not layers:
        raise ValueError(_no_positions_message(" and ".join(roles), None))
    return layers


def _draw_fov_layer(a, layer, members, names, *, n_channels, same_field, annotate):
    """Draw one role's neurons: grey outside every channel, each channel's members in colour.

    Returns the member names written (for :func:`keep_apart`), in drawing order.
    """
    role, P, xy = layer.role, layer.P, layer.xy
    placed = np.all(np.isfinite(xy), axis=1)
    lost = int(np.sum(members.any(axis=1) & ~placed))
    if lost:
        warnings.warn(
            f"{lost} {role} member(s) have no position (NaN) and are not drawn.",
            UserWarning,
            stacklevel=3,  # the caller of plot_members_fov
        )
    marker = _ROLE_MARKERS[role] if same_field else "o"
    prefix = f"{role}, " if same_field else ""
    others = placed & ~members.any(axis=1)
    a.scatter(
        xy[others, 0], xy[others, 1], s=12, c="0.75", marker=marker, linewidths=0,
        label=f"{prefix}in no channel", gid=f"{role}:others",
    )  # fmt: skip
    labels = []
    unnamed = np.ones(len(xy), dtype=bool)  # a neuron in several channels: named once
    for k in range(n_channels):
        chosen = placed & members[:, k]
        # Later channels smaller and on top: a neuron in several channels shows
        # every one of its colours as nested rings.
        a.scatter(
            xy[chosen, 0], xy[chosen, 1], s=60.0 * 0.55**k, color=f"C{k % 10}",
            marker=marker, edgecolors="k", linewidths=0.4, zorder=3 + k,
            label=f"{prefix}channel {k} ({int(chosen.sum())})", gid=f"{role}:members:{k}",
        )  # fmt: skip
        if annotate:
            fresh = chosen & unnamed
            values = np.where(fresh, P[:, k], 0.0)
            labels += _name_points(a, names, xy, values, fresh, f"C{k % 10}")
            unnamed &= ~fresh
    return labels


def _fov_frame(a, from_loader):
    """Axis labels and image orientation of a field-of-view panel (row 0 at the top)."""
    unit = " (pixels)" if from_loader else ""
    a.set_xlabel(f"x{unit}")
    a.set_ylabel(f"y{unit}")
    a.set_aspect("equal", adjustable="datalim")
    if not a.yaxis_inverted():
        a.invert_yaxis()


def _no_positions_message(role, n):
    shape = f"({n}, 2)" if n is not None else "(n, 2)"
    return (
        f"no positions for the {role} neurons: the model was not fitted on DataArrays "
        "with x/y coordinates along the neuron dimension. Fit it on the output of a "
        "mics.io loader that reads ROI positions (suite2p stat.npy, NWB "
        "PlaneSegmentation masks, CaImAn footprints) or pass "
        f"positions={{{role.split()[0]!r}: array of shape {shape} with x, y}}."
    )


# ------------------------------------------------------------------ biplot
def _second_axis(channel, versus, K):
    """What the vertical axis shows: another channel (int) or the baseline ("baseline")."""
    if versus is None:
        if K >= 2:
            # channels are ordered by weight: the leading channel other than ``channel``
            return 1 if channel == 0 else 0
        return "baseline"
    if isinstance(versus, str):
        if versus != "baseline":
            raise ValueError(f"versus must be a channel index or 'baseline', got {versus!r}.")
        return versus
    v = int(versus)
    if not 0 <= v < K or v == channel:
        raise ValueError(
            f"versus={versus} must be another channel of the model (0 .. {K - 1}, "
            f"not {channel}) or 'baseline'."
        )
    return v


def plot_member_biplot(
    model, channel=0, versus=None, stability=None, roles=("source", "target"), ax=None
):
    """Source and target neurons' loadings in one shared plane (a bibiplot).

    In the style of the bibiplots of sparse reduced-rank regression (Kobak
    et al. 2021), each neuron is a point whose coordinates are its loadings
    on two axes shared by all panels, one panel per population:

    - horizontal: the pattern of ``channel`` (unit norm);
    - vertical: with two or more channels the pattern of the leading other
      channel (``versus``); with one channel the leading dimension of the
      baseline communication subspace (``source_subspace_[:, 0]``,
      ``target_subspace_[:, 0]``, unit norm).

    Why these axes: the gated coupling from source neuron ``i`` to target
    neuron ``j`` is ``sum_k lambda_k g_k(z) A[i, k] B[j, k]``, so with two
    channels on the axes a source point and a target point pointing the same
    way (positive dot product, weighted by the ``lambda_k g_k``) are coupled
    positively, opposite ways negatively, at right angles not at all. With
    one channel the horizontal product ``A[i, 0] B[j, 0]`` is the gated
    coupling and the vertical product ``U[i, 0] V[j, 0]`` (times the first
    singular value) the baseline one: members on the horizontal axis carry
    only the gated channel, members off it also carry the ungated
    communication.

    Members of ``channel`` (non-zero weight in a sparse fit, or selected in
    ``stability``) are drawn as red points with spokes from the origin and
    named; members of the ``versus`` channel as blue rings; other neurons
    grey.

    Parameters
    ----------
    model : mics.MICs
        Fitted, with at least one channel (and ``rank_ >= 1`` when it has
        a single channel and ``versus`` is not another channel).
    channel : int, default=0
        Channel on the horizontal axis whose members are highlighted.
    versus : int or "baseline", optional
        Vertical axis: another channel, or the leading baseline dimension.
        Default: the leading other channel if there is one, else
        ``"baseline"``.
    stability : xarray.Dataset or MemberNeurons, optional
        Of :func:`mics.stability_selection` or :func:`mics.member_neurons`
        on this model.
    roles : sequence of {"source", "target", "modulator"}, default=("source", "target")
        One panel each. The modulator has no baseline subspace: it needs
        ``versus`` to be a channel.
    ax : sequence of matplotlib.axes.Axes, optional
        One per role; new ones (sharing both axes) when omitted.

    Returns
    -------
    axes : list of matplotlib.axes.Axes
        One per role. Member points of role ``r`` are the collection with
        gid ``"r:members"`` (offsets: their loadings), rings of the
        ``versus`` channel ``"r:members_versus"``, the rest ``"r:others"``.

    Raises
    ------
    ValueError
        If ``channel`` or ``versus`` is not a channel of the model, the
        baseline is asked for with rank 0 or for the modulator, or ``ax``
        has the wrong length.
    """
    weights = _channel_weights(model)
    K = weights.size
    channel = int(channel)
    if not 0 <= channel < K:
        raise ValueError(f"channel must be in 0 .. {K - 1}, got {channel}.")
    roles = list(roles)
    _check_roles(roles)
    second = _second_axis(channel, versus, K)
    if second == "baseline":
        _check_baseline(model, roles)
    panels = [_biplot_panel(model, stability, role, channel, second) for role in roles]
    axes = _panel_axes(ax, len(roles), expected=f"one axes per role ({len(roles)})", share=True)

    # One scale for every panel: the plane is shared.
    reach = max(float(np.max(np.abs(np.r_[p.x, p.y]), initial=0.0)) for p in panels)
    reach = 1.15 * (reach if reach > 0 else 1.0)
    xlabel = f"channel {channel} pattern (\u03bb = {weights[channel]:.3g})"
    ylabel = "leading baseline dimension" if second == "baseline" else f"channel {second} pattern"
    for a, panel in zip(axes, panels, strict=True):
        labels = _draw_biplot_panel(a, panel, channel=channel, second=second)
        a.set_xlim(-reach, reach)
        a.set_ylim(-reach, reach)
        a.set_aspect("equal")
        a.set_xlabel(xlabel)
        a.set_ylabel(f"{panel.role}: {ylabel}")
        a.set_title(f"{panel.role} neurons", fontsize="small")
        _finish_panel(a, labels)
    return axes


def _check_baseline(model, roles):
    """Raise unless the leading baseline dimension exists for every role drawn."""
    rank = int(getattr(model, "rank_", 0) or 0)
    if rank < 1:
        raise ValueError(
            "with one channel the vertical axis is the leading baseline dimension, but "
            "the model has no baseline communication (rank 0); fit with rank >= 1 or a "
            "second channel."
        )
    if "modulator" in roles:
        raise ValueError(
            "the modulator has no baseline subspace: drop it from roles or pass "
            "versus=<another channel>."
        )


class _BiplotPanel(NamedTuple):
    """One role's points in the biplot plane and who is named."""

    role: str
    x: np.ndarray  # loadings on ``channel``
    y: np.ndarray  # loadings on the second axis
    members: np.ndarray  # (n,) members of ``channel``
    ring: np.ndarray | None  # (n,) members of the ``versus`` channel, None for the baseline
    names: list


def _biplot_panel(model, stability, role, channel, second):
    """Coordinates and members of one role on the biplot axes (``second``: channel or baseline)."""
    P = np.asarray(getattr(model, f"{role}_patterns_"), dtype=float)
    members, _, names = _members_and_names(model, stability, role, P)
    if second == "baseline":
        y = np.asarray(getattr(model, f"{role}_subspace_"), dtype=float)[:, 0]
        ring = None
    else:
        y, ring = P[:, second], members[:, second]
    return _BiplotPanel(role, P[:, channel], y, members[:, channel], ring, names)


def _draw_biplot_panel(a, panel, *, channel, second):
    """Draw one role's points: grey non-members, red members with spokes, ``versus`` rings.

    Returns the member names written (for :func:`keep_apart`), largest first.
    """
    from matplotlib.collections import LineCollection

    role, x, y, mask, ring = panel.role, panel.x, panel.y, panel.members, panel.ring
    a.axhline(0.0, color="k", linewidth=0.5)
    a.axvline(0.0, color="k", linewidth=0.5)
    rest = ~mask
    a.scatter(x[rest], y[rest], s=10, c="0.7", linewidths=0, gid=f"{role}:others",
              label="not a member")  # fmt: skip
    spokes = [[(0.0, 0.0), (x[i], y[i])] for i in np.flatnonzero(mask)]
    a.add_collection(
        LineCollection(spokes, colors="C3", linewidths=0.8, alpha=0.7, gid=f"{role}:spokes")
    )
    a.scatter(x[mask], y[mask], s=24, color="C3", zorder=3, gid=f"{role}:members",
              label=f"channel {channel} member ({int(mask.sum())})")  # fmt: skip
    if ring is not None:
        a.scatter(x[ring], y[ring], s=60, facecolors="none", edgecolors="C0", zorder=4,
                  gid=f"{role}:members_versus",
                  label=f"channel {second} member ({int(ring.sum())})")  # fmt: skip
    named = mask if ring is None else mask | ring
    return _name_points(a, panel.names, np.column_stack([x, y]), np.hypot(x, y), named, "C3")
