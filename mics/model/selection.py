"""Blocked cross-validation and the one-SEM rule.

Calcium signals are autocorrelated for seconds, so folds are contiguous
blocks of time (scikit-learn's ``KFold(shuffle=False)``), optionally with a
gap of discarded samples on each side of the held-out block. With trial ids
(``groups``) the blocks are runs of whole trials (:func:`mics.data.folds.cv_splits`
builds every fold).
"""

from __future__ import annotations

import warnings
from dataclasses import replace

import numpy as np
from sklearn.exceptions import ConvergenceWarning

from mics.core.als import penalties
from mics.core.heldout import (
    data_heldout_loss,
    fold_mean_sem,
    heldout_loss,
    normalized_squared_error,
    one_sem_rule,
    sums_heldout_loss,
)
from mics.core.linalg import single_blas_thread
from mics.core.rrr import fit_reduced_rank, reduced_rank_path_from_sums
from mics.core.sparse import sparse_settings
from mics.core.stats import RawLinearMoments

__all__ = [
    "FoldOutlierWarning",
    "warn_fold_outliers",
    "cross_validate_reduced_rank",
    "select_from_moments",
    "cross_validate_rank",
]

# Convergence tolerance of the fold fits (the final fit keeps the estimator's
# ``tol``; the sweep cap is the estimator's ``max_iter`` for both, see
# docs/model.md "Stopping"). Fold fits are compared, not reported: a sweep
# that lowers the penalised loss by less than 1e-6 of itself (of the
# residual variance) moves a held-out NSE by about that much, three orders
# below the fold SEM. Looser is not free: on null data the held-out losses
# of over-specified candidates lie in a flat valley, where the stopping
# point moves the test statistic by a fraction of its null spread (against
# 1e-7 on 50 null data sets, per-data-set p-values kept a rank correlation
# of 0.96 at 1e-6, 0.76 at 1e-5, and the same false-positive rate).
CV_TOL = 1e-6
# Random restarts of each fold fit (the HOSVD and K - 1 starts always run).
_CV_N_INIT = 0


def cross_validate_reduced_rank(X, Y, ranks, cv=10, alpha=0.0, groups=None):
    """Cross-validated NSE of reduced-rank regression for each candidate rank.

    Parameters
    ----------
    X : ndarray of shape (n_samples, p)
    Y : ndarray of shape (n_samples, q)
    ranks : sequence of int, increasing complexity
    cv : int or splitter
    alpha : float
    groups : array-like of shape (n_samples,), optional
        Trial ids: folds then hold out contiguous blocks of whole trials.

    Returns
    -------
    results : dict
        ``rank``, ``fold_loss`` (n_ranks, n_folds), ``mean_loss``, ``sem_loss``
        and ``best_index`` (the one-SEM choice).
    """
    from mics.data.folds import cv_splits

    ranks = list(ranks)
    losses = []
    for train, test in cv_splits(cv, X.shape[0], groups=groups):
        coefs, intercepts = fit_reduced_rank(X[train], Y[train], ranks, alpha=alpha)
        losses.append(
            [
                normalized_squared_error(Y[test], X[test] @ B + b)
                for B, b in zip(coefs, intercepts, strict=True)
            ]
        )
    fold_loss = np.asarray(losses).T
    return summarize_cv(ranks, fold_loss, key="rank")


def cross_validate_reduced_rank_sums(total, folds, ranks, alpha=0.0):
    """:func:`cross_validate_reduced_rank` from linear moments (chunked inputs).

    Parameters
    ----------
    total : RawLinearMoments
        Of all samples, from :func:`mics.data.chunked.xy_fold_moments`.
    folds : list of (test_moments, excluded_moments)
    ranks : sequence of int
    alpha : float

    Returns
    -------
    dict
        As :func:`cross_validate_reduced_rank`.
    """
    ranks = list(ranks)
    losses = []
    for test, excl in folds:
        train = total - excl
        coefs, intercepts = reduced_rank_path_from_sums(train, ranks, alpha)
        losses.append(
            [sums_heldout_loss(test, B, c) for B, c in zip(coefs, intercepts, strict=True)]
        )
    return summarize_cv(ranks, np.asarray(losses).T, key="rank")


