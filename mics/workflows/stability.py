"""How sure each membership is: stability selection of the neurons of sparse channels.

A sparse fit (``MICs(sparsity=...)``, :mod:`mics.core.sparse`) names the
neurons of each channel, but one fit says nothing about how reliable each
name is. Stability selection (Meinshausen & Buhlmann, JRSS B 2010) refits
on resamples and keeps the neurons selected in at least a fraction
``threshold`` of them. Here the resamples are half of the whole trials, or
of the contiguous blocks of time, drawn without replacement
(:func:`mics.workflows.bootstrap_channels` with ``scheme="half"``, so
autocorrelation is respected), and every refit's channels are aligned to
the full-data fit exactly as the bootstrap aligns them.

Error control: with ``q_hat`` the mean number of neurons of one pattern
selected per resample and ``p`` the neurons of that population, the
expected number of falsely selected neurons among those kept at frequency
``threshold > 1/2`` is at most ``q_hat^2 / ((2 threshold - 1) p)``
(Meinshausen & Buhlmann 2010, Theorem 1), reported as
``*_expected_false``. The theorem assumes subsamples of half the data, as
drawn here, and exchangeable noise neurons. With ``scheme="bootstrap"``
(draws with replacement, the earlier default) duplicated trials make each
refit select more neurons than the full fit: on the Semedo sample 48.6
source neurons per resample against 24 in the full fit
(``results/members_real/``), which lifts every frequency and voids the
bound.
"""

from __future__ import annotations

import numpy as np

from mics.data.validation import check_count, check_fraction
from mics.model.sparsity_path import SPARSITY_GRID as _MODEL_SPARSITY_GRID

__all__ = ["stability_selection", "member_table", "choose_sparsity", "pattern_labels"]

#: Default candidates of :func:`choose_sparsity` (relative weights, see
#: :func:`mics.core.penalties`); 0 is the dense fit. The estimator's grid.
SPARSITY_GRID = _MODEL_SPARSITY_GRID

_ROLES = ("source", "target", "modulator")


def pattern_labels(pattern, n):
    """Neuron ids of a fitted pattern matrix (a DataArray's row coordinate) or 0..n-1."""
    dims = getattr(pattern, "dims", None)
    if dims is not None and dims[0] in pattern.coords:
        return np.asarray(pattern.coords[dims[0]].values)
    return np.arange(n)


def stability_selection(
    model,
    X,
    Y,
    Z,
    *,
    groups=None,
    n_boot=50,
    threshold=0.6,
    block_length=None,
    n_jobs=None,
    verbose=1,
    random_state=None,
    scheme="half",
):
    """Selection frequencies of every neuron in every channel over subsamples.

    Parameters
    ----------
    model : fitted MICs
        With ``sparsity > 0`` (a dense fit selects every neuron every time)
        and at least one channel.
    X : array-like of shape (n_samples, n_source)
    Y : array-like of shape (n_samples, n_target)
    Z : array-like of shape (n_samples, n_modulators)
        The data the model was fitted on (DataArrays give the neuron ids).
    groups : array-like of shape (n_samples,), optional
        Trial ids: resample whole trials (see :func:`bootstrap_channels`).
    n_boot : int, default=50
        Resamples.
    scheme : {"half", "bootstrap"}, default="half"
        ``"half"``: each resample is half of the trials (or contiguous
        blocks), drawn without replacement, the subsamples for which the
        Meinshausen-Buhlmann bound holds. ``"bootstrap"``: as many drawn
        with replacement; duplicated trials make each refit select more
        neurons than the full fit, which lifts every frequency and voids
        the bound.
    threshold : float in (0.5, 1), default=0.6
        Selection frequency at which a neuron counts as a member.
    block_length, n_jobs, verbose, random_state
        As in :func:`mics.workflows.bootstrap_channels`.

    Returns
    -------
    xarray.Dataset
        For each role ``source``, ``target``, ``modulator`` (dimension named
        after the role, coordinates the neuron ids): ``{role}_frequency``
        (role, channel), the fraction of resamples in which the neuron has
        a non-zero weight in the aligned channel; ``{role}_members``
        (role, channel), frequency >= ``threshold``; ``{role}_pattern`` the
        full-data pattern; and per channel ``{role}_mean_selected`` (the
        ``q_hat`` above), ``{role}_n_members`` and ``{role}_expected_false``,
        the Meinshausen-Buhlmann bound on the expected number of false
        members. Attributes ``threshold``, ``n_boot``, ``resampling``.
        :func:`member_table` lists the members.

    Notes
    -----
    The modulator pattern of a single modulator (``m = 1``) is not
    penalised; its frequency is then that of a non-zero channel.
    """
    from mics.workflows.inference import bootstrap_channels

    _check_has_members(model)
    n_boot = check_count(n_boot, "n_boot", 1)
    check_fraction(threshold, "threshold")
    if not 0.5 < threshold < 1:
        raise ValueError(f"threshold must be in (0.5, 1), got {threshold!r}.")
    boot = bootstrap_channels(
        model,
        X,
        Y,
        Z,
        n_boot=n_boot,
        block_length=block_length,
        groups=groups,
        n_jobs=n_jobs,
        verbose=verbose,
        random_state=random_state,
        scheme=scheme,
    )
    return _stability_dataset(model, boot, threshold, n_boot)


