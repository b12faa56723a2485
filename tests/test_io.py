"""Loaders (suite2p, NWB, CaImAn, Park 2024), netCDF/zarr round trips, build_inputs."""

from __future__ import annotations

import os
from datetime import datetime, timezone

import h5py
import numpy as np
import pytest
import scipy.io
import xarray as xr

import mics.io

rng = np.random.default_rng(7)

# ------------------------------------------------------------------------ suite2p


def _write_suite2p(folder, n_rois=6, n_frames=50, ops=None):
    folder.mkdir(parents=True, exist_ok=True)
    F = rng.random((n_rois, n_frames)).astype(np.float32) + 1
    np.save(folder / "F.npy", F)
    np.save(folder / "Fneu.npy", 0.5 * F)
    np.save(folder / "spks.npy", rng.random((n_rois, n_frames)).astype(np.float32))
    iscell = np.column_stack([np.arange(n_rois) % 2, np.linspace(0, 1, n_rois)])
    np.save(folder / "iscell.npy", iscell)
    stat = np.array(
        [{"med": [10 * k, 20 * k], "npix": 30, "ypix": np.arange(3)} for k in range(n_rois)],
        dtype=object,
    )
    np.save(folder / "stat.npy", stat, allow_pickle=True)
    if ops is not None:
        np.save(folder / "ops.npy", ops, allow_pickle=True)
    return F, iscell


@pytest.mark.shared_data
def test_real_suite2p_folder_loads_with_labels(data_dir):
    folder = data_dir / "suite2p_pynapple"
    ds = mics.io.load_suite2p(folder, fs=30.0)
    assert ds.sizes == {"time": 2000, "neuron": 219}
    F = np.load(folder / "F.npy")
    np.testing.assert_array_equal(ds.F.values, F.T)  # ROIs x frames -> time x neuron
    iscell = np.load(folder / "iscell.npy")
    np.testing.assert_array_equal(ds.iscell.values, iscell[:, 0] == 1)
    assert ds.iscell.dtype == bool and 0 < ds.iscell.sum() < 219
    np.testing.assert_allclose(ds.time.values[[0, 1, -1]], [0.0, 1 / 30, 1999 / 30])
    assert ds.attrs["fs"] == 30.0 and ds.F.attrs["fs"] == 30.0
    # The restricted unpickler reads the same ROI centres as a full (trusted) unpickle.
    trusted = mics.io.load_suite2p(folder, fs=30.0, trust=True)
    xr.testing.assert_identical(ds, trusted)
    stat = np.load(folder / "stat.npy", allow_pickle=True)
    np.testing.assert_array_equal(ds.med_x.values, [s["med"][1] for s in stat])
    cells = mics.io.load_suite2p(folder, fs=30.0, only_cells=True)
    assert cells.sizes["neuron"] == int(iscell[:, 0].sum())


@pytest.mark.shared_data
def test_real_suite2p_folder_without_rate_says_how_to_give_one(data_dir):
    with pytest.raises(ValueError, match=r"fs=30\.0"):
        mics.io.load_suite2p(data_dir / "suite2p_pynapple")


def test_suite2p_rate_from_ops_and_placeholders(tmp_path):
    _write_suite2p(tmp_path / "a", ops={"fs": 15.5, "nframes": 50, "filelist": ["x.tif"]})
    ds = mics.io.load_suite2p(tmp_path / "a")
    assert ds.attrs["fs"] == 15.5 and ds.attrs["fs_origin"] == "ops.npy"
    np.testing.assert_allclose(np.diff(ds.time.values), 1 / 15.5)
    with pytest.warns(UserWarning, match="overrides"):
        assert mics.io.load_suite2p(tmp_path / "a", fs=30.0).attrs["fs"] == 30.0

    _write_suite2p(tmp_path / "b", ops={"fs": 0.0})
    with pytest.raises(ValueError, match="placeholder"):
        mics.io.load_suite2p(tmp_path / "b")
    with pytest.raises(ValueError, match="placeholder"):
        mics.io.load_suite2p(tmp_path / "a", fs=-1)
    _write_suite2p(tmp_path / "c", ops={"fs": 10.0})
    with pytest.warns(UserWarning, match="suite2p's default"):
        mics.io.load_suite2p(tmp_path / "c")


