"""Figures that draw a modulator value say its units."""

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402
import xarray as xr  # noqa: E402

import mics  # noqa: E402
from mics import plotting  # noqa: E402


@pytest.fixture(scope="module")
def data():
    X, Y, Z, _ = mics.simulate(
        n_samples=300, n_source=6, n_target=5, n_modulators=2, rank=1, n_channels=1,
        random_state=0,
    )  # fmt: skip
    return X, Y, 3.0 * Z + 5.0  # not standardised


def _labelled_z(Z, **attrs):
    return xr.DataArray(
        Z,
        dims=("time", "modulator"),
        coords={"time": np.arange(len(Z)) * 0.1, "modulator": ["speed", "pupil"]},
        attrs=attrs,
    )


@pytest.fixture(scope="module")
def fitted(data):
    """Fitted on a labelled Z whose DataArray says its units."""
    X, Y, Z = data
    return mics.MICs(1, 1, verbose=0, random_state=0).fit(X, Y, _labelled_z(Z, units="cm/s"))


@pytest.fixture(scope="module")
def plain(data):
    X, Y, Z = data
    return mics.MICs(1, 1, verbose=0, random_state=0).fit(X, Y, Z)


@pytest.fixture(autouse=True)
def _close_figures():
    yield
    plt.close("all")


def _gain_labels(model, Z):
    return [ax.get_xlabel() for ax in plotting.plot_channel_gain(model, Z).axes]


def _state_titles(model, Z):
    fig = plotting.plot_state_communication(model, Z)
    return [ax.get_title() for ax in fig.axes if ax.get_title().startswith("B(z)")]


def test_units_from_the_dataarray_drawn(plain, data):
    Zd = _labelled_z(data[2], units="cm/s")
    assert _gain_labels(plain, Zd) == [
        "z0 (cm/s; training mean dotted)",
        "z1 (cm/s; training mean dotted)",
    ]
    titles = _state_titles(plain, Zd)
    assert len(titles) == 4 and all(t.endswith(" (cm/s)") for t in titles)


def test_units_per_modulator(fitted, data):
    # a units coordinate along the modulator dimension, or one units string each
    Zd = _labelled_z(data[2]).assign_coords(units=("modulator", ["cm/s", "mm"]))
    assert _gain_labels(fitted, Zd) == [
        "speed (cm/s; training mean dotted)",
        "pupil (mm; training mean dotted)",
    ]
    titles = _state_titles(fitted, _labelled_z(data[2], units=["cm/s", "mm"]))
    assert [t.rsplit(" ", 1)[1] for t in titles] == ["(cm/s)", "(cm/s)", "(mm)", "(mm)"]
    assert titles[0].startswith("B(z), speed low:\np10 = ")


def test_units_the_model_was_fitted_with(fitted, data, tmp_path):
    # Drawn from a plain array, the figure uses the units of the fitted Z,
    # which a saved model keeps.
    assert fitted._labels[2].attrs["units"] == "cm/s"
    assert _gain_labels(fitted, data[2])[0] == "speed (cm/s; training mean dotted)"
    back = mics.load(fitted.to_netcdf(tmp_path / "model.nc"))
    assert _gain_labels(back, data[2])[1] == "pupil (cm/s; training mean dotted)"
    assert all(t.endswith(" (cm/s)") for t in _state_titles(back, data[2]))


def test_without_units_say_z_scored_or_input_units(plain, data):
    Z = data[2]
    assert _gain_labels(plain, Z)[0] == "z0 (input units; training mean dotted)"
    assert all(t.endswith(" (input units)") for t in _state_titles(plain, Z))
    X, Y, _ = data
    zs = (Z - Z.mean(axis=0)) / Z.std(axis=0)
    standard = mics.MICs(1, 1, verbose=0, random_state=0).fit(X, Y, zs)
    assert _gain_labels(standard, zs) == [
        "z0 (z-scored; training mean dotted)",
        "z1 (z-scored; training mean dotted)",
    ]
    assert all(t.endswith(" (z-scored)") for t in _state_titles(standard, zs))


def test_zscore_of_mics_preprocessing_names_its_units(plain, data):
    from mics.preprocessing import zscore

    Zd = zscore(_labelled_z(data[2]))
    assert Zd.attrs["units"] == "z-score"
    assert _gain_labels(plain, Zd)[0] == "z0 (z-score; training mean dotted)"
