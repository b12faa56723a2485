"""Data quality at the seam: artifact frames, extreme samples and modulator glitches.

One motion-artifact frame, a laser flicker, an encoder glitch or a pupil
tracker's jump at a blink can decide a cross-validated selection on its
own: the fold that holds it has a held-out loss orders of magnitude above
the others. :func:`mics.data.make_problem`, through which every entry point
passes (the fit, the modulation test, the bootstrap, the power analysis,
the sparsity path, chunked inputs), runs three detectors once per call and
warns (:class:`DataQualityWarning`) naming the samples, their trials and
the columns:

- **artifact frames**: samples where most neurons of a population jump
  together, away from both neighbouring stretches of their own traces
  (motion, flicker);
- **extreme samples**: one neuron's sample far outside that neuron's own
  range, away from both sides (a saturated pixel, a corrupt value);
- **modulator glitches**: modulator samples that depart from both sides by
  far more than the modulator moves there and reach far beyond the levels
  it holds (an encoder or tracker glitch).

The scores are :func:`mics.core.robust.artifact_scores`: medians and MADs
that a few bad samples cannot move, and scales taken from each signal's
own largest levels and steps, so valid heavy tails (bursty running that is
mostly zero, calcium transients with a fast rise and a slow decay, pupil
dilations) do not trip them (see ``results/artifacts/`` for the rates).

Settings: :func:`quality_checks` (a context manager) switches the checks
off or to raising, and sets their :class:`QualityThresholds`, for every
call inside it; :func:`mics.data.make_problem` takes the same as its
``quality`` argument. Workflows that build several problems from one
user's data (a lag scan, a power analysis) run inside
:func:`quality_scope`, which checks the first and not the variants.
"""

from __future__ import annotations

import contextlib
import contextvars
import os
import sys
import warnings
from dataclasses import dataclass, field, replace

import numpy as np

from mics.core.robust import artifact_scores, segment_starts

__all__ = [
    "DataQualityWarning",
    "QualityReport",
    "QualityThresholds",
    "find_artifacts",
    "quality_checks",
    "quality_scope",
    "user_stacklevel",
    "warn_artifacts",
]

ROLES = ("X", "Y", "Z")
_ROLE_NAMES = {"X": "source X", "Y": "target Y", "Z": "modulator Z"}
# Fewer samples than this say too little about a signal's own range to
# call any of them an artifact (and include the tiny data of API checks).
_MIN_SAMPLES = 20
# Rows per block of an in-memory population (about 16 MB of float64 per
# score array): the scales are the block's, as they are a chunk's on Dask.
_BLOCK_VALUES = 2**21
_MIN_BLOCK_ROWS = 2000


class DataQualityWarning(UserWarning):
    """A few samples look like artifacts and may decide the fit (see :mod:`mics.data.quality`)."""


@dataclass(frozen=True)
class QualityThresholds:
    """When a sample counts as an artifact: the scores of :func:`mics.core.robust.artifact_scores`.

    Each detector has a *shape* threshold (how far the sample departs from
    both sides, over how fast its signal moves there) and a *level*
    threshold (how far it lies from the median, over the largest levels the
    signal itself reaches); a sample is flagged when it exceeds both. A
    shape threshold of None switches that detector off.

    Attributes
    ----------
    frame, frame_level : float or None, float
        Artifact frames: the median over a population's neurons of their
        scores (most neurons jump together). Defaults 6 and 2.
    sample, sample_level : float or None, float
        One neuron's extreme sample (outside artifact frames). Defaults 10
        and 8: high, because neurons carry valid one-sample events (spike
        counts, fast transients) and only samples of about 100 SD or more
        move a fit on their own.
    modulator, modulator_level : float or None, float
        A modulator glitch. Defaults 8 and 4: a modulator gates every
        channel, so glitches of 20 SD already move the selection.
    min_neurons : int
        Populations with fewer neurons get no frame check (their samples are
        checked one by one).
    """

    frame: float | None = 6.0
    frame_level: float = 2.0
    sample: float | None = 10.0
    sample_level: float = 8.0
    modulator: float | None = 8.0
    modulator_level: float = 4.0
    min_neurons: int = 5

    def __post_init__(self):
        for name in ("frame", "sample", "modulator"):
            for key in (name, f"{name}_level"):
                value = getattr(self, key)
                if value is None and key == name:
                    continue
                if not isinstance(value, (int, float)) or isinstance(value, bool) or value <= 0:
                    raise ValueError(f"{key} must be a positive number, got {value!r}.")
        if not isinstance(self.min_neurons, int) or self.min_neurons < 1:
            raise ValueError(f"min_neurons must be a positive integer, got {self.min_neurons!r}.")


