"""The warm-started penalty path of one model, fold by fold.

One engine for every path the selection runs at fixed sizes: the
``alpha_channels`` path (:mod:`mics.model.penalty_path`) and the group-lasso
``sparsity`` path (:mod:`mics.model.sparsity_path`). Both modules import it
from here, so neither imports the other's caller.
"""

from __future__ import annotations

import warnings

import numpy as np
from sklearn.exceptions import ConvergenceWarning

from mics.core.als import fit_mic_model
from mics.model.selection import CV_TOL, fold_operator

__all__ = ["warm_path"]


def warm_path(
    settings, total, folds, data, rank, n_channels, grid, penalise, record=None, stop=None
):
    """Held-out losses of one model along a warm-started path of penalty settings, per fold.

    The shared engine of the ``alpha_channels`` path
    (:func:`mics.model.penalty_path.channel_penalty_path`)
    and the ``sparsity`` path (:mod:`mics.model.sparsity_path`). In every fold
    the candidates are fitted in the order given, each by
    :func:`mics.core.fit_mic_model` from the HOSVD start of the fold's
    training moments and from the fold's fit at the previous candidate
    (``warm_start``), the better after a few probe sweeps kept; neither start
    has seen the held-out block. A candidate with a group penalty (the
    sparsity path) starts its group sweeps from the fold's last fit without
    one (``dense_start``), the start its own dense stage would find again.
    The folds run in parallel threads (``settings.n_jobs``), as the
    selection's.

    Parameters
    ----------
    settings : mics.model.settings.FitSettings
        ``alpha``, ``max_iter``, ``tol``, ``solver_``, ``n_jobs``.
    total, folds, data
        As :func:`mics.model.penalty_path.select_with_penalties`.
    rank, n_channels : int
    grid : ndarray of shape (n_grid,)
        The candidates, in the order of the path.
    penalise : callable
        ``penalise(op, candidate)`` -> keyword arguments of
        :func:`mics.core.fit_mic_model` (the absolute penalties on the fold's
        operator).
    record : callable, optional
        ``record(fit)`` -> tuple of numbers kept for every fit (e.g. the
        number of neurons with non-zero weight).
    stop : callable, optional
        ``stop(fit)`` -> bool: the fits at the later candidates of this fold
        would be this one (a group penalty that emptied every channel keeps
        them empty at every larger weight), so they are not run and this
        fit's loss, objective and record are repeated.

    Returns
    -------
    dict
        ``fold_loss`` and ``objective`` of shape (n_grid, n_folds): the
        held-out NSE and the penalised training loss at the end of each fit
        (standard units); ``records`` of shape (n_grid, n_folds, n_record)
        when ``record`` is given.
    """
    from joblib import Parallel, delayed

    jobs = (
        delayed(_fold_path)(
            settings, total, fold, data, rank, n_channels, grid, penalise, record, stop
        )
        for fold in folds
    )
    # Threads, as the selection's fold tasks: BLAS and LAPACK release the GIL.
    out = Parallel(n_jobs=settings.n_jobs, prefer="threads")(jobs)
    result = {
        "fold_loss": np.asarray([losses for losses, _, _ in out], dtype=float).T,
        "objective": np.asarray([obj for _, obj, _ in out], dtype=float).T,
    }
    if record is not None:
        result["records"] = np.asarray([rec for _, _, rec in out], dtype=float).transpose(1, 0, 2)
    return result


def _fold_path(settings, total, fold, data, rank, n_channels, grid, penalise, record, stop):
    op, score = fold_operator(settings, total, fold, data)
    previous, dense, losses, objective, records = None, None, [], [], []
    for a in grid:
        if previous is not None and stop is not None and stop(previous):
            losses.append(losses[-1])
            objective.append(objective[-1])
            records.append(records[-1])
            continue
        pen = penalise(op, a)
        with warnings.catch_warnings():
            # a capped fold fit moves its loss by less than the fold SEM (see
            # mics.model.selection); it is not warned about fold by fold
            warnings.simplefilter("ignore", ConvergenceWarning)
            fit = fit_mic_model(
                op,
                rank,
                n_channels,
                **pen,
                n_init=0,
                max_iter=settings.max_iter,
                tol=max(settings.tol, CV_TOL),
                joint=settings.joint,
                random_state=0,  # unused without restarts: the path draws nothing
                warm_start=previous,
                dense_start=dense,
            )
        if pen.get("group_penalty") is None:
            dense = fit
        losses.append(score(fit.coef, fit.modulator_coef, fit, fit.coef_basis))
        objective.append(float(fit.loss_history[-1]))
        records.append(() if record is None else tuple(record(fit)))
        previous = fit
    return losses, objective, records
