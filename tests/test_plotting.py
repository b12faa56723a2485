import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402
from matplotlib.collections import PathCollection  # noqa: E402

import mics  # noqa: E402
from mics import plotting  # noqa: E402
from mics.model.decomposition import PARTS  # noqa: E402
from tests._generate import make_mic_data  # noqa: E402


@pytest.fixture(scope="module")
def data():
    return make_mic_data(T=600, p=20, q=15)


@pytest.fixture(scope="module")
def model(data):
    X, Y, Z, _ = data
    return mics.MICs(rank=3, n_channels=2, random_state=0, verbose=0).fit(X, Y, Z)


@pytest.fixture(scope="module")
def cv_model(data):
    X, Y, Z, _ = data
    est = mics.MICs(cv=3, max_rank=4, max_channels=3, n_init=1, random_state=0, verbose=0)
    return est.fit(X, Y, Z)


@pytest.fixture(autouse=True)
def _close_figures():
    yield
    plt.close("all")


def test_plot_channels_stems_equal_patterns(model):
    fig = plotting.plot_channels(model)
    K = model.channel_weights_.size
    axes = np.array(fig.axes).reshape(K, 3)
    patterns = (model.source_patterns_, model.target_patterns_)
    for k in range(K):
        for j, P in enumerate(patterns):
            ax = axes[k, j]
            stem = ax.containers[0]
            np.testing.assert_allclose(stem.markerline.get_ydata(), P[:, k])
            np.testing.assert_allclose(stem.markerline.get_xdata(), np.arange(P.shape[0]))
            assert f"{model.channel_weights_[k]:.3g}" in ax.get_title()
        # modulators: one bar per modulator on a categorical axis (z0, z1, ... unlabelled)
        ax = axes[k, 2]
        heights = [bar.get_height() for bar in ax.containers[0]]
        np.testing.assert_allclose(heights, model.modulator_patterns_[:, k])
        m = model.modulator_patterns_.shape[0]
        np.testing.assert_array_equal(ax.get_xticks(), np.arange(m))
        assert [t.get_text() for t in ax.get_xticklabels()] == [f"z{i}" for i in range(m)]


def test_plot_channels_uses_given_figure(model):
    fig = plt.figure()
    n_figures = len(plt.get_fignums())
    assert plotting.plot_channels(model, fig=fig) is fig
    assert len(plt.get_fignums()) == n_figures  # drawn into fig, no new figure
    K = model.channel_weights_.size
    assert len(fig.axes) == 3 * K
    # the given figure holds the model's patterns, channel by channel
    axes = np.array(fig.axes).reshape(K, 3)
    for k in range(K):
        src, tgt, mod = axes[k]
        np.testing.assert_allclose(
            src.containers[0].markerline.get_ydata(), model.source_patterns_[:, k]
        )
        np.testing.assert_allclose(
            tgt.containers[0].markerline.get_ydata(), model.target_patterns_[:, k]
        )
        heights = [bar.get_height() for bar in mod.containers[0]]
        np.testing.assert_allclose(heights, model.modulator_patterns_[:, k])


def test_plot_decomposition_bars_match_fractions(model):
    ds = model.decompose()
    ax = plotting.plot_decomposition(model)
    K = ds.sizes["channel"]
    assert len(ax.containers) == len(PARTS)
    widths = np.array([[patch.get_width() for patch in c.patches] for c in ax.containers])
    lefts = np.array([[patch.get_x() for patch in c.patches] for c in ax.containers])
    assert widths.shape == (len(PARTS), K + 1)
    for i, part in enumerate(PARTS):
        np.testing.assert_allclose(widths[i, :K], ds[part].values)
        np.testing.assert_allclose(widths[i, K], float(ds[f"total_{part}"]))
        assert ax.containers[i].get_label() == plotting.PART_LABELS[part]
        colors = {tuple(p.get_facecolor()) for p in ax.containers[i].patches}
        assert colors == {matplotlib.colors.to_rgba(plotting.PART_COLORS[part])}
    # stacked: each segment starts where the previous ended, and every bar sums to 1
    np.testing.assert_allclose(lefts[1:], np.cumsum(widths, axis=0)[:-1])
    np.testing.assert_allclose(widths.sum(axis=0), 1.0, atol=1e-10)
    labels = [t.get_text() for t in ax.get_yticklabels()]
    assert labels == [f"channel {k}" for k in range(K)] + ["total"]
    legend = [t.get_text() for t in ax.get_legend().get_texts()]
    assert legend == [plotting.PART_LABELS[p] for p in PARTS]


def test_plot_decomposition_accepts_dataset_and_ax(model):
    ds = model.decompose()
    _, ax = plt.subplots()
    assert plotting.plot_decomposition(ds, ax=ax) is ax
    np.testing.assert_allclose(
        [p.get_width() for p in ax.containers[0].patches][:-1], ds["reshape"].values
    )


def test_plot_loss_history(model):
    ax = plotting.plot_loss_history(model)
    line = ax.get_lines()[0]
    np.testing.assert_allclose(line.get_ydata(), model.loss_history_)
    np.testing.assert_allclose(line.get_xdata(), np.arange(1, model.loss_history_.size + 1))