class _Exploit:
    """A pickle that would call a function when loaded."""

    def __reduce__(self):
        return (os.getcwd, ())


def test_suite2p_refuses_arbitrary_pickles_unless_trusted(tmp_path):
    _write_suite2p(tmp_path, ops={"fs": 20.0})
    np.save(tmp_path / "ops.npy", np.array({"fs": 20.0, "x": _Exploit()}), allow_pickle=True)
    with pytest.raises(ValueError, match="trust=True") as err:
        mics.io.load_suite2p(tmp_path)
    assert "getcwd" in str(err.value)
    # Trusted: the pickle runs (here harmlessly) and the rate is read.
    assert mics.io.load_suite2p(tmp_path, trust=True).attrs["fs"] == 20.0


def test_suite2p_bad_folders(tmp_path):
    with pytest.raises(FileNotFoundError, match="not found"):
        mics.io.load_suite2p(tmp_path / "nowhere", fs=10.0)
    _write_suite2p(tmp_path / "suite2p" / "plane0")
    with pytest.raises(FileNotFoundError, match="plane0"):
        mics.io.load_suite2p(tmp_path / "suite2p", fs=10.0)
    folder = tmp_path / "suite2p" / "plane0"
    np.save(folder / "Fneu.npy", np.zeros((6, 49), dtype=np.float32))
    with pytest.raises(ValueError, match=r"Fneu\.npy has shape \(6, 49\)"):
        mics.io.load_suite2p(folder, fs=10.0)


# --------------------------------------------------------------------------- NWB

FS_IMAGING = 10.0
N_FRAMES = 300
T0 = 5.0


def _speed(t):
    return 1 + np.sin(2 * np.pi * 0.2 * t)


def _write_nwb(path, *, speed_start=0.0, ophys=True):
    """Two imaging planes (PFC, V1), running speed at 50 Hz and pupil at 5 Hz."""
    from pynwb import NWBHDF5IO, NWBFile, TimeSeries
    from pynwb.behavior import BehavioralTimeSeries, PupilTracking
    from pynwb.ophys import Fluorescence, ImageSegmentation, OpticalChannel

    nwb = NWBFile(
        session_description="mics test",
        identifier="mics-test",
        session_start_time=datetime(2024, 1, 1, tzinfo=timezone.utc),
    )
    truth = {}
    if ophys:
        device = nwb.create_device(name="scope")
        ophys_module = nwb.create_processing_module("ophys", "calcium")
        segmentation = ImageSegmentation()
        fluorescence = Fluorescence()
        ophys_module.add(segmentation)
        ophys_module.add(fluorescence)
        frames = T0 + np.arange(N_FRAMES) / FS_IMAGING
        for k, (area, n_rois) in enumerate([("PFC", 4), ("V1", 3)]):
            plane = nwb.create_imaging_plane(
                name=f"plane{k}",
                optical_channel=OpticalChannel(
                    name="green", description="GCaMP", emission_lambda=510.0
                ),
                description=f"{area} plane",
                device=device,
                excitation_lambda=920.0,
                imaging_rate=FS_IMAGING,
                indicator="GCaMP6s",
                location=area,
            )
            table = segmentation.create_plane_segmentation(
                name=f"rois_{area}", description=area, imaging_plane=plane
            )
            for _ in range(n_rois):
                table.add_roi(image_mask=rng.random((4, 4)))
            data = rng.standard_normal((N_FRAMES, n_rois))
            truth[area] = data
            fluorescence.create_roi_response_series(
                name=f"F_{area}",
                data=data,
                rois=table.create_roi_table_region(description="all", region=list(range(n_rois))),
                unit="a.u.",
                # Plane 1 is scanned 30 ms after plane 0 in each volume: the same frames.
                timestamps=frames + 0.03 * k,
            )
    behaviour = nwb.create_processing_module("behavior", "behaviour")
    bt = speed_start + np.arange(2500) / 50.0
    behaviour.add(
        BehavioralTimeSeries(
            time_series=TimeSeries(
                name="running_speed",
                data=_speed(bt),
                unit="cm/s",
                starting_time=speed_start,
                rate=50.0,
            )
        )
    )
    pt = np.arange(0.0, 50.0, 0.2)
    pupil = 3 + 0.05 * pt
    pupil[100] = np.nan  # a blink
    behaviour.add(
        PupilTracking(time_series=TimeSeries(name="pupil", data=pupil, unit="px", timestamps=pt))
    )
    with NWBHDF5IO(str(path), "w") as io:
        io.write(nwb)
    return truth


