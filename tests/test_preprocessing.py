"""Neuropil, dF/F, z-scoring, binning and behaviour alignment."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import scipy.stats
import xarray as xr

from mics.preprocessing import (
    align_to_frames,
    bin_time,
    delta_f_over_f,
    subtract_neuropil,
    zscore,
)

rng = np.random.default_rng(1)


def _traces(values, fs=10.0):
    n_time, n = values.shape
    return xr.DataArray(
        values,
        dims=("time", "neuron"),
        coords={"time": np.arange(n_time) / fs, "neuron": np.arange(100, 100 + n)},
        attrs={"fs": fs},
    )


# --------------------------------------------------------------------- neuropil


def test_subtract_neuropil_numpy_and_xarray():
    F, Fneu = rng.random((50, 4)) + 1, rng.random((50, 4))
    np.testing.assert_allclose(subtract_neuropil(F, Fneu, 0.7), F - 0.7 * Fneu)
    out = subtract_neuropil(_traces(F), _traces(Fneu), coefficient=0.5)
    np.testing.assert_allclose(out.values, F - 0.5 * Fneu)
    assert out.attrs["neuropil_coefficient"] == 0.5
    np.testing.assert_array_equal(out.neuron, np.arange(100, 104))


def test_subtract_neuropil_refuses_mismatches():
    with pytest.raises(ValueError, match="shape"):
        subtract_neuropil(np.ones((5, 3)), np.ones((5, 2)))
    with pytest.raises(ValueError, match=r"\[0, 1\]"):
        subtract_neuropil(np.ones(3), np.ones(3), coefficient=1.5)
    a = _traces(np.ones((5, 2)))
    b = a.assign_coords(neuron=[1, 2])  # same shape, different neurons
    with pytest.raises(ValueError):
        subtract_neuropil(a, b)


# ---------------------------------------------------------------------- dF / F


def _rank_filter_twin(x, percentile, window):
    """Running percentile as scipy defines it (rank statistic, edge-replicated)."""
    rank = int(window * percentile / 100.0)
    rank = min(rank, window - 1)
    half = window // 2
    padded = np.pad(x, (half, window - 1 - half), mode="edge")
    return np.array([np.sort(padded[t : t + window])[rank] for t in range(x.size)])


def test_percentile_baseline_matches_a_slow_twin():
    F = 5 + rng.random((120, 3))
    fs, window_s, pct = 10.0, 2.1, 20.0  # 21-frame window
    dff = delta_f_over_f(F, fs=fs, window_s=window_s, percentile=pct)
    for j in range(3):
        f0 = _rank_filter_twin(F[:, j], pct, 21)
        np.testing.assert_allclose(dff[:, j], (F[:, j] - f0) / f0)


def test_dff_recovers_transients_on_a_flat_baseline():
    # 2 % of samples carry transients: the 8th percentile of any window is the baseline.
    T, baseline = 600, 200.0
    transients = np.zeros((T, 2))
    transients[rng.choice(T, 12, replace=False), 0] = 0.5
    transients[rng.choice(T, 12, replace=False), 1] = 1.5
    F = _traces(baseline * (1 + transients), fs=20.0)
    for method in ("percentile", "maximin"):
        dff = delta_f_over_f(F, window_s=10.0, method=method, sigma_s=0.2)  # fs from attrs
        np.testing.assert_allclose(dff.values, transients, atol=1e-12, err_msg=method)
        assert dff.attrs["units"] == "dF/F" and dff.dims == ("time", "neuron")


def test_dff_refuses_non_positive_baseline_and_names_the_neurons():
    F = np.column_stack([np.full(100, 50.0), np.zeros(100), np.full(100, -3.0)])
    with pytest.raises(ValueError, match=r"2 neuron\(s\) \[101, 102\].*f0_floor") as err:
        delta_f_over_f(_traces(F), window_s=2.0)
    assert "inf" in str(err.value)
    out = delta_f_over_f(_traces(F), window_s=2.0, f0_floor=1.0)
    assert np.isfinite(out.values).all()
    np.testing.assert_allclose(out.values[:, 1], -1.0)  # (0 - 1) / 1
    with pytest.raises(ValueError, match="fs="):
        delta_f_over_f(F, window_s=2.0)  # NumPy input carries no rate
    with pytest.raises(ValueError, match="NaN"):
        delta_f_over_f(np.full((10, 1), np.nan), fs=10.0)
    with pytest.raises(ValueError, match="method"):
        delta_f_over_f(F + 100, fs=10.0, method="median")


@pytest.mark.shared_data
def test_dff_on_the_real_suite2p_traces_flags_empty_rois(data_dir):
    import mics.io

    ds = mics.io.load_suite2p(data_dir / "suite2p_pynapple", fs=30.0)
    empty = int((ds.F == 0).all("time").sum())
    assert empty > 0  # the folder has ROIs with all-zero F
    with pytest.raises(ValueError, match=r"F0 is <= 0 .* neuron\(s\) \[0, 1, ") as err:
        delta_f_over_f(ds.F, window_s=5.0)
    n_named = int(str(err.value).split(" neuron(s)")[0].rsplit(" ", 1)[1])
    assert n_named >= empty  # every empty ROI, plus ROIs whose F sits at 0 for long stretches
    kept = ds.F.isel(neuron=(ds.F > 0).all("time").values)
    assert np.isfinite(delta_f_over_f(kept, window_s=5.0).values).all()


# ---------------------------------------------------------------- z-score, bins


def test_zscore_matches_scipy_and_handles_constant_neurons():
    x = rng.standard_normal((80, 3)) * [1, 5, 9] + [0, 2, -4]
    np.testing.assert_allclose(zscore(x), scipy.stats.zscore(x, axis=0))
    da = _traces(np.column_stack([x, np.full(80, 3.0)])).transpose("neuron", "time")
    with pytest.warns(UserWarning, match=r"\[103\]"):
        out = zscore(da)
    assert out.dims == ("neuron", "time")
    np.testing.assert_allclose(out.values[:3].T, scipy.stats.zscore(x, axis=0))
    np.testing.assert_array_equal(out.values[3], 0.0)


def test_bin_time_numpy_and_xarray():
    x = np.arange(14.0).reshape(7, 2)
    np.testing.assert_array_equal(bin_time(x, 3), [[2.0, 3.0], [8.0, 9.0]])
    da = _traces(x, fs=10.0).assign_coords(trial=("time", [0, 0, 0, 1, 1, 1, 2]))
    out = bin_time(da, 3)
    np.testing.assert_array_equal(out.values, [[2.0, 3.0], [8.0, 9.0]])
    np.testing.assert_allclose(out.time.values, [0.1, 0.4])  # mean time of each bin
    np.testing.assert_array_equal(out.trial.values, [0, 1])
    assert out.attrs["fs"] == pytest.approx(10.0 / 3)
    with pytest.raises(ValueError, match="positive whole number"):
        bin_time(x, 0)
    with pytest.raises(ValueError, match="fewer than one bin"):
        bin_time(x, 8)


# ------------------------------------------------------------ behaviour alignment


def _speed(t):
    return np.sin(2 * np.pi * 0.3 * t) + t / 10


def test_fast_behaviour_is_bin_averaged_onto_frames():
    frames = 5.0 + np.arange(100) * 0.1  # 10 Hz imaging
    bt = np.arange(0, 20, 0.02)  # 50 Hz wheel
    beh = xr.DataArray(_speed(bt), dims="time", coords={"time": bt}, name="speed")
    out = align_to_frames(beh, frames)
    expected = [_speed(bt[np.abs(bt - f) < 0.05]).mean() for f in frames]
    np.testing.assert_allclose(out.values, expected)
    np.testing.assert_allclose(out.time.values, frames)
    assert out.attrs["alignment"] == "mean" and out.attrs["n_missing_frames"] == 0


def test_slow_behaviour_is_interpolated_and_short_blinks_filled():
    frames = np.arange(200) / 30.0
    bt = np.arange(-1, 8, 0.2)  # 5 Hz pupil camera
    pupil = 2 + 0.1 * bt
    pupil[20] = np.nan  # one dropped sample: a 0.4 s gap, shorter than max_gap_s
    out = align_to_frames(pupil, frames, behaviour_times=bt)  # NumPy path
    assert isinstance(out, np.ndarray)
    np.testing.assert_allclose(out, 2 + 0.1 * frames)  # linear: interpolation is exact


def test_long_gaps_stay_nan_and_are_reported():
    frames = np.arange(100) / 10.0
    bt = np.arange(0, 10, 0.01)
    values = np.ones((bt.size, 2))
    values[(bt > 3) & (bt < 5), 1] = np.nan  # a 2 s blink in the second column
    beh = xr.DataArray(
        values, dims=("time", "eye"), coords={"time": bt, "eye": ["left", "right"]}, name="pupil"
    )
    with pytest.warns(UserWarning, match="frames have no usable 'pupil'"):
        out = align_to_frames(beh, frames, max_gap_s=0.5)
    blink = (frames > 3.05) & (frames < 4.95)
    assert np.isnan(out.values[blink, 1]).all()
    assert not np.isnan(out.values[~blink]).any()
    assert out.attrs["n_missing_frames"] == blink.sum()
    np.testing.assert_array_equal(out.eye.values, ["left", "right"])


def test_partial_overlap_gives_nan_outside_the_behaviour_recording():
    frames = np.arange(50) / 10.0
    bt = np.arange(2.0, 10.0, 0.5)  # starts 2 s after imaging, slower
    with pytest.warns(UserWarning, match="20 of 50"):
        out = align_to_frames(bt * 3, frames, behaviour_times=bt)
    assert np.isnan(out[frames < 2.0]).all()
    np.testing.assert_allclose(out[frames >= 2.0], frames[frames >= 2.0] * 3)


def test_non_overlapping_clocks_are_refused():
    frames = np.arange(100) / 10.0
    bt = 1000 + np.arange(100) / 50.0  # behaviour clock not in the imaging clock's seconds
    with pytest.raises(ValueError, match="does not overlap the imaging clock"):
        align_to_frames(np.ones(100), frames, behaviour_times=bt)
    with pytest.raises(ValueError, match="strictly increasing"):
        align_to_frames(np.ones(3), frames, behaviour_times=[0.0, 2.0, 1.0])
    with pytest.raises(ValueError, match="behaviour_times"):
        align_to_frames(np.ones(3), frames)


def test_no_warning_when_nothing_is_missing():
    frames = np.arange(20) / 10.0
    # 20 Hz behaviour, offset so that no sample sits on a frame-bin edge (halfway
    # between frames), linear in time: each frame gets the mean of its samples.
    bt = 0.0125 + np.arange(40) / 20.0
    values = 3.0 + 2.0 * bt
    beh = xr.DataArray(values, dims="time", coords={"time": bt}, name="speed")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        out = align_to_frames(values, frames, behaviour_times=bt)
        labelled = align_to_frames(beh, frames)
    expected = [values[np.abs(bt - f) < 0.05].mean() for f in frames]
    np.testing.assert_allclose(out, expected, rtol=0, atol=1e-12)
    # two samples per frame, centred 12.5 ms early; the first frame has only one
    np.testing.assert_allclose(out[1:], 3.0 + 2.0 * (frames[1:] - 0.0125), atol=1e-12)
    assert out[0] == pytest.approx(3.0 + 2.0 * 0.0125)
    np.testing.assert_array_equal(labelled.values, out)
    assert labelled.attrs["n_missing_frames"] == 0 and labelled.attrs["alignment"] == "mean"
