"""Member neurons on the field of view and in a bibiplot (issue 33, part 4).

Positions come from the loaders (suite2p ``stat['med']``, NWB ROI masks,
CaImAn footprints) as ``x`` / ``y`` coordinates on the neuron dimension; the
figures must highlight exactly the member neurons of a sparse fit, at their
positions (field of view) or loadings (bibiplot).
"""

from datetime import datetime, timezone

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402
import xarray as xr  # noqa: E402

import mics  # noqa: E402
from mics.plotting import plot_member_biplot, plot_members_fov  # noqa: E402

# Planted members: 10% of 40 source neurons, 20% of 30 target neurons.
PLANTED = dict(
    n_samples=1200,
    n_source=40,
    n_target=30,
    n_modulators=1,
    rank=1,
    n_channels=1,
    geometry="random",
    modulation_snr=0.5,
    source_members=0.1,
    target_members=0.2,
)


@pytest.fixture(autouse=True)
def _close_figures():
    yield
    plt.close("all")


def _collection(ax, gid):
    found = [c for c in ax.collections if c.get_gid() == gid]
    assert len(found) == 1, [c.get_gid() for c in ax.collections]
    return np.asarray(found[0].get_offsets(), dtype=float).reshape(-1, 2)


def _texts(ax):
    return {t.get_text() for t in ax.texts}


def _same_rows(a, b):
    """The same set of 2-D points, in any order."""
    a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    assert a.shape == b.shape, (a.shape, b.shape)
    np.testing.assert_allclose(a[np.lexsort(a.T)], b[np.lexsort(b.T)])


# --------------------------------------------------------------------- loaders
@pytest.mark.shared_data
def test_suite2p_positions_are_stat_med_of_the_cells(data_dir):
    folder = data_dir / "suite2p_pynapple"
    if not (folder / "stat.npy").is_file():
        pytest.skip(f"no suite2p stat.npy in {folder}")
    stat = np.load(folder / "stat.npy", allow_pickle=True)  # our own test data: trusted
    iscell = np.load(folder / "iscell.npy")[:, 0] == 1
    med = np.array([s["med"] for s in stat], dtype=float)  # (y, x)
    cells = mics.io.load_suite2p(folder, fs=30.0, only_cells=True)
    assert cells.sizes["neuron"] == iscell.sum() == 20
    np.testing.assert_array_equal(cells.neuron.values, np.flatnonzero(iscell))
    np.testing.assert_array_equal(cells.x.values, med[iscell, 1])
    np.testing.assert_array_equal(cells.y.values, med[iscell, 0])
    assert cells.x.attrs["units"] == "pixel"
    # the earlier coordinates are still there, unchanged
    np.testing.assert_array_equal(cells.med_x.values, cells.x.values)

    # Positions travel through a fit on the loader's DataArrays into the figure.
    ds = mics.io.load_suite2p(folder, fs=30.0)
    ids = ds.neuron.values
    neuropil = ds.Fneu.mean("neuron").rename("neuropil")
    X, Y, Z = mics.io.build_inputs(
        ds, source=ids[:110], target=ids[110:], modulators=[neuropil], variable="spks"
    )
    model = mics.MICs(rank=1, n_channels=1, sparsity=2.0, verbose=0, random_state=0)
    model.fit(X, Y, Z)
    (ax,) = plot_members_fov(model)  # same recording: one shared panel
    members = np.asarray(model.source_patterns_)[:, 0] != 0
    drawn = np.vstack([_collection(ax, "source:others"), _collection(ax, "source:members:0")])
    _same_rows(drawn, med[:110, ::-1])
    _same_rows(_collection(ax, "source:members:0"), med[:110][members][:, ::-1])
    assert ax.yaxis_inverted()  # image rows grow downwards


def _write_nwb_masks(path):
    """Two ROI tables: pixel masks (x, y, weight) and image masks (x, y)."""
    from pynwb import NWBHDF5IO, NWBFile
    from pynwb.ophys import Fluorescence, ImageSegmentation, OpticalChannel

    nwb = NWBFile(
        session_description="masks",
        identifier="masks",
        session_start_time=datetime(2024, 1, 1, tzinfo=timezone.utc),
    )
    device = nwb.create_device(name="scope")
    module = nwb.create_processing_module("ophys", "calcium")
    segmentation, fluorescence = ImageSegmentation(), Fluorescence()
    module.add(segmentation)
    module.add(fluorescence)
    plane = nwb.create_imaging_plane(
        name="plane0",
        optical_channel=OpticalChannel(name="green", description="GCaMP", emission_lambda=510.0),
        description="V1",
        device=device,
        excitation_lambda=920.0,
        imaging_rate=10.0,
        indicator="GCaMP6s",
        location="V1",
    )
    pixels = segmentation.create_plane_segmentation(
        name="pixel_rois", description="pixel masks", imaging_plane=plane
    )
    pixels.add_roi(pixel_mask=[(1, 2, 1.0), (3, 2, 1.0)])  # centre (2, 2)
    pixels.add_roi(pixel_mask=[(0, 0, 1.0), (4, 8, 3.0)])  # weighted: (3, 6)
    images = segmentation.create_plane_segmentation(
        name="image_rois", description="image masks", imaging_plane=plane
    )
    mask = np.zeros((8, 6))  # axes (x, y) in the NWB schema
    mask[5, 2], mask[7, 2] = 1.0, 1.0  # centre x=6, y=2
    images.add_roi(image_mask=mask)
    for table, n in ((pixels, 2), (images, 1)):
        fluorescence.create_roi_response_series(
            name=f"F_{table.name}",
            data=np.random.default_rng(n).standard_normal((30, n)),
            rois=table.create_roi_table_region(description="all", region=list(range(n))),
            unit="a.u.",
            rate=10.0,
        )
    with NWBHDF5IO(str(path), "w") as io:
        io.write(nwb)