@pytest.fixture(scope="module")
def nwb_file(tmp_path_factory):
    path = tmp_path_factory.mktemp("nwb") / "two_areas.nwb"
    return path, _write_nwb(path)


def test_nwb_two_areas_round_trip_into_model_inputs(nwb_file):
    path, truth = nwb_file
    ds = mics.io.load_nwb(path)
    frames = T0 + np.arange(N_FRAMES) / FS_IMAGING
    np.testing.assert_allclose(ds.time.values, frames)
    assert ds.attrs["fs"] == pytest.approx(FS_IMAGING)
    assert list(np.unique(ds.area.values)) == ["PFC", "V1"]

    X, Y, Z = mics.io.build_inputs(
        ds, source={"area": "PFC"}, target={"area": "V1"}, modulators=["running_speed", "pupil"]
    )
    assert X.dims == Y.dims == ("time", "neuron") and Z.dims == ("time", "modulator")
    np.testing.assert_allclose(X.values, truth["PFC"])
    np.testing.assert_allclose(Y.values, truth["V1"])
    assert list(X.neuron.values) == ["rois_PFC/0", "rois_PFC/1", "rois_PFC/2", "rois_PFC/3"]
    assert list(Z.modulator.values) == ["running_speed", "pupil"]
    np.testing.assert_array_equal(Z.time.values, X.time.values)
    # 50 Hz speed averaged over each 100 ms frame (5 samples centred on the frame).
    bt = np.arange(2500) / 50.0
    expected = [_speed(bt[np.abs(bt - f) < 0.05]).mean() for f in frames]
    np.testing.assert_allclose(Z.sel(modulator="running_speed").values, expected)
    # 5 Hz pupil is linear in time: interpolation (and the blink fill) is exact.
    np.testing.assert_allclose(Z.sel(modulator="pupil").values, 3 + 0.05 * frames)

    # ...and a MIC fit runs on them, with patterns labelled by ROI and behaviour.
    model = mics.MICs(rank=1, n_channels=1, random_state=0).fit(X, Y, Z)
    assert list(model.source_patterns_.neuron.values) == list(X.neuron.values)
    assert list(model.modulator_patterns_.modulator.values) == ["running_speed", "pupil"]
    plain = mics.MICs(rank=1, n_channels=1, random_state=0).fit(X.values, Y.values, Z.values)
    np.testing.assert_allclose(model.predict(X, Z).values, plain.predict(X.values, Z.values))


def test_nwb_select_series_and_behaviour(nwb_file):
    path, truth = nwb_file
    ds = mics.io.load_nwb(path, series=["F_V1"], behaviour=False)
    assert set(ds.data_vars) == {"activity"}
    np.testing.assert_allclose(ds.activity.values, truth["V1"])
    with pytest.raises(ValueError, match=r"not found; available: \['pupil', 'running_speed'\]"):
        mics.io.load_nwb(path, behaviour=["speed"])
    with pytest.raises(ValueError, match="DfOverF"):
        mics.io.load_nwb(path, kind="DfOverF")


