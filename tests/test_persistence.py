"""MICs.to_netcdf / mics.load: a reopened model is the fitted model, labels included."""

import json
import warnings

import numpy as np
import pytest
import xarray as xr
from sklearn.exceptions import NotFittedError
from sklearn.model_selection import KFold

import mics
from mics.estimators.persistence import FORMAT_VERSION, model_to_dataset
from tests._generate import make_mic_data

T, P, Q, M = 400, 12, 9, 2


@pytest.fixture(scope="module")
def data():
    return make_mic_data(T=T, p=P, q=Q, m=M)


@pytest.fixture(scope="module")
def labelled(data):
    X, Y, Z, _ = data
    t = np.arange(T) * 0.1
    Xd = xr.DataArray(
        X,
        dims=("time", "neuron"),
        coords={
            "time": t,
            "neuron": [f"v1_{i}" for i in range(P)],
            "depth": ("neuron", np.linspace(100.0, 300.0, P)),
        },
    )
    Yd = xr.DataArray(Y, dims=("time", "neuron"), coords={"time": t, "neuron": 100 + np.arange(Q)})
    Zd = xr.DataArray(
        Z, dims=("time", "modulator"), coords={"time": t, "modulator": ["running", "pupil"]}
    )
    return Xd, Yd, Zd


def _fit(*args, **params):
    kw = dict(cv=3, max_rank=3, max_channels=2, n_init=1, random_state=0, verbose=0)
    kw.update(params)
    return mics.MICs(**kw).fit(*args)


def _assert_same_state(a, b):
    """Every attribute (public fitted ones and the private label state) restored exactly."""
    assert a.get_params() == b.get_params()
    fitted = {k for k in vars(a) if k.endswith("_") and not k.startswith("_")}
    assert fitted == {k for k in vars(b) if k.endswith("_") and not k.startswith("_")}
    for name in fitted:
        va, vb = getattr(a, name), getattr(b, name)
        if isinstance(va, xr.DataArray):
            assert isinstance(vb, xr.DataArray), name
            xr.testing.assert_identical(va, vb)
        elif isinstance(va, dict):
            assert va.keys() == vb.keys(), name
            for key in va:
                np.testing.assert_array_equal(va[key], vb[key], err_msg=f"{name}[{key}]")
        elif isinstance(va, np.ndarray):
            assert vb.dtype == va.dtype and vb.shape == va.shape, name
            np.testing.assert_array_equal(va, vb, err_msg=name)
        else:
            assert type(va) is type(vb) and va == vb, name
    assert a._y_1d == b._y_1d


def test_labelled_model_round_trip_predicts_identically(tmp_path, labelled):
    Xd, Yd, Zd = labelled
    model = _fit(Xd, Yd, Zd)
    assert model.n_channels_ >= 1 and "n_channels_mean_loss" in model.cv_results_
    path = model.to_netcdf(tmp_path / "model.nc")
    back = mics.load(path)
    _assert_same_state(model, back)
    pred, pred_back = model.predict(Xd, Zd), back.predict(Xd, Zd)
    xr.testing.assert_identical(pred, pred_back)  # exact values, labels and clock
    assert back.score(Xd, Yd, Zd) == model.score(Xd, Yd, Zd)
    # labels: target ids on the prediction, modulator names and neuron ids on patterns
    np.testing.assert_array_equal(pred_back["neuron"].values, 100 + np.arange(Q))
    assert list(back.modulator_patterns_["modulator"].values) == ["running", "pupil"]
    assert list(back.source_patterns_["neuron"].values) == [f"v1_{i}" for i in range(P)]
    np.testing.assert_array_equal(back.source_patterns_["depth"].values, np.linspace(100, 300, P))
    # readouts
    xr.testing.assert_identical(model.decompose(), back.decompose())
    z = np.array([1.5, -0.5])
    xr.testing.assert_identical(model.communication_matrix(z), back.communication_matrix(z))
    # neurons given in another order are still matched by id after reloading
    shuffled = Xd.isel(neuron=np.random.default_rng(0).permutation(P))
    xr.testing.assert_identical(back.predict(shuffled, Zd), pred)


def test_unlabelled_model_round_trip(tmp_path, data):
    X, Y, Z, _ = data
    model = _fit(X, Y, Z, rank=3, n_channels=2)
    back = mics.load(model.to_netcdf(tmp_path / "plain.nc"))
    _assert_same_state(model, back)
    assert back._labels is None
    np.testing.assert_array_equal(back.predict(X, Z), model.predict(X, Z))
    assert isinstance(back.source_patterns_, np.ndarray)
    np.testing.assert_array_equal(back.modulation_tensor(), model.modulation_tensor())


@pytest.mark.parametrize("one_target", [False, True])
def test_model_without_modulator_round_trip(tmp_path, data, one_target):
    """The RRR case: no Z, CV over ranks (unprefixed cv_results_), and a 1-D target."""
    X, Y, _, _ = data
    y = Y[:, 0] if one_target else Y
    model = _fit(X, y)
    assert model.n_channels_ == 0 and "mean_loss" in model.cv_results_
    back = mics.load(model.to_netcdf(tmp_path / "rrr.nc"))
    _assert_same_state(model, back)
    pred = back.predict(X)
    assert pred.shape == ((T,) if one_target else (T, Q))
    np.testing.assert_array_equal(pred, model.predict(X))
    with pytest.raises(ValueError):  # still refuses Z-less predictions the same way
        back.communication_matrix(np.zeros(1))


