"""The labelled-input boundary: unwrap to (T, n) arrays, re-wrap outputs by id."""

from __future__ import annotations

import numpy as np
import pytest
import xarray as xr

from mics.data.labels import LabelInfo, unwrap, wrap_matrix, wrap_patterns, wrap_timeseries

rng = np.random.default_rng(0)


def _population(n_time=40, ids=(7, 3, 11), area="V1", order=("time", "neuron")):
    values = rng.standard_normal((n_time, len(ids)))
    da = xr.DataArray(
        values,
        dims=("time", "neuron"),
        coords={
            "time": np.arange(n_time) / 30.0,
            "neuron": list(ids),
            "area": ("neuron", [area] * len(ids)),
            "trial": ("time", np.arange(n_time) // 10),
        },
        attrs={"fs": 30.0},
    )
    return da.transpose(*order), values


def test_numpy_passes_through_untouched():
    x = rng.standard_normal((10, 3))
    out, info = unwrap(x, "X")
    assert out is x and info is None
    assert wrap_patterns(x, None) is x
    assert wrap_timeseries(x, None, None) is x
    assert wrap_matrix(x, None, None) is x


@pytest.mark.parametrize("order", [("time", "neuron"), ("neuron", "time")])
def test_unwrap_finds_time_by_name(order):
    da, values = _population(order=order)
    array, info = unwrap(da, "X")
    np.testing.assert_array_equal(array, values)  # rows are time whatever the input order
    assert info.feature_dim == "neuron"
    np.testing.assert_array_equal(info.features, [7, 3, 11])
    np.testing.assert_allclose(info.time, np.arange(40) / 30.0)
    np.testing.assert_array_equal(info.feature_coords["area"], ["V1"] * 3)
    np.testing.assert_array_equal(info.time_coords["trial"], np.arange(40) // 10)
    assert info.attrs["fs"] == 30.0


def test_unwrap_one_dimensional_modulator_is_a_column():
    speed = xr.DataArray(np.arange(5.0), dims="time", coords={"time": np.arange(5)}, name="speed")
    array, info = unwrap(speed, "Z")
    assert array.shape == (5, 1)
    np.testing.assert_array_equal(array[:, 0], np.arange(5.0))
    assert list(info.features) == ["speed"]


def test_unwrap_errors_are_readable():
    da, _ = _population()
    with pytest.raises(ValueError, match="no 'time' dimension"):
        unwrap(da.rename(time="frame"), "X")
    with pytest.raises(ValueError, match="3 dimensions"):
        unwrap(da.expand_dims(plane=[0, 1]), "X")
    with pytest.raises(TypeError, match="Dataset"):
        unwrap(da.to_dataset(name="F"), "X")
    # A custom time dimension name is honoured.
    array, info = unwrap(da.rename(time="frame"), "X", time_dim="frame")
    assert array.shape == (40, 3) and info.time_dim == "frame"


def test_wrap_patterns_round_trips_the_ids():
    da, _ = _population(order=("neuron", "time"))
    _, info = unwrap(da, "X")
    patterns = rng.standard_normal((3, 2))
    out = wrap_patterns(patterns, info)
    assert out.dims == ("neuron", "channel")
    # The pattern of neuron 3 is row 1 of the core's matrix.
    np.testing.assert_array_equal(out.sel(neuron=3).values, patterns[1])
    np.testing.assert_array_equal(out.area.values, ["V1"] * 3)
    np.testing.assert_array_equal(out.channel.values, [0, 1])
    assert wrap_patterns(patterns, info, component_dim="rank").dims == ("neuron", "rank")
    with pytest.raises(ValueError, match="4 entries but X had 3"):
        wrap_patterns(rng.standard_normal((4, 2)), info)


def test_wrap_timeseries_takes_time_from_one_input_and_ids_from_another():
    X, _ = _population(ids=(1, 2, 3, 4))
    Y, _ = _population(ids=(20, 21), area="V2")
    _, info_x = unwrap(X, "X")
    _, info_y = unwrap(Y, "Y")
    prediction = rng.standard_normal((40, 2))
    out = wrap_timeseries(prediction, info_x, info_y)
    assert out.dims == ("time", "neuron")
    np.testing.assert_array_equal(out.neuron.values, [20, 21])
    np.testing.assert_allclose(out.time.values, X.time.values)
    np.testing.assert_array_equal(out.sel(neuron=21).values, prediction[:, 1])
    np.testing.assert_array_equal(out.trial.values, X.trial.values)
    # Time labels without feature labels (Y was NumPy in fit) still wrap.
    assert wrap_timeseries(prediction, info_x, None).dims == ("time", "feature")
    with pytest.raises(ValueError, match="samples"):
        wrap_timeseries(prediction[:10], info_x, info_y)


def test_wrap_matrix_separates_colliding_dimension_names():
    X, _ = _population(ids=(1, 2, 3), area="PFC")
    Y, _ = _population(ids=(1, 2), area="V1")  # same ids in another area
    _, info_x = unwrap(X, "X")
    _, info_y = unwrap(Y, "Y")
    B = rng.standard_normal((3, 2))
    out = wrap_matrix(B, info_x, info_y)
    assert out.dims == ("X_neuron", "Y_neuron")
    assert out.sel(X_neuron=3, Y_neuron=1).item() == B[2, 0]
    np.testing.assert_array_equal(out["X_neuron_area"].values, ["PFC"] * 3)
    np.testing.assert_array_equal(out["Y_neuron_area"].values, ["V1"] * 2)
    with pytest.raises(ValueError, match="rows"):
        wrap_matrix(B.T, info_x, info_y)


def test_wrap_matrix_keeps_distinct_dimension_names():
    rows = LabelInfo("X", "time", None, "neuron", np.array([5, 6]))
    cols = LabelInfo("Z", "time", None, "modulator", np.array(["speed", "pupil", "x"]))
    out = wrap_matrix(np.arange(6.0).reshape(2, 3), rows, cols)
    assert out.dims == ("neuron", "modulator")
    assert out.sel(neuron=6, modulator="pupil").item() == 4.0
