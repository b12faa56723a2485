"""The asv (airspeed velocity) benchmark suite of ``mics``: timings of the public API.

Run from the repository root (``asv.conf.json``)::

    asv run --python=same --quick      # every benchmark once, this environment
    asv continuous ca89bfb HEAD        # two commits side by side, in fresh envs
    asv compare ca89bfb HEAD

Every benchmark runs at a small (T=5000, p=100, q=50, m=3) and a large
(T=20000, p=300, q=100, m=3) size on data simulated with fixed seeds. The
data are simulated once per process and kept (:func:`data`); numba's kernels
are compiled and BLAS started by a warm-up fit of both solver paths before
anything is timed (:func:`warm_up`, called by every ``setup``).

The suite must also run on commits from before the package was split into
subpackages (e.g. ca89bfb): names that moved are imported from their new
public home first and from the old module otherwise (:func:`compute_moments`,
:func:`solve_psd`). That fallback is the only use of old module paths.
"""

from __future__ import annotations

import contextlib
import functools
import warnings

import numpy as np

import mics

try:
    from mics.core import compute_moments, solve_psd
except ImportError:  # before the subpackages (ca89bfb and earlier)
    from mics._linalg import solve_psd
    from mics.moments import compute_moments

__all__ = ["SIZES", "compute_moments", "data", "quiet", "solve_psd", "warm_up"]

#: (T, p, q, m) of the two sizes every benchmark runs at.
SIZES = {
    "small": dict(T=5000, p=100, q=50, m=3),
    "large": dict(T=20000, p=300, q=100, m=3),
}


@functools.cache
def data(T, p, q, m, *, rank=3, n_channels=2, modulator_kind="gaussian", seed=0):
    """``(X, Y, Z)`` from ``mics.simulate``, simulated once per process and argument set.

    asv re-runs ``setup`` before every timed sample; the cache makes that
    cheap. Benchmarks only read the arrays (they are not marked read-only:
    numba would compile other specialisations of its kernels for them).
    """
    X, Y, Z = mics.simulate(
        n_samples=T,
        n_source=p,
        n_target=q,
        n_modulators=m,
        rank=rank,
        n_channels=n_channels,
        modulator_kind=modulator_kind,
        random_state=seed,
    )[:3]
    return X, Y, Z


@functools.cache
def warm_up():
    """Compile (or load) the numba kernels and start BLAS: one tiny fit on each solver path.

    Once per process; later calls return at once.
    """
    X, Y, Z = mics.simulate(
        n_samples=300, n_source=10, n_target=8, n_modulators=3, random_state=1
    )[:3]
    with quiet():
        for solver in ("moments", "data"):
            est = mics.MICs(
                random_state=0, cv=3, max_rank=2, max_channels=1, solver=solver, verbose=0
            )
            est.fit(X, Y, Z)
        compute_moments(X, Y, Z).centered()
        solve_psd(np.eye(3), np.ones(3))
    return True


@contextlib.contextmanager
def quiet():
    """A context in which the capped fits' convergence warnings are not printed."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        yield