def test_nwb_bad_files(tmp_path):
    no_ophys = tmp_path / "behaviour_only.nwb"
    _write_nwb(no_ophys, ophys=False)
    with pytest.raises(ValueError, match="no 'ophys' processing module"):
        mics.io.load_nwb(no_ophys)
    late = tmp_path / "late_wheel.nwb"
    _write_nwb(late, speed_start=5000.0)  # behaviour on another clock
    with pytest.raises(ValueError, match="'running_speed'.*does not overlap the imaging clock"):
        mics.io.load_nwb(late)
    with pytest.raises(FileNotFoundError):
        mics.io.load_nwb(tmp_path / "missing.nwb")
    garbage = tmp_path / "garbage.nwb"
    garbage.write_bytes(b"not hdf5")
    with pytest.raises(ValueError, match="NWB"):
        mics.io.load_nwb(garbage)


# ------------------------------------------------------------------- build_inputs


def _toy_dataset(n_time=20):
    return xr.Dataset(
        {
            "activity": (("time", "neuron"), rng.standard_normal((n_time, 5))),
            "speed": ("time", np.arange(n_time, dtype=float)),
            "eye": (("time", "side"), np.ones((n_time, 2))),
        },
        coords={
            "time": np.arange(n_time) / 10.0,
            "neuron": [10, 11, 12, 13, 14],
            "area": ("neuron", ["A", "A", "B", "B", "B"]),
            "side": ["l", "r"],
        },
        attrs={"fs": 10.0},
    )


def test_build_inputs_selection_and_errors():
    ds = _toy_dataset()
    X, Y, Z = mics.io.build_inputs(ds, [10, 12], {"area": "B"}, allow_overlap=True)
    assert Z is None and list(X.neuron.values) == [10, 12] and Y.sizes["neuron"] == 3
    X, Y, Z = mics.io.build_inputs(ds, {"area": "A"}, {"area": "B"}, ["speed", "eye"])
    assert list(Z.modulator.values) == ["speed", "eye_l", "eye_r"]
    np.testing.assert_array_equal(Z.sel(modulator="speed").values, np.arange(20.0))
    with pytest.raises(ValueError, match=r"no neuron has area in \['C'\].*\['A', 'B'\]"):
        mics.io.build_inputs(ds, {"area": "C"}, {"area": "B"})
    with pytest.raises(ValueError, match="both source and target"):
        mics.io.build_inputs(ds, {"area": "B"}, [12])
    with pytest.raises(ValueError, match="no coordinate 'layer'"):
        mics.io.build_inputs(ds, {"layer": 2}, {"area": "B"})
    with pytest.raises(ValueError, match="modulator 'pupil' not found"):
        mics.io.build_inputs(ds, {"area": "A"}, {"area": "B"}, ["pupil"])


def test_build_inputs_refuses_other_clocks_and_nans():
    ds = _toy_dataset()
    slow = xr.DataArray(np.ones(7), dims="time", coords={"time": np.arange(7) / 3}, name="wheel")
    with pytest.raises(ValueError, match="7 samples but the activity has 20.*align_to_frames"):
        mics.io.build_inputs(ds, {"area": "A"}, {"area": "B"}, [slow])
    shifted = ds.speed.assign_coords(time=ds.time + 100.0)
    with pytest.raises(ValueError, match="different clock"):
        mics.io.build_inputs(ds.activity, {"area": "A"}, {"area": "B"}, shifted)
    ds["speed"][[3, 4]] = np.nan
    with pytest.raises(ValueError, match="2 of 20 time points.*dropna=True"):
        mics.io.build_inputs(ds, {"area": "A"}, {"area": "B"}, "speed")
    X, Y, Z = mics.io.build_inputs(ds, {"area": "A"}, {"area": "B"}, "speed", dropna=True)
    assert X.sizes["time"] == Y.sizes["time"] == Z.sizes["time"] == 18
    assert not np.isnan(Z.values).any() and X.attrs["n_dropped_nan"] == 2
    two = ds.assign(F2=ds.activity * 2)
    with pytest.raises(ValueError, match="variable="):
        mics.io.build_inputs(two, {"area": "A"}, {"area": "B"})
    X2, _, _ = mics.io.build_inputs(two, {"area": "A"}, {"area": "B"}, variable="F2")
    np.testing.assert_allclose(X2.values, 2 * ds.activity.sel(neuron=[10, 11]).values)


