"""Text that runs into other text in a drawn figure, from matplotlib's window extents.

A figure is readable when no two of its texts share pixels: titles, axis
labels, the tick labels that are drawn, annotations, the figure's own texts
and each legend (one box, frame included). ``overlapping_texts`` draws the
figure (Agg) and returns every such pair.
"""

import itertools

from matplotlib.legend import Legend
from matplotlib.text import Text

#: Pixels two boxes may share before they count as overlapping (rounding of
#: the extents; at 100 dpi a glyph's stroke is about 1 px).
TOLERANCE_PX = 1.0


def _undrawn_tick_labels(ax):
    """Tick labels of ticks outside the view limits: kept by matplotlib, never drawn."""
    hidden = set()
    for axis in (ax.xaxis, ax.yaxis):
        lo, hi = sorted(axis.get_view_interval())
        slack = 1e-9 * max(hi - lo, 1e-300)
        for tick in axis.get_major_ticks() + axis.get_minor_ticks():
            if not lo - slack <= tick.get_loc() <= hi + slack:
                hidden.update({id(tick.label1), id(tick.label2)})
    return hidden


def _describe(text):
    ax = text.axes
    if ax is None or text is ax.title:
        return repr(text.get_text())
    return f"{text.get_text()!r} (in {ax.get_title() or ax.get_label()!r})"


def text_boxes(fig):
    """``[(description, Bbox)]`` of every drawn text of ``fig``, each legend as one box."""
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    skip = set()
    for ax in fig.axes:
        skip |= _undrawn_tick_labels(ax)
    boxes = []
    for legend in fig.findobj(Legend):
        skip |= {id(t) for t in legend.findobj(Text)}
        ax = legend.axes
        if legend.get_visible() and (ax is None or ax.get_visible()):
            name = "figure legend" if ax is None else f"legend of {ax.get_title()!r}"
            boxes.append((name, legend.get_window_extent(renderer)))
    for text in fig.findobj(Text):
        if id(text) in skip or not text.get_visible() or not text.get_text().strip():
            continue
        if text.axes is not None and not text.axes.get_visible():
            continue
        box = text.get_window_extent(renderer)
        if box.width > 0 and box.height > 0:
            boxes.append((_describe(text), box))
    return boxes


def overlapping_texts(fig, tolerance=TOLERANCE_PX):
    """Pairs of texts of ``fig`` whose boxes share more than ``tolerance`` pixels each way."""
    pairs = []
    for (name_a, a), (name_b, b) in itertools.combinations(text_boxes(fig), 2):
        width = min(a.x1, b.x1) - max(a.x0, b.x0)
        height = min(a.y1, b.y1) - max(a.y0, b.y0)
        if width > tolerance and height > tolerance:
            pairs.append(f"{name_a} and {name_b} ({width:.0f} x {height:.0f} px)")
    return pairs
