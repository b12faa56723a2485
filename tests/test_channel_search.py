"""The sequential channel search scores a prefix of the grid, with the grid's own fits."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import mics
from mics.core.heldout import one_sem_rule
from mics.workflows.inference import best_gain
from tests._generate import make_mic_data


def _fit(search, X, Y, Z, **kw):
    params = dict(rank=3, cv=5, max_channels=4, n_init=0, random_state=0, verbose=0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # capped fold fits
        return mics.MICs(channel_search=search, **{**params, **kw}).fit(X, Y, Z)


@pytest.mark.parametrize("solver", ["moments", "data"])
def test_sequential_scores_the_grids_prefix_with_identical_fits(solver):
    # Two planted channels: the search must go past K = 2 before it stops,
    # so its later steps start from fits (and caches) carried between steps.
    X, Y, Z, _ = make_mic_data(T=900, p=12, q=10, m=3, K=2, seed=4)
    grid = _fit("grid", X, Y, Z, solver=solver).cv_results_
    seq_model = _fit("sequential", X, Y, Z, solver=solver)
    seq = seq_model.cv_results_
    n = seq["n_channels"].size
    assert n >= 4  # K = 0, 1, 2 improve; K = 3 is the first that does not
    np.testing.assert_array_equal(seq["n_channels"], grid["n_channels"][:n])
    # the same fold fits, so the same held-out losses to rounding
    np.testing.assert_allclose(
        seq["n_channels_fold_loss"], grid["n_channels_fold_loss"][:n], rtol=1e-12, atol=0
    )
    mean = seq["n_channels_mean_loss"]
    # the stopping rule: every K before the last improved on all smaller K,
    # the last one did not (or the grid ran out)
    for k in range(1, n - 1):
        assert mean[k] < mean[:k].min()
    assert n == grid["n_channels"].size or mean[-1] >= mean[:-1].min()
    # the one-SEM choice among the counts scored, and here the grid's choice
    assert seq["n_channels_best_index"] == one_sem_rule(mean, seq["n_channels_sem_loss"])
    assert seq_model.n_channels_ == grid["n_channels"][grid["n_channels_best_index"]] == 2


def test_sequential_stops_after_one_channel_on_null_data():
    X, Y, Z, _ = make_mic_data(T=900, p=12, q=10, m=3, K=0, seed=5)
    grid_model = _fit("grid", X, Y, Z)
    seq_model = _fit("sequential", X, Y, Z)
    seq, grid = seq_model.cv_results_, grid_model.cv_results_
    np.testing.assert_array_equal(seq["n_channels"], [0, 1])
    assert seq["n_channels_mean_loss"][1] >= seq["n_channels_mean_loss"][0]
    assert seq_model.n_channels_ == grid_model.n_channels_ == 0
    # the test statistic is K = 1's (negative) gain; the grid's best gain can
    # only be larger (more candidates), never smaller
    assert best_gain(seq_model.cv_results_) == pytest.approx(
        grid["n_channels_mean_loss"][0] - grid["n_channels_mean_loss"][1], rel=1e-12
    )
    assert best_gain(grid_model.cv_results_) >= best_gain(seq_model.cv_results_)


def test_sequential_search_is_the_same_with_two_jobs():
    X, Y, Z, _ = make_mic_data(T=900, p=12, q=10, m=3, K=2, seed=4)
    one = _fit("sequential", X, Y, Z, n_jobs=1).cv_results_
    two = _fit("sequential", X, Y, Z, n_jobs=2).cv_results_
    np.testing.assert_array_equal(one["n_channels_fold_loss"], two["n_channels_fold_loss"])


def test_channel_search_is_checked():
    X, Y, Z, _ = make_mic_data(T=200, p=5, q=4, m=2, K=1, seed=0)
    with pytest.raises(ValueError, match="channel_search"):
        mics.MICs(channel_search="greedy").fit(X, Y, Z)


@pytest.mark.parametrize("solver", ["moments", "data"])
def test_fold_operators_carried_between_stages_change_nothing(monkeypatch, solver):
    # With room in memory_limit each fold's moment operator (its centred
    # training moments) is built once for the rank stage and every channel
    # step; without room, and always on the data path (whose operator is a
    # copy of the fold's rows), it is rebuilt per step. The selection must
    # not tell the two apart.
    from mics.core import als as modulation

    built = []
    cls = modulation.MomentOperator if solver == "moments" else modulation.DataOperator
    init = cls.__init__

    def counting(self, *args, **kwargs):
        built.append(1)
        init(self, *args, **kwargs)

    monkeypatch.setattr(cls, "__init__", counting)
    X, Y, Z, _ = make_mic_data(T=900, p=12, q=10, m=3, K=2, seed=4)
    kw = dict(rank=None, max_rank=4, solver=solver)
    kept = _fit("sequential", X, Y, Z, memory_limit=1e12, **kw)
    n_kept, built[:] = len(built), []
    rebuilt = _fit("sequential", X, Y, Z, memory_limit=1.0, **kw)
    steps = kept.cv_results_["n_channels"].size - 1  # [0, 1], then one K a step
    assert steps >= 2  # so that something is carried past the first step
    per_step = 5 * (1 + steps) + 1  # 5 folds: the rank stage, every step; + the final fit
    assert len(built) == per_step
    assert n_kept == (5 + 1 if solver == "moments" else per_step)
    for key in ("rank_fold_loss", "n_channels_fold_loss"):
        np.testing.assert_array_equal(kept.cv_results_[key], rebuilt.cv_results_[key])
    np.testing.assert_allclose(kept.loss_history_, rebuilt.loss_history_, rtol=1e-12)