# ------------------------------------------------------------------------ CaImAn


def _write_caiman(path, *, f_dff=True, idx=(0, 2, 3), fr=15.0, S_shape=None):
    n_comp, n_frames = 5, 40
    C = rng.random((n_comp, n_frames))
    with h5py.File(path, "w") as f:
        est = f.create_group("estimates")
        est["C"] = C
        est["S"] = rng.random(S_shape or (n_comp, n_frames))
        est["F_dff"] = C / 2 if f_dff else "NoneType"
        est["idx_components"] = np.array(idx) if idx is not None else "NoneType"
        est["dims"] = np.array([32, 32])
        if fr is not None:
            f["params/data/fr"] = fr
            f["params/data/decay_time"] = 0.4
    return C


def test_caiman_file_loads(tmp_path):
    C = _write_caiman(tmp_path / "cnm.hdf5")
    ds = mics.io.load_caiman(tmp_path / "cnm.hdf5")
    np.testing.assert_array_equal(ds.C.values, C.T)
    np.testing.assert_array_equal(ds.F_dff.values, C.T / 2)
    np.testing.assert_array_equal(ds.iscell.values, [True, False, True, True, False])
    np.testing.assert_allclose(np.diff(ds.time.values), 1 / 15.0)
    accepted = mics.io.load_caiman(tmp_path / "cnm.hdf5", accepted_only=True)
    np.testing.assert_array_equal(accepted.neuron.values, [0, 2, 3])
    np.testing.assert_array_equal(accepted.C.values, C[[0, 2, 3]].T)

    # CaImAn writes None as the string 'NoneType': no F_dff, no evaluation.
    _write_caiman(tmp_path / "raw.hdf5", f_dff=False, idx=None)
    raw = mics.io.load_caiman(tmp_path / "raw.hdf5")
    assert set(raw.data_vars) == {"C", "S"} and raw.iscell.values.all()


def test_caiman_bad_files(tmp_path):
    _write_caiman(tmp_path / "nofr.hdf5", fr=None)
    with pytest.raises(ValueError, match="fs="):
        mics.io.load_caiman(tmp_path / "nofr.hdf5")
    assert mics.io.load_caiman(tmp_path / "nofr.hdf5", fs=7.5).attrs["fs"] == 7.5
    _write_caiman(tmp_path / "shape.hdf5", S_shape=(5, 39))
    with pytest.raises(ValueError, match=r"estimates/S has shape \(5, 39\)"):
        mics.io.load_caiman(tmp_path / "shape.hdf5")
    with h5py.File(tmp_path / "other.h5", "w") as f:
        f["x"] = 1
    with pytest.raises(ValueError, match="no 'estimates' group"):
        mics.io.load_caiman(tmp_path / "other.h5")
    with pytest.raises(FileNotFoundError):
        mics.io.load_caiman(tmp_path / "absent.hdf5")


# --------------------------------------------------------------------- Park 2024

PARK = "park2024/230803_mrcuts24_fov1_grat-000_data.mat"


