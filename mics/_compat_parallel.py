"""The former ``mics.parallel``: its names gathered from their new homes (see mics._compat)."""

from mics.data.chunked import moments_from_dask, moments_from_sessions, worker_config
from mics.model.fit import fit_from_moments
from mics.workflows.sessions import fit_each_session

__all__ = [
    "fit_each_session",
    "fit_from_moments",
    "moments_from_dask",
    "moments_from_sessions",
    "worker_config",
]
