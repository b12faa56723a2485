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


def test_warm_start_keeps_the_previous_channels_as_the_als_holds_them():
    """The K-channel start of a fold: the K - 1 fitted channels, their patterns
    scaled by the cube root of their weights (balanced factors), then the next
    HOSVD directions at the mean of those scales."""
    from mics.core.als import MICFit, warm_start_patterns

    rng = np.random.default_rng(0)
    q, m = 5, 3
    w = np.array([8.0, 1.0])
    Bm = np.linalg.qr(rng.standard_normal((q, 2)))[0]
    C = np.linalg.qr(rng.standard_normal((m, 2)))[0]
    prev = MICFit(
        coef=np.zeros((4, q)),
        modulator_coef=np.zeros((m, q)),
        weights=w,
        source_patterns=np.zeros((4, 2)),
        target_patterns=Bm,
        modulator_patterns=C,
        loss_history=np.zeros(1),
        n_iter=1,
        converged=True,
        init_losses=np.zeros(1),
        baseline_loss=0.0,
    )
    Ub = np.linalg.qr(rng.standard_normal((q, q)))[0]
    Uc = np.linalg.qr(rng.standard_normal((m, m)))[0]
    Bm0, C0 = warm_start_patterns(prev, Ub, Uc, 3)
    np.testing.assert_allclose(Bm0[:, :2], Bm * [2.0, 1.0])
    np.testing.assert_allclose(C0[:, :2], C * [2.0, 1.0])
    np.testing.assert_allclose(Bm0[:, 2], Ub[:, 2] * 1.5)
    np.testing.assert_allclose(C0[:, 2], Uc[:, 2] * 1.5)


def test_rank_candidates_stop_at_the_smaller_population():
    """max_rank above min(p, q): the ranks scored are 0 .. min(p, q)."""
    X, Y, Z, _ = make_mic_data(T=300, p=3, q=5, m=2, K=0, seed=1)
    model = mics.MICs(max_rank=10, n_channels=0, cv=3, random_state=0, verbose=0).fit(X, Y, Z)
    np.testing.assert_array_equal(model.cv_results_["rank"], [0, 1, 2, 3])


def test_channel_candidates_stop_at_the_identifiable_cp_rank():
    """max_channels above min(p q, p m, q m): the grid scores K = 0 .. that limit."""
    X, Y, Z, _ = make_mic_data(T=300, p=3, q=5, m=1, K=0, seed=1)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # one shared gate; capped fold fits
        model = mics.MICs(
            rank=1,
            max_channels=10,
            channel_search="grid",
            cv=3,
            n_init=0,
            random_state=0,
            verbose=0,
        ).fit(X, Y, Z)
    np.testing.assert_array_equal(model.cv_results_["n_channels"], [0, 1, 2, 3])


def test_two_fold_sem_is_the_sample_sem():
    """With two folds the SEM is std(ddof=1) / sqrt(2), not zero."""
    from mics.model.selection import summarize_cv

    out = summarize_cv([0, 1], [[1.0, 2.0], [3.0, 6.0]], key="rank")
    np.testing.assert_allclose(out["sem_loss"], [0.5, 1.5])
