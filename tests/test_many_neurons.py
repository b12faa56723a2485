"""Thousands of neurons (issue 34): the exact reduction, fold memory, principal components.

The reduced fits are compared with the full fits of the same data (the
reduction switched off), not with shapes: a population with more neurons
than samples is fitted in the coordinates of its samples' span, which must
give the full fit to rounding.
"""

import tracemalloc
import warnings

import numpy as np
import pytest
import xarray as xr

import mics
import mics.core.als as als
import mics.model.fit as fit_module
import mics.model.solver as solver_module
from mics.core.stats import moment_nbytes

TOL = 1e-8


def _data(T, p, q, m, seed=0, gain=1.0):
    """Source with an offset (the uncentred interaction), a rank-2 baseline, one channel."""
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((T, p)) + 1.0
    Z = rng.standard_normal((T, m)) + 0.5
    a, b, c = rng.standard_normal(p), rng.standard_normal(q), rng.standard_normal(m)
    B = rng.standard_normal((p, 2)) @ rng.standard_normal((2, q)) / np.sqrt(p)
    gate = (Z @ c) * (X @ a) / np.sqrt(p)
    Y = X @ B + gain * gate[:, None] * b + rng.standard_normal((T, q)) + 2.0
    return X, Y, Z


def _full_and_reduced(params, X, Y, Z, monkeypatch):
    reduced = mics.MICs(**params).fit(X, Y, Z)
    with monkeypatch.context() as mp:
        mp.setattr(fit_module, "plan_reduction", lambda *args, **kwargs: None)
        full = mics.MICs(**params).fit(X, Y, Z)
    return reduced, full


def _assert_same_fit(reduced, full, X, Z):
    for name in ("coef_", "intercept_", "modulator_coef_", "channel_weights_", "loss_history_"):
        np.testing.assert_allclose(
            np.asarray(getattr(reduced, name)), np.asarray(getattr(full, name)), rtol=0, atol=TOL
        )
    for name in ("source_patterns_", "target_patterns_", "modulator_patterns_"):
        np.testing.assert_allclose(getattr(reduced, name), getattr(full, name), rtol=0, atol=TOL)
    np.testing.assert_allclose(
        reduced.modulation_tensor(), full.modulation_tensor(), rtol=0, atol=TOL
    )
    np.testing.assert_allclose(reduced.predict(X, Z), full.predict(X, Z), rtol=0, atol=TOL)


@pytest.mark.parametrize("solver", ["moments", "data"])
def test_reduced_fit_is_the_full_fit(solver, monkeypatch):
    # p > T and q > T: both reduced; three random restarts (drawn in the
    # full space), the HOSVD start and channel-by-channel solves (K p > 256)
    X, Y, Z = _data(T=40, p=150, q=60, m=3)
    # alpha_channels=0.25: at the default 0.125 the second (unplanted)
    # channel of these 40 samples shrinks to zero, which would leave its
    # patterns arbitrary and the comparison of them void.
    params = dict(
        rank=2, n_channels=2, alpha_channels=0.25, solver=solver, random_state=1, verbose=0
    )
    reduced, full = _full_and_reduced(params, X, Y, Z, monkeypatch)
    assert reduced.reduction_["source_coordinates"] == 40
    assert reduced.reduction_["target_coordinates"] == 40
    assert reduced.reduction_["source_exact"] and reduced.reduction_["target_exact"]
    assert full.reduction_ == {}
    assert reduced.channel_weights_.min() > 0
    _assert_same_fit(reduced, full, X, Z)


@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")
def test_reduced_fit_with_sketched_start(monkeypatch):
    # the HOSVD start of large p m q sketches with random draws in the full space
    monkeypatch.setattr(als, "_EXACT_INIT_MAX", 1000)
    X, Y, Z = _data(T=40, p=90, q=50, m=3, seed=2)
    params = dict(rank=1, n_channels=2, solver="data", random_state=0, verbose=0)
    reduced, full = _full_and_reduced(params, X, Y, Z, monkeypatch)
    assert reduced.reduction_
    _assert_same_fit(reduced, full, X, Z)