@pytest.mark.shared_data
def test_park2024_loads_into_a_labelled_dataset(data_dir):
    ds = mics.io.load_park2024(data_dir / PARK)
    assert ds.sizes == {"time": 128 * 49, "neuron": 28}
    assert ds.attrs["fs"] == 16.0
    raw = scipy.io.loadmat(data_dir / PARK)  # the nested cell layout, read independently
    D, TE = raw["D"][0, 0], raw["TE"][0, 0]
    trial, sample = 37, 20
    position = trial * 49 + sample
    expected = D["neuron5"][0, trial][sample, 0]
    assert ds.activity.sel(neuron=5).values[position] == expected
    assert ds.pupil.values[position] == D["pupil_zscore"][0, trial][sample, 0]
    assert ds.trial.values[position] == trial
    assert ds.trial_time.values[position] == pytest.approx(raw["t"].ravel()[sample])
    assert ds.trial_time.values[16] == 0.0  # stimulus onset
    assert ds.direction.values[position] == TE["direction"][0, trial]
    # speed mixes uint8 and double cells: every trial comes back as float, values kept.
    speeds = D["speed"][0]
    kinds = {speeds[i].dtype.kind for i in range(128)}
    assert kinds == {"u", "f"}
    assert ds.speed.dtype == np.float64
    for i in (0, 1):
        np.testing.assert_array_equal(ds.speed.values[i * 49 : (i + 1) * 49], speeds[i].ravel())


def test_park2024_bad_files(tmp_path):
    with pytest.raises(FileNotFoundError):
        mics.io.load_park2024(tmp_path / "absent.mat")
    scipy.io.savemat(tmp_path / "other.mat", {"x": np.ones(3)})
    with pytest.raises(ValueError, match=r"lacks \['D', 'TE', 't'\]"):
        mics.io.load_park2024(tmp_path / "other.mat")
    (tmp_path / "text.mat").write_text("hello")
    with pytest.raises(ValueError, match="MATLAB"):
        mics.io.load_park2024(tmp_path / "text.mat")


# ------------------------------------------------------------ netCDF / zarr / env


# zarr 3 warns that fixed-width unicode (string neuron ids) has no v3 spec yet.
@pytest.mark.filterwarnings("ignore:The data type", "ignore:Consolidated metadata")
@pytest.mark.parametrize("fmt", ["netcdf", "zarr"])
def test_loader_output_round_trips_through_netcdf_and_zarr(tmp_path, nwb_file, fmt):
    _write_suite2p(tmp_path / "plane0", ops={"fs": 12.0})
    path, truth = nwb_file
    for ds in (mics.io.load_suite2p(tmp_path / "plane0"), mics.io.load_nwb(path)):
        target = tmp_path / f"{ds.attrs['loader']}.{fmt}"
        if fmt == "netcdf":
            ds.to_netcdf(target)
            back = xr.open_dataset(target).load()
        else:
            ds.to_zarr(target)
            back = xr.open_zarr(target).load()
        # Values, coordinates (bool iscell, string neuron ids) and attributes all survive.
        xr.testing.assert_identical(back, ds)
        if ds.attrs["loader"] == "mics.io.load_suite2p":
            assert back.iscell.dtype == bool
            np.testing.assert_array_equal(back.iscell.values, [False, True] * 3)
        else:
            # string labels come back as unicode (not bytes/object), and the
            # activity read back is the one written to the NWB file
            for name in ("neuron", "area", "population", "imaging_plane"):
                assert back[name].dtype.kind == "U", name
            assert list(back.area.values) == ["PFC"] * 4 + ["V1"] * 3
            np.testing.assert_array_equal(back.neuron.values[[0, 4]], ["rois_PFC/0", "rois_V1/0"])
            np.testing.assert_allclose(
                back.activity.values, np.column_stack([truth["PFC"], truth["V1"]])
            )


def test_data_dir_reads_the_environment(monkeypatch, tmp_path):
    monkeypatch.delenv("MICS_DATA_DIR", raising=False)
    assert mics.io.data_dir() is None
    monkeypatch.setenv("MICS_DATA_DIR", str(tmp_path))
    assert mics.io.data_dir() == tmp_path
