"""The documentation site builds offline with warnings as errors, tutorials executed.

One build (a few minutes: it executes every tutorial) checked for what a reader needs:
every tutorial page with its figures, an API page for every public name.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys

import pytest

import mics
from tests.conftest import ROOT, shared_data_dir

pytest.importorskip("sphinx")
pytest.importorskip("myst_nb")
pytest.importorskip("numpydoc")
pytest.importorskip("pydata_sphinx_theme")

# Tutorials that draw figures, and the least number of figures each must show.
FIGURES = {
    "quickstart": 3,
    "recovery": 1,
    "semedo_v1_v2": 2,
    "park_behaviour": 1,
    "suite2p_to_fit": 1,
}
REAL_DATA = ["semedo2019/sample_data.mat", "park2024", "suite2p_pynapple/F.npy"]


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    missing = [rel for rel in REAL_DATA if not (shared_data_dir() / rel).exists()]
    if missing:
        pytest.skip(f"the tutorials need the recordings ({', '.join(missing)}); set MICS_DATA_DIR")
    out = tmp_path_factory.mktemp("html")
    doctrees = tmp_path_factory.mktemp("doctrees")
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    env.pop("MICS_DOCS_EXECUTE", None)
    cmd = [sys.executable, "-m", "sphinx", "-W", "--keep-going", "-q", "-b", "html"]
    cmd += ["-d", str(doctrees), str(ROOT / "docs"), str(out)]
    result = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True)
    assert result.returncode == 0, result.stderr[-5000:]
    return out


@pytest.mark.slow
def test_every_public_name_has_an_api_page(site):
    generated = site / "api" / "generated"
    names = [f"mics.{n}" for n in mics.__all__] + [f"mics.{n}" for n in mics._LAZY]
    missing = [n for n in names if not (generated / f"{n}.html").is_file()]
    assert not missing, missing
    # Module pages link the functions they export, each with its own page.
    for name in mics.io.__all__:
        assert (generated / f"mics.io.{name}.html").is_file(), name
    page = (generated / "mics.MICs.html").read_text()
    assert "fit" in page and "Parameters" in page


@pytest.mark.slow
def test_tutorials_are_rendered_with_their_figures(site):
    for name, n_figures in FIGURES.items():
        html = (site / "tutorials" / f"{name}.html").read_text()
        images = set(re.findall(r'<img[^>]+src="[^"]*_images/([^"]+\.png)"', html))
        assert len(images) >= n_figures, (name, len(images))
    tutorials = [p.stem for p in (ROOT / "docs" / "tutorials").glob("*.md") if p.stem != "index"]
    assert set(FIGURES) <= set(tutorials)
    for name in tutorials:
        html = (site / "tutorials" / f"{name}.html").read_text()
        assert "all checks passed" in html and "Traceback" not in html, name


@pytest.mark.slow
def test_landing_page_has_a_figure_and_links_every_section(site):
    html = (site / "index.html").read_text()
    assert re.search(r'<img[^>]+_images/[^"]+\.png', html)
    for target in (
        "install.html",
        "theory.html",
        "guide/index.html",
        "api/index.html",
        "changelog.html",
        "tutorials/index.html",
    ):
        assert target in html, target
