"""Execute the tutorial notebooks top to bottom (their last cells assert sanity checks)."""

from __future__ import annotations

import pytest

from tests.conftest import ROOT, shared_data_dir

nbformat = pytest.importorskip("nbformat")
nbclient = pytest.importorskip("nbclient")
pytest.importorskip("ipykernel")

TUTORIALS = ROOT / "tutorials"

# Runs first in the kernel: the notebook must see this checkout of mics, not another
# installation (e.g. a user-level "python3" kernelspec pointing at a different Python).
_KERNEL_CHECK = f"""
import sys
from pathlib import Path
import mics
_root = Path({str(ROOT)!r}).resolve()
assert _root in Path(mics.__file__).resolve().parents, (sys.executable, mics.__file__)
print(sys.executable, mics.__file__)
"""


def _run(name):
    path = TUTORIALS / name
    nb = nbformat.read(path, as_version=4)
    assert all(not cell.get("outputs") for cell in nb.cells if cell.cell_type == "code"), (
        f"{name} is committed with outputs; regenerate it with tutorials/_build.py"
    )
    nb.cells.insert(0, nbformat.v4.new_code_cell(_KERNEL_CHECK))
    client = nbclient.NotebookClient(
        nb,
        timeout=300,
        kernel_name="python3",
        resources={"metadata": {"path": str(TUTORIALS)}},
    )
    client.execute()
    last = nb.cells[-1]
    text = "".join(o.get("text", "") for o in last.get("outputs", []) if o.output_type == "stream")
    assert "all checks passed" in text, text


def test_notebooks_match_generator(tmp_path):
    """The committed notebooks are exactly what tutorials/_build.py writes."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("_tutorial_build", TUTORIALS / "_build.py")
    build = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(build)
    for fresh in build.build(tmp_path):
        committed = TUTORIALS / fresh.name
        assert committed.read_text() == fresh.read_text(), (
            f"{committed.name} is out of date: run python tutorials/_build.py"
        )


def test_simulated_recovery_notebook():
    _run("01_simulated_recovery.ipynb")


def test_real_recordings_notebook():
    data = shared_data_dir()
    needed = [
        data / "semedo2019" / "sample_data.mat",
        data / "park2024" / "230809_mrcuts28_fov4_grat-000_data.mat",
    ]
    missing = [str(p) for p in needed if not p.is_file()]
    if missing:
        pytest.skip(f"real recordings not found ({', '.join(missing)}); set MICS_DATA_DIR")
    _run("02_real_recordings.ipynb")
