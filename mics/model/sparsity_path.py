"""Sparsity chosen by the data: a cross-validated path from the dense fit to sparse ones.

``MICs(sparsity="cv")`` (or a sequence of candidate weights) chooses the
group-lasso weight on the neurons of the channel patterns
(:mod:`mics.core.sparse`) on the folds that choose the rank and the number
of channels, from the same fold moments (no pass over the data per fit).
:func:`mics.workflows.choose_sparsity` is the same computation for an
estimator with fixed sizes. Like the ridge penalties, ``sparsity`` is
relative to the standardised data (:func:`mics.core.penalties`), so the
chosen value and the members do not depend on the units of X, Y or Z.

Order (after the penalties of :mod:`mics.model.penalty_path`):

1. The rank and the number of channels are selected on the *dense* model
   (sparsity 0), as without sparsity: the group lasso decides which neurons
   carry a channel, not whether there is one. With ``K = 0`` there are no
   patterns to make sparse and the path is not run.
2. At the selected rank and ``K`` (and the chosen ``alpha_channels``), every
   fold fits the candidates from the smallest weight (0, the dense fit) to
   the largest, on the engine of the ``alpha_channels`` path
   (:func:`mics.model.warm_path.warm_path`). The group-lasso sweeps of
   each sparse candidate start from the fold's dense fit, the path's first
   candidate (``dense_start``), as every sparse fit starts from its dense
   solution (:func:`mics.core.fit_mic_model`): each fold fit follows the
   final fit's procedure at that weight, without its random restarts and
   without finding the dense solution again. (Starting from the previous
   candidate's sparse fit instead saves no sweeps.) A weight
   that sets every neuron of every channel of a fold to zero is the end of
   that fold's path: larger ones keep the channels empty, and repeat its
   loss without being fitted.

Rule: **one standard error towards sparser models**, the rule of the rank
and channel counts (:func:`mics.core.heldout.one_sem_rule`, glmnet's
``lambda.1se``) with the candidates ordered from the sparsest: the chosen
weight is the *largest* whose mean held-out loss is at most the lowest mean
plus the standard error (over folds) of the lowest candidate's losses.
Sparser means fewer neurons, the simpler model. Held-out prediction alone
rewards small weights: the group lasso shrinks the members' weights too, so
the loss rises with the weight long after the non-members are gone, and
the minimum keeps weakly weighted extra neurons (Meinshausen & Buhlmann
2006). On a planted channel (T = 1500, p = 60, q = 40, 6 source and 8
target members) the minimum was at 2, with 15 source and 21 target neurons
selected; the rule chose 16, the members exactly. The rule is the one that
selected the channel: a weight that empties the channels is (nearly) the
model without them, which the channel selection found worse than the best
by more than one SEM, so it is not chosen either. It is not the minimum
of the ``alpha_channels`` path (:mod:`mics.model.penalty_path`): there the
candidates are one model shrunk more or less, here nested sets of neurons,
a choice of structure. ``cv_results_`` keeps every fold loss, so another
rule can be applied afterwards.
"""

from __future__ import annotations

import numbers

import numpy as np

from mics.core.als import penalties
from mics.core.heldout import fold_mean_sem, one_sem_rule
from mics.core.linalg import single_blas_thread
from mics.core.sparse import sparse_factors
from mics.model.warm_path import warm_path

__all__ = [
    "SPARSITY_GRID",
    "chooses_sparsity",
    "chosen_sparsity",
    "one_sem_sparser",
    "sparsity_grid",
    "sparsity_path",
]

#: Candidates of ``sparsity="cv"``, from the dense fit to the sparsest, in
#: factors of 2 as the penalty grids. ``sparsity`` is a threshold in standard
#: errors of the loss gradient at a neuron that carries nothing
#: (:func:`mics.core.penalties`), so the grid does not depend on the number
#: of samples. On simulated planted members (T = 1000-2000, modulation SNR
#: 0.1-0.5, p = 60-150) the non-members left the patterns by 4-8, the
#: members stayed up to 8-32, and the channels emptied at 16-48. Each
#: candidate costs one sparse fit per fold, the bulk of the path's time.
SPARSITY_GRID = (0.0, 1.0, 2.0, 4.0, 8.0, 16.0, 32.0)

_ROLES = ("source", "target", "modulator")


def sparsity_grid(value):
    """The candidates of a ``sparsity`` setting, smallest first, or None for a fixed weight.

    Parameters
    ----------
    value : float, "cv" or sequence of float
        As given to :class:`mics.MICs` (checked by
        :func:`mics.data.validation.check_sparsity`).

    Returns
    -------
    ndarray of shape (n_grid,) or None
        Distinct candidates in increasing order (the path runs from the
        densest fit to the sparsest).
    """
    if value is None or isinstance(value, numbers.Real):
        return None
    if isinstance(value, str):
        return np.asarray(SPARSITY_GRID, dtype=float)
    return np.unique(np.asarray(value, dtype=float))


def chooses_sparsity(params):
    """Whether ``sparsity`` is to be chosen by cross-validation.

    Parameters
    ----------
    params : dict or namespace
        The estimator's parameters (parameter sets without ``sparsity`` fit dense).
    """
    value = params.get("sparsity") if isinstance(params, dict) else getattr(params, "sparsity", 0)
    return sparsity_grid(value) is not None


