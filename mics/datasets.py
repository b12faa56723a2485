"""Public example recordings, found locally or downloaded, as labelled xarray objects.

Each function returns one public recording that the tutorials use. It looks for
the files first in ``$MICS_DATA_DIR``, then in a ``shared/data`` folder next to
the repository or the working directory (``../shared/data``, the layout of the
project's own checkout), and otherwise downloads them once with :mod:`pooch`
from the public repository they were published in (URL pinned to a commit,
checked against its SHA-256) into the user's cache folder
(``pooch.os_cache("mics")``, e.g. ``~/.cache/mics`` on Linux).

=================================  ==========================================
:func:`semedo2019`                 macaque V1 + V2, Utah arrays (Semedo 2019)
:func:`park2024`                   mouse V1 two-photon, pupil and running
:func:`suite2p_example`            a real suite2p ``plane0`` folder, loaded
:func:`suite2p_example_folder`     the same folder as a path, for ``mics.io``
:func:`fetch`                      path of one file of the registry
=================================  ==========================================

File formats are read by :mod:`mics.io`; this module only knows *which*
recordings exist and where to get them.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import xarray as xr

from mics.io import DATA_DIR_ENV

__all__ = [
    "PARK2024_SESSIONS",
    "DatasetNotFoundError",
    "fetch",
    "park2024",
    "semedo2019",
    "suite2p_example",
    "suite2p_example_folder",
]

_RAW = "https://raw.githubusercontent.com"
_SEMEDO = f"{_RAW}/joao-semedo/communication-subspace/c28bf276d3e479299178778a2a3276ed18ad4556"
_PARK = f"{_RAW}/surlab/Park_et_al/6d53beb9841ca3a1120a94855b1198896e19aa5f/sample-data/glm"
_PYNAPPLE = f"{_RAW}/pynapple-org/pynapple/{{commit}}/tests/nwbfilestest/suite2p/suite2p/plane0"

#: Sessions of Park et al. (2024) published with their code (``sample-data/glm``).
PARK2024_SESSIONS = (
    "230803_mrcuts24_fov1",
    "230803_mrcuts25_fov6",
    "230804_mrcuts26_fov5",
    "230804_mrcuts27_fov3",
    "230809_mrcuts28_fov4",
    "230810_mrcuts29_fov2",
    "230814_mrcuts30_fov1",
)
_PARK_SHA256 = (
    "832214faef26d711bb98f820b1a2d3d5dfcfc412e319a387c128a95c86a43da6",
    "ed4e01cf205e93791205b3b78bc441b4071847eed8788b3faaeebf50b987416b",
    "816a21ce2fdb4039fa13e35d0173cf77fad3f5293ea95ef3d90e2614432c38a2",
    "f0e3910cbd32f90a3f2a5487d3b715acfc0023ef1dbf8c0d3984dea20100f34a",
    "b3935f05ced3dbd4f47a3035afd877d926a9ec8b149362d278b503ee562bcd18",
    "f41552cfe0fa95404b7367e21b84bec3edbce2941fc4d3ed4ef80a8f4c867c91",
    "797a6b9fd9892178717c17172ae2a0d35bf1b6625417acce61d61fc997cc6955",
)

# Relative path in the data folder -> (URL, SHA-256). The URLs name the commit of
# the public snapshot the local copies were taken from, so the bytes cannot change
# under a pinned hash; the hashes are those of the unchanged copies in shared/data
# (tests/test_datasets.py checks them). The URLs were not fetched when they were
# pinned (no network there): if one has moved, the error names it and the hash.
REGISTRY: dict[str, tuple[str, str]] = {
    "semedo2019/sample_data.mat": (
        f"{_SEMEDO}/mat_sample/sample_data.mat",
        "37cd032962360baf5f6f7b853fea5739e6bfd9038520ec6247d9932c51634ec1",
    ),
    **{
        f"park2024/{session}_grat-000_data.mat": (
            f"{_PARK}/{session}_grat-000_data.mat",
            sha,
        )
        for session, sha in zip(PARK2024_SESSIONS, _PARK_SHA256, strict=True)
    },
    **{
        f"suite2p_pynapple/{name}": (_PYNAPPLE.format(commit=commit) + f"/{name}", sha)
        for name, commit, sha in (
            (
                "F.npy",
                "7d0748aaa75c1e15a0395ee20e9ad7e821e8bd5a",
                "98b6facdb1cb24138f0677eb62c090d0c9252ba2c3c0bf3f6f51c2debfcd9625",
            ),
            (
                "Fneu.npy",
                "dfeb5fe0346b5e386c70dca0abc6ee4f92483625",
                "374981b9fbc1ef0cbba0ccfb91bc53a7ecfe4bff64cf5c9d0381bce32fa3a06e",
            ),
            (
                "spks.npy",
                "dfeb5fe0346b5e386c70dca0abc6ee4f92483625",
                "d300e5974c9a46516a8a40d36eaa8a663e55376e69edcc560d6642a2e03f7f84",
            ),
            (
                "iscell.npy",
                "7ea1345e1a2f04168d5fe05708ab65a10866c365",
                "cc109d5fffd172d3d9f39fdc077bf50df744eecc63223438e1f5caf41d780faf",
            ),
            (
                "stat.npy",
                "c99a9221d56cdbef433c7098cef63af80a938f5e",
                "5cbae5581fa28ab665f0e5f39f3a48b6a4c89c873e58ebe4f5fe1948e8777ed5",
            ),
        )
    },
}


class DatasetNotFoundError(FileNotFoundError):
    """An example recording is neither on disk nor downloadable (e.g. offline)."""


def local_folders() -> list[Path]:
    """Folders searched for the recordings before anything is downloaded.

    Returns
    -------
    list of pathlib.Path
        In order: ``$MICS_DATA_DIR`` (if set), ``../shared/data`` relative to
        the repository holding this package, and ``../shared/data`` relative to
        the current working directory. Folders that do not exist are included
        (they are named in the error message when a file is missing).
    """
    folders = []
    if os.environ.get(DATA_DIR_ENV):
        folders.append(Path(os.environ[DATA_DIR_ENV]).expanduser())
    repo = Path(__file__).resolve().parents[1]
    for base in (repo, Path.cwd()):
        candidate = (base / ".." / "shared" / "data").resolve()
        if candidate not in folders:
            folders.append(candidate)
    return folders


def cache_folder() -> Path:
    """Where downloads are kept: ``pooch.os_cache("mics")`` (the user's cache folder)."""
    import pooch

    return Path(pooch.os_cache("mics"))


def _download(url: str, sha256: str, relpath: str) -> Path:
    """Download one file into the cache (pooch checks the hash; kept if present)."""
    try:
        import pooch
    except ImportError as err:  # pragma: no cover - pooch is a dependency
        raise ImportError("downloading example data needs pooch: pip install pooch") from err
    folder = cache_folder() / Path(relpath).parent
    name = Path(relpath).name
    return Path(pooch.retrieve(url, known_hash=f"sha256:{sha256}", fname=name, path=folder))


def fetch(relpath: str) -> Path:
    """Path of one file of the example recordings, downloading it if needed.

    Parameters
    ----------
    relpath : str
        Its path inside the data folder, a key of ``mics.datasets.REGISTRY``
        (e.g. ``"semedo2019/sample_data.mat"``).

    Returns
    -------
    pathlib.Path
        A local copy: the first of :func:`local_folders` that holds it, else
        the verified download in :func:`cache_folder`.

    Raises
    ------
    KeyError
        If ``relpath`` is not a file of the registry.
    DatasetNotFoundError
        If no local copy exists and the download fails (no network, server
        gone, or a file whose SHA-256 differs from the pinned one).
    """
    if relpath not in REGISTRY:
        raise KeyError(f"relpath={relpath!r} is not an example file; known: {sorted(REGISTRY)}")
    for folder in local_folders():
        if (folder / relpath).is_file():
            return folder / relpath
    url, sha256 = REGISTRY[relpath]
    try:
        return _download(url, sha256, relpath)
    except Exception as err:  # network, HTTP and hash errors all mean "not available"
        places = "\n".join(f"  {folder / relpath}" for folder in local_folders())
        # "from None": the cause is summarised in one line, not a traceback from deep
        # inside the downloader.
        raise DatasetNotFoundError(
            f"example file {relpath!r} is not on this machine and could not be downloaded "
            f"({type(err).__name__}: {err}).\nPut a copy at one of\n{places}\n"
            f"(or set ${DATA_DIR_ENV} to a folder holding {relpath}); "
            f"it is published at {url} (sha256 {sha256})."
        ) from None


def semedo2019() -> xr.Dataset:
    """V1 and V2 population responses of Semedo et al. (2019), their sample data.

    Macaque V1 (Utah array) and V2 (tetrodes) recorded at once during drifting
    gratings, stimulus-mean subtracted, 400 trials x 10 time bins, as
    published with the reference communication-subspace code
    (github.com/joao-semedo/communication-subspace, MIT licence).

    Returns
    -------
    xarray.Dataset
        ``activity`` (``time``: 4000, ``neuron``: 141) with the neurons of
        the three matrices of the file side by side. Along ``neuron``:
        ``neuron`` (ids ``"V1s_00"``..., ``"V2_00"``..., ``"V1h_00"``...),
        ``area`` (``"V1"`` or ``"V2"``) and ``population``: ``"V1 source"``
        (``X``, 79 neurons), ``"V2"`` (``Y_V2``, 31) and ``"V1 held-out"``
        (``Y_V1``, 31 other V1 neurons). ``time`` is the sample index: the
        file stores neither the bin width nor the order of trials and bins,
        so no clock in seconds is invented. Select a population with
        ``ds.activity.where(ds.population == "V2", drop=True)`` or
        ``mics.io.build_inputs(ds, source={"population": "V1 source"}, ...)``.
    """
    from scipy import io as sio

    mat = sio.loadmat(fetch("semedo2019/sample_data.mat"))
    blocks = (("X", "V1s", "V1", "V1 source"), ("Y_V2", "V2", "V2", "V2"))
    blocks += (("Y_V1", "V1h", "V1", "V1 held-out"),)
    arrays = [np.asarray(mat[key], dtype=float) for key, *_ in blocks]
    n_samples = arrays[0].shape[0]
    ids, area, population = [], [], []
    for (_, prefix, region, label), values in zip(blocks, arrays, strict=True):
        ids += [f"{prefix}_{k:02d}" for k in range(values.shape[1])]
        area += [region] * values.shape[1]
        population += [label] * values.shape[1]
    activity = xr.DataArray(
        np.hstack(arrays),
        dims=("time", "neuron"),
        coords={
            "time": np.arange(n_samples),
            "neuron": ids,
            "area": ("neuron", area),
            "population": ("neuron", population),
        },
        name="activity",
    )
    return xr.Dataset(
        {"activity": activity},
        attrs={"source": "Semedo et al. 2019, sample_data.mat"},
    )


def park2024(session: str = "230809_mrcuts28_fov4") -> xr.Dataset:
    """One session of Park et al. (2024): mouse V1 calcium imaging with pupil and running.

    Two-photon GCaMP imaging during drifting gratings, 128 trials x 49
    samples at 16 Hz, published with the paper's code
    (github.com/surlab/Park_et_al, ``sample-data/glm``, MIT licence); read by
    :func:`mics.io.load_park2024`.

    Parameters
    ----------
    session : str, default="230809_mrcuts28_fov4"
        One of :data:`PARK2024_SESSIONS` (the ``_grat-000_data.mat`` suffix
        may be included).

    Returns
    -------
    xarray.Dataset
        ``activity`` (``time``, ``neuron``), ``pupil`` and ``speed``
        (``time``), with ``trial``, ``trial_time`` and ``direction``
        coordinates; see :func:`mics.io.load_park2024`.
    """
    from mics.io import load_park2024

    name = str(session).removesuffix(".mat").removesuffix("_grat-000_data")
    if name not in PARK2024_SESSIONS:
        raise ValueError(f"session={session!r} is not one of {PARK2024_SESSIONS}")
    return load_park2024(fetch(f"park2024/{name}_grat-000_data.mat"))


def suite2p_example_folder() -> Path:
    """A real suite2p ``plane0`` output folder (219 ROIs x 2000 frames), as a path.

    The folder of pynapple's suite2p loader tests
    (github.com/pynapple-org/pynapple, ``tests/nwbfilestest/suite2p``, MIT
    licence): ``F.npy``, ``Fneu.npy``, ``spks.npy``, ``iscell.npy`` and
    ``stat.npy``, without ``ops.npy``.

    Returns
    -------
    pathlib.Path
        The folder holding all five files, to pass to
        :func:`mics.io.load_suite2p`.
    """
    paths = [fetch(key) for key in REGISTRY if key.startswith("suite2p_pynapple/")]
    folders = {path.parent for path in paths}
    if len(folders) == 1:
        return folders.pop()
    # Some files local, some downloaded: gather the downloaded ones beside each other.
    target = cache_folder() / "suite2p_pynapple"
    target.mkdir(parents=True, exist_ok=True)
    for path in paths:
        if path.parent != target:
            (target / path.name).write_bytes(path.read_bytes())
    return target


def suite2p_example(fs: float = 30.0, **kwargs) -> xr.Dataset:
    """The example suite2p folder loaded by :func:`mics.io.load_suite2p`.

    Parameters
    ----------
    fs : float, default=30.0
        Frame rate (Hz). The folder has no ``ops.npy``, so its acquisition
        rate is not recorded; 30 Hz only sets the time axis in seconds.
    **kwargs
        Passed to :func:`mics.io.load_suite2p` (``only_cells``,
        ``variables``...). ``stat.npy`` is read with the restricted
        unpickler.

    Returns
    -------
    xarray.Dataset
        ``F``, ``Fneu`` and ``spks`` (``time``: 2000, ``neuron``: 219) with
        ``iscell``, ``iscell_prob``, ``med_y`` and ``med_x`` coordinates, and
        the ROI centres ``x`` and ``y`` in pixels (for
        :func:`mics.plotting.plot_members_fov`).
    """
    from mics.io import load_suite2p

    return load_suite2p(suite2p_example_folder(), fs=fs, **kwargs)
