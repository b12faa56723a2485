"""The report figures show the right numbers under the user's names.

Each test reads back what was drawn (tick labels, bar heights, line data)
and compares it with the quantity computed independently.
"""

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402
import xarray as xr  # noqa: E402
from matplotlib.collections import LineCollection  # noqa: E402
from scipy import linalg  # noqa: E402

import mics  # noqa: E402
from mics import plotting  # noqa: E402
from mics.model.decomposition import PARTS  # noqa: E402
from mics.workflows.inference import ModulationTest  # noqa: E402
from tests._generate import make_mic_data  # noqa: E402

NAMES = ["running", "pupil", "whisking"]
P, Q = 20, 15


@pytest.fixture(scope="module")
def data():
    X, Y, Z, _ = make_mic_data(T=600, p=P, q=Q)
    t = np.arange(len(X)) * 0.05
    Xd = xr.DataArray(
        X, dims=("time", "neuron"), coords={"time": t, "neuron": [f"s{i}" for i in range(P)]}
    )
    Yd = xr.DataArray(
        Y, dims=("time", "neuron"), coords={"time": t, "neuron": [f"t{i}" for i in range(Q)]}
    )
    Zd = xr.DataArray(Z, dims=("time", "modulator"), coords={"time": t, "modulator": NAMES})
    return Xd, Yd, Zd


@pytest.fixture(scope="module")
def model(data):
    return mics.MICs(rank=3, n_channels=2, random_state=0, verbose=0).fit(*data)


@pytest.fixture(autouse=True)
def _close_figures():
    yield
    plt.close("all")


def _ticks(ax, axis="x"):
    labels = ax.get_xticklabels() if axis == "x" else ax.get_yticklabels()
    return [t.get_text() for t in labels]


def test_channels_named_modulators_and_neurons(model, tmp_path):
    fig = plotting.plot_channels(model)
    axes = np.array(fig.axes).reshape(2, 3)
    for k in range(2):
        assert _ticks(axes[k, 2]) == NAMES  # categorical, one tick per modulator
        heights = [bar.get_height() for bar in axes[k, 2].containers[0]]
        np.testing.assert_allclose(heights, model.modulator_patterns_.sel(channel=k).values)
        assert _ticks(axes[k, 0]) == [f"s{i}" for i in range(P)]
        assert _ticks(axes[k, 1]) == [f"t{i}" for i in range(Q)]
    # the same figure from a reopened model
    back = mics.load(model.to_netcdf(tmp_path / "m.nc"))
    axes_back = np.array(plotting.plot_channels(back).axes).reshape(2, 3)
    for a, b in zip(axes.ravel(), axes_back.ravel(), strict=True):
        assert _ticks(a) == _ticks(b)
        np.testing.assert_array_equal(
            [p.get_height() for p in a.patches], [p.get_height() for p in b.patches]
        )


def test_geometry_labels_name_channels_inside_axes(model):
    ax = plotting.plot_geometry(model)
    plt.gcf().canvas.draw()
    names = [t for t in ax.texts if t.get_text().startswith("channel")]
    assert sorted(t.get_text() for t in names) == ["channel 0", "channel 1"]
    box = ax.get_window_extent()
    for t in names:
        ext = t.get_window_extent()
        assert box.x0 <= ext.x0 and ext.x1 <= box.x1 and box.y0 <= ext.y0 and ext.y1 <= box.y1


def test_cv_curves_one_sem_line_and_rrr_case(data):
    X, Y, _ = data
    model = mics.MICs(cv=3, max_rank=5, verbose=0).fit(X, Y)  # no Z: unprefixed cv_results_
    (ax,) = plotting.plot_cv_curves(model)
    res = model.cv_results_
    perf = 1 - np.asarray(res["mean_loss"])
    best = int(np.argmax(perf))
    threshold = next(ln for ln in ax.get_lines() if ln.get_label() == "best - 1 SEM")
    np.testing.assert_allclose(threshold.get_ydata(), perf[best] - res["sem_loss"][best])
    star = next(ln for ln in ax.get_lines() if ln.get_label().startswith("selected"))
    assert star.get_label() == f"selected: {model.rank_}"
    np.testing.assert_allclose(star.get_xdata(), [model.rank_])
    # the choice is the simplest candidate at or above the one-SEM line
    chosen = list(res["rank"]).index(model.rank_)
    assert perf[chosen] >= threshold.get_ydata()[0] - 1e-12
    assert np.all(perf[:chosen] < threshold.get_ydata()[0])


def test_null_distribution_histogram_and_observed():
    rng = np.random.default_rng(0)
    null = rng.normal(0.0, 0.01, size=99)
    result = ModulationTest(0.05, 0.05, null, 0.01, 1, np.arange(99))
    ax = plotting.plot_null_distribution(result)
    counts = [p.get_height() for p in ax.containers[0]]
    edges = [ax.containers[0][0].get_x()] + [p.get_x() + p.get_width() for p in ax.containers[0]]
    np.testing.assert_array_equal(counts, np.histogram(null, bins=edges)[0])
    assert sum(counts) == 99
    (observed,) = [ln for ln in ax.get_lines() if ln.get_label().startswith("observed")]
    np.testing.assert_allclose(observed.get_xdata(), [0.05, 0.05])
    lo, hi = ax.get_xlim()
    assert lo < null.min() and hi > 0.05  # the observed value is inside the view
    assert "p = 0.01" in ax.get_title() and "circular" in ax.get_title()
    assert "(smallest possible 0.01 with 99 permutations)" in ax.get_title()
    with pytest.raises(ValueError, match="null_distribution"):
        plotting.plot_null_distribution(object())