def cross_validate_rank(problem, ranks, cv, alpha):
    """Select the rank of a reduced-rank regression on a problem, and refit on all samples.

    In memory, each fold is fitted on its rows (the reference code's
    procedure); otherwise from every fold's sums, computed in one pass.

    Parameters
    ----------
    problem : mics.data.Problem
    ranks : list of int
    cv : int or splitter
    alpha : float

    Returns
    -------
    cv_results : dict
        As :func:`cross_validate_reduced_rank`.
    rank : int
    coef : ndarray of shape (p, q)
    intercept : ndarray of shape (q,)
    """
    if problem.in_memory:
        X, Y = problem.X, problem.Y
        groups = problem.groups
        results = cross_validate_reduced_rank(X, Y, ranks, cv=cv, alpha=alpha, groups=groups)
        rank = int(ranks[results["best_index"]])
        (B,), (b,) = fit_reduced_rank(X, Y, [rank], alpha=alpha)
        return results, rank, B, b
    total, folds, (x_shift, y_shift) = problem.xy_fold_sums(problem.splits(cv))
    results = cross_validate_reduced_rank_sums(total, folds, ranks, alpha)
    rank = int(ranks[results["best_index"]])
    (B,), (c,) = reduced_rank_path_from_sums(total, [rank], alpha)
    # back from the shifted basis: y - y_shift = (x - x_shift) B + c
    return results, rank, B, y_shift + c - x_shift @ B


def summarize_cv(candidates, fold_loss, key):
    """Mean, SEM across folds and the one-SEM choice for a candidate table.

    A fold whose held-out loss is an order of magnitude above the others'
    (:func:`mics.core.heldout.fold_outliers`: one bad sample in its block)
    is left out of the mean and SEM, and named in ``fold_outlier`` (a
    boolean per fold, present only when some fold is an outlier, so the
    table of clean data is what it always was).
    """
    fold_loss = np.asarray(fold_loss, dtype=float)
    mean, sem, outliers = fold_mean_sem(fold_loss)
    best = one_sem_rule(mean, sem)
    out = {
        key: np.asarray(candidates),
        "fold_loss": fold_loss,
        "mean_loss": mean,
        "sem_loss": sem,
        "mean_score": 1 - mean,
        "best_index": best,
    }
    if outliers.any():
        out["fold_outlier"] = outliers
    return out


# ----------------------------------------------------------------------------- MIC selection
# Caches an operator keeps of its own training moments (the HOSVD start and
# the profiled baseline solve): carried between the stages of a selection
# when the fold's operator itself is rebuilt.


def _fold_states(settings, n_folds):
    """One state per fold (its memory allowance), for :func:`_fold_task` to carry forward.

    A fold's moment operator is kept for the next stage when all folds'
    operators together take at most half of ``memory_limit`` (the budget the
    user set for interaction moments); otherwise, and on the data path, each
    stage rebuilds it.
    """
    keep = float(settings.memory_limit) / 2 / max(n_folds, 1)
    return [{"keep_bytes": keep} for _ in range(n_folds)]


def _nbytes(obj):
    return sum(a.nbytes for a in vars(obj).values() if isinstance(a, np.ndarray))


def _training_operator(settings, total, fold, data):
    """A fold's training operator (its moments centred) and those centred moments."""
    from mics.core.als import DataOperator, MomentOperator

    train, _, _, excl_m = fold
    cm = (total - excl_m).centered()
    # reduced coordinates (mics.model.reduction): the full problem's
    # penalties and draws; the basis of all rows holds every fold's
    embedding = settings.embedding_
    if settings.solver_ == "moments":
        op = MomentOperator(cm, embedding=embedding)
    else:
        op = DataOperator(cm, *data, rows=train, embedding=embedding)
    return op, cm


def fold_scorer(settings, fold, cm, data):
    """The held-out NSE of fits on one fold: ``score(B, D, fit, basis=None)``.

    Parameters
    ----------
    settings : mics.model.settings.FitSettings
        Read for ``solver_``.
    fold : tuple
        ``(train, test, test_moments, excluded_moments)``.
    cm : CenteredMoments
        The fold's centred training moments (only their means on the data path).
    data : tuple or None
        The standardised ``(X, Y, Z)`` (data path).
    """
    _, test, test_m, _ = fold
    if settings.solver_ == "moments":
        return lambda B, D, fit, basis=None: heldout_loss(test_m, cm, B, D, fit, basis)
    return lambda B, D, fit, basis=None: data_heldout_loss(data, test, cm, B, D, fit)


