"""The documentation site builds with warnings as errors, with or without the recordings.

Two builds, each shared by the tests through a session fixture:

- ``offline_site``: a copy of this checkout as on a fresh clone, with no
  recordings beside it, an empty download cache and no network (a refusing
  proxy). It must succeed, and the tutorials that need a recording must say on
  the page that they were rendered without running.
- ``site``: the full build with every tutorial executed, when the recordings
  are here (``../shared/data`` or ``$MICS_DATA_DIR``); without them it is the
  offline build (one build, not two). When both run, the offline one skips
  execution (the full build executes the tutorials) and checks only what the
  absence of the recordings changes.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys

import pytest

import mics
from tests.conftest import ROOT, shared_data_dir
from tests.test_tutorials import NEEDS

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
    "power": 1,
    "members": 2,
}
REAL_DATA = ["semedo2019/sample_data.mat", "park2024", "suite2p_pynapple/F.npy"]
# Tutorials that read a recording (tests/test_tutorials.py lists their files).
NEED_RECORDINGS = sorted(name.removesuffix(".md") for name, files in NEEDS.items() if files)
NOT_RUN_NOTE = "Rendered without running"


def _recordings_here() -> bool:
    return all((shared_data_dir() / rel).exists() for rel in REAL_DATA)


def _build(root, out, doctrees, env) -> None:
    cmd = [sys.executable, "-m", "sphinx", "-W", "--keep-going", "-q", "-b", "html"]
    cmd += ["-d", str(doctrees), str(root / "docs"), str(out)]
    result = subprocess.run(cmd, cwd=root, env=env, capture_output=True, text=True)
    assert result.returncode == 0, result.stderr[-8000:]


@pytest.fixture(scope="session")
def offline_site(tmp_path_factory):
    """The site built from a copy of this checkout with no recordings and no network."""
    base = tmp_path_factory.mktemp("fresh_clone")
    # The copy has no ../shared/data beside it (mics.datasets.local_folders).
    root = base / "mics"
    shutil.copytree(ROOT / "mics", root / "mics", ignore=shutil.ignore_patterns("__pycache__"))
    skip = ("_build", "api", "jupyter_execute", "__pycache__", ".ipynb_checkpoints")
    shutil.copytree(ROOT / "docs", root / "docs", ignore=shutil.ignore_patterns(*skip))
    # the pages include results files and quote figures from them, as a clone has them
    shutil.copytree(ROOT / "results", root / "results", ignore=shutil.ignore_patterns("cache"))
    (base / "empty").mkdir()
    (base / "home").mkdir()
    env = {
        k: v
        for k, v in os.environ.items()
        if k.upper() not in {"PYTHONPATH", "MICS_DOCS_EXECUTE", "NO_PROXY"}
    }
    refuse = "http://127.0.0.1:9"  # nothing listens there: every download fails at once
    env.update(
        MICS_DATA_DIR=str(base / "empty"),
        HOME=str(base / "home"),  # no earlier download in the user's cache
        XDG_CACHE_HOME=str(base / "home" / ".cache"),
        HTTP_PROXY=refuse,
        HTTPS_PROXY=refuse,
        ALL_PROXY=refuse,
        http_proxy=refuse,
        https_proxy=refuse,
        all_proxy=refuse,
    )
    import matplotlib

    env["MPLCONFIGDIR"] = matplotlib.get_cachedir()  # its font cache, not rebuilt in the kernels
    if _recordings_here():
        env["MICS_DOCS_EXECUTE"] = "off"  # the full build (``site``) executes them
    out = base / "html"
    _build(root, out, base / "doctrees", env)
    return out


@pytest.fixture(scope="session")
def site(tmp_path_factory, request):
    """The full build, tutorials executed; the offline build when the recordings are absent."""
    if not _recordings_here():
        return request.getfixturevalue("offline_site")
    out = tmp_path_factory.mktemp("html")
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    env.pop("MICS_DOCS_EXECUTE", None)
    _build(ROOT, out, tmp_path_factory.mktemp("doctrees"), env)
    return out


def _printed(html: str) -> str:
    """The cells' outputs on a page (not their code, which holds the same words)."""
    parts = html.split('class="cell_output')[1:]
    return "".join(part.split('class="cell_input')[0] for part in parts)


def _not_run(site, name) -> bool:
    return NOT_RUN_NOTE in (site / "tutorials" / f"{name}.html").read_text()


@pytest.mark.docs
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


@pytest.mark.docs
def test_tutorials_are_rendered_with_their_figures(site):
    tutorials = [p.stem for p in (ROOT / "docs" / "tutorials").glob("*.md") if p.stem != "index"]
    assert set(FIGURES) <= set(tutorials)
    executed = [name for name in tutorials if not _not_run(site, name)]
    # Only a missing recording keeps a tutorial from running.
    assert set(tutorials) - set(executed) <= set(NEED_RECORDINGS)
    if _recordings_here():
        assert executed == tutorials
    for name in executed:
        html = (site / "tutorials" / f"{name}.html").read_text()
        assert "all checks passed" in _printed(html) and "Traceback" not in html, name
        images = set(re.findall(r'<img[^>]+src="[^"]*_images/([^"]+\.png)"', html))
        assert len(images) >= FIGURES.get(name, 0), (name, len(images))


@pytest.mark.docs
def test_without_recordings_the_site_builds_and_says_what_was_not_run(offline_site):
    tutorials = [p.stem for p in (ROOT / "docs" / "tutorials").glob("*.md") if p.stem != "index"]
    for name in tutorials:
        html = (offline_site / "tutorials" / f"{name}.html").read_text()
        if name in NEED_RECORDINGS:
            # The note is on the page, under the title, with where to get the files.
            note = html[html.index(NOT_RUN_NOTE) :]
            assert "needs the example recordings" in note, name
            assert "mics.datasets.html" in note[:2000], name
            assert "Traceback" not in html and not _printed(html), name
        else:
            assert NOT_RUN_NOTE not in html, name
    if not _recordings_here():  # executed here (otherwise the full build executes them)
        for name in set(tutorials) - set(NEED_RECORDINGS):
            html = (offline_site / "tutorials" / f"{name}.html").read_text()
            assert "all checks passed" in _printed(html), name


@pytest.mark.docs
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
