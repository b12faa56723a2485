"""Every nonsensical count and bad input is refused with a message naming it."""

import re

import numpy as np
import pytest
import xarray as xr

from mics import MICs, ReducedRankRegressionCV, bootstrap_channels, simulate, test_modulation
from mics.data.validation import check_count, check_fraction
from mics.io import build_inputs
from mics.preprocessing import zscore


@pytest.fixture(scope="module")
def data():
    X, Y, Z, _ = simulate(
        n_samples=120, n_source=5, n_target=4, n_modulators=2, rank=1, n_channels=1, random_state=0
    )
    return X, Y, Z


@pytest.fixture(scope="module")
def fitted(data):
    return MICs(1, 1, verbose=0, random_state=0).fit(*data)


@pytest.mark.parametrize(
    "value, minimum, maximum, ok",
    [(3, 1, None, True), (0, 0, None, True), (0, 1, None, False), (2.0, 1, None, False),
     (True, 0, None, False), (np.int64(4), 1, 4, True), (5, 1, 4, False), ("3", 1, None, False)],
)  # fmt: skip
def test_check_count(value, minimum, maximum, ok):
    if ok:
        assert check_count(value, "n_things", minimum, maximum) == int(value)
        return
    with pytest.raises(ValueError, match=r"^n_things must be .*, got "):
        check_count(value, "n_things", minimum, maximum)


@pytest.mark.parametrize("value", [0, 1, 1.5, -0.1, True, "0.9"])
def test_check_fraction(value):
    with pytest.raises(ValueError, match="confidence must be a number strictly between 0 and 1"):
        check_fraction(value, "confidence")
    assert check_fraction(0.9, "confidence") == 0.9


@pytest.mark.parametrize(
    "params, message",
    [
        ({"n_init": -1}, "n_init must be a non-negative integer, got -1"),
        ({"n_init": 1.5}, "n_init must be a non-negative integer, got 1.5"),
        ({"max_iter": 0}, "max_iter must be a positive integer, got 0"),
        ({"max_rank": -2}, "max_rank must be a non-negative integer, got -2"),
        ({"max_channels": 2.5}, "max_channels must be a non-negative integer, got 2.5"),
        ({"gap": -1}, "gap must be a non-negative integer, got -1"),
        ({"cv": 1}, "cv must be an integer >= 2, got 1"),
        ({"cv": 2.5}, "cv must be an integer >= 2, got 2.5"),
        ({"tol": -1e-3}, "tol must be a non-negative finite number"),
        ({"tol": np.nan}, "tol must be a non-negative finite number"),
        ({"memory_limit": 0}, "memory_limit must be a positive number of bytes"),
    ],
)
def test_mics_counts_are_named(data, params, message):
    with pytest.raises(ValueError, match=re.escape(message)):
        MICs(verbose=0, **params).fit(*data)


@pytest.mark.parametrize(
    "params, message",
    [({"max_rank": -1}, "max_rank must be"), ({"cv": 0}, "cv must be an integer >= 2, got 0")],
)
def test_mics_without_modulator_counts_are_named(data, params, message):
    with pytest.raises(ValueError, match=re.escape(message)):
        MICs(verbose=0, **params).fit(*data[:2])


def test_rrr_cv_folds_are_named(data):
    with pytest.raises(ValueError, match=re.escape("cv must be an integer >= 2, got 1.0")):
        ReducedRankRegressionCV(cv=1.0).fit(*data[:2])


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"n_permutations": 0}, "n_permutations must be a positive integer, got 0"),
        ({"n_permutations": 2.0}, "n_permutations must be a positive integer, got 2.0"),
        ({"min_shift": 0}, "min_shift must be an integer in [1, 60], got 0"),
        ({"min_shift": 61}, "min_shift must be an integer in [1, 60], got 61"),
        ({"min_shift": 5.5}, "min_shift must be an integer in [1, 60], got 5.5"),
    ],
)
def test_permutation_test_counts_are_named(data, kwargs, message):
    with pytest.raises(ValueError, match=re.escape(message)):
        test_modulation(MICs(verbose=0), *data, verbose=0, **kwargs)


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"n_boot": 0}, "n_boot must be a positive integer, got 0"),
        ({"n_boot": -3}, "n_boot must be a positive integer, got -3"),
        ({"block_length": 0}, "block_length must be an integer in [1, 120], got 0"),
        ({"block_length": 121}, "block_length must be an integer in [1, 120], got 121"),
        ({"confidence": 95}, "confidence must be a number strictly between 0 and 1, got 95"),
    ],
)
def test_bootstrap_counts_are_named(data, fitted, kwargs, message):
    with pytest.raises(ValueError, match=re.escape(message)):
        bootstrap_channels(fitted, *data, verbose=0, **kwargs)