def _check_has_members(model):
    """Refuse a model whose resamples cannot name members: dense, or without a channel."""
    # the weight the fit used: as given, or chosen on the folds (sparsity="cv")
    if not getattr(model, "sparsity_", getattr(model, "sparsity", 0)):
        raise ValueError(
            "stability_selection needs a sparse model (MICs(sparsity=...) with sparsity > 0): "
            "a dense fit gives every neuron a non-zero weight in every resample."
        )
    if not getattr(model, "n_channels_", 0):
        raise ValueError("the model has no channel (n_channels_ = 0): there are no members.")
    if not np.any(np.asarray(model.channel_weights_)):
        # aligning resamples to an empty pattern has no meaning: the sparsity
        # removed the channel, which is the model without it
        raise ValueError(
            "every channel of the model is empty (the sparsity set all its neurons to zero): "
            "this is the model without channels, so there are no members. Refit with a "
            "smaller sparsity to look at candidates, and read them as exploratory."
        )


def _stability_dataset(model, boot, threshold, n_boot):
    """Selection frequencies, members and Meinshausen-Buhlmann bounds from the aligned draws."""
    import xarray as xr

    ds = xr.Dataset(attrs={"threshold": float(threshold), "n_boot": n_boot})
    ds.attrs["resampling"] = boot.attrs.get("resampling", "block")
    K = int(model.n_channels_)
    channel = np.arange(K)
    for role in _ROLES:
        fitted = getattr(model, f"{role}_patterns_")
        draws = np.asarray(boot[f"{role}_patterns_draws"])  # (boot, n, K)
        n = draws.shape[1]
        labels = pattern_labels(fitted, n)
        selected = draws != 0
        freq = selected.mean(axis=0)
        members = freq >= threshold
        q_hat = selected.sum(axis=1).mean(axis=0)  # (K,)
        coords = {role: labels, "channel": channel}
        ds[f"{role}_frequency"] = xr.DataArray(freq, dims=(role, "channel"), coords=coords)
        ds[f"{role}_members"] = xr.DataArray(members, dims=(role, "channel"), coords=coords)
        ds[f"{role}_pattern"] = xr.DataArray(
            np.asarray(fitted), dims=(role, "channel"), coords=coords
        )
        ds[f"{role}_mean_selected"] = ("channel", q_hat)
        ds[f"{role}_n_members"] = ("channel", members.sum(axis=0))
        ds[f"{role}_expected_false"] = ("channel", q_hat**2 / ((2 * threshold - 1) * n))
    return ds


def member_table(result):
    """The members of each channel as a table.

    Parameters
    ----------
    result : xarray.Dataset or MemberNeurons
        Of :func:`stability_selection`, or of :func:`mics.member_neurons`.

    Returns
    -------
    pandas.DataFrame
        One row per (channel, role, member neuron), sorted by channel, role
        and decreasing evidence, with columns ``channel``, ``role``,
        ``neuron``, ``weight`` (the full-data pattern) and, for a stability
        selection, ``frequency`` and ``expected_false`` (the bound of that
        channel and role); for :func:`mics.member_neurons`, ``p_value``,
        ``q_value`` (the adjusted p-value), ``statistic`` and ``estimate``
        (the tested coefficient).
    """
    import pandas as pd

    fdr = "source_q_value" in result
    extra = ("p_value", "q_value", "statistic", "estimate") if fdr else ("frequency",)
    rows = []
    for role in _ROLES:
        members = np.asarray(result[f"{role}_members"])
        labels = np.asarray(result[f"{role}_members"].coords[role].values)
        values = {key: np.asarray(result[f"{role}_{key}"], dtype=float) for key in extra}
        weights = np.asarray(result[f"{role}_pattern"], dtype=float)
        for k in range(members.shape[1]):
            idx = np.flatnonzero(members[:, k])
            # most evident first: highest frequency, or smallest p-value
            key = values["p_value"][idx, k] if fdr else -values["frequency"][idx, k]
            idx = idx[np.argsort(key, kind="stable")]
            for i in idx:
                row = {"channel": k, "role": role, "neuron": labels[i]}
                row.update({name: float(v[i, k]) for name, v in values.items()})
                row["weight"] = float(weights[i, k])
                if not fdr:
                    row["expected_false"] = float(result[f"{role}_expected_false"][k])
                rows.append(row)
    columns = ["channel", "role", "neuron", *extra, "weight"]
    columns += [] if fdr else ["expected_false"]
    return pd.DataFrame(rows, columns=columns)