@dataclass
class QualityReport:
    """What the detectors found in one data set.

    Attributes
    ----------
    n_samples : int
    frames : dict of str to ndarray of int
        ``"X"``, ``"Y"``: samples where most neurons of that population jump
        together (artifact frames), sorted.
    cells : dict of str to ndarray of shape (n_flags, 2)
        ``"X"``, ``"Y"``: ``(sample, neuron)`` of extreme samples of one
        neuron (outside artifact frames); ``"Z"``: ``(sample, column)`` of
        modulator glitches. Columns are positions (0-based).
    scores : dict of str to ndarray of shape (n_samples,)
        Per role, how far each sample is past the thresholds of its
        detectors (the largest ratio of score to threshold; 1 or more is
        flagged), for :func:`mics.plotting.plot_artifacts`.
    groups : ndarray of shape (n_samples,) or None
        Trial codes (0, 1, ... in time order) when trial ids are known.
    trial_labels : ndarray of shape (n_samples,) or None
        The trial ids as given (or as the ``trial`` coordinate has them).
    columns : dict of str to ndarray
        Column labels per role (neuron ids, modulator names), when labelled.
    thresholds : QualityThresholds
    """

    n_samples: int
    frames: dict = field(default_factory=dict)
    cells: dict = field(default_factory=dict)
    scores: dict = field(default_factory=dict)
    groups: np.ndarray | None = None
    trial_labels: np.ndarray | None = None
    columns: dict = field(default_factory=dict)
    thresholds: QualityThresholds = field(default_factory=QualityThresholds)

    def __bool__(self):
        return bool(self.samples.size)

    @property
    def samples(self):
        """Every flagged sample (any role), sorted, as ndarray of int."""
        parts = [np.asarray(f, dtype=np.intp) for f in self.frames.values()]
        parts += [np.asarray(c, dtype=np.intp).reshape(-1, 2)[:, 0] for c in self.cells.values()]
        return np.unique(np.concatenate(parts)) if parts else np.zeros(0, dtype=np.intp)

    def role_samples(self, role):
        """Flagged samples of one role (``"X"``, ``"Y"`` or ``"Z"``), sorted."""
        frames = np.asarray(self.frames.get(role, np.zeros(0)), dtype=np.intp)
        cells = np.asarray(self.cells.get(role, np.zeros((0, 2))), dtype=np.intp).reshape(-1, 2)
        return np.unique(np.concatenate([frames, cells[:, 0]]))

    def mask(self):
        """ndarray of bool of shape (n_samples,): True at every flagged sample."""
        out = np.zeros(self.n_samples, dtype=bool)
        out[self.samples] = True
        return out

    def cell_mask(self, role, n_columns):
        """ndarray of bool of shape (n_samples, n_columns): the flagged entries of one role.

        Artifact frames flag their whole row; extreme samples and glitches
        their one entry.
        """
        out = np.zeros((self.n_samples, int(n_columns)), dtype=bool)
        out[np.asarray(self.frames.get(role, []), dtype=np.intp)] = True
        cells = np.asarray(self.cells.get(role, np.zeros((0, 2))), dtype=np.intp).reshape(-1, 2)
        out[cells[:, 0], cells[:, 1]] = True
        return out

    @property
    def trials(self):
        """The trial ids (as given) that hold a flagged sample, in time order; empty without."""
        if self.trial_labels is None or not self:
            return np.zeros(0, dtype=object)
        labels = np.asarray(self.trial_labels)[self.samples]
        _, first = np.unique(labels, return_index=True)
        return labels[np.sort(first)]

    def table(self):
        """One row per flag: ``sample``, ``trial``, ``role``, ``kind``, ``column``, ``score``.

        Returns
        -------
        pandas.DataFrame
            ``kind`` is ``"frame"``, ``"sample"`` or ``"glitch"``; ``column`` is
            the label (or position) of the flagged column, empty for a frame.
        """
        import pandas as pd

        rows = []
        for role in ROLES:
            score = self.scores.get(role)
            for t in np.asarray(self.frames.get(role, []), dtype=np.intp):
                rows.append((int(t), role, "frame", "", score[t] if score is not None else np.nan))
            cells = np.asarray(self.cells.get(role, np.zeros((0, 2))), dtype=np.intp)
            kind = "glitch" if role == "Z" else "sample"
            for t, j in cells.reshape(-1, 2):
                value = score[t] if score is not None else np.nan
                rows.append((int(t), role, kind, str(self._column(role, j)), value))
        df = pd.DataFrame(rows, columns=["sample", "role", "kind", "column", "score"])
        trials = None if self.trial_labels is None else np.asarray(self.trial_labels)
        df.insert(1, "trial", [trials[t] if trials is not None else "" for t in df["sample"]])
        return df.sort_values(["sample", "role"], kind="stable").reset_index(drop=True)

    def _column(self, role, j):
        labels = self.columns.get(role)
        return labels[j] if labels is not None and j < len(labels) else j

    def _where(self, samples, limit):
        trials = self.trial_labels
        words = []
        for t in samples[:limit]:
            words.append(f"{t} (trial {trials[t]})" if trials is not None else str(t))
        more = len(samples) - limit
        return ", ".join(words) + (f" and {more} more" if more > 0 else "")

    def describe(self, limit=8):
        """The findings in words, one line per role and kind (what the warning says).

        Parameters
        ----------
        limit : int
            Samples named per line; the rest are counted.

        Returns
        -------
        str
        """
        lines = []
        for role in ROLES:
            frames = np.asarray(self.frames.get(role, []), dtype=np.intp)
            if frames.size:
                noun = "frame" if frames.size == 1 else "frames"
                lines.append(
                    f"{_ROLE_NAMES[role]}: {frames.size} artifact {noun} where most neurons "
                    f"jump together, at sample(s) {self._where(frames, limit)}"
                )
            cells = np.asarray(self.cells.get(role, np.zeros((0, 2))), dtype=np.intp)
            cells = cells.reshape(-1, 2)
            if cells.size:
                columns = np.unique(cells[:, 1])
                what = "glitch(es)" if role == "Z" else "extreme sample(s) of single neurons"
                unit = "column" if role == "Z" else "neuron"
                names = ", ".join(str(self._column(role, j)) for j in columns[:limit])
                if columns.size > limit:
                    names += f" and {columns.size - limit} more"
                samples = np.unique(cells[:, 0])
                lines.append(
                    f"{_ROLE_NAMES[role]}: {len(cells)} {what} in {columns.size} {unit}(s) "
                    f"({names}), at sample(s) {self._where(samples, limit)}"
                )
        return "\n".join(lines)

    def message(self, limit=8):
        """The warning's text: the findings and what to do about them."""
        n = self.samples.size
        trials = self.trials
        where = f" in {trials.size} trial(s)" if trials.size else ""
        return (
            f"{n} sample(s){where} look like artifacts and may decide the fit on their own:\n"
            + "\n".join("  - " + line for line in self.describe(limit).splitlines())
            + "\nLook at them with mics.preprocessing.find_artifacts(X, Y, Z) and "
            "mics.plotting.plot_artifacts; then interpolate them "
            "(mics.preprocessing.interpolate_artifacts) or drop them "
            "(mics.preprocessing.drop_artifacts: whole trials when trial ids are known). "
            "Valid data this flags can be kept: silence the check with "
            "mics.quality_checks(False) or raise its thresholds (mics.data.QualityThresholds)."
        )


