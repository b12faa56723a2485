"""Execute every tutorial (MyST markdown notebooks in docs/tutorials) top to bottom.

Each tutorial ends with assertions on the outcome it teaches and prints "all checks
passed"; a tutorial that needs the real recordings is skipped when they are absent.
"""

from __future__ import annotations

import pytest

from tests.conftest import ROOT, shared_data_dir

jupytext = pytest.importorskip("jupytext")
nbformat = pytest.importorskip("nbformat")
nbclient = pytest.importorskip("nbclient")
pytest.importorskip("ipykernel")

TUTORIALS = ROOT / "docs" / "tutorials"

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
    "semedo_v1_v2.md": ["semedo2019/sample_data.mat"],
    "park_behaviour.md": ["park2024/230809_mrcuts28_fov4_grat-000_data.mat"],
    "park_study.md": [
        f"park2024/{s}_grat-000_data.mat"
        for s in ("230809_mrcuts28_fov4", "230810_mrcuts29_fov2", "230814_mrcuts30_fov1")
    ],
    "semedo_study.md": ["semedo2019/sample_data.mat"],
    "suite2p_to_fit.md": ["suite2p_pynapple/F.npy"],
    "dask_scaling.md": [],
}


def test_every_tutorial_is_listed():
    found = {p.name for p in TUTORIALS.glob("*.md")} - {"index.md"}
    assert found == set(NEEDS)


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(NEEDS))
def test_tutorial_runs_and_asserts_its_outcome(name):
    missing = [rel for rel in NEEDS[name] if not (shared_data_dir() / rel).is_file()]
    if missing:
        pytest.skip(f"real recordings not found ({', '.join(missing)}); set MICS_DATA_DIR")
    nb = jupytext.read(TUTORIALS / name)
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
