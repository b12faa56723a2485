"""Calcium-imaging recordings in, labelled xarray objects out.

Every loader returns an :class:`xarray.Dataset` whose traces have dims
(``time``, ``neuron``), with ``time`` in seconds, neuron ids and labels
(``iscell``, ``population``, ``area``...) as coordinates, and the sampling rate
in ``attrs["fs"]`` (Hz) next to the source file.

======================  =====================================================
:func:`load_suite2p`    suite2p ``plane0`` folder (F, Fneu, spks, iscell, stat)
:func:`load_nwb`        NWB ophys traces + behavioural TimeSeries (pynwb)
:func:`load_caiman`     CaImAn CNMF ``.hdf5`` estimates (h5py)
:func:`load_park2024`   Park et al. 2024 trial-structured ``.mat`` files
:func:`build_inputs`    one recording -> source X, target Y, modulator Z
:func:`data_dir`        folder of example recordings (``$MICS_DATA_DIR``)
======================  =====================================================

netCDF and zarr need no loader of their own: xarray reads and writes them, and
the loaders' outputs are built to round-trip (plain numeric/string/bool
coordinates, scalar attributes)::

    ds = mics.io.load_suite2p("suite2p/plane0", fs=30.0)
    ds.to_netcdf("session.nc")           # needs netCDF4 or h5netcdf
    ds = xr.open_dataset("session.nc")
    ds.to_zarr("session.zarr")           # needs zarr; chunked, cloud-friendly
    ds = xr.open_zarr("session.zarr")    # lazy (dask) arrays

With zarr 3, string coordinates (NWB neuron ids) raise zarr's "no Zarr V3
specification" warning; ``to_zarr(..., zarr_format=2)`` avoids it when the
store must be read by other zarr implementations.

Typical use::

    ds = mics.io.load_nwb("session.nwb")
    X, Y, Z = mics.io.build_inputs(
        ds, source={"area": "PFC"}, target={"area": "V1"}, modulators=["speed", "pupil"]
    )
    mics.MICs().fit(X, Y, Z)
"""

from __future__ import annotations

from mics.io._common import DATA_DIR_ENV as DATA_DIR_ENV
from mics.io._common import data_dir
from mics.io._inputs import build_inputs
from mics.io.caiman import load_caiman
from mics.io.nwb import load_nwb
from mics.io.park2024 import load_park2024
from mics.io.suite2p import load_suite2p

# DATA_DIR_ENV (the environment variable naming the recordings' folder) is
# importable from here for mics.datasets, but it is a constant, not an API page.
__all__ = [
    "build_inputs",
    "data_dir",
    "load_caiman",
    "load_nwb",
    "load_park2024",
    "load_suite2p",
]