def test_saved_file_is_plain_netcdf(tmp_path, labelled):
    """Readable by xarray alone: numbers and strings, labelled patterns with ids."""
    model = _fit(*labelled, rank=2, n_channels=1)
    path = model.to_netcdf(tmp_path / "m.nc")
    with xr.open_dataset(path) as ds:
        assert ds.attrs["mics_format"] == "mics.MICs"
        assert int(ds.attrs["mics_format_version"]) == FORMAT_VERSION
        assert json.loads(ds.attrs["params"])["n_channels"] == 1
        assert list(ds["modulator_patterns_.modulator"].values) == ["running", "pupil"]
        for var in ds.variables.values():
            assert var.dtype.kind in "fiubUSO", var.name
        np.testing.assert_array_equal(ds["coef_"].values, model.coef_)


def test_object_hyperparameters_warn_and_still_predict(tmp_path, data):
    X, Y, Z, _ = data
    model = _fit(X, Y, Z, cv=KFold(3), rank=None, n_channels=1)
    with pytest.warns(UserWarning, match=r"\['cv'\]") as record:
        path = model.to_netcdf(tmp_path / "kfold.nc")
    assert record[0].filename == __file__  # points at the caller
    back = mics.load(path)
    assert back.cv == 10  # default restored, said so in the warning
    np.testing.assert_array_equal(back.predict(X, Z), model.predict(X, Z))


def test_candidate_lists_are_saved_and_refit_the_same(tmp_path, data):
    """Penalty and sparsity candidates (lists, tuples) survive the file, types included."""
    X, Y, Z, _ = data
    model = _fit(X, Y, Z, rank=2, n_channels=1, alpha_channels=[0.5, 0.125], sparsity=(0.0, 4.0))
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # nothing dropped, nothing warned about
        path = model.to_netcdf(tmp_path / "candidates.nc")
    back = mics.load(path)
    assert back.alpha_channels == [0.5, 0.125] and back.sparsity == (0.0, 4.0)
    assert back.get_params() == model.get_params()
    np.testing.assert_array_equal(back.predict(X, Z), model.predict(X, Z))
    refit = mics.MICs(**back.get_params()).fit(X, Y, Z)
    assert (refit.alpha_channels_, refit.sparsity_) == (model.alpha_channels_, model.sparsity_)
    np.testing.assert_array_equal(refit.coef_, model.coef_)


def test_errors(tmp_path, data):
    X, Y, Z, _ = data
    with pytest.raises(NotFittedError, match="fit it before saving"):
        mics.MICs().to_netcdf(tmp_path / "unfitted.nc")
    with pytest.raises(FileNotFoundError, match="no model file"):
        mics.load(tmp_path / "missing.nc")
    text = tmp_path / "notes.nc"
    text.write_text("not a netCDF file")
    with pytest.raises(ValueError, match="not a netCDF file written by MICs.to_netcdf"):
        mics.load(text)
    other = tmp_path / "other.nc"
    xr.Dataset({"x": ("t", np.arange(3.0))}).to_netcdf(other)
    with pytest.raises(ValueError, match="not a model saved by mics"):
        mics.load(other)
    ds = model_to_dataset(_fit(X, Y, Z, rank=2, n_channels=1))
    ds.attrs["mics_format_version"] = FORMAT_VERSION + 1
    newer = tmp_path / "newer.nc"
    ds.to_netcdf(newer)
    with pytest.raises(ValueError, match=f"version {FORMAT_VERSION + 1}.*Upgrade mics"):
        mics.load(newer)
    ds.attrs["mics_format_version"] = FORMAT_VERSION
    ds.attrs["params"] = json.dumps({**json.loads(ds.attrs["params"]), "future_option": 1})
    future = tmp_path / "future_option.nc"
    ds.to_netcdf(future)
    with pytest.warns(UserWarning, match="future_option"):
        assert mics.load(future).rank_ == 2
    ds.attrs["mics_format_version"] = "one"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ds.to_netcdf(newer)
    with pytest.raises(ValueError, match="unreadable mics_format_version"):
        mics.load(newer)


def test_single_named_modulator_and_partly_labelled_inputs(tmp_path, labelled, data):
    """A 1-D Z DataArray (named by its variable) and a NumPy X alongside labelled Y."""
    X, _, Z, _ = data
    _, Yd, Zd = labelled
    running = Zd.sel(modulator="running").drop_vars("modulator").rename("running")
    model = _fit(X, Yd, running, rank=2, n_channels=1)
    back = mics.load(model.to_netcdf(tmp_path / "one.nc"))
    _assert_same_state(model, back)
    assert list(back.modulator_patterns_[back.modulator_patterns_.dims[0]].values) == ["running"]
    xr.testing.assert_identical(back.predict(X, Z[:, 0]), model.predict(X, Z[:, 0]))
    assert back._labels[0] is None and back._labels[2].features.tolist() == ["running"]