def fold_operator(settings, total, fold, data):
    """A fold's training operator (its moments centred) and the held-out scorer.

    The one construction behind the selection's fold fits and the penalty
    and sparsity paths (:mod:`mics.model.warm_path`).

    Parameters
    ----------
    settings : mics.model.settings.FitSettings
        Read for ``solver_`` and ``embedding_`` (reduced coordinates).
    total, fold, data
        The standardised moments, one fold ``(train, test, test_moments,
        excluded_moments)`` and the data (data path), as
        :func:`select_from_moments` takes them.

    Returns
    -------
    op : MomentOperator or DataOperator
    score : callable
        ``score(B, D, fit, basis=None)`` -> held-out NSE (:func:`fold_scorer`).
    """
    op, cm = _training_operator(settings, total, fold, data)
    return op, fold_scorer(settings, fold, cm, data)


def _fold_task(settings, total, fold, data, stage, rank, candidates, seed, state=None):
    """Fit every candidate on one training fold and score it on the held-out block.

    ``state`` (a dict per fold, from :func:`_fold_states`) carries the
    fold's operator (or its caches) and its last channel fit from one stage
    or step of the selection to the next: the rank stage, then each step of
    the sequential channel search. Its fits are then those of a single pass
    over all candidates, without centring the fold's moments again. With a
    state the task returns ``(losses, new_state)``: it may run in another
    process (a Dask backend), where changes to its argument would be lost.
    """
    from mics.core.als import baseline_path

    state = None if state is None else dict(state)
    if state is not None and "operator" in state:
        op, cm = state["operator"]
    else:
        op, cm = _training_operator(settings, total, fold, data)
        if state is not None:
            op.restore_caches(state.get("caches"))
    score = fold_scorer(settings, fold, cm, data)
    pen = penalties(op, settings.alpha, settings.alpha_channels, **sparse_settings(settings))
    if stage == "rank":
        baselines = baseline_path(op, candidates, pen["alpha_B"])
        fits = [(B, D, None, V) for B, D, _, V in baselines]
    else:
        previous = None if state is None else state.get("previous")
        path = _channel_path(settings, op, rank, candidates, pen, seed, previous)
        fits = [(f.coef, f.modulator_coef, f, f.coef_basis) for f in path]
        if state is not None:
            state["previous"] = path[int(np.argmax(candidates))]
            state["capped"] = [not f.converged for f in path]
    losses = [score(B, D, fit, V) for B, D, fit, V in fits]
    if state is None:
        return losses
    if "operator" not in state:
        # Only the moment path keeps its operator: rebuilding it centres the
        # fold's (p m)^2 moments, while a data-path operator is a copy of the
        # fold's rows that would pin one data set per fold in memory (and
        # its weighted-Gram buffers with it). The held-out scores need only
        # the training means of cm, not its M.
        light = replace(cm, M=None)
        moments = settings.solver_ == "moments"
        if moments and _nbytes(op) + _nbytes(light) <= state["keep_bytes"]:
            state["operator"] = (op, light)
        else:
            state["caches"] = op.fit_caches()
    return losses, state


def _channel_path(settings, op, rank, candidates, pen, seed, previous=None):
    """Fold fits for each channel count, every K warm-started from the K - 1 fit.

    The fits of one fold share its training moments, so the K - 1 solution
    (plus the next HOSVD direction) is a start that never saw the held-out
    block; with the HOSVD start it replaces the random restarts, which then
    run in the final fit on all the data only (``_CV_N_INIT``). ``previous``
    is the same fold's fit with one channel fewer than the smallest candidate
    (the sequential search's earlier step), if any.
    """
    from mics.core.als import fit_mic_model

    fits = []
    for c in sorted(candidates):
        # A fold fit that reaches the sweep cap is counted in cv_results_
        # ("n_channels_n_capped") rather than warned about fold by fold.
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ConvergenceWarning)
            fit = fit_mic_model(
                op,
                rank,
                c,
                **pen,
                n_init=min(settings.n_init, _CV_N_INIT),
                max_iter=settings.max_iter,
                tol=max(settings.tol, CV_TOL),
                joint=settings.joint,
                random_state=seed,
                warm_start=previous,
            )
        fits.append(fit)
        previous = fit
    order = np.argsort(np.argsort(candidates))
    return [fits[i] for i in order]


