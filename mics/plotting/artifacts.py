"""Figure of a data-quality report: where in time the detectors flag samples."""

from __future__ import annotations

import numpy as np

from mics.plotting.model import new_axes

__all__ = ["plot_artifacts"]

_LABELS = {"X": "source X", "Y": "target Y", "Z": "modulator Z"}
_MARKERS = {"frame": "v", "sample": "x", "glitch": "o"}
# Scores below this are drawn at it: the axis shows how far past the
# threshold (1) a sample is, not the exact size of unremarkable samples.
_FLOOR = 1e-2
# Trial edges are drawn when there are at most this many trials.
_MAX_EDGES = 150


def plot_artifacts(report, ax=None):
    """Each role's artifact score over time, the flagged samples marked.

    Parameters
    ----------
    report : mics.data.quality.QualityReport
        From :func:`mics.preprocessing.find_artifacts`.
    ax : matplotlib.axes.Axes, optional
        Axes to draw into; created when omitted.

    Returns
    -------
    ax : matplotlib.axes.Axes
        x: sample; y (log): each sample's score over its detectors'
        thresholds (the largest ratio; 1, dashed, is the threshold), one
        line per population and the modulator. Flagged samples are marked:
        triangles for artifact frames, crosses for single neurons' extreme
        samples, circles for modulator glitches. Thin grey lines are trial
        edges (when there are at most 150 trials).
    """
    ax = new_axes(ax)
    t = np.arange(report.n_samples)
    for i, role in enumerate(r for r in ("X", "Y", "Z") if r in report.scores):
        color = f"C{i}"
        score = np.maximum(np.asarray(report.scores[role], dtype=float), _FLOOR)
        ax.plot(t, score, color=color, linewidth=0.6, label=_LABELS[role])
        frames = np.asarray(report.frames.get(role, []), dtype=np.intp)
        cells = np.asarray(report.cells.get(role, np.zeros((0, 2))), dtype=np.intp).reshape(-1, 2)
        kind = "glitch" if role == "Z" else "sample"
        for where, mark in ((frames, "frame"), (np.unique(cells[:, 0]), kind)):
            if where.size:
                ax.plot(
                    where,
                    score[where],
                    linestyle="none",
                    marker=_MARKERS[mark],
                    color=color,
                    markersize=7,
                    label=f"{_LABELS[role]}: {where.size} {mark}(s)",
                )
    if report.groups is not None:
        edges = np.flatnonzero(np.diff(report.groups)) + 0.5
        if 0 < edges.size <= _MAX_EDGES:
            for edge in edges:
                ax.axvline(edge, color="0.85", linewidth=0.5, zorder=0)
    ax.axhline(1.0, color="0.3", linestyle="--", linewidth=1, label="threshold")
    ax.set_yscale("log")
    ax.set_ylim(bottom=_FLOOR)
    ax.set_xlim(-0.5, report.n_samples - 0.5)
    ax.set_xlabel("sample")
    ax.set_ylabel("artifact score / threshold")
    n = report.samples.size
    trials = report.trials.size
    where = f" in {trials} trial(s)" if trials else ""
    ax.set_title(f"Data quality: {n} flagged sample(s){where}")
    ax.legend(frameon=False, fontsize="small", loc="upper right")
    return ax
