"""Every nonsensical count and bad input is refused with a message naming it."""

import re

import numpy as np
import pytest
import xarray as xr

from mics import (
    MICs,
    ReducedRankRegression,
    ReducedRankRegressionCV,
    bootstrap_channels,
    simulate,
    test_modulation,
)
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


# ------------------------------------------------------------ the bad-input matrix
# Every bad array, on every entry point, is refused with a message naming the
# argument as that entry point spells it: the estimators take (X, y, Z), the
# workflows (X, Y, Z). Matches ignore case: "target Y" and "target y" are the
# same argument.
def _nan(a):
    a = a.astype(float)
    a.flat[3] = np.nan
    return a


def _inf(a):
    a = a.astype(float)
    a.flat[3] = -np.inf
    return a


def _objects(a):
    a = a.astype(object)
    a.flat[0] = "x"
    return a


BAD = {
    # case: (make the bad array, message after the argument's name)
    "nan": (_nan, "contains NaN or infinite values"),
    "inf": (_inf, "contains NaN or infinite values"),
    "1-D": (lambda a: a[:, 0], r"must be 2-D, .* got a 1-D array .* Reshape your data"),
    "3-D": (lambda a: a.reshape(a.shape[0], -1, 1), r"must be (1-D or )?2-D.* 3 dimensions"),
    "strings": (lambda a: a.astype(str), r"holds strings \(dtype <U"),
    "objects": (_objects, r"must hold numbers \(activity\)"),
    "complex": (lambda a: a + 1j, "holds complex numbers"),
    "short": (lambda a: a[:-3], "has 117"),
    "empty": (lambda a: a[:0], r"has 0 sample\(s\)"),
    "scalar": (lambda a: 3.0, "must be an array of shape"),
    "None": (lambda a: None, "is None"),
    "constant": (lambda a: np.full_like(a, 0.1), r"(column\(s\) \[0, 1\] are|is) constant"),
}
# entry point: the arguments it takes (the workflows spell the target "Y")
ENTRY_POINTS = {
    "MICs.fit": "XYZ", "MICs(1, 1).fit": "XYZ", "MICs.predict": "XZ", "MICs.score": "XYZ",
    "RRR.fit": "XY", "RRRCV.fit": "XY", "RRR.predict": "X", "RRR.score": "XY",
    "test_modulation": "XYZ", "bootstrap_channels": "XYZ",
}  # fmt: skip
FITS = {"MICs.fit", "MICs(1, 1).fit", "RRR.fit", "RRRCV.fit", "test_modulation",
        "bootstrap_channels"}  # fmt: skip
NAMES = {"X": "source X", "Y": "target y", "Z": "modulator Z"}


def _refused(entry, arg, case):
    """Whether the case is an error at this entry point (else it is a valid input)."""
    if case == "constant":
        # Predicting from constant activity is fine; fitting a constant target
        # by reduced-rank regression is too (it predicts the constant).
        return entry in FITS and not (arg == "Y" and entry.startswith("RRR"))
    if case == "1-D":
        return arg == "X"  # a 1-D target or modulator is one neuron
    if case == "short":
        return len(ENTRY_POINTS[entry]) > 1  # predicting fewer samples is fine
    return not (case == "None" and arg == "Z")  # no modulator: a reduced-rank regression


MATRIX = [
    (entry, arg, case)
    for entry, takes in ENTRY_POINTS.items()
    for arg in takes
    for case in BAD
    if _refused(entry, arg, case)
]


@pytest.fixture(scope="module")
def entry_points(data, fitted):
    X, Y, _ = data
    rrr = ReducedRankRegression(1).fit(X, Y)

    def tested(X, Y, Z):
        return test_modulation(MICs(1, 1, verbose=0), X, Y, Z, n_permutations=2, verbose=0)

    def booted(X, Y, Z):
        return bootstrap_channels(fitted, X, Y, Z, n_boot=2, verbose=0)

    return {
        "MICs.fit": lambda X, Y, Z: MICs(max_rank=1, max_channels=1, cv=3, verbose=0).fit(X, Y, Z),
        "MICs(1, 1).fit": lambda X, Y, Z: MICs(1, 1, verbose=0).fit(X, Y, Z),
        "MICs.predict": lambda X, Y, Z: fitted.predict(X, Z),
        "MICs.score": lambda X, Y, Z: fitted.score(X, Y, Z),
        "RRR.fit": lambda X, Y, Z: ReducedRankRegression(1).fit(X, Y),
        "RRRCV.fit": lambda X, Y, Z: ReducedRankRegressionCV(cv=3).fit(X, Y),
        "RRR.predict": lambda X, Y, Z: rrr.predict(X),
        "RRR.score": lambda X, Y, Z: rrr.score(X, Y),
        "test_modulation": tested,
        "bootstrap_channels": booted,
    }


def test_the_matrix_covers_every_entry_point_and_case():
    assert {e for e, _, _ in MATRIX} == set(ENTRY_POINTS)
    assert {c for _, _, c in MATRIX} == set(BAD)
    assert len(MATRIX) >= 250


@pytest.mark.parametrize("entry, arg, case", MATRIX)
def test_bad_inputs_name_the_argument(data, entry_points, entry, arg, case):
    make, message = BAD[case]
    args = dict(zip("XYZ", data, strict=True))
    args[arg] = make(args[arg])
    # Case is ignored: the workflows spell the target "Y", the estimators "y".
    with pytest.raises(ValueError, match=f"(?i){re.escape(NAMES[arg])} {message}"):
        entry_points[entry](args["X"], args["Y"], args["Z"])


def test_bad_input_messages_are_the_packages_own(data, entry_points):
    # The scikit-learn wording the issue met is gone: no advice to use
    # HistGradientBoostingClassifier, no "Expected 2D array" without a name.
    X, Y, Z = data
    for entry in ("MICs(1, 1).fit", "RRR.fit", "RRRCV.fit", "RRR.predict", "MICs.predict"):
        call = entry_points[entry]
        for bad in (_nan(X), X[:, 0], X.reshape(120, 5, 1)):
            with pytest.raises(ValueError) as err:
                call(bad, Y, Z)
            text = str(err.value)
            assert text.startswith("source X "), (entry, text)
            assert "HistGradientBoosting" not in text and "Expected 2D" not in text


@pytest.mark.parametrize("entry", ["MICs(1, 1).fit", "RRR.fit", "RRRCV.fit"])
def test_sklearn_fails_on_objects_that_are_not_numbers(data, entry_points, entry):
    # scikit-learn's check_dtype_object wants numpy's TypeError kept.
    X, Y, Z = data
    bad = X.astype(object)
    bad[0, 0] = {"foo": "bar"}
    with pytest.raises(TypeError, match=r"^source X: .*argument must be .* number"):
        entry_points[entry](bad, Y, Z)


def test_one_dimensional_target_and_modulator_are_one_column(data):
    X, Y, Z = data
    model = MICs(1, 1, verbose=0, random_state=0).fit(X, Y[:, 0], Z[:, 0])
    assert model.predict(X, Z[:, 0]).shape == (120,)
    assert ReducedRankRegression(1).fit(X, Y[:, 0]).predict(X).shape == (120,)


def test_constant_target_reduced_rank_predicts_the_constant(data):
    X, Y, _ = data
    model = ReducedRankRegression(1).fit(X, np.full_like(Y, 0.1))
    np.testing.assert_allclose(model.predict(X), 0.1, atol=1e-12)
