"""Golden values: results of the code at one commit, frozen.

``tests/golden/*.npz`` were written by ``tests/golden/make_golden.py`` from
commit f9fe0bf (its docstring says how to regenerate them, and their
history: first frozen at ca89bfb before the subpackage restructure, which
reproduced them bit for bit). Each test recomputes one group with the case function of that script
(public API only: ``mics.MICs``, ``mics.test_modulation``, ...) and compares
it with the file, key by key.

Tolerance, by the issue's rule ("bitwise where they are bitwise today,
otherwise to 1e-12 relative"): every group was generated twice, and every
Dask group also on 1 and 2 distributed worker processes; all of them gave
the same bits every time, except the two Dask groups of the modulation test
on worker processes (its conditional null, issue 45, sums Dask matrix
products whose blocks can arrive misaligned: 2.5e-14 of the largest value at
most). ``NOT_BITWISE`` lists those two, with the absolute tolerance added to
``rtol=1e-12`` for them; every other group is compared bit for bit (dtype and
shape included). Bits are those of this machine's NumPy/OpenBLAS: the cases run with
BLAS on one thread (with two threads the two real-data fits move by ~4e-15),
so the number of cores does not matter, but another BLAS or CPU may.

Run against the old code from the repository root with ``-P`` and
``--import-mode=importlib``: ``python -m pytest`` otherwise puts the root
(and its ``./mics``) on ``sys.path`` ahead of ``PYTHONPATH``::

    PYTHONPATH=/tmp/mics-golden .venv/bin/python -P -m pytest -p no:cacheprovider \\
        --import-mode=importlib tests/test_golden.py
"""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path

import numpy as np
import pytest

import mics

GOLDEN = Path(__file__).resolve().parent / "golden"


def _generator():
    # Not a package and not put in sys.modules: loaded by path, so the case
    # functions are the generator's own, whatever the import mode.
    spec = importlib.util.spec_from_file_location("mics_golden_cases", GOLDEN / "make_golden.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


gen = _generator()

# group -> atol (with rtol=1e-12) for groups that are not bitwise across schedulers.
# The conditional null's cross-products, trial means and refits of the null
# residual are Dask matrix products: on worker processes a block can arrive at
# any byte, NumPy then sums it in another order, and the test's statistics
# moved by up to 2.5e-14 of their largest value (1 or 2 workers against the
# synchronous scheduler; every other Dask group stays bitwise).
NOT_BITWISE: dict[str, float] = {
    "modulation_circular_chunked": 1e-13,
    "modulation_trial_chunked": 1e-13,
}


def assert_golden(name, got):
    want = gen.load(GOLDEN / f"{name}.npz")
    assert sorted(got) == sorted(want), f"{name}: other keys than the golden file"
    atol = NOT_BITWISE.get(name)
    failures = []  # every differing key is named, the first one in full
    for key in sorted(want):
        value, expected = np.asarray(got[key]), want[key]
        msg = f"golden group {name!r}, key {key!r}"
        try:
            if atol is None or expected.dtype.kind not in "fc":
                np.testing.assert_array_equal(value, expected, err_msg=msg, strict=True)
            else:
                assert (value.dtype, value.shape) == (expected.dtype, expected.shape), msg
                np.testing.assert_allclose(value, expected, rtol=1e-12, atol=atol, err_msg=msg)
        except AssertionError as err:
            failures.append((key, err))
    if failures:
        keys = ", ".join(key for key, _ in failures)
        pytest.fail(f"{len(failures)} key(s) differ: {keys}\n{failures[0][1]}")


def test_every_case_has_one_golden_file():
    files = {path.stem for path in GOLDEN.glob("*.npz")}
    assert files == set(gen.CASES)
    assert sum(path.stat().st_size for path in GOLDEN.glob("*.npz")) < 1_000_000


@pytest.mark.parametrize("name", list(gen.IN_MEMORY) + list(gen.CHUNKED))
def test_golden(name):
    """In-memory groups, and Dask groups on the synchronous scheduler."""
    assert_golden(name, gen.compute(name))


@pytest.mark.shared_data
@pytest.mark.parametrize("name", list(gen.SHARED_DATA))
def test_golden_on_recordings(name, data_dir, monkeypatch):
    monkeypatch.setenv("MICS_DATA_DIR", str(data_dir))  # the local copies, never a download
    assert_golden(name, gen.compute(name))


@pytest.fixture(scope="module", params=[1, 2], ids=["1_worker", "2_workers"])
def on_workers(request):
    """The Dask groups of ``ON_WORKERS`` computed on a cluster of 1 or 2 worker processes.

    The cluster is closed before the tests compare, so no client is left
    active for the tests that run on the synchronous scheduler.
    """
    pytest.importorskip("distributed")
    # distributed writes its pre-spawn variables (MALLOC_TRIM_THRESHOLD_) into
    # this process's environment, where later clusters of other tests would
    # inherit them: put the environment back.
    environ = dict(os.environ)
    cluster, client = gen.distributed_cluster(request.param)
    try:
        with cluster, client:
            assert gen.worker_mics_files(client) == {mics.__file__}
            return {name: gen.compute(name, scheduler=None) for name in gen.ON_WORKERS}
    finally:
        os.environ.clear()
        os.environ.update(environ)


# Starting the clusters takes most of the time: with the full run only
# (tests/test_chunked.py compares worker processes with local results fast).
@pytest.mark.slow
@pytest.mark.parametrize("name", gen.ON_WORKERS)
def test_golden_on_distributed_workers(name, on_workers):
    assert_golden(name, on_workers[name])
