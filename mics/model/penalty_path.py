"""Penalties chosen by the data: held-out losses over a grid of relative penalties.

``MICs(alpha="cv")`` and ``MICs(alpha_channels="cv")`` (or a sequence of
candidate values) choose the relative ridge penalties by cross-validation on
the folds that choose the rank and the number of channels, from the same
fold moments: a fold's training fit and its held-out score need no pass over
the data (see :mod:`mics.model.selection`). Everything here runs in standard
units (:class:`mics.core.InputScales`), where the relative penalties are
defined, so the chosen values do not depend on the units of X, Y or Z.

Order (hierarchical, as the rank and channel selection):

1. ``alpha`` (baseline) on the channel-free model: for every candidate, the
   held-out loss of the baseline at the fixed rank, or at the best rank of
   that candidate when the rank is selected. Each candidate is one closed-form
   ridge reduced-rank solve per fold (``O(p^3 + q^3)``).
2. The rank and the number of channels, by :func:`select_from_moments`, at
   the chosen ``alpha`` and a provisional ``alpha_channels``: the grid value
   nearest the package default 0.125 (on a log scale).
3. ``alpha_channels`` for the selected rank and ``K > 0``: a path from the
   largest candidate to the smallest in every fold, each fit warm-started
   from the fold's fit at the previous (larger) penalty, as ``glmnet`` and
   ``RidgeCV`` run theirs. With ``K = 0`` there is nothing to penalise and the
   provisional value is kept. A path costs ``n_grid x n_folds`` channel fits;
   the warm start makes each one a few sweeps from a nearby optimum.
4. ``sparsity`` (``MICs(sparsity="cv")``), last, at the selected rank,
   ``K`` and ``alpha_channels``: the same warm-started fold path
   (:func:`mics.model.warm_path.warm_path`) over group-lasso weights, from the dense fit to the
   sparsest, with its own rule (:mod:`mics.model.sparsity_path`). The
   stages before it run on the dense model.

Rule: the candidate with the smallest mean held-out loss, not the one-SEM
rule of the rank and channel counts. The one-SEM rule guards a *discrete*
choice among nested models against adding structure that is not there;
a penalty is a continuous bias-variance trade-off within one model, and the
one-SEM choice is by construction the most shrunk value compatible with the
minimum, which biases the channels towards zero (on the low-sample recovery
study, ``results/penalties/``, it recovered the channels worse than the
minimum). ``cv_results_`` keeps every fold loss, so either rule can be
applied afterwards.
"""

from __future__ import annotations

import numbers
from dataclasses import dataclass, replace

import numpy as np

from mics.core.als import (
    baseline_path,
    penalties,
)
from mics.core.heldout import fold_mean_sem
from mics.core.linalg import single_blas_thread
from mics.model.selection import fold_operator, select_from_moments
from mics.model.sparsity_path import chooses_sparsity, no_path, sparsity_grid, sparsity_path
from mics.model.warm_path import warm_path

__all__ = [
    "ALPHA_CHANNELS_GRID",
    "ALPHA_GRID",
    "baseline_penalty_path",
    "channel_penalty_path",
    "chosen_penalties",
    "chooses_penalties",
    "penalty_grid",
    "Selection",
    "select_with_penalties",
]

# Candidate relative penalties for "cv", largest first (the path's order):
# factors of 2 (about three a decade) through the fixed defaults 0.05 and
# 0.125, from 16x (alpha) and 8x (alpha_channels) above them to 8x and 16x
# below.
# The relative penalties scale with the number of parameters of a
# component, not with the number of samples, so a long recording needs a
# smaller value, rarely a larger one; below the grid the fits approach the
# unpenalised ones. On the low-sample simulations of results/penalties/
# (T = 300-500, p = 150) the chosen alpha_channels ranged over 0.03-0.5,
# inside the grid, and alpha over 0.025-0.8.
ALPHA_GRID = tuple(0.05 * 2.0**k for k in range(4, -4, -1))  # 0.8 ... 0.00625
ALPHA_CHANNELS_GRID = tuple(0.125 * 2.0**k for k in range(3, -5, -1))  # 1 ... 0.0078125
# Provisional alpha_channels while the channel count is selected: the default.
_PROVISIONAL_CHANNELS = 0.125