def test_nwb_positions_are_mask_centres(tmp_path):
    pytest.importorskip("pynwb")
    _write_nwb_masks(tmp_path / "masks.nwb")
    ds = mics.io.load_nwb(tmp_path / "masks.nwb", behaviour=False)
    ds = ds.sel(neuron=["pixel_rois/0", "pixel_rois/1", "image_rois/0"])
    np.testing.assert_allclose(ds.x.values, [2.0, 3.0, 6.0])
    np.testing.assert_allclose(ds.y.values, [2.0, 6.0, 2.0])


def test_caiman_positions_are_footprint_centres_of_mass(tmp_path):
    h5py = pytest.importorskip("h5py")
    from scipy import ndimage, sparse

    d1, d2, n = 30, 40, 3  # rows (y), columns (x)
    rows, cols = np.mgrid[:d1, :d2]
    centres = [(5.0, 30.0), (20.0, 8.0), (12.5, 17.0)]  # (row, column)
    images = [np.exp(-((rows - r) ** 2 + (cols - c) ** 2) / 8.0) for r, c in centres]
    images = [np.where(im > 0.05, im, 0.0) for im in images]  # footprints are sparse
    # CaImAn flattens each frame in Fortran order into a column of A.
    A = sparse.csc_matrix(np.column_stack([im.ravel(order="F") for im in images]))
    with h5py.File(tmp_path / "cnm.hdf5", "w") as f:
        f["estimates/C"] = np.random.default_rng(0).random((n, 20))
        f["estimates/dims"] = np.array([d1, d2])
        for key in ("data", "indices", "indptr", "shape"):
            f[f"estimates/A/{key}"] = np.asarray(getattr(A, key))
    ds = mics.io.load_caiman(tmp_path / "cnm.hdf5", fs=10.0)
    expected = np.array([ndimage.center_of_mass(im) for im in images])  # (row, column)
    np.testing.assert_allclose(ds.x.values, expected[:, 1])
    np.testing.assert_allclose(ds.y.values, expected[:, 0])
    np.testing.assert_allclose(ds.x.values, [c for _, c in centres], atol=0.05)


# ----------------------------------------------------------------------- figures
@pytest.fixture(scope="module")
def planted():
    """A sparse one-channel fit on labelled data with known members and positions."""
    X, Y, Z, truth = mics.simulate(random_state=7, **PLANTED)
    rng = np.random.default_rng(0)
    xy = {"source": rng.uniform(0, 512, (40, 2)), "target": rng.uniform(0, 512, (30, 2))}

    def labelled(values, role, prefix):
        return xr.DataArray(
            values,
            dims=("time", "neuron"),
            coords={
                "neuron": [f"{prefix}{i}" for i in range(values.shape[1])],
                "x": ("neuron", xy[role][:, 0]),
                "y": ("neuron", xy[role][:, 1]),
            },
            attrs={"source": "session.nwb"},
        )

    Xd, Yd = labelled(X, "source", "s"), labelled(Y, "target", "t")
    model = mics.MICs(rank=1, n_channels=1, sparsity=8.0, verbose=0, random_state=0)
    model.fit(Xd, Yd, Z)
    return model, truth, xy, (X, Y, Z)


def test_fov_highlights_exactly_the_members_at_their_positions(planted):
    model, truth, xy, _ = planted
    A = np.asarray(model.source_patterns_)[:, 0]
    B = np.asarray(model.target_patterns_)[:, 0]
    # the sparse fit finds the planted members here, so the figure must show those
    np.testing.assert_array_equal(A != 0, truth.source_members_[:, 0])
    np.testing.assert_array_equal(B != 0, truth.target_members_[:, 0])
    for role, members, prefix in (("source", A != 0, "s"), ("target", B != 0, "t")):
        ax_shared = plot_members_fov(model)[0]
        ax = plot_members_fov(model, roles=[role])[0]
        for a in (ax_shared, ax):
            _same_rows(_collection(a, f"{role}:members:0"), xy[role][members])
            _same_rows(_collection(a, f"{role}:others"), xy[role][~members])
        assert _texts(ax) == {f"{prefix}{i}" for i in np.flatnonzero(members)}
    # one recording, no planes: one panel; forced apart: one per role
    assert len(plot_members_fov(model)) == 1
    assert len(plot_members_fov(model, same_field=False)) == 2