def test_reduced_selection_is_the_full_selection(monkeypatch):
    # Fold fits use the basis of all rows: every fold's training rows, centred
    # on their own mean, lie in its span. Same choices, same fold losses.
    X, Y, Z = _data(T=48, p=80, q=60, m=2, seed=4, gain=20.0)
    params = dict(
        cv=3,
        max_rank=3,
        max_channels=2,
        channel_search="grid",
        solver="data",
        # At the default 0.125 these 48 samples leave a flat valley in which
        # round-off moves where the two fits stop by up to 2e-7 (the same
        # selections); 0.25 keeps the comparison at the 1e-8 the claim is about.
        alpha_channels=0.25,
        random_state=0,
        verbose=0,
    )
    reduced, full = _full_and_reduced(params, X, Y, Z, monkeypatch)
    assert reduced.reduction_["source_coordinates"] == 48
    assert reduced.reduction_["target_coordinates"] == 48
    assert (reduced.rank_, reduced.n_channels_) == (full.rank_, full.n_channels_)
    assert full.n_channels_ > 0
    for key in ("rank_fold_loss", "n_channels_fold_loss"):
        np.testing.assert_allclose(
            reduced.cv_results_[key], full.cv_results_[key], rtol=0, atol=TOL
        )
    _assert_same_fit(reduced, full, X, Z)


def test_no_reduction_when_neurons_fit_the_samples():
    X, Y, Z = _data(T=60, p=20, q=10, m=2)
    est = mics.MICs(rank=1, n_channels=1, random_state=0, verbose=0).fit(X, Y, Z)
    assert est.reduction_ == {}


def _selection_peak(X, Y, Z, cv):
    est = mics.MICs(
        solver="moments",
        cv=cv,
        max_rank=2,
        max_channels=1,
        memory_limit=1.0,  # far below cv copies of the interaction moments
        random_state=0,
        verbose=0,
    )
    tracemalloc.start()
    try:
        est.fit(X, Y, Z)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    return peak, est.cv_results_


def test_selection_memory_does_not_grow_with_folds(monkeypatch):
    rng = np.random.default_rng(0)
    T, p, q, m = 360, 60, 8, 3
    X, Z = rng.standard_normal((T, p)), rng.standard_normal((T, m))
    Y = X[:, :q] + rng.standard_normal((T, q))
    one = moment_nbytes(p, m, q)  # one set of raw interaction moments
    _selection_peak(X, Y, Z, 3)  # compiled kernels and caches out of the count
    lazy = {cv: _selection_peak(X, Y, Z, cv) for cv in (3, 9)}
    # the peak holds a few sets of moments, whatever the number of folds
    assert lazy[9][0] < lazy[3][0] + one
    assert lazy[9][0] < 8 * one
    # kept folds (as within the budget) grow by one set per fold: the
    # measurement sees the difference
    with monkeypatch.context() as mp:
        mp.setattr(fit_module, "moment_nbytes", lambda *args: 0)
        kept = {cv: _selection_peak(X, Y, Z, cv) for cv in (3, 9)}
    assert kept[9][0] > kept[3][0] + 5 * one
    # the same folds' moments: the same selection
    for cv in (3, 9):
        for key, value in kept[cv][1].items():
            np.testing.assert_allclose(lazy[cv][1][key], value, rtol=0, atol=1e-12)


def test_principal_components_map_back_to_labelled_neurons():
    X, Y, Z = _data(T=150, p=40, q=10, m=2, seed=4, gain=2.0)
    ids = [f"roi{i}" for i in range(40)]
    Xd = xr.DataArray(X, dims=("time", "neuron"), coords={"neuron": ids})
    k = 6
    est = mics.MICs(rank=2, n_channels=1, source_components=k, random_state=0, verbose=0)
    est.fit(Xd, Y, Z)
    info = est.reduction_
    assert info["source_coordinates"] == k and not info["source_exact"]
    # the variance kept is that of the top k principal components (the
    # scale is one scalar for all neurons, so standardising does not move it)
    Xc = X - X.mean(axis=0)
    evals = np.linalg.eigvalsh(Xc.T @ Xc)[::-1]
    np.testing.assert_allclose(info["source_variance_kept"], evals[:k].sum() / evals.sum())
    # patterns over the neurons, with their ids, inside the top-k PC span
    A = est.source_patterns_
    assert A.dims[0] == "neuron" and list(A["neuron"].values) == ids
    V = np.linalg.svd(Xc, full_matrices=False)[2][:k].T
    A = np.asarray(A)
    np.testing.assert_allclose(A - V @ (V.T @ A), 0, atol=1e-10)
    coef = np.asarray(est.coef_)  # (q, p)
    np.testing.assert_allclose(coef - (coef @ V) @ V.T, 0, atol=1e-10)
    # predictions from the neurons equal those from the fit's own coordinates
    assert est.predict(Xd, Z).shape == Y.shape
    assert est.score(X, Y, Z) > 0