def penalty_grid(value, name="alpha"):
    """The candidates of a penalty setting, largest first, or None for a fixed value.

    Parameters
    ----------
    value : float, "cv" or sequence of float
        As given to :class:`mics.MICs` (checked by
        :func:`mics.data.validation.check_alpha`).
    name : {"alpha", "alpha_channels"}
        Which default grid "cv" means.

    Returns
    -------
    ndarray of shape (n_grid,) or None
        Distinct candidates in decreasing order (the path runs from the most
        to the least shrunk fit).
    """
    if value is None or isinstance(value, numbers.Real):
        return None
    if isinstance(value, str):
        return np.asarray(ALPHA_GRID if name == "alpha" else ALPHA_CHANNELS_GRID, dtype=float)
    return np.unique(np.asarray(value, dtype=float))[::-1].copy()


def chooses_penalties(params):
    """Whether ``alpha``, ``alpha_channels`` or ``sparsity`` is to be chosen by cross-validation.

    Parameters
    ----------
    params : dict or namespace
        The estimator's parameters.
    """
    get = params.get if isinstance(params, dict) else lambda k: getattr(params, k)
    return (
        penalty_grid(get("alpha")) is not None
        or penalty_grid(get("alpha_channels"), "alpha_channels") is not None
        or chooses_sparsity(params)
    )


def chosen_penalties(params, cv_results):
    """The relative penalties a fit used: fixed values as given, chosen ones from the table.

    Parameters
    ----------
    params : dict
        The estimator's parameters.
    cv_results : dict or None
        Of :func:`select_with_penalties` (``cv_results_``).

    Returns
    -------
    alpha, alpha_channels : float
        ``alpha_channels`` is ``alpha`` when it was None.
    """
    out = {}
    for name in ("alpha", "alpha_channels"):
        value = params[name]
        if penalty_grid(value, name) is not None and cv_results and name in cv_results:
            value = cv_results[name][cv_results[f"{name}_best_index"]]
        out[name] = value
    if out["alpha_channels"] is None:
        out["alpha_channels"] = out["alpha"]
    return float(out["alpha"]), float(out["alpha_channels"])


@dataclass(frozen=True)
class Selection:
    """What the folds chose: the sizes, the penalties of the final fit and the table.

    Attributes
    ----------
    rank, n_channels : int
    alpha, alpha_channels, sparsity
        The relative penalties the final fit uses: chosen on the folds where
        the settings asked (floats), as given otherwise.
    cv_results : dict
        See :func:`select_with_penalties`.
    """

    rank: int
    n_channels: int
    alpha: object
    alpha_channels: object
    sparsity: object
    cv_results: dict


