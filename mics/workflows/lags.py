"""Lag scan: cross-validated communication (and modulation) against time lag.

The direction and delay of an interaction show in how well the source
predicts the target when it is shifted in time: a peak at a positive lag
(source leading) suggests feedforward signalling, at a negative lag
(target leading) feedback. Every lag is scored on the same samples and the
same trial-blocked folds, and a shift never reaches into another trial.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from tqdm import tqdm

from mics.data.folds import groups_from_labels, shift_within_trials
from mics.data.labels import unwrap
from mics.data.problem import make_problem
from mics.data.quality import check_inputs, quality_scope
from mics.model.fit import fit_problem
from mics.model.selection import cross_validate_reduced_rank
from mics.workflows.inference import best_gain

__all__ = ["lag_scan"]


def _common_rows(arrays, lags, codes):
    """Samples where every lagged source and the target/modulator are finite."""
    X, Y, Z = arrays
    keep = np.isfinite(Y).all(axis=1)
    if Z is not None:
        keep &= np.isfinite(Z).all(axis=1)
    for lag in lags:
        keep &= np.isfinite(shift_within_trials(X, lag, codes)).all(axis=1)
    return keep


def _modulation_gain(estimator, X, Y, Z, groups):
    """Best CV improvement of a channel model over K = 0, its fold SEM and the K chosen."""
    params = {**estimator.get_params(deep=False), "n_channels": None, "verbose": 0}
    # the selection alone: the statistic needs no fit on all samples
    outcome = fit_problem(params, make_problem(X, Y, Z, groups=groups), cv_only=True)
    res = outcome.cv_results
    fold = np.asarray(res["n_channels_fold_loss"])  # (n_K, n_folds)
    best = 1 + int(np.argmin(res["n_channels_mean_loss"][1:]))
    diff = fold[0] - fold[best]
    # the folds the selection's mean used (an outlier fold left out)
    diff = diff[~np.asarray(res.get("n_channels_fold_outlier", np.zeros(diff.size, bool)))]
    sem = diff.std(ddof=1) / np.sqrt(diff.size) if diff.size > 1 else 0.0
    return best_gain(res), float(sem), int(outcome.n_channels)


def lag_scan(
    X: Any,
    Y: Any,
    Z: Any = None,
    *,
    lags: Any = range(-3, 4),
    groups: Any = None,
    ranks: Any = range(11),
    cv: Any = 10,
    estimator: Any = None,
    fs: float | None = None,
    verbose: int = 1,
):
    """Cross-validated communication and modulation for each time lag of the source.

    At lag ``l`` the source at time ``t - l`` predicts the target at ``t``
    (``l > 0``: source leads). Communication is ``1 - NSE`` of reduced-rank
    regression at the rank the one-SEM rule picks; modulation (with ``Z``,
    which stays aligned with the target) is the best cross-validated NSE
    improvement of a model with channels over the same model without them.

    Parameters
    ----------
    X : array-like of shape (T, p) or DataArray
        Source.
    Y : array-like of shape (T, q) or DataArray
        Target.
    Z : array-like of shape (T, m) or (T,), optional
        Modulator.
    lags : sequence of int, default=range(-3, 4)
        Lags in samples.
    groups : array-like of shape (T,), optional
        Trial ids (taken from a ``trial`` coordinate of labelled inputs):
        shifts stay inside trials and folds hold out whole trials.
    ranks : sequence of int
        Candidate ranks of the reduced-rank regression.
    cv : int or splitter, default=10
    estimator : mics.MICs, optional
        Used for the modulation (its ``n_channels`` is selected at each
        lag). Default ``MICs(cv=cv, max_channels=2, n_init=1)``.
    fs : float, optional
        Sampling rate (Hz) for a ``lag_s`` coordinate; read from the ``fs``
        attribute of labelled inputs when not given.
    verbose : int

    Returns
    -------
    xarray.Dataset
        Over dimension ``lag``: ``communication`` and ``communication_sem``
        (1 - NSE and its fold SEM), ``rank``; with ``Z`` also ``modulation``,
        ``modulation_sem`` and ``n_channels``. Coordinate ``lag_s`` when the
        sampling rate is known. Attributes: ``n_samples`` (rows scored),
        ``n_trials``, ``cv``.
    """
    import xarray as xr

    from mics.estimators.mic import MICs

    Xv, ix = unwrap(X, "X")
    Yv, iy = unwrap(Y, "Y")
    Zv, iz = unwrap(Z, "Z") if Z is not None else (None, None)
    Xv = np.asarray(Xv, dtype=float).reshape(len(Xv), -1)
    Yv = np.asarray(Yv, dtype=float).reshape(len(Yv), -1)
    if Zv is not None:
        Zv = np.asarray(Zv, dtype=float).reshape(len(Zv), -1)
    n = Xv.shape[0]
    for name, a in (("Y", Yv), ("Z", Zv)):
        if a is not None and a.shape[0] != n:
            raise ValueError(f"{name} has {a.shape[0]} samples but X has {n}.")
    lags = np.asarray(list(lags), dtype=int)
    if lags.size == 0:
        raise ValueError("lags must name at least one lag.")
    codes = groups_from_labels(groups, ix, iy, iz, n_samples=n)
    if fs is None:
        fs = next((i.attrs["fs"] for i in (ix, iy, iz) if i is not None and "fs" in i.attrs), None)
    keep = _common_rows((Xv, Yv, Zv), lags, codes)
    if keep.sum() < 2 * (cv if isinstance(cv, int) else 2):
        raise ValueError(f"only {int(keep.sum())} samples have every lag inside their trial.")
    g = None if codes is None else codes[keep]
    if estimator is None:
        estimator = MICs(cv=cv, max_channels=2, n_init=1, verbose=0)
    out = {k: [] for k in ("communication", "communication_sem", "rank")}
    if Zv is not None:
        out.update(modulation=[], modulation_sem=[], n_channels=[])
    with quality_scope():
        # the data quality is checked once, on the recording as given; the
        # lagged copies the modulation fits make are of the same samples
        check_inputs(Xv, Yv, Zv, groups=codes, labels=(ix, iy, iz), trial_labels=_ids(groups))
        _scan(out, lags, Xv, Yv, Zv, codes, keep, g, ranks, cv, estimator, verbose)
    ds = xr.Dataset({k: ("lag", np.asarray(v)) for k, v in out.items()}, coords={"lag": lags})
    if fs is not None:
        ds = ds.assign_coords(lag_s=("lag", lags / float(fs)))
    ds.attrs.update(
        n_samples=int(keep.sum()),
        n_trials=0 if g is None else int(np.unique(g).size),
        cv=str(cv),
        description="lag > 0: source leads target",
    )
    return ds


def _ids(groups):
    return None if groups is None else np.asarray(groups)


def _scan(out, lags, Xv, Yv, Zv, codes, keep, g, ranks, cv, estimator, verbose):
    """Fill ``out`` with each lag's communication (and modulation)."""
    for lag in tqdm(lags, desc="lag scan", disable=not verbose):
        Xl = shift_within_trials(Xv, lag, codes)[keep]
        cand = [r for r in ranks if r <= min(Xl.shape[1], Yv.shape[1])]
        res = cross_validate_reduced_rank(Xl, Yv[keep], cand, cv=cv, groups=g)
        best = res["best_index"]
        out["communication"].append(res["mean_score"][best])
        out["communication_sem"].append(res["sem_loss"][best])
        out["rank"].append(int(res["rank"][best]))
        if Zv is not None:
            gain, sem, k = _modulation_gain(estimator, Xl, Yv[keep], Zv[keep], g)
            out["modulation"].append(gain)
            out["modulation_sem"].append(sem)
            out["n_channels"].append(k)