@pytest.mark.parametrize("func", ["test", "boot"])
def test_inference_data_are_checked(data, fitted, func):
    X, Y, Z = data

    def call(*args):
        if func == "test":
            return test_modulation(MICs(verbose=0), *args, n_permutations=2, verbose=0)
        return bootstrap_channels(fitted, *args, n_boot=2, verbose=0)

    with pytest.raises(ValueError, match="share the time axis.*modulator Z has 119"):
        call(X, Y, Z[:-1])
    Xn = X.copy()
    Xn[3, 1] = np.nan
    with pytest.raises(ValueError, match="source X contains NaN or infinite values"):
        call(Xn, Y, Z)
    Zi = Z.copy()
    Zi[0, 0] = np.inf
    with pytest.raises(ValueError, match="modulator Z contains NaN or infinite values"):
        call(X, Y, Zi)


# ----------------------------------------------------------------- labelled inputs
def _labelled(data, neurons=None, time=None):
    X, Y, Z = data
    T, p = X.shape
    neurons = np.arange(p) if neurons is None else neurons
    time = np.arange(T) * 0.1 if time is None else time
    Xd = xr.DataArray(X, dims=("time", "neuron"), coords={"time": time, "neuron": neurons})
    Yd = xr.DataArray(Y, dims=("time", "neuron"), coords={"time": time})
    Zd = xr.DataArray(Z, dims=("time", "modulator"), coords={"time": time})
    return Xd, Yd, Zd


def test_duplicate_neuron_ids_are_refused(data):
    Xd, Yd, Zd = _labelled(data, neurons=np.array([0, 1, 2, 2, 4]))
    with pytest.raises(ValueError, match=re.escape("X has duplicate neuron ids [2]")):
        MICs(1, 1, verbose=0).fit(Xd, Yd, Zd)


@pytest.mark.parametrize("bad", ["repeat", "backwards"])
def test_time_must_increase(data, bad):
    time = np.arange(120) * 0.1
    if bad == "repeat":
        time[50] = time[49]
    else:
        time[50:] -= 10.0  # a second session appended with its own clock
    Xd, Yd, Zd = _labelled(data, time=time)
    with pytest.raises(ValueError, match=r"X's 'time' coordinate is not increasing .* index 50"):
        MICs(1, 1, verbose=0).fit(Xd, Yd, Zd)
    # With a trial coordinate, the clock may restart in each trial.
    trial = np.repeat([0, 1], 60)
    Xd, Yd, Zd = (a.assign_coords(trial=("time", trial)) for a in (Xd, Yd, Zd))
    if bad == "backwards":
        time[60:] = np.arange(60) * 0.1
        Xd, Yd, Zd = (a.assign_coords(time=time) for a in (Xd, Yd, Zd))
        MICs(1, 1, verbose=0, random_state=0).fit(Xd, Yd, Zd)


@pytest.fixture
def recording():
    rng = np.random.default_rng(0)
    return xr.Dataset(
        {
            "F": (("time", "neuron"), rng.standard_normal((50, 6))),
            "speed": ("time", rng.standard_normal(50)),
        },
        coords={
            "time": np.arange(50) * 0.1,
            "neuron": np.arange(10, 16),
            "area": ("neuron", ["V1"] * 3 + ["LM"] * 3),
        },
    )


def test_build_inputs_refuses_empty_and_repeated_selections(recording):
    with pytest.raises(ValueError, match="source: the selection is empty"):
        build_inputs(recording, {}, {"area": "LM"})
    with pytest.raises(ValueError, match="target: the list of neuron ids is empty"):
        build_inputs(recording, {"area": "V1"}, [])
    with pytest.raises(ValueError, match=re.escape("source: neuron ids [11] are listed twice")):
        build_inputs(recording, [10, 11, 11], {"area": "LM"})
    X, Y, Z = build_inputs(recording, {"area": "V1"}, {"area": "LM"}, "speed")
    assert X["neuron"].values.tolist() == [10, 11, 12]
    assert Y["neuron"].values.tolist() == [13, 14, 15]


def test_build_inputs_refuses_duplicate_ids_and_unsorted_time(recording):
    dup = recording.assign_coords(neuron=[10, 11, 12, 13, 13, 15])
    with pytest.raises(ValueError, match=re.escape("duplicate neuron ids [13]")):
        build_inputs(dup, {"area": "V1"}, {"area": "LM"})
    t = recording["time"].values.copy()
    t[[10, 11]] = t[[11, 10]]
    with pytest.raises(ValueError, match="'time' coordinate is not increasing"):
        build_inputs(recording.assign_coords(time=t), {"area": "V1"}, {"area": "LM"})
    with pytest.raises(ValueError, match="no samples"):
        build_inputs(recording.isel(time=slice(0, 0)), {"area": "V1"}, {"area": "LM"})


def test_other_counts_are_named(data):
    X, Y, _ = data
    with pytest.raises(ValueError, match="ranks is empty"):
        ReducedRankRegressionCV(ranks=[]).fit(X, Y)
    with pytest.raises(ValueError, match="each of ranks must be a non-negative integer, got -1"):
        ReducedRankRegressionCV(ranks=[0, -1]).fit(X, Y)
    for ddof in (-1, 120, 1.5):
        with pytest.raises(
            ValueError, match=re.escape(f"ddof must be an integer in [0, 119], got {ddof}")
        ):
            zscore(X, ddof=ddof)
    np.testing.assert_allclose(zscore(X, ddof=1).std(axis=0, ddof=1), 1.0)