def choose_sparsity(estimator, X, Y, Z, *, grid=None, groups=None, n_jobs=None, verbose=0):
    """Cross-validate ``sparsity`` on the estimator's folds, one-SEM rule towards sparser fits.

    A thin wrapper of ``MICs(sparsity=grid)`` for an estimator with fixed
    sizes: one implementation (:mod:`mics.model.sparsity_path`) serves
    both. Every candidate is fitted on every training fold (the folds of
    the estimator's ``cv`` and ``gap``: contiguous blocks, whole trials with
    ``groups``) along a warm-started path from the smallest weight to the
    largest, with the estimator's fixed ``rank`` and ``n_channels``, and
    scored on the held-out block by the NSE of the selection. The chosen
    value is the *largest* sparsity whose mean held-out loss is at most the
    lowest mean plus its standard error over folds (the one-SEM rule of the
    rank and channel counts, sparser models counted simpler; see
    :mod:`mics.model.sparsity_path` for why not the minimum).

    Parameters
    ----------
    estimator : MICs
        Unfitted or fitted; ``rank`` and ``n_channels`` must be set (fit a
        dense model with selection first and pass ``rank_`` and
        ``n_channels_``, or fit ``MICs(sparsity="cv")``, which selects them
        and the sparsity on the same folds).
    X : array-like of shape (n_samples, n_source)
    Y : array-like of shape (n_samples, n_target)
    Z : array-like of shape (n_samples, n_modulators)
        NumPy, DataArrays or chunked (Dask) arrays, as :meth:`mics.MICs.fit`.
    grid : sequence of float, optional
        Candidates; default :data:`mics.model.sparsity_path.SPARSITY_GRID`
        (0 to 32).
    groups : array-like of shape (n_samples,), optional
        Trial ids (folds of whole trials).
    n_jobs, verbose
        Parallel folds and progress, as in the selection.

    Returns
    -------
    dict
        ``sparsity`` (candidates, largest first), ``fold_loss`` (n_candidates,
        n_folds), ``mean_loss``, ``sem_loss`` (over folds), ``best_index``
        (one-SEM), ``sparsity_`` (the chosen value), ``n_source``,
        ``n_target``, ``n_modulator`` (neurons with a non-zero weight in the
        fold fits, mean over folds) and ``model``: the estimator fitted at the
        chosen value on all samples (its ``cv_results_`` holds the path in
        increasing order).

    Notes
    -----
    Held-out prediction alone (the minimum of the path) keeps weakly weighted
    extra neurons (Meinshausen & Buhlmann 2006); the one-SEM rule removes
    them where the members carry the channel clearly, but read how sure
    each membership is from :func:`stability_selection`.
    """
    from sklearn.base import clone

    from mics.data.validation import check_sparsity

    if estimator.rank is None or estimator.n_channels is None:
        raise ValueError(
            "choose_sparsity needs fixed rank and n_channels (e.g. those a dense "
            "selection chose: MICs(rank=m.rank_, n_channels=m.n_channels_)), or fit "
            "MICs(sparsity='cv'), which selects them too."
        )
    grid = SPARSITY_GRID if grid is None else grid
    grid = np.asarray(sorted((float(g) for g in grid), reverse=True))
    if grid.size == 0 or np.any(~np.isfinite(grid)) or np.any(grid < 0):
        raise ValueError(f"grid must hold non-negative finite numbers, got {grid!r}.")
    check_sparsity(tuple(grid), estimator.sparse_on, choose=True)
    model = clone(estimator).set_params(sparsity=tuple(grid), n_jobs=n_jobs, verbose=verbose)
    model.fit(X, Y, Z, groups=groups)
    res = model.cv_results_
    # cv_results_ runs from the densest fit; this function's table from the sparsest
    order = np.searchsorted(res["sparsity"], grid)
    return {
        "sparsity": grid,
        "fold_loss": res["sparsity_fold_loss"][order],
        "mean_loss": res["sparsity_mean_loss"][order],
        "sem_loss": res["sparsity_sem_loss"][order],
        "best_index": int(np.flatnonzero(grid == model.sparsity_)[0]),
        "sparsity_": float(model.sparsity_),
        **{f"n_{role}": res[f"sparsity_n_{role}"][order] for role in _ROLES},
        "model": model,
    }