def test_plot_geometry_points_are_squared_alignments(model):
    ax = plotting.plot_geometry(model)
    (points,) = [c for c in ax.collections if isinstance(c, PathCollection)]
    xy = points.get_offsets()
    U, _ = np.linalg.qr(model.source_subspace_)
    V, _ = np.linalg.qr(model.target_subspace_)
    A, Bm = model.source_patterns_, model.target_patterns_
    expected_x = np.sum((U.T @ A) ** 2, axis=0) / np.sum(A**2, axis=0)
    expected_y = np.sum((V.T @ Bm) ** 2, axis=0) / np.sum(Bm**2, axis=0)
    np.testing.assert_allclose(xy[:, 0], expected_x, atol=1e-12)
    np.testing.assert_allclose(xy[:, 1], expected_y, atol=1e-12)
    assert np.all((xy >= 0) & (xy <= 1))
    # consistent with the Euclidean decomposition
    ds = model.decompose()
    np.testing.assert_allclose(xy[:, 0], ds["source_alignment"].values, atol=1e-10)
    np.testing.assert_allclose(xy[:, 1], ds["target_alignment"].values, atol=1e-10)
    texts = {t.get_text() for t in ax.texts}
    assert {"reshape", "private source", "private target", "new"} <= texts


def test_plot_geometry_quadrant_labels_positions(model):
    ax = plotting.plot_geometry(model)
    pos = {t.get_text(): t.get_position() for t in ax.texts}
    assert pos["reshape"][0] > 0.5 and pos["reshape"][1] > 0.5
    assert pos["private source"][0] < 0.5 and pos["private source"][1] > 0.5
    assert pos["private target"][0] > 0.5 and pos["private target"][1] < 0.5
    assert pos["new"][0] < 0.5 and pos["new"][1] < 0.5


def test_plot_cv_curves_match_results(cv_model):
    res = cv_model.cv_results_
    axes = plotting.plot_cv_curves(cv_model)
    assert len(axes) == 2
    for ax, key in zip(axes, ("rank", "n_channels"), strict=True):
        perf_line = next(ln for ln in ax.get_lines() if ln.get_label() == "CV performance")
        np.testing.assert_allclose(perf_line.get_xdata(), res[key])
        np.testing.assert_allclose(
            perf_line.get_ydata(), 1.0 - np.asarray(res[f"{key}_mean_loss"])
        )
        best = res[f"{key}_best_index"]
        marker = next(ln for ln in ax.get_lines() if ln.get_label().startswith("selected"))
        np.testing.assert_allclose(marker.get_xdata(), [res[key][best]])
        np.testing.assert_allclose(marker.get_ydata(), [1.0 - res[f"{key}_mean_loss"][best]])
        # the SEM band spans mean +/- sem
        band = ax.collections[0].get_paths()[0].vertices
        perf = 1.0 - np.asarray(res[f"{key}_mean_loss"])
        sem = np.asarray(res[f"{key}_sem_loss"])
        np.testing.assert_allclose(band[:, 1].max(), (perf + sem).max())
        np.testing.assert_allclose(band[:, 1].min(), (perf - sem).min())
    assert cv_model.rank_ == res["rank"][res["rank_best_index"]]
    assert cv_model.n_channels_ == res["n_channels"][res["n_channels_best_index"]]


def test_plot_cv_curves_errors(model, cv_model):
    with pytest.raises(ValueError, match="cv_results_"):
        plotting.plot_cv_curves(model)

    class Fake:
        cv_results_ = {"rank": [0, 1], "rank_mean_loss": [0.5, 0.4]}

    with pytest.raises(KeyError, match="rank_sem_loss"):
        plotting.plot_cv_curves(Fake())
    Fake.cv_results_ = {"other": 1}
    with pytest.raises(ValueError, match="neither"):
        plotting.plot_cv_curves(Fake())
    _, ax = plt.subplots()
    with pytest.raises(ValueError, match="expected 2 axes"):
        plotting.plot_cv_curves(cv_model, axes=[ax])


def test_no_show_called(model, monkeypatch):
    monkeypatch.setattr(plt, "show", lambda *a, **k: pytest.fail("plt.show called"))
    # each call returns its (unshown) figure with the model's numbers drawn in it
    fig = plotting.plot_channels(model)
    stem = fig.axes[0].containers[0].markerline
    np.testing.assert_allclose(stem.get_ydata(), model.source_patterns_[:, 0])
    ax = plotting.plot_decomposition(model)
    widths = [patch.get_width() for patch in ax.containers[0].patches]
    ds = model.decompose()
    np.testing.assert_allclose(widths[:-1], ds[PARTS[0]].values)
    np.testing.assert_allclose(widths[-1], float(ds[f"total_{PARTS[0]}"]))
    ax = plotting.plot_loss_history(model)
    np.testing.assert_allclose(ax.get_lines()[0].get_ydata(), model.loss_history_)
    ax = plotting.plot_geometry(model)
    (points,) = [c for c in ax.collections if isinstance(c, PathCollection)]
    np.testing.assert_allclose(points.get_offsets()[:, 0], ds["source_alignment"].values)
    np.testing.assert_allclose(points.get_offsets()[:, 1], ds["target_alignment"].values)
    assert len(plt.get_fignums()) == 4  # one figure per call, none closed by show()