def test_positions_survive_saving_the_model(planted, tmp_path):
    pytest.importorskip("netCDF4")
    model, _, xy, _ = planted
    model.to_netcdf(tmp_path / "model.nc")
    back = mics.load(tmp_path / "model.nc")
    members = np.asarray(model.target_patterns_)[:, 0] != 0
    ax = plot_members_fov(back, roles=["target"])[0]
    _same_rows(_collection(ax, "target:members:0"), xy["target"][members])


def test_biplot_places_members_at_their_loadings(planted):
    model, truth, _, _ = planted
    axes = plot_member_biplot(model)
    for ax, role, prefix in zip(axes, ("source", "target"), ("s", "t"), strict=True):
        P = np.asarray(getattr(model, f"{role}_patterns_"))[:, 0]
        U = np.asarray(getattr(model, f"{role}_subspace_"))[:, 0]
        members = P != 0
        # K = 1: channel pattern against the leading baseline dimension
        _same_rows(_collection(ax, f"{role}:members"), np.column_stack([P, U])[members])
        _same_rows(_collection(ax, f"{role}:others"), np.column_stack([P, U])[~members])
        assert _texts(ax) == {f"{prefix}{i}" for i in np.flatnonzero(members)}
    # a shared plane: both panels on the same scale
    assert axes[0].get_xlim() == axes[1].get_xlim() and axes[0].get_ylim() == axes[1].get_ylim()
    with pytest.raises(ValueError, match="channel must be in"):
        plot_member_biplot(model, channel=1)
    with pytest.raises(ValueError, match="another channel"):
        plot_member_biplot(model, versus=0)


def test_stability_members_replace_the_nonzero_weights(planted):
    model, _, xy, _ = planted
    chosen = np.zeros((40, 1), dtype=bool)
    chosen[[3, 17, 21], 0] = True  # not the fit's members: the figure must follow these
    ids = [f"s{i}" for i in range(40)]
    tids = [f"t{i}" for i in range(30)]
    stability = xr.Dataset(
        {
            "source_frequency": (("source", "channel"), chosen * 0.9),
            "source_members": (("source", "channel"), chosen),
            "target_frequency": (("target", "channel"), np.zeros((30, 1))),
            "target_members": (("target", "channel"), np.zeros((30, 1), dtype=bool)),
        },
        coords={"source": ids, "target": tids},
        attrs={"threshold": 0.6},
    )
    ax = plot_members_fov(model, stability=stability, roles=["source"])[0]
    _same_rows(_collection(ax, "source:members:0"), xy["source"][[3, 17, 21]])
    assert (
        _collection(plot_members_fov(model, stability=stability)[0], "target:members:0").size == 0
    )
    ax = plot_member_biplot(model, stability=stability)[0]
    P = np.asarray(model.source_patterns_)[:, 0]
    U = np.asarray(model.source_subspace_)[:, 0]
    _same_rows(_collection(ax, "source:members"), np.column_stack([P, U])[[3, 17, 21]])


@pytest.mark.filterwarnings("ignore:With a single modulator")
def test_two_channels_share_the_plane_and_colours(planted):
    _, _, xy, (X, Y, Z) = planted
    model = mics.MICs(rank=1, n_channels=2, sparsity=8.0, verbose=0, random_state=0)
    model.fit(X, Y, Z)
    A = np.asarray(model.source_patterns_)
    axes = plot_member_biplot(model, channel=0)
    # K >= 2: channel 0 against channel 1; rings mark channel 1's members
    _same_rows(_collection(axes[0], "source:members"), A[A[:, 0] != 0][:, :2])
    _same_rows(_collection(axes[0], "source:members_versus"), A[A[:, 1] != 0][:, :2])
    ax = plot_members_fov(model, positions={"source": xy["source"]}, roles=["source"])[0]
    for k in range(2):
        _same_rows(_collection(ax, f"source:members:{k}"), xy["source"][A[:, k] != 0])
    assert ax.get_xlabel() == "x"  # explicit positions: no unit assumed


def test_clear_errors_without_positions(planted):
    _, _, xy, (X, Y, Z) = planted
    model = mics.MICs(rank=1, n_channels=1, sparsity=8.0, verbose=0, random_state=0)
    model.fit(X, Y, Z)  # plain arrays: nothing says where the neurons are
    with pytest.raises(ValueError, match="no positions for the source and target"):
        plot_members_fov(model)
    with pytest.raises(ValueError, match=r"no positions for the target neurons.*\(30, 2\)"):
        plot_members_fov(model, positions={"source": xy["source"]}, roles=["source", "target"])
    with pytest.raises(ValueError, match=r"shape \(40, 2\)"):
        plot_members_fov(model, positions={"source": xy["source"][:, :1]})
    with pytest.raises(ValueError, match="dict"):
        plot_members_fov(model, positions=xy["source"])
    # given explicitly, they are used (and roles without them are left out)
    (ax,) = plot_members_fov(model, positions={"target": xy["target"]})
    members = np.asarray(model.target_patterns_)[:, 0] != 0
    _same_rows(_collection(ax, "target:members:0"), xy["target"][members])