def test_components_at_full_rank_do_nothing():
    X, Y, Z = _data(T=60, p=20, q=10, m=2)
    params = dict(rank=1, n_channels=1, random_state=0, verbose=0)
    a = mics.MICs(**params, source_components=20).fit(X, Y, Z)
    b = mics.MICs(**params).fit(X, Y, Z)
    assert a.reduction_ == {}
    np.testing.assert_array_equal(a.coef_, b.coef_)


@pytest.mark.parametrize("value", [0, -3, 2.5, True])
def test_bad_components_are_refused(value):
    X, Y, Z = _data(T=30, p=8, q=4, m=2)
    with pytest.raises(ValueError, match="source_components"):
        mics.MICs(rank=1, n_channels=1, source_components=value).fit(X, Y, Z)


def test_slow_fit_warns_and_names_what_helps(monkeypatch):
    monkeypatch.setattr(solver_module, "_SLOW_SECONDS", 0.0)
    X, Y, Z = _data(T=30, p=8, q=4, m=2)
    with pytest.warns(UserWarning, match="estimated to take") as record:
        mics.MICs(cv=2, max_rank=1, max_channels=1, verbose=0).fit(X, Y, Z)
    assert "fixed rank and n_channels" in str(record[0].message)
    # one fold after the other on a machine with more cores: say n_jobs
    monkeypatch.setattr(solver_module.os, "cpu_count", lambda: 4)
    with pytest.warns(UserWarning, match="n_jobs=-1"):
        mics.MICs(cv=2, max_rank=1, max_channels=1, verbose=0).fit(X, Y, Z)
    with pytest.warns(UserWarning, match="estimated to take") as record:
        mics.MICs(cv=2, max_rank=1, max_channels=1, n_jobs=2, verbose=0).fit(X, Y, Z)
    assert "n_jobs" not in str(record[0].message)
    # nothing to say about a small fixed fit at the real threshold
    monkeypatch.undo()
    with warnings.catch_warnings():
        warnings.simplefilter("error", UserWarning)
        mics.MICs(rank=1, n_channels=1, verbose=0).fit(X, Y, Z)


def test_joint_line_search_cuts_the_sweeps_where_baseline_and_channels_compete(monkeypatch):
    # With more source neurons than samples the baseline can absorb almost
    # any channel contribution and the joint stage's alternation crawls;
    # its line search (from the sixth joint iteration) must reach at least
    # as low a loss in far fewer sweeps (measured 45 against 85 here), and
    # the loss must still never increase. (The default joint stage there
    # profiles the baseline out, tests/test_profiled.py: the alternation
    # is asked for.)
    monkeypatch.setattr(als, "PROFILED_MIN_RATIO", np.inf)
    X, Y, Z = mics.simulate(
        n_samples=200,
        n_source=300,
        n_target=30,
        n_modulators=3,
        rank=3,
        n_channels=2,
        random_state=0,
    )[:3]

    def fit():
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return mics.MICs(rank=3, n_channels=2, random_state=0, verbose=0).fit(X, Y, Z)

    searched = fit()
    monkeypatch.setattr(als, "_JOINT_EXTRAPOLATE_AFTER", 10**9)
    plain = fit()
    assert searched.n_iter_ <= 0.7 * plain.n_iter_
    assert searched.loss_history_[-1] <= plain.loss_history_[-1] * (1 + 1e-9)
    for h in (searched.loss_history_, plain.loss_history_):
        assert np.all(np.diff(h) <= 1e-12 * h[0])