# ----------------------------------------------------------------------------- settings
@dataclass(frozen=True)
class _Settings:
    action: str = "warn"
    thresholds: QualityThresholds = field(default_factory=QualityThresholds)


_SETTINGS = contextvars.ContextVar("mics_quality_settings", default=None)
_DEFAULT = _Settings()


def _settings():
    """The settings in force (:func:`quality_checks`), the defaults outside any."""
    return _SETTINGS.get() or _DEFAULT


_SCOPE = contextvars.ContextVar("mics_quality_scope", default=None)
_ACTIONS = ("warn", "raise", "ignore")


def _action(value):
    if value is True:
        return "warn"
    if value is False:
        return "ignore"
    if value not in _ACTIONS:
        raise ValueError(f"quality action must be one of {_ACTIONS} or a bool, got {value!r}.")
    return value


@contextlib.contextmanager
def quality_checks(action=None, thresholds=None, **changes):
    """Switch the data-quality checks of every call inside the block, or change their thresholds.

    Parameters
    ----------
    action : {"warn", "raise", "ignore"}, bool or None
        What a finding does: a :class:`DataQualityWarning` (the default
        outside any block), a ValueError, or nothing (the checks do not
        run; ``False`` is ``"ignore"``, ``True`` ``"warn"``). None keeps the
        action in force.
    thresholds : QualityThresholds, optional
        Default: the current ones.
    **changes
        Fields of :class:`QualityThresholds` to change, e.g. ``sample=None``
        (no check of single neurons' samples) or ``modulator=12``.

    Examples
    --------
    >>> import mics
    >>> with mics.quality_checks(False):  # doctest: +SKIP
    ...     model = mics.MICs().fit(X, Y, Z)
    >>> with mics.quality_checks(sample=None):  # doctest: +SKIP
    ...     result = mics.test_modulation(mics.MICs(), X, Y, Z)
    """
    current = _settings()
    base = current.thresholds if thresholds is None else thresholds
    if not isinstance(base, QualityThresholds):
        raise TypeError(f"thresholds must be QualityThresholds, got {type(base).__name__}.")
    action = current.action if action is None else _action(action)
    token = _SETTINGS.set(_Settings(action, replace(base, **changes)))
    try:
        yield
    finally:
        _SETTINGS.reset(token)