def _run_stage(settings, total, folds, data, stage, rank, candidates, seeds, desc, states=None):
    from joblib import Parallel, delayed
    from tqdm import tqdm

    carried = states is not None
    jobs = (
        delayed(_fold_task)(settings, total, fold, data, stage, rank, candidates, seed, state)
        for fold, seed, state in zip(folds, seeds, states or [None] * len(folds), strict=True)
    )
    # Threads: the fold tasks spend their time in BLAS/LAPACK calls that
    # release the GIL, and threads share the moments unpickled.
    results = Parallel(n_jobs=settings.n_jobs, prefer="threads", return_as="generator")(jobs)
    out = list(
        tqdm(results, total=len(folds), desc=desc, disable=not settings.verbose, leave=False)
    )
    capped = np.zeros((len(candidates), len(folds)), dtype=bool)
    if carried:
        states[:] = [state for _, state in out]
        out = [losses for losses, _ in out]
        for i, state in enumerate(states):
            capped[:, i] = state.pop("capped", False)
    return np.asarray(out).T, capped  # each (n_candidates, n_folds)


def select_from_moments(settings, total, folds, rng, data=None):
    """Hierarchical selection: baseline rank, then number of channels given the rank.

    Both stages use blocked cross-validation (NSE pooled over target
    neurons; whole trials per fold when the problem has trial ids) and the
    one-SEM rule. Fold statistics are the total moments minus the held-out
    block, so the whole selection costs one pass over the data.

    Parameters
    ----------
    settings : mics.model.settings.FitSettings
    total : RawMoments
        Moments of all samples (standardised units).
    folds : list of (train, test, test_moments, excluded_moments)
        Per fold: index arrays (used by the data solver only; None on the
        moment solver) and the raw moments of the held-out block and of
        everything the training set excludes (held-out block plus gap).
    rng : RandomState
        Draws the fold fits' seeds.
    data : tuple of (X, Y, Z), optional
        The standardised data, for the data solver.

    Returns
    -------
    rank, n_channels, cv_results
    """
    if isinstance(total, RawLinearMoments):
        p, m, q = total.x_shift.size, total.z_shift.size, total.y_shift.size
    else:
        p, m, q = total.G.shape[0] - 1, total.G.shape[1] - 1, total.Gy.shape[2]
    embedding = settings.embedding_
    if embedding is not None:  # the candidates are the full problem's
        p, q, m = embedding.sizes
    # Set once, before any worker thread starts: the fold fits are small dense
    # solves (see fit_mic_model), and per-thread limits would race.
    with single_blas_thread():
        return _select(settings, total, folds, data, rng, p, q, m)


def _select(settings, total, folds, data, rng, p, q, m):
    results = {}
    states = _fold_states(settings, len(folds))
    if settings.rank is None:
        ranks = list(range(0, min(settings.max_rank, p, q) + 1))
        fold_loss, _ = _run_stage(
            settings, total, folds, data, "rank", None, ranks, [0] * len(folds), "rank CV", states
        )
        summary = summarize_cv(ranks, fold_loss, key="rank")
        rank = ranks[summary["best_index"]]
        results.update(prefixed(summary, "rank"))
    else:
        rank = int(settings.rank)
    if settings.n_channels is None:
        limit = min(p * q, p * m, q * m)
        ks = list(range(0, min(settings.max_channels, limit) + 1))
        seeds = rng.randint(np.iinfo(np.int32).max, size=len(folds)).tolist()
        if settings.channel_search == "grid":
            fold_loss, capped = _run_stage(
                settings, total, folds, data, "channels", rank, ks, seeds, "channel CV", states
            )
        else:
            ks, fold_loss, capped = _sequential_channels(
                settings, total, folds, data, rank, ks, seeds, states
            )
        summary = summarize_cv(ks, fold_loss, key="n_channels")
        n_channels = ks[summary["best_index"]]
        results.update(prefixed(summary, "n_channels"))
        # Fold fits that stopped at max_iter, per channel count: their losses
        # would move with the cap (0 everywhere is what the statistics need).
        results["n_channels_n_capped"] = capped.sum(axis=1)
    else:
        n_channels = int(settings.n_channels)
    return rank, n_channels, results


