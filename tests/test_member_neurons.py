"""Member lists at a false-discovery rate (mics.member_neurons)."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import xarray as xr
from scipy import stats

import mics
from mics.workflows import MemberNeurons, member_table
from mics.workflows.members import guarantee

# a planted channel on 6 of 40 source and 5 of 30 target neurons, in a
# population with strong shared variability and autocorrelated samples
PLANTED = dict(
    n_samples=1200, n_source=40, n_target=30, n_modulators=1, rank=2, n_channels=1,
    geometry="random", source_members=6, target_members=5, modulation_snr=0.5,
    source_autocorr=0.7, modulator_autocorr=0.7, noise_autocorr=0.7,
    shared_variability=dict(n_factors=4, strength=0.8),
)  # fmt: skip
FAST = dict(n_init=1, max_iter=60, tol=1e-5, verbose=0, random_state=0)


def _fit(X, Y, Z, **kw):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return mics.MICs(rank=2, n_channels=1, **FAST, **kw).fit(X, Y, Z)


@pytest.fixture(scope="module")
def planted():
    X, Y, Z, truth = mics.simulate(**PLANTED, random_state=3)
    model = _fit(X, Y, Z)
    res = mics.member_neurons(model, X, Y, Z, n_folds=3, verbose=0, random_state=0)
    return X, Y, Z, truth, model, res


def test_planted_members_are_found_exactly(planted):
    *_, truth, _, res = planted
    assert isinstance(res, MemberNeurons)
    for role in ("source", "target"):
        np.testing.assert_array_equal(
            np.asarray(res[f"{role}_members"])[:, 0], getattr(truth, f"{role}_members_")[:, 0]
        )
    assert bool(res["channel_named"][0]) and float(res["channel_p_value"][0]) < 1e-6
    # one modulator: it is the member of the channel that passed its test
    assert bool(res["modulator_members"][0, 0])
    # the prewhitening used the data's autocorrelation (AR(1) 0.7 noise)
    assert 0.55 < float(res["channel_autocorrelation"][0]) < 0.85
    assert res.members("source").tolist() == np.flatnonzero(truth.source_members_[:, 0]).tolist()


def test_lists_state_their_guarantee(planted):
    *_, res = planted
    text = repr(res)
    assert "Benjamini-Yekutieli" in text and "any dependence" in text
    assert "trials (or blocks) independent" in text
    assert res.attrs["guarantee_source"] == guarantee("source", "by", 1, "full")
    assert "nothing to select" in res.attrs["guarantee_modulator"]  # m = 1
    bh = res.at(0.1, "bh")
    assert "Benjamini-Hochberg" in bh.attrs["guarantee_target"]
    assert "positively dependent" in bh.attrs["guarantee_target"]
    assert bh.attrs["method"] == "bh"


def test_rate_and_method_redraw_the_lists_from_the_same_tests(planted):
    X, Y, Z, _, model, res = planted
    direct = mics.member_neurons(model, X, Y, Z, fdr=0.3, method="bh", n_folds=3, verbose=0,
                                 random_state=0)  # fmt: skip
    redrawn = res.at(0.3, "bh")
    for role in ("source", "target", "modulator"):
        for key in ("members", "q_value", "p_value"):
            np.testing.assert_array_equal(
                np.asarray(direct[f"{role}_{key}"]), np.asarray(redrawn[f"{role}_{key}"])
            )
    # the q-values are BH / BY adjustments of the p-values, within each role
    p = np.asarray(res["source_p_value"])[:, 0]
    np.testing.assert_allclose(
        np.asarray(res["source_q_value"])[:, 0], stats.false_discovery_control(p, method="by")
    )
    # a larger rate never names fewer neurons
    assert np.all(np.asarray(redrawn["source_members"]) >= np.asarray(res["source_members"]))


def test_tests_are_equivariant_to_neuron_order_and_units(planted):
    X, Y, Z, _, model, res = planted
    rng = np.random.default_rng(0)
    ps, pt = rng.permutation(X.shape[1]), rng.permutation(Y.shape[1])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        other = mics.MICs(rank=2, n_channels=1, **FAST).fit(3.0 * X[:, ps], Y[:, pt], Z)
    moved = mics.member_neurons(other, 3.0 * X[:, ps], Y[:, pt], Z, n_folds=3, verbose=0,
                                random_state=0)  # fmt: skip
    np.testing.assert_allclose(np.asarray(moved["source_p_value"])[:, 0],
                               np.asarray(res["source_p_value"])[ps, 0], rtol=1e-4)  # fmt: skip
    np.testing.assert_allclose(np.asarray(moved["target_p_value"])[:, 0],
                               np.asarray(res["target_p_value"])[pt, 0], rtol=1e-4)  # fmt: skip


def test_a_modulator_that_cannot_gate_names_no_members(planted):
    X, Y, Z, *_ = planted
    # the modulator's blocks in another order: every neuron keeps its statistics
    blocks = np.arange(len(Z)).reshape(-1, 40)
    Zp = Z[np.random.default_rng(1).permutation(blocks).ravel()]
    model = _fit(X, Y, Zp)
    res = mics.member_neurons(model, X, Y, Zp, n_folds=3, verbose=0, random_state=0)
    assert not bool(res["channel_named"][0])
    for role in ("source", "target", "modulator"):
        assert int(res[f"{role}_n_members"][0]) == 0


def test_labelled_inputs_and_the_member_table(planted):
    X, Y, Z, truth, _, _ = planted
    src = [f"s{i}" for i in range(X.shape[1])]
    Xl = xr.DataArray(X, dims=("time", "neuron"), coords={"neuron": src})
    Yl = xr.DataArray(
        Y, dims=("time", "neuron"), coords={"neuron": [f"t{j}" for j in range(Y.shape[1])]}
    )
    Zl = xr.DataArray(Z, dims=("time", "modulator"), coords={"modulator": ["speed"]})
    model = _fit(Xl, Yl, Zl)
    res = mics.member_neurons(model, Xl, Yl, Zl, n_folds=3, verbose=0, random_state=0)
    table = member_table(res)
    named = table[table.role == "source"].neuron.tolist()
    assert sorted(named) == sorted(np.asarray(src)[truth.source_members_[:, 0]].tolist())
    assert list(table.columns) == ["channel", "role", "neuron", "p_value", "q_value",
                                   "statistic", "estimate", "weight"]  # fmt: skip
    assert table.p_value.is_monotonic_increasing or table.role.nunique() > 1
    assert table[table.role == "modulator"].neuron.tolist() == ["speed"]


def test_a_model_without_channels_names_nobody_and_an_unfitted_one_is_fitted(planted):
    X, Y, Z, *_ = planted
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        none = mics.MICs(rank=2, n_channels=0, **FAST).fit(X, Y, Z)
    res = mics.member_neurons(none, X, Y, Z, verbose=0)
    assert res["source_members"].shape == (X.shape[1], 0)
    assert "no channel" in res.attrs["note"] and "no channel" in repr(res)
    fitted_here = mics.member_neurons(mics.MICs(rank=2, n_channels=1, **FAST), X, Y, Z,
                                      n_folds=3, verbose=0, random_state=0)  # fmt: skip
    assert int(fitted_here["source_n_members"][0]) == 6


def test_member_neurons_rejects_bad_input(planted):
    X, Y, Z, _, model, _ = planted
    with pytest.raises(ValueError, match="columns"):
        mics.member_neurons(model, X[:, :-1], Y, Z, verbose=0)
    with pytest.raises(ValueError, match="method"):
        mics.member_neurons(model, X, Y, Z, method="holm", verbose=0)
    with pytest.raises(ValueError, match="fdr"):
        mics.member_neurons(model, X, Y, Z, fdr=0, verbose=0)
    with pytest.raises(ValueError, match="blocks for 5 cross-fitting folds"):
        mics.member_neurons(model, X, Y, Z, block_length=200, verbose=0)
    with pytest.raises(ValueError, match="modulator Z"):
        mics.member_neurons(model, X, Y, None, verbose=0)
    with pytest.raises(ValueError, match="controls"):
        mics.member_neurons(model, X, Y, Z, controls="some", verbose=0)
    import dask.array as da

    with pytest.raises(ValueError, match="in memory"):
        mics.member_neurons(model, da.from_array(X, chunks=300), Y, Z, verbose=0)
    with pytest.raises(ValueError, match="too few samples"):
        mics.member_neurons(model, X[:60], Y[:60], Z[:60], n_folds=2, block_length=6,
                            verbose=0)  # fmt: skip


def test_member_figures_draw_the_lists(planted):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    *_, truth, model, res = planted
    fig = mics.plotting.plot_members(model, res)
    title = fig.axes[0].get_title()
    assert "6 members" in title
    axes = mics.plotting.plot_members_fov(
        model, positions={"source": truth.source_positions_, "target": truth.target_positions_},
        stability=res, same_field=False,
    )  # fmt: skip
    drawn = [c for c in axes[0].collections if c.get_gid() == "source:members:0"]
    assert len(drawn) == 1 and drawn[0].get_offsets().shape[0] == 6
    plt.close("all")


# ----------------------------------------------------------------- slow checks
def _fdp(named, truth):
    return np.sum(named & ~truth) / max(named.sum(), 1)


@pytest.mark.slow
def test_false_discoveries_and_recall_with_strong_shared_variability():
    """30 data sets, shared variance 0.9: the default lists' false discoveries and recall."""
    counts = {role: np.zeros(3, int) for role in ("source", "target")}  # named, false, true
    fdps = {role: [] for role in counts}
    for seed in range(30):
        X, Y, Z, truth = mics.simulate(
            **{**PLANTED, "shared_variability": dict(n_factors=4, strength=0.9),
               "modulation_snr": 0.25, "n_samples": 1500}, random_state=100 + seed,
        )  # fmt: skip
        model = _fit(X, Y, Z)
        res = mics.member_neurons(model, X, Y, Z, verbose=0, random_state=seed)
        for role in counts:
            named = np.asarray(res[f"{role}_members"])[:, 0]
            true = getattr(truth, f"{role}_members_")[:, 0]
            counts[role] += [named.sum(), np.sum(named & ~true), true.sum()]
            fdps[role].append(_fdp(named, true))
    for role, (named, false, true) in counts.items():
        assert np.mean(fdps[role]) <= 0.1, (role, np.mean(fdps[role]))
        # false members among all named: no more than a 10% rate allows (one-sided 99%)
        assert false <= stats.binom.ppf(0.99, named, 0.1), (role, false, named)
        # recall >= 0.8: the members found are not significantly fewer (one-sided 99%)
        assert named - false >= stats.binom.ppf(0.01, true, 0.8), (role, named - false, true)