@contextlib.contextmanager
def quality_scope():
    """Check only the first data set built inside the block (variants of one user's data).

    A workflow that builds several problems from the same recording (the
    lags of a lag scan, the planted data sets of a power analysis) runs
    inside it, so the user gets one check and at most one warning per call.
    Nested scopes are one scope.
    """
    if _SCOPE.get() is not None:
        yield
        return
    token = _SCOPE.set({"checked": False})
    try:
        yield
    finally:
        _SCOPE.reset(token)


def _resolve(quality):
    """The (action, thresholds) of a ``quality`` argument (None: the current settings)."""
    settings = _settings()
    if quality is None:
        return settings.action, settings.thresholds
    if isinstance(quality, QualityThresholds):
        return "warn", quality
    return _action(quality), settings.thresholds


# ----------------------------------------------------------------------------- detection
def _block_findings(blocks, starts, thresholds):
    """Flags of one row block: ``{role: (frames, cells, scores)}`` with block-local rows."""
    out = {}
    for role, a in blocks.items():
        if a is None:
            continue
        a = np.asarray(a, dtype=np.float64)
        n, p = a.shape
        scores = np.zeros(n)
        frames = np.zeros(0, dtype=np.intp)
        cells = np.zeros((0, 2), dtype=np.intp)
        if n < _MIN_SAMPLES or p == 0 or not np.all(np.isfinite(a)):
            out[role] = (frames, cells, scores)
            continue
        shape, level = artifact_scores(a, starts)
        if role == "Z":
            cut, cut_level = thresholds.modulator, thresholds.modulator_level
        else:
            cut, cut_level = thresholds.sample, thresholds.sample_level
            if thresholds.frame is not None and p >= thresholds.min_neurons:
                past = np.minimum(
                    np.median(shape, axis=1) / thresholds.frame,
                    np.median(level, axis=1) / thresholds.frame_level,
                )
                frames = np.flatnonzero(past >= 1)
                scores = np.maximum(scores, past)
        if cut is not None:
            past = np.minimum(shape / cut, level / cut_level)
            past[frames] = 0.0  # a frame's neurons are reported as the frame
            cells = np.argwhere(past >= 1).astype(np.intp)
            scores = np.maximum(scores, past.max(axis=1))
        out[role] = (frames, cells, scores)
    return out


