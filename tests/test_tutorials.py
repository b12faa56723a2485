"""Execute every tutorial notebook (tutorials/*.ipynb) top to bottom, as a user would.

The tutorials' source is the MyST markdown in docs/tutorials/ (the documentation
executes it); each is paired with the notebook of the same name in the top-level
tutorials/ folder, written by tools/sync_tutorials.py, and the pairs must agree.
Each tutorial ends with assertions on the outcome it teaches and prints "all checks
passed"; a tutorial that needs the real recordings is skipped when they are absent.
"""

from __future__ import annotations

import importlib.util

import pytest

from tests.conftest import ROOT, shared_data_dir

jupytext = pytest.importorskip("jupytext")
nbformat = pytest.importorskip("nbformat")
nbclient = pytest.importorskip("nbclient")
pytest.importorskip("ipykernel")

TUTORIALS = ROOT / "docs" / "tutorials"  # the sources (MyST markdown)
NOTEBOOKS = ROOT / "tutorials"  # the paired notebooks users open in Jupyter

# Runs first in the kernel: the notebook must see this checkout of mics, not another
# installation (e.g. a user-level "python3" kernelspec pointing at a different Python).
_KERNEL_CHECK = f"""
import sys
from pathlib import Path
import mics
_root = Path({str(ROOT)!r}).resolve()
assert _root in Path(mics.__file__).resolve().parents, (sys.executable, mics.__file__)
"""

# Tutorial -> files it reads from the shared data folder (none: simulated data only).
NEEDS = {
    "quickstart.md": [],
    "recovery.md": [],
    "power.md": [],
    "semedo_v1_v2.md": ["semedo2019/sample_data.mat"],
    "park_behaviour.md": ["park2024/230809_mrcuts28_fov4_grat-000_data.mat"],
    "park_study.md": [
        f"park2024/{s}_grat-000_data.mat"
        for s in ("230809_mrcuts28_fov4", "230810_mrcuts29_fov2", "230814_mrcuts30_fov1")
    ],
    "semedo_study.md": ["semedo2019/sample_data.mat"],
    "members.md": ["semedo2019/sample_data.mat"],
    "suite2p_to_fit.md": ["suite2p_pynapple/F.npy"],
    "dask_scaling.md": [],
}


def _sync_tool():
    spec = importlib.util.spec_from_file_location(
        "sync_tutorials", ROOT / "tools" / "sync_tutorials.py"
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_every_tutorial_is_listed():
    found = {p.name for p in TUTORIALS.glob("*.md")} - {"index.md"}
    assert found == set(NEEDS)
    assert {p.stem for p in NOTEBOOKS.glob("*.ipynb")} == {n.removesuffix(".md") for n in NEEDS}


def test_notebooks_are_in_sync_with_their_sources():
    # Each notebook regenerated from its .md: same cells, same sources, no outputs.
    problems = _sync_tool().differences()
    assert not problems, "\n".join([*problems, "run: python tools/sync_tutorials.py"])


def test_notebooks_needing_recordings_say_how_to_get_them_first():
    for name, files in NEEDS.items():
        first = nbformat.read(NOTEBOOKS / name.replace(".md", ".ipynb"), as_version=4).cells[0]
        assert first.cell_type == "markdown", name
        says = all(word in first.source for word in ("mics.datasets", "MICS_DATA_DIR", "download"))
        assert says == bool(files), name


@pytest.mark.tutorials
@pytest.mark.parametrize("name", sorted(NEEDS))
def test_tutorial_runs_and_asserts_its_outcome(name):
    missing = [rel for rel in NEEDS[name] if not (shared_data_dir() / rel).is_file()]
    if missing:
        pytest.skip(f"real recordings not found ({', '.join(missing)}); set MICS_DATA_DIR")
    # The notebook a user opens, run from its folder (the docs run the .md from theirs).
    nb = nbformat.read(NOTEBOOKS / name.replace(".md", ".ipynb"), as_version=4)
    nb.cells.insert(0, nbformat.v4.new_code_cell(_KERNEL_CHECK))
    client = nbclient.NotebookClient(
        nb,
        timeout=300,
        kernel_name="python3",
        resources={"metadata": {"path": str(NOTEBOOKS)}},
    )
    client.execute()
    last = nb.cells[-1]
    text = "".join(o.get("text", "") for o in last.get("outputs", []) if o.output_type == "stream")
    assert "all checks passed" in text, text