def select_with_penalties(settings, total, folds, rng, data=None, channels=True):
    """:func:`select_from_moments` with the penalties chosen on the same folds where asked.

    Parameters
    ----------
    settings : mics.model.settings.FitSettings
        ``alpha``, ``alpha_channels`` and ``sparsity`` may be "cv" or
        sequences (left as they are: the choices come back in the result).
    total, folds, rng, data
        As :func:`mics.model.selection.select_from_moments` (standardised).
    channels : bool, default=True
        Run the ``alpha_channels`` path. Without it (a null statistic of the
        modulation test, which reads only the channel-count table) the
        provisional value is kept.

    Returns
    -------
    Selection
        Its ``cv_results`` hold the selection's table plus, for a chosen
        penalty ``name``: ``name`` (the candidates, largest first),
        ``name_fold_loss`` (n_grid, n_folds), ``name_mean_loss``,
        ``name_sem_loss`` and ``name_best_index`` (the chosen candidate).
        ``alpha_rank`` gives the rank each ``alpha`` was scored at;
        ``alpha_channels_penalised_loss`` (n_grid, n_folds) the training
        objective at the end of each fit of the path (it never increases
        along the path). When ``K = 0`` was selected the ``alpha_channels``
        losses are NaN and ``best_index`` points at the provisional value.
        With ``sparsity`` chosen, the entries of
        :func:`mics.model.sparsity_path.summarize` (the sizes and
        ``alpha_channels`` are then chosen on the dense model).
    """
    results = {}
    grid = penalty_grid(settings.alpha, "alpha")
    if grid is not None:
        summary = _choose_alpha(settings, total, folds, data, grid)
        results.update(summary)
        settings = replace(settings, alpha=float(grid[summary["alpha_best_index"]]))
    grid_c = penalty_grid(settings.alpha_channels, "alpha_channels")
    if grid_c is not None:
        with np.errstate(divide="ignore"):  # a candidate 0 is infinitely far
            distance = np.abs(np.log(grid_c / _PROVISIONAL_CHANNELS))
        provisional = int(np.argmin(distance))
        settings = replace(settings, alpha_channels=float(grid_c[provisional]))
    # sparsity="cv": the sizes and alpha_channels are chosen on the dense
    # model, then the sparsity path runs at them (mics.model.sparsity_path)
    grid_s = sparsity_grid(settings.sparsity)
    chosen_sparsity = settings.sparsity
    if grid_s is not None:
        settings = replace(settings, sparsity=0.0)
    rank, n_channels, selected = select_from_moments(settings, total, folds, rng, data)
    results.update(selected)
    path = channels and n_channels > 0
    if grid_c is not None:
        summary = _choose_alpha_channels(
            settings, total, folds, data, rank, n_channels, grid_c, provisional, path
        )
        results.update(summary)
        settings = replace(
            settings, alpha_channels=float(grid_c[summary["alpha_channels_best_index"]])
        )
    if grid_s is not None:
        if path:
            summary = sparsity_path(settings, total, folds, data, rank, n_channels, grid_s)
        else:
            summary = no_path(grid_s, len(folds))
        results.update(summary)
        chosen_sparsity = float(grid_s[summary["sparsity_best_index"]])
    return Selection(
        rank=rank,
        n_channels=n_channels,
        alpha=settings.alpha,
        alpha_channels=settings.alpha_channels,
        sparsity=chosen_sparsity,
        cv_results=results,
    )


def _choose_alpha(settings, total, folds, data, grid):
    """The ``alpha`` entries of the table: the baseline penalty path on every fold."""
    with single_blas_thread():
        fold_loss, ranks = baseline_penalty_path(settings, total, folds, data, grid)
    summary = _summary("alpha", grid, fold_loss)
    summary["alpha_rank"] = ranks
    return summary


def _choose_alpha_channels(
    settings, total, folds, data, rank, n_channels, grid, provisional, path
):
    """The ``alpha_channels`` entries of the table: the channel penalty path, where it runs.

    Without the path (``path`` False: no channel selected, or the channel
    path not asked for) the losses are NaN and the choice is the
    ``provisional`` candidate.
    """
    if path:
        with single_blas_thread():
            fold_loss, objective = channel_penalty_path(
                settings, total, folds, data, rank, n_channels, grid
            )
        summary = _summary("alpha_channels", grid, fold_loss)
        summary["alpha_channels_penalised_loss"] = objective
        return summary
    nan = np.full((grid.size, len(folds)), np.nan)
    summary = _summary("alpha_channels", grid, nan)
    summary["alpha_channels_best_index"] = provisional
    summary["alpha_channels_penalised_loss"] = nan
    return summary


def _summary(name, grid, fold_loss):
    """Mean and SEM over folds, and the minimum-mean rule (see the module docstring)."""
    fold_loss = np.asarray(fold_loss, dtype=float)
    mean, sem, outliers = fold_mean_sem(fold_loss)  # an outlier fold left out
    best = int(np.argmin(mean)) if np.isfinite(mean).any() else 0
    out = {
        name: np.asarray(grid, dtype=float),
        f"{name}_fold_loss": fold_loss,
        f"{name}_mean_loss": mean,
        f"{name}_sem_loss": sem,
        f"{name}_best_index": best,
    }
    if outliers.any():
        out[f"{name}_fold_outlier"] = outliers
    return out