def _row_blocks(n, widest, starts):
    """Row ranges of blocks of about ``_BLOCK_VALUES`` values, cut at segment starts."""
    rows = max(_MIN_BLOCK_ROWS, _BLOCK_VALUES // max(widest, 1))
    n_blocks = max(1, int(round(n / rows)))
    if n_blocks == 1:
        return [(0, n)]
    cuts = np.linspace(0, n, n_blocks + 1).round().astype(int)[1:-1]
    if len(starts) > 1:  # the nearest trial start, so no trial is cut
        cuts = np.unique(starts[np.abs(starts[None, :] - cuts[:, None]).argmin(axis=1)])
        cuts = cuts[(cuts > 0) & (cuts < n)]
    edges = np.r_[0, cuts, n]
    return list(zip(edges[:-1], edges[1:], strict=True))


def _merge(n, parts):
    """Join ``(offset, findings)`` of row blocks into report fields."""
    frames, cells, scores = {}, {}, {}
    for offset, found in parts:
        for role, (f, c, s) in found.items():
            frames.setdefault(role, []).append(np.asarray(f, dtype=np.intp) + offset)
            cells.setdefault(role, []).append(np.asarray(c, dtype=np.intp) + [offset, 0])
            scores.setdefault(role, []).append(s)
    frames = {r: np.concatenate(v) for r, v in frames.items() if r != "Z"}
    cells = {r: np.concatenate(v).reshape(-1, 2) for r, v in cells.items()}
    scores = {r: np.concatenate(v) for r, v in scores.items()}
    return frames, cells, scores


def detect(X, Y, Z, *, groups=None, trial_labels=None, columns=None, thresholds=None):
    """Run the detectors on unwrapped inputs (NumPy, or Dask arrays scored where they live).

    Parameters
    ----------
    X : array of shape (n_samples, p) or None
    Y : array of shape (n_samples, q) or None
    Z : array of shape (n_samples, m) or (n_samples,) or None
    groups : ndarray of shape (n_samples,), optional
        Trial codes: no score reaches across a trial's edge.
    trial_labels : ndarray of shape (n_samples,), optional
        Trial ids as the user knows them (for the report).
    columns : dict of str to ndarray, optional
        Column labels per role.
    thresholds : QualityThresholds, optional

    Returns
    -------
    QualityReport

    Notes
    -----
    The scales are those of each row block: in-memory populations are cut
    into blocks of about two million values (at trial starts), Dask arrays
    keep their row blocks (merged up to 2000 rows), so the check of chunked
    data is one pass over them.
    """
    from mics.data.chunked import map_row_blocks

    thresholds = QualityThresholds() if thresholds is None else thresholds
    present = [a for a in (X, Y, Z) if a is not None]
    n = present[0].shape[0]
    widest = max(a.shape[1] if len(a.shape) > 1 else 1 for a in present)

    def task(offset, *blocks):
        rows = next(b.shape[0] for b in blocks if b is not None)
        g = None if groups is None else groups[offset : offset + rows]
        starts = segment_starts(g, rows)
        return offset, _block_findings(dict(zip(ROLES, blocks, strict=True)), starts, thresholds)

    blocks = _row_blocks(n, widest, segment_starts(groups, n))
    parts = map_row_blocks(task, X, Y, Z, blocks=blocks, min_rows=_MIN_BLOCK_ROWS)
    frames, cells, scores = _merge(n, parts)
    return QualityReport(
        n,
        frames,
        cells,
        scores,
        None if groups is None else np.asarray(groups),
        None if trial_labels is None else np.asarray(trial_labels),
        dict(columns or {}),
        thresholds,
    )


def find_artifacts(X, Y=None, Z=None, *, groups=None, thresholds=None):
    """Run the data-quality detectors and return what they find (no warning).

    The same detectors :func:`mics.data.make_problem` runs before every fit
    and test (see :mod:`mics.data.quality`).

    Parameters
    ----------
    X : array-like, DataArray or Dask array of shape (n_samples, p)
        Source activity (or any population).
    Y : array-like of shape (n_samples, q), optional
        Target activity.
    Z : array-like of shape (n_samples, m) or (n_samples,), optional
        Modulator.
    groups : array-like of shape (n_samples,), optional
        Trial ids; taken from a ``trial`` coordinate of labelled inputs when
        not given. No score reaches across a trial's edge.
    thresholds : QualityThresholds, optional
        Default: the current ones (:func:`quality_checks`).

    Returns
    -------
    QualityReport
    """
    from mics.data.folds import check_groups
    from mics.data.labels import unwrap

    arrays, infos = [], []
    for a, role in zip((X, Y, Z), ROLES, strict=True):
        if a is None:
            arrays.append(None)
            infos.append(None)
            continue
        value, info = unwrap(a, role)
        arrays.append(value)
        infos.append(info)
    lengths = {a.shape[0] for a in arrays if a is not None}
    if len(lengths) > 1:
        raise ValueError(f"X, Y and Z must share the time axis; got lengths {sorted(lengths)}.")
    n = lengths.pop()
    trial_labels = _trial_labels(groups, infos)
    codes = check_groups(trial_labels, n)
    thresholds = _settings().thresholds if thresholds is None else thresholds
    columns = {r: i.features for r, i in zip(ROLES, infos, strict=True) if i is not None}
    return detect(
        *arrays,
        groups=codes,
        trial_labels=trial_labels,
        columns=columns,
        thresholds=thresholds,
    )


def _trial_labels(groups, infos):
    """Trial ids as the user gave them: ``groups``, else a ``trial`` coordinate."""
    if groups is not None:
        return np.asarray(groups)
    for info in infos:
        if info is not None and "trial" in info.time_coords:
            return np.asarray(info.time_coords["trial"])
    return None


def user_stacklevel():
    """The ``stacklevel`` that points a warning at the first frame outside the package.

    For :func:`warnings.warn` called by the function that calls this one:
    the warning then names the user's line, however deep in the package it
    was raised.
    """
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep
    frame, level = sys._getframe(1), 1  # the caller of warnings.warn is level 1
    while frame is not None and os.path.abspath(frame.f_code.co_filename).startswith(root):
        frame, level = frame.f_back, level + 1
    return level


def warn_artifacts(report, action="warn"):
    """Warn (or raise) about a report's findings; nothing when it found none.

    Parameters
    ----------
    report : QualityReport
    action : {"warn", "raise"}
    """
    if not report:
        return
    if action == "raise":
        raise ValueError(report.message())
    warnings.warn(report.message(), DataQualityWarning, stacklevel=user_stacklevel())


def check_inputs(X, Y, Z, *, groups=None, labels=None, trial_labels=None, quality=None):
    """The seam's check: detect and warn once per user call (see :func:`quality_scope`).

    Parameters
    ----------
    X, Y, Z : arrays (unwrapped, checked) or None
    groups : ndarray of int, optional
        Trial codes.
    labels : tuple of (LabelInfo or None) * 3, optional
    trial_labels : ndarray, optional
    quality : None, bool, str or QualityThresholds
        As :func:`mics.data.make_problem` takes it.

    Returns
    -------
    QualityReport or None
        None when the check did not run (switched off, or a variant inside
        a :func:`quality_scope` that already checked its data).
    """
    action, thresholds = _resolve(quality)
    if action == "ignore":
        return None
    scope = _SCOPE.get()
    if scope is not None:
        if scope["checked"]:
            return None
        scope["checked"] = True
    columns = {}
    if labels is not None:
        columns = {r: i.features for r, i in zip(ROLES, labels, strict=True) if i is not None}
    if trial_labels is None and labels is not None:
        trial_labels = _trial_labels(None, labels)
    report = detect(
        X,
        Y,
        Z,
        groups=groups,
        trial_labels=trial_labels,
        columns=columns,
        thresholds=thresholds,
    )
    warn_artifacts(report, action)
    return report