def test_bootstrap_intervals_bars_and_bounds(data):
    X, Y, Z = (np.asarray(a) for a in data)
    model = mics.MICs(rank=3, n_channels=2, n_init=0, random_state=0, verbose=0).fit(X, Y, Z)
    boot = mics.bootstrap_channels(model, X, Y, Z, n_boot=4, random_state=0, verbose=0)
    # a reference model fitted on the labelled inputs gives the same intervals
    labelled = mics.MICs(rank=3, n_channels=2, n_init=0, random_state=0, verbose=0).fit(*data)
    boot_labelled = mics.bootstrap_channels(labelled, X, Y, Z, n_boot=4, random_state=0, verbose=0)
    xr.testing.assert_allclose(boot, boot_labelled, rtol=1e-10)
    dec = model.decompose()
    ax = plotting.plot_bootstrap_intervals(boot, model)
    assert _ticks(ax) == ["channel 0", "channel 1", "total"]
    segments = [c for c in ax.collections if isinstance(c, LineCollection)]
    assert len(ax.containers) == len(segments) == len(PARTS)
    for i, part in enumerate(PARTS):
        heights = [b.get_height() for b in ax.containers[i]]
        expected = np.append(dec[part].values, float(dec[f"total_{part}"]))
        np.testing.assert_allclose(heights, expected)
        ys = np.array([seg[:, 1] for seg in segments[i].get_segments()])
        low = np.append(boot[part].sel(bound="low"), boot[f"total_{part}"].sel(bound="low"))
        high = np.append(boot[part].sel(bound="high"), boot[f"total_{part}"].sel(bound="high"))
        np.testing.assert_allclose(ys[:, 0], low)
        np.testing.assert_allclose(ys[:, 1], high)
    # without the model the point estimate is the bootstrap median
    ax2 = plotting.plot_bootstrap_intervals(boot)
    np.testing.assert_allclose(
        [b.get_height() for b in ax2.containers[0]][:2],
        np.median(boot["reshape_draws"].values, axis=0),
    )
    with pytest.raises(ValueError, match="bootstrap_channels"):
        plotting.plot_bootstrap_intervals(dec)


def test_state_communication_angles_and_matrices(model, data):
    _, _, Zd = data
    fig = plotting.plot_state_communication(model, Zd, modulators=["pupil"])
    image_axes = [ax for ax in fig.axes if ax.images]
    low_ax, high_ax = image_axes
    angle_ax = next(ax for ax in fig.axes if ax.containers)
    # independent computation of the two states and their subspaces
    Z = Zd.values
    zbar = np.asarray(model.modulator_mean_)
    states = []
    for pct in (10, 90):
        z = zbar.copy()
        z[1] = np.percentile(Z[:, 1], pct)
        states.append(z)
    mats = [np.asarray(model.communication_matrix(z)) for z in states]
    np.testing.assert_allclose(low_ax.images[0].get_array(), mats[0])
    np.testing.assert_allclose(high_ax.images[0].get_array(), mats[1])
    assert low_ax.images[0].get_clim() == high_ax.images[0].get_clim()  # one colour scale
    assert "pupil low" in low_ax.get_title() and "pupil high" in high_ax.get_title()
    svd = [np.linalg.svd(m) for m in mats]
    r = model.rank_
    src = np.degrees(linalg.subspace_angles(svd[0][0][:, :r], svd[1][0][:, :r]))[::-1]
    tgt = np.degrees(linalg.subspace_angles(svd[0][2][:r].T, svd[1][2][:r].T))[::-1]
    by_label = {c.get_label(): [b.get_height() for b in c] for c in angle_ax.containers}
    np.testing.assert_allclose(by_label["source"], src, atol=1e-6)
    np.testing.assert_allclose(by_label["target"], tgt, atol=1e-6)
    assert _ticks(low_ax, "y") == [f"s{i}" for i in range(P)]
    # a Z with its modulators in another order is matched by name
    reordered = plotting.plot_state_communication(model, Zd[:, ::-1], modulators=["pupil"])
    np.testing.assert_allclose(
        [ax for ax in reordered.axes if ax.images][0].images[0].get_array(), mats[0]
    )
    # default: one row per modulator
    assert len(plotting.plot_state_communication(model, Zd).axes) == 3 * 3 + 3  # + colorbars
    with pytest.raises(ValueError, match="not one of"):
        plotting.plot_state_communication(model, Zd, modulators=["speed"])


def test_channel_gain_lines(model, data):
    _, _, Zd = data
    fig = plotting.plot_channel_gain(model, Zd)
    axes = fig.axes
    assert [ax.get_title() for ax in axes] == NAMES
    C = model.modulator_patterns_.values
    for j, ax in enumerate(axes):
        lines = [ln for ln in ax.get_lines() if ln.get_label().startswith("channel")]
        assert [ln.get_label() for ln in lines] == ["channel 0", "channel 1"]
        for k, line in enumerate(lines):
            z = line.get_xdata()
            np.testing.assert_allclose(
                line.get_ydata(),
                model.channel_weights_[k] * C[j, k] * (z - model.modulator_mean_[j]),
            )
            np.testing.assert_allclose(
                [z[0], z[-1]], np.percentile(Zd.values[:, j], [1, 99]), rtol=1e-12
            )


def test_state_figures_refuse_models_without_modulator(data):
    X, Y, Z = data
    rrr = mics.MICs(rank=2, verbose=0).fit(X, Y)
    for plot in (plotting.plot_state_communication, plotting.plot_channel_gain):
        with pytest.raises(ValueError, match="without a modulator"):
            plot(rrr, Z)
    with pytest.raises(ValueError, match="shape"):
        plotting.plot_channel_gain(
            mics.MICs(rank=2, n_channels=1, verbose=0).fit(X, Y, Z), Z[:, :2]
        )
