"""mics.datasets: local copies first, pinned downloads otherwise, clear offline errors.

No test touches the network: downloads are replaced by a fake or by a failure.
"""

from __future__ import annotations

import hashlib

import numpy as np
import pytest
import scipy.io

import mics.datasets as datasets


def _sha256(path):
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.mark.shared_data
def test_registry_hashes_match_the_local_copies(data_dir):
    """The pinned SHA-256 of every file is that of the published copy in shared/data."""
    for relpath, (url, sha) in datasets.REGISTRY.items():
        assert url.startswith("https://raw.githubusercontent.com/")
        assert _sha256(data_dir / relpath) == sha, relpath


@pytest.mark.shared_data
def test_semedo2019_keeps_the_three_matrices_and_labels_them(data_dir):
    mat = scipy.io.loadmat(data_dir / "semedo2019" / "sample_data.mat")
    ds = datasets.semedo2019()
    act = ds.activity
    for population, key in (("V1 source", "X"), ("V2", "Y_V2"), ("V1 held-out", "Y_V1")):
        block = act.where(act.population == population, drop=True)
        np.testing.assert_array_equal(block.values, mat[key])
    assert (act.area == "V2").sum().item() == mat["Y_V2"].shape[1]
    assert len(set(act.neuron.values.tolist())) == act.sizes["neuron"]


@pytest.mark.shared_data
def test_park2024_session_names_and_content(data_dir):
    ds = datasets.park2024("230810_mrcuts29_fov2_grat-000_data.mat")
    direct = datasets.park2024("230810_mrcuts29_fov2")
    np.testing.assert_array_equal(ds.activity.values, direct.activity.values)
    assert ds.attrs["n_trials"] * ds.attrs["n_samples_per_trial"] == ds.sizes["time"]
    with pytest.raises(ValueError, match="session="):
        datasets.park2024("230810_mrcuts99_fov2")


@pytest.mark.shared_data
def test_suite2p_example_is_the_shared_folder(data_dir):
    assert datasets.suite2p_example_folder() == (data_dir / "suite2p_pynapple").resolve()
    ds = datasets.suite2p_example(fs=20.0)
    F = np.load(data_dir / "suite2p_pynapple" / "F.npy")
    np.testing.assert_array_equal(ds.F.values, F.T)
    assert ds.time.values[1] == pytest.approx(1 / 20.0)


def test_data_dir_variable_comes_first(tmp_path, monkeypatch):
    """A copy in $MICS_DATA_DIR is used before ../shared/data."""
    rng = np.random.default_rng(0)
    mats = {
        "X": rng.normal(size=(6, 3)),
        "Y_V2": rng.normal(size=(6, 2)),
        "Y_V1": rng.normal(size=(6, 2)),
    }
    (tmp_path / "semedo2019").mkdir()
    scipy.io.savemat(tmp_path / "semedo2019" / "sample_data.mat", mats)
    monkeypatch.setenv("MICS_DATA_DIR", str(tmp_path))
    assert datasets.local_folders()[0] == tmp_path
    ds = datasets.semedo2019()
    assert ds.sizes == {"time": 6, "neuron": 7}
    np.testing.assert_array_equal(ds.activity.sel(neuron="V2_01").values, mats["Y_V2"][:, 1])


def test_download_uses_the_pinned_url_and_hash(tmp_path, monkeypatch):
    """Without local copies, pooch is asked for the pinned URL and SHA-256, into the cache."""
    pooch = pytest.importorskip("pooch")
    calls = []

    def fake_retrieve(url, known_hash, fname, path):
        calls.append((url, known_hash, fname, path))
        out = path / fname
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_bytes(b"x")
        return str(out)

    monkeypatch.setattr(datasets, "local_folders", lambda: [tmp_path / "nowhere"])
    monkeypatch.setattr(datasets, "cache_folder", lambda: tmp_path / "cache")
    monkeypatch.setattr(pooch, "retrieve", fake_retrieve)
    path = datasets.fetch("park2024/230803_mrcuts24_fov1_grat-000_data.mat")
    url, sha = datasets.REGISTRY["park2024/230803_mrcuts24_fov1_grat-000_data.mat"]
    assert calls == [(url, f"sha256:{sha}", path.name, tmp_path / "cache" / "park2024")]
    assert path == tmp_path / "cache" / "park2024" / "230803_mrcuts24_fov1_grat-000_data.mat"


def test_offline_error_says_where_to_put_the_file(tmp_path, monkeypatch):
    pooch = pytest.importorskip("pooch")
    requests = pytest.importorskip("requests")

    def offline(*args, **kwargs):
        raise requests.exceptions.ConnectionError("Failed to resolve raw.githubusercontent.com")

    monkeypatch.setattr(datasets, "local_folders", lambda: [tmp_path / "data"])
    monkeypatch.setattr(datasets, "cache_folder", lambda: tmp_path / "cache")
    monkeypatch.setattr(pooch, "retrieve", offline)
    with pytest.raises(datasets.DatasetNotFoundError) as info:
        datasets.semedo2019()
    message = str(info.value)
    assert str(tmp_path / "data" / "semedo2019" / "sample_data.mat") in message
    assert "MICS_DATA_DIR" in message and "ConnectionError" in message
    assert datasets.REGISTRY["semedo2019/sample_data.mat"][0] in message
    # No chained traceback from inside the downloader.
    assert info.value.__cause__ is None and info.value.__suppress_context__
    assert isinstance(info.value, FileNotFoundError)


def test_unknown_file_is_refused():
    with pytest.raises(KeyError, match="relpath="):
        datasets.fetch("semedo2019/other.mat")