def chosen_sparsity(params, cv_results):
    """The group-lasso weight a fit used: as given, or the one chosen on the folds.

    Parameters
    ----------
    params : dict
        The estimator's parameters.
    cv_results : dict or None
        With the ``sparsity`` entries of :func:`summarize`, when chosen.

    Returns
    -------
    float
    """
    value = params.get("sparsity", 0.0)
    grid = sparsity_grid(value)
    if grid is None:
        return float(value or 0.0)
    if cv_results and "sparsity" in cv_results:
        return float(cv_results["sparsity"][cv_results["sparsity_best_index"]])
    return float(grid[0])


def one_sem_sparser(mean_loss, sem_loss):
    """The one-SEM rule towards sparser models (see the module docstring).

    Parameters
    ----------
    mean_loss, sem_loss : ndarray of shape (n_grid,)
        Mean held-out loss over folds and its SEM, candidates in increasing
        sparsity.

    Returns
    -------
    int
        The index of the largest weight whose mean loss is at most the
        lowest mean plus that candidate's SEM.
    """
    mean_loss = np.asarray(mean_loss, dtype=float)
    # one_sem_rule takes the first (simplest) candidate within one SEM
    return mean_loss.size - 1 - one_sem_rule(mean_loss[::-1], np.asarray(sem_loss)[::-1])


def summarize(grid, fold_loss, counts, objective):
    """The ``cv_results_`` entries of a sparsity path.

    Parameters
    ----------
    grid : ndarray of shape (n_grid,)
        Candidates, increasing.
    fold_loss : ndarray of shape (n_grid, n_folds)
    counts : ndarray of shape (n_grid, n_folds, 3)
        Neurons with a non-zero weight in some channel: source, target,
        modulator, per fold fit.
    objective : ndarray of shape (n_grid, n_folds)
        Penalised training loss at the end of each fold fit.

    Returns
    -------
    dict
        ``sparsity`` (the candidates), ``sparsity_fold_loss``,
        ``sparsity_mean_loss``, ``sparsity_sem_loss`` (over folds),
        ``sparsity_best_index`` (the one-SEM choice, :func:`one_sem_sparser`),
        ``sparsity_lowest_index`` (the held-out minimum),
        ``sparsity_n_{role}`` (mean over folds) and ``sparsity_fold_n_{role}``
        (n_grid, n_folds) for each role, and ``sparsity_penalised_loss``.
    """
    fold_loss = np.asarray(fold_loss, dtype=float)
    mean, sem, outliers = fold_mean_sem(fold_loss)  # an outlier fold left out
    finite = np.isfinite(mean)
    out = {
        "sparsity": np.asarray(grid, dtype=float),
        "sparsity_fold_loss": fold_loss,
        "sparsity_mean_loss": mean,
        "sparsity_sem_loss": sem,
        "sparsity_best_index": one_sem_sparser(mean, sem),
        "sparsity_lowest_index": int(np.nanargmin(mean)) if finite.any() else 0,
        "sparsity_penalised_loss": np.asarray(objective, dtype=float),
    }
    if outliers.any():
        out["sparsity_fold_outlier"] = outliers
    counts = np.asarray(counts, dtype=float)
    for r, role in enumerate(_ROLES):
        out[f"sparsity_fold_n_{role}"] = counts[:, :, r]
        out[f"sparsity_n_{role}"] = counts[:, :, r].mean(axis=1)
    return out


def _members(fit):
    """Neurons with a non-zero weight in some channel: (source, target, modulator)."""
    return tuple(
        int(np.count_nonzero(np.any(F != 0, axis=1)))
        for F in (fit.source_patterns, fit.target_patterns, fit.modulator_patterns)
    )


def _empty(fit):
    """Every channel emptied (all weights zero): larger weights keep it so."""
    return fit.weights.size > 0 and not np.any(fit.weights)


def sparsity_path(settings, total, folds, data, rank, n_channels, grid):
    """Held-out losses and member counts along the warm-started sparsity path of every fold.

    Parameters
    ----------
    settings : mics.model.settings.FitSettings
        ``alpha`` and ``alpha_channels`` (floats), ``sparse_on``,
        ``max_iter``, ``tol``, ``solver_``, ``n_jobs``.
    total, folds, data
        Standardised moments and folds, as
        :func:`mics.model.selection.select_from_moments` takes them.
    rank, n_channels : int
        The selected (or fixed) sizes; ``n_channels > 0``.
    grid : ndarray of shape (n_grid,)
        Candidate weights, increasing (0 first for the dense fit).

    Returns
    -------
    dict
        As :func:`summarize`.
    """
    on = sparse_factors(settings.sparse_on)

    def penalise(op, s):
        return penalties(op, settings.alpha, settings.alpha_channels, sparsity=s, sparse_on=on)

    with single_blas_thread():
        out = warm_path(
            settings, total, folds, data, rank, n_channels, grid, penalise, _members, _empty
        )
    return summarize(grid, out["fold_loss"], out["records"], out["objective"])


def no_path(grid, n_folds):
    """The entries of :func:`summarize` when no channel was selected (NaN losses, no members)."""
    nan = np.full((len(grid), n_folds), np.nan)
    out = summarize(grid, nan, np.zeros((len(grid), n_folds, 3)), nan)
    out["sparsity_best_index"] = out["sparsity_lowest_index"] = 0
    return out