@pytest.mark.slow
def test_null_data_give_empty_lists():
    """40 data sets without a channel, one channel forced: lists empty in >= 90%."""
    nonempty = 0
    n = 40
    for seed in range(n):
        X, Y, Z, _ = mics.simulate(
            **{**PLANTED, "n_channels": 0, "source_members": None, "target_members": None},
            random_state=200 + seed,
        )
        model = _fit(X, Y, Z)
        res = mics.member_neurons(model, X, Y, Z, verbose=0, random_state=seed)
        nonempty += any(int(res[f"{r}_n_members"][0]) > 0 for r in ("source", "target"))
    # at most 10% in expectation: more than 9 of 40 has probability < 0.05
    assert nonempty <= stats.binom.ppf(0.95, n, 0.1), nonempty


def test_channel_test_merges_the_folds_by_twice_their_median(planted):
    *_, res = planted
    folds = np.asarray(res["channel_fold_p_value"])[0]
    assert folds.shape == (3,) and np.all(folds < 1e-3)  # a strong channel in every fold
    assert float(res["channel_p_value"][0]) == pytest.approx(min(1.0, 2 * np.median(folds)))
    from mics.workflows.members import _merged_p_value

    # the smallest value reached by at least half the p-values, doubled
    assert _merged_p_value([0.01, 0.02, 0.5, 0.9]) == pytest.approx(0.04)
    assert _merged_p_value([0.3, 0.02, 0.01]) == pytest.approx(0.04)
    assert _merged_p_value([0.8, 0.9]) == 1.0
