"""The two test commands: the README states them, CI runs the full one, the markers exist."""

import re

from tests.conftest import OPT_IN, ROOT


def _commands(text):
    """The ``python -m pytest`` command lines of a page's bash blocks."""
    blocks = re.findall(r"```bash\n(.*?)```", text, re.S)
    lines = [line.split("#")[0].strip() for block in blocks for line in block.splitlines()]
    return [line for line in lines if line.startswith("python -m pytest")]


def test_readme_and_install_page_give_the_fast_and_the_full_command():
    for page in (ROOT / "README.md", ROOT / "docs" / "install.md"):
        assert _commands(page.read_text()) == [
            "python -m pytest -q",
            "python -m pytest -q --full",
        ], page


def test_ci_runs_exactly_the_readmes_full_command():
    full = _commands((ROOT / "README.md").read_text())[-1]
    script = (ROOT / ".ci" / "run").read_text()
    lines = [line.strip() for line in script.splitlines()]
    runs = [line for line in lines if re.match(r"\S*python -m pytest", line)]
    assert runs == [full]


def test_the_opt_in_markers_are_registered():
    text = (ROOT / "pyproject.toml").read_text()
    block = re.search(r"^markers = \[\n(.*?)^\]", text, re.S | re.M).group(1)
    registered = set(re.findall(r'^\s*"(\w+):', block, re.M))
    assert registered == set(OPT_IN) | {"shared_data"}