def baseline_penalty_path(settings, total, folds, data, grid):
    """Held-out loss of the channel-free model for each baseline penalty.

    Parameters
    ----------
    settings : mics.model.settings.FitSettings
        ``rank`` (None: every rank up to ``max_rank`` is scored and each
        candidate keeps its best), ``max_rank``, ``solver_``.
    total, folds, data
        As :func:`select_with_penalties`.
    grid : ndarray of shape (n_grid,)
        Relative baseline penalties.

    Returns
    -------
    fold_loss : ndarray of shape (n_grid, n_folds)
        At the rank of ``ranks``.
    ranks : ndarray of int, shape (n_grid,)
        The fixed rank, or the rank with the smallest mean loss per candidate.
    """
    embedding = settings.embedding_
    p, q = _sizes(total) if embedding is None else embedding.sizes[:2]
    ranks = (
        [int(settings.rank)]
        if settings.rank is not None
        else list(range(min(settings.max_rank, p, q) + 1))
    )
    # (n_grid, n_ranks, n_folds): the baseline path gives every rank at once
    loss = np.empty((len(grid), len(ranks), len(folds)))
    for f, fold in enumerate(folds):
        op, score = fold_operator(settings, total, fold, data)
        for i, a in enumerate(grid):
            alpha_B = penalties(op, a, 0.0)["alpha_B"]
            for j, (B, D, _, V) in enumerate(baseline_path(op, ranks, alpha_B)):
                loss[i, j, f] = score(B, D, None, V)
    best = np.argmin(loss.mean(axis=2), axis=1)
    fold_loss = loss[np.arange(len(grid)), best]
    return fold_loss, np.asarray(ranks)[best]


def channel_penalty_path(settings, total, folds, data, rank, n_channels, grid):
    """Held-out loss of the ``(rank, n_channels)`` model along a warm-started penalty path.

    In every fold the candidates are fitted from the largest to the
    smallest, each from the HOSVD start of the fold's training moments and
    from the fold's fit at the previous candidate (``warm_start``), the
    better after a few probe sweeps kept; neither start has seen the
    held-out block.

    Parameters
    ----------
    settings : mics.model.settings.FitSettings
        ``alpha`` (a float), ``max_iter``, ``tol``, ``solver_``, ``n_jobs``.
    total, folds, data
        As :func:`select_with_penalties`.
    rank, n_channels : int
    grid : ndarray of shape (n_grid,)
        Relative channel penalties, decreasing.

    Returns
    -------
    fold_loss : ndarray of shape (n_grid, n_folds)
        Held-out NSE.
    objective : ndarray of shape (n_grid, n_folds)
        The penalised training loss at the end of each fit (standard units):
        non-increasing along a decreasing grid, since the optimum of a
        smaller penalty is below the previous fit's loss.
    """

    def penalise(op, a):
        return _penalties(op, settings, a)

    out = warm_path(settings, total, folds, data, rank, n_channels, grid, penalise)
    return out["fold_loss"], out["objective"]


def _penalties(op, settings, alpha_channels):
    """Absolute penalties of a fold fit, with the estimator's other penalty settings.

    Settings beyond the two relative ridges (a group lasso's ``sparsity`` and
    ``sparse_on``, where the estimator has them) are passed on as the
    selection passes them, so the path scores the model the final fit fits.
    """
    return penalties(
        op,
        settings.alpha,
        alpha_channels,
        sparsity=settings.sparsity,
        sparse_on=settings.sparse_on,
    )


def _sizes(total):
    """``(p, q)`` of raw (interaction or linear) moments."""
    if hasattr(total, "x_shift"):
        return total.x_shift.size, total.y_shift.size
    return total.G.shape[0] - 1, total.Gy.shape[2]
