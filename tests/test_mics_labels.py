"""Labelled (xarray) inputs give labelled outputs that keep neuron identities."""

import numpy as np
import pytest
import xarray as xr

import mics


@pytest.fixture(scope="module")
def labelled():
    X, Y, Z, _ = mics.simulate(
        n_samples=600, n_source=20, n_target=15, n_modulators=2, random_state=0
    )
    t = np.arange(600) / 10.0
    src = [f"pfc{i}" for i in range(20)]
    Xd = xr.DataArray(X.T, dims=("neuron", "time"), coords={"neuron": src, "time": t})
    Yd = xr.DataArray(
        Y, dims=("time", "neuron"), coords={"neuron": [f"v1_{i}" for i in range(15)], "time": t}
    )
    Zd = xr.DataArray(Z, dims=("time", "modulator"), coords={"modulator": ["speed", "pupil"]})
    plain = mics.MICs(rank=3, n_channels=2, random_state=0).fit(X, Y, Z)
    model = mics.MICs(rank=3, n_channels=2, random_state=0).fit(Xd, Yd, Zd)
    return X, Y, Z, Xd, Yd, Zd, plain, model


def test_patterns_are_labelled_by_neuron_ids_and_equal_the_numpy_fit(labelled):
    X, Y, Z, Xd, Yd, Zd, plain, model = labelled
    a = model.source_patterns_
    assert a.dims == ("neuron", "channel")
    assert list(a.neuron.values) == list(Xd.neuron.values)
    np.testing.assert_array_equal(a.values, plain.source_patterns_)
    np.testing.assert_array_equal(model.target_patterns_.values, plain.target_patterns_)
    assert list(model.modulator_patterns_.modulator.values) == ["speed", "pupil"]
    assert model.modulator_coef_.shape == (15, 2)


def test_predictions_keep_the_clock_and_reorder_neurons_by_id(labelled):
    X, Y, Z, Xd, Yd, Zd, plain, model = labelled
    shuffled = Xd.isel(neuron=np.random.default_rng(0).permutation(20))
    pred = model.predict(shuffled, Zd)
    assert pred.dims == ("time", "neuron")
    np.testing.assert_allclose(pred.time.values, Xd.time.values)
    np.testing.assert_allclose(pred.values, plain.predict(X, Z), rtol=1e-12)
    assert model.score(Xd, Yd, Zd) == pytest.approx(plain.score(X, Y, Z))


def test_numpy_in_numpy_out(labelled):
    *_, plain, _ = labelled
    assert isinstance(plain.source_patterns_, np.ndarray)
    assert isinstance(plain.communication_matrix(np.zeros(2)), np.ndarray)


def test_communication_matrix_is_labelled_by_source_and_target(labelled):
    X, Y, Z, Xd, Yd, Zd, plain, model = labelled
    Bz = model.communication_matrix(Z[0])
    assert Bz.dims == ("X_neuron", "Y_neuron")
    np.testing.assert_allclose(Bz.values, plain.communication_matrix(Z[0]))


def test_missing_neuron_at_predict_time_is_an_error(labelled):
    X, Y, Z, Xd, Yd, Zd, plain, model = labelled
    with pytest.raises(ValueError, match="lacks"):
        model.predict(
            Xd.isel(neuron=slice(1, None)).assign_coords(neuron=[f"other{i}" for i in range(19)]),
            Zd,
        )
