"""Texts that keep clear of each other: point labels moved or dropped, tick labels turned.

Where a label goes depends on the drawn layout (the axes' size in pixels,
the fonts), so these helpers lay the figure out once
(``Figure.draw_without_rendering``) and read the texts' window extents.
Without a canvas that can lay out (no renderer), they leave the figure as
it is.
"""

from __future__ import annotations

import textwrap

__all__ = ["keep_apart", "make_room", "readable_categories"]


def _overlap(a, b):
    return min(a.x1, b.x1) > max(a.x0, b.x0) and min(a.y1, b.y1) > max(a.y0, b.y0)


def _laid_out(fig):
    try:
        fig.draw_without_rendering()
    except (AttributeError, NotImplementedError):  # a canvas without a renderer
        return False
    return True


def _obstacles(ax, group):
    """Boxes a label must not cover: the axes' title, legend and other texts."""
    texts = [t for t in ax.texts if id(t) not in group]
    texts.append(ax.title)
    boxes = [t.get_window_extent() for t in texts if t.get_visible() and t.get_text().strip()]
    legend = ax.get_legend()
    if legend is not None and legend.get_visible():
        boxes.append(legend.get_window_extent())
    return boxes


def keep_apart(labels, shifts=((0.0, 0.0),)):
    """Move each label to the first place where it covers no text; remove it when none is free.

    Parameters
    ----------
    labels : sequence of matplotlib.text.Annotation
        On one axes, most important first: a label never displaces one
        before it. They avoid each other and the axes' title, legend and
        other texts.
    shifts : sequence of (float, float)
        Places to try, in points from where each label was put, in order
        (for labels placed with ``textcoords="offset points"``; the
        default keeps every label where it is or removes it).

    Returns
    -------
    kept : list of matplotlib.text.Annotation
        The labels still drawn, in the given order.
    """
    labels = list(labels)
    if not labels or not _laid_out(labels[0].axes.figure):
        return labels
    placed = _obstacles(labels[0].axes, {id(t) for t in labels})
    kept = []
    for label in labels:
        x0, y0 = label.xyann
        for dx, dy in shifts:
            label.xyann = (x0 + dx, y0 + dy)
            box = label.get_window_extent()
            if not any(_overlap(box, other) for other in placed):
                placed.append(box)
                kept.append(label)
                break
        else:
            label.remove()
    return kept


def make_room(ax, labels, tries=3):
    """Widen the y limits until every label lies inside the axes.

    Labels at the ends of bars (:func:`mics.plotting.model.plot_modulator_patterns`)
    otherwise reach past the axes into the title and the tick labels. A
    label keeps its size in pixels as the limits widen, so a few rounds
    settle it.

    Parameters
    ----------
    ax : matplotlib.axes.Axes
    labels : sequence of matplotlib.text.Text
        Texts drawn in ``ax``'s data coordinates.
    tries : int
        Rounds of widening at most.
    """
    labels = [t for t in labels if t.get_visible()]
    if not labels or not _laid_out(ax.figure):
        return
    for _ in range(tries):
        frame = ax.get_window_extent()
        boxes = [t.get_window_extent() for t in labels]
        over = max(b.y1 for b in boxes) - frame.y1
        under = frame.y0 - min(b.y0 for b in boxes)
        if over <= 0 and under <= 0:
            return
        low, high = ax.get_ylim()
        per_pixel = (high - low) / frame.height
        ax.set_ylim(low - 1.1 * max(under, 0) * per_pixel, high + 1.1 * max(over, 0) * per_pixel)
        ax.figure.draw_without_rendering()


def readable_categories(axes, names, width=10):
    """Name the categories along x: level, wrapped at spaces, or upright when they would touch.

    Parameters
    ----------
    axes : sequence of matplotlib.axes.Axes
        Each with one category at x = 0, 1, ..., len(names) - 1.
    names : sequence of str
        The categories' names.
    width : int
        Characters per line of a wrapped name.
    """
    axes = list(axes)
    wrapped = ["\n".join(textwrap.wrap(str(n), width)) or str(n) for n in names]
    for ax in axes:
        ax.set_xticks(range(len(names)), wrapped)
    if not axes or not _laid_out(axes[0].figure):
        return
    for ax in axes:
        boxes = [t.get_window_extent() for t in ax.get_xticklabels() if t.get_text()]
        if any(_overlap(a, b) for a, b in zip(boxes, boxes[1:], strict=False)):
            ax.set_xticks(range(len(names)), [str(n) for n in names], rotation=90)