def _sequential_channels(settings, total, folds, data, rank, ks, seeds, states):
    """Channel counts in increasing order, until one does not improve on the best so far.

    K = 0 and 1 are always scored; each further K is fitted (in every fold,
    from that fold's K - 1 fit, as on the whole grid) only while the last
    count lowered the mean held-out loss below that of every smaller count.
    Once a channel count overfits, larger ones almost never predict better
    (they hold the same channels plus more fitted noise), so the one-SEM
    choice is the whole grid's on nearly every data set (results/channel_search/,
    results/park2024_channel_search/), at the cost of the counts up to one
    past the optimum: on null data, K = 1 only. The best improvement over
    K = 0 (the test statistic) can differ where K = 1 overfits and K = 2
    predicts: rarely on the simulations, more often on the Park tests.

    Returns
    -------
    ks : list of int
        The channel counts scored.
    fold_loss : ndarray of shape (len(ks), n_folds)
    capped : ndarray of bool, shape (len(ks), n_folds)
        Fold fits that stopped at the sweep cap.
    """
    rows, capped = [], []
    for step in [ks[:2]] + [[k] for k in ks[2:]]:
        desc = f"channel CV (K={step[-1]})"
        losses, caps = _run_stage(
            settings, total, folds, data, "channels", rank, step, seeds, desc, states
        )
        rows.extend(losses)
        capped.extend(caps)
        # the selection's own mean (an outlier fold left out), so one bad
        # sample cannot stop the search either
        mean = fold_mean_sem(np.asarray(rows))[0]
        if mean.size > 1 and mean[-1] >= mean[:-1].min():
            break
    return ks[: len(rows)], np.asarray(rows), np.asarray(capped)


def prefixed(summary, key):
    out = {key: summary[key]}
    for name in ("fold_loss", "mean_loss", "sem_loss", "mean_score", "best_index", "fold_outlier"):
        if name in summary:
            out[f"{key}_{name}"] = summary[name]
    return out


class FoldOutlierWarning(UserWarning):
    """A cross-validation fold's held-out loss was an order of magnitude above the others'."""


def fold_outlier_message(cv_results):
    """Words on the outlier folds of a selection's table; empty when there are none.

    Parameters
    ----------
    cv_results : dict
        A selection's ``cv_results_``.

    Returns
    -------
    str
    """
    parts = []
    for name, flags in cv_results.items():
        if not name.endswith("fold_outlier") or not np.any(flags):
            continue
        stage = name[: -len("fold_outlier")].rstrip("_") or "rank"
        losses = np.asarray(cv_results[name.replace("fold_outlier", "fold_loss")], dtype=float)
        flags = np.asarray(flags, dtype=bool)
        with np.errstate(invalid="ignore", divide="ignore"):
            ratio = np.nanmax(losses[:, flags] / np.nanmedian(losses, axis=1, keepdims=True))
        folds = ", ".join(str(i) for i in np.flatnonzero(flags))
        parts.append(f"fold(s) {folds} of the {stage} selection ({ratio:.3g} times the median)")
    if not parts:
        return ""
    return (
        "Held-out losses an order of magnitude above the other folds': "
        + "; ".join(parts)
        + ". One or a few samples in those blocks decide their loss, so they were left out "
        "of the mean and SEM the one-SEM rule reads (cv_results_['..._fold_outlier']). "
        "Look for artifacts there with mics.preprocessing.find_artifacts."
    )


def warn_fold_outliers(cv_results):
    """Warn (:class:`FoldOutlierWarning`, at the user's line) when a selection left out folds.

    The estimators call it at the end of ``fit``; a workflow calls it once
    on the selection of the user's data (not on its null or resampled
    variants).

    Parameters
    ----------
    cv_results : dict or None
    """
    from mics.data.quality import user_stacklevel

    message = fold_outlier_message(cv_results or {})
    if message:
        warnings.warn(message, FoldOutlierWarning, stacklevel=user_stacklevel())
