"""Source- against target-side reconfiguration: the asymmetry statistic and its test.

The finding ``mics`` was built to test is that behavioural state *changes
which source patterns communicate while the target patterns stay stable*.
In the closed-form decomposition (:mod:`mics.model.decomposition`) that is
a large ``private_source`` fraction of the modulation tensor's energy
against a small ``private_target`` one. :func:`asymmetry` puts a bootstrap
interval on their difference and tests it, with the reshape and new
fractions alongside.
"""

from __future__ import annotations

import numpy as np

from mics.model.decomposition import PARTS, asymmetry_from_draws, decompose
from mics.workflows.inference import bootstrap_channels

__all__ = ["asymmetry"]


def asymmetry(
    model,
    X=None,
    Y=None,
    Z=None,
    *,
    groups=None,
    n_boot=200,
    block_length=None,
    confidence=0.95,
    interval="bc",
    bootstrap=None,
    n_jobs=None,
    verbose=0,
    random_state=None,
):
    """Bootstrap interval and test of private-source minus private-target modulation.

    The statistic is ``d = total_private_source - total_private_target`` of
    the fitted model's decomposition (fractions of the modulation tensor's
    energy ``||W||^2``; euclidean metric, modulators per standard
    deviation). Its sampling distribution comes from
    :func:`mics.bootstrap_channels`: whole trials (when trial ids are known)
    or time blocks resampled with replacement, the model refitted with its
    rank and number of channels fixed. The whole-tensor fractions need no
    matching of channels across refits, so channels that swap order or
    merge do not blur the statistic.

    Parameters
    ----------
    model : fitted MICs
        With at least one channel (``n_channels_ >= 1``) and a baseline of
        rank at least 1 (the sides are defined relative to its subspaces).
    X : array-like of shape (n_samples, n_source)
    Y : array-like of shape (n_samples, n_target)
    Z : array-like of shape (n_samples, n_modulators) or (n_samples,)
        The data the model was fitted on (not needed with ``bootstrap``).
    groups : array-like of shape (n_samples,), optional
        Trial id of every sample: resamples then draw whole trials. Taken
        from a ``trial`` coordinate of a labelled input when not given.
    n_boot : int
        Bootstrap resamples. The p-value's resolution is ``2 / n_boot``.
    block_length : int, optional
        Samples per block when no trial ids are known (default
        ``sqrt(n_samples)``).
    confidence : float in (0, 1)
        Level of the intervals.
    interval : {"bc", "percentile"}
        Bias-corrected (default) or plain percentile bootstrap interval; the
        p-value inverts it (:func:`mics.model.decomposition.asymmetry_from_draws`).
    bootstrap : xarray.Dataset, optional
        A result of :func:`mics.bootstrap_channels` for this model, to reuse
        its draws (``total_*_draws``) instead of refitting.
    n_jobs, verbose, random_state
        As in :func:`mics.bootstrap_channels`.

    Returns
    -------
    result : xarray.Dataset
        ``fraction`` (part,) and ``fraction_interval`` (part, bound) for the
        four parts (``reshape``, ``private_source``, ``private_target``,
        ``new``), ``difference`` = private_source - private_target with
        ``difference_interval`` (bound,) and the two-sided ``p_value``,
        ``bias`` (mean of the bootstrap differences minus the observed
        one), and the draws ``difference_draws`` (boot,) and
        ``fraction_draws`` (boot, part); see
        :func:`mics.model.decomposition.asymmetry_from_draws`.
        ``result.mics.summary()`` reads it in one sentence and
        ``mics.plotting.plot_asymmetry`` draws it.

    Notes
    -----
    The p-value inverts the interval: ``p < 1 - confidence`` exactly when
    the interval excludes 0. The planted side is read from the sign of
    ``difference``. Both private fractions are biased upwards in small
    samples (a fitted pattern's estimation noise falls mostly outside the
    baseline subspaces), more on the side of the larger population; the
    default bias-corrected interval removes the part of that bias the
    bootstrap reproduces (``bias`` reports it). On simulations with equal
    source- and target-side reconfiguration the test rejected at 0.05 in
    2/60 (p = 16, q = 14), 3/40 (p = q = 20) and 6/40 (p = 30, q = 12)
    data sets: liberal when the populations differ in size, so read a p
    near 0.05 as borderline (docs/guide/decomposition.md).

    Examples
    --------
    >>> import mics
    >>> X, Y, Z, truth = mics.simulate(n_samples=600, n_source=20, n_target=20,
    ...                                rank=2, n_channels=1, geometry="private_source",
    ...                                random_state=0)
    >>> model = mics.MICs(rank=2, n_channels=1, random_state=0).fit(X, Y, Z)
    >>> result = mics.asymmetry(model, X, Y, Z, n_boot=50, random_state=0)
    >>> float(result.difference) > 0, float(result.p_value) < 0.05
    (True, True)
    """
    n_channels = int(getattr(model, "n_channels_", 0))
    if n_channels == 0:
        raise ValueError(
            "the model has no channels (n_channels_ = 0): there is no modulation whose "
            "source and target sides could be compared."
        )
    if int(getattr(model, "rank_", 1)) == 0:
        # With no communication subspace every channel is "new" by definition
        # (both private fractions are 0 in every refit): the statistic would
        # be 0 with a degenerate interval, an answer the data never gave.
        raise ValueError(
            "the baseline has rank 0 (no communication subspace), so every channel counts "
            "as a 'new' interaction and source- against target-side reconfiguration is "
            "undefined. Fit with rank >= 1 (or let MICs select the rank) to compare the sides."
        )
    if bootstrap is None:
        if X is None or Y is None or Z is None:
            raise ValueError("pass the data X, Y, Z the model was fitted on (or bootstrap=).")
        bootstrap = bootstrap_channels(
            model,
            X,
            Y,
            Z,
            n_boot=n_boot,
            block_length=block_length,
            groups=groups,
            confidence=confidence,
            n_jobs=n_jobs,
            verbose=verbose,
            random_state=random_state,
        )
    missing = [f"total_{part}_draws" for part in PARTS if f"total_{part}_draws" not in bootstrap]
    if missing:
        raise ValueError(
            f"bootstrap lacks {missing}: pass the Dataset of mics.bootstrap_channels."
        )
    draws = np.column_stack([bootstrap[f"total_{part}_draws"].values for part in PARTS])
    attrs = {
        key: bootstrap.attrs[key]
        for key in ("resampling", "block_length")
        if key in bootstrap.attrs
    }
    attrs["n_channels"] = n_channels
    attrs["metric"] = "euclidean"
    return asymmetry_from_draws(
        decompose(model), draws, confidence=confidence, interval=interval, attrs=attrs
    )
