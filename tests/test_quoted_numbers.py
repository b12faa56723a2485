"""Numbers the documentation quotes match the results files they come from.

``docs/results_numbers.py`` reads every quoted study figure from ``results/``.
Pages of the Sphinx site show them as ``{{ name }}`` substitutions (a rerun
of the study updates them at the next build); text that is also read
outside Sphinx (the README, the tutorials) writes them out, and its passages
are listed in ``QUOTES``. A passage that no longer says what its file holds
fails here: rerun, then update the passage to the new figure.
"""

from __future__ import annotations

import importlib.util
import re
import sys

import pytest

from tests.conftest import ROOT

_spec = importlib.util.spec_from_file_location(
    "mics_results_numbers", ROOT / "docs" / "results_numbers.py"
)
results_numbers = sys.modules.setdefault(
    "mics_results_numbers", importlib.util.module_from_spec(_spec)
)
_spec.loader.exec_module(results_numbers)

#: The pages of the site (their sources); the changelog records history.
PAGES = sorted(
    p
    for p in (ROOT / "docs").rglob("*.md")
    if "_build" not in p.parts and p.name != "changelog.md"
)
SUBSTITUTION = re.compile(r"\{\{\s*(\w+)\s*\}\}")
# code (fenced blocks and inline literals) is shown as written, not substituted
CODE = re.compile(r"```.*?```|`[^`\n]*`", flags=re.S)


def _flat(text):
    return " ".join(text.split())


def stale_quotes(numbers, quotes):
    """The ``(file, passage)`` of ``quotes`` whose file no longer holds the passage."""
    return [
        (path, passage.format(**numbers))
        for path, passage in quotes
        if _flat(passage.format(**numbers)) not in _flat((ROOT / path).read_text())
    ]


@pytest.fixture(scope="module")
def numbers():
    return results_numbers.numbers()


@pytest.mark.parametrize("quote", results_numbers.QUOTES, ids=lambda q: q[0])
def test_each_written_quote_says_what_its_results_file_holds(quote, numbers):
    assert stale_quotes(numbers, [quote]) == [], (
        "a quoted figure no longer matches its results file: update the passage"
    )


def test_a_changed_result_makes_its_quote_stale(numbers):
    path, passage = results_numbers.QUOTES[0]
    name = re.search(r"\{(\w+)\}", passage).group(1)
    changed = dict(numbers, **{name: numbers[name] + "1"})
    assert stale_quotes(changed, [(path, passage)]) == [(path, passage.format(**changed))]


def test_every_substitution_on_the_pages_is_a_registered_figure(numbers):
    used = {
        name: page
        for page in PAGES
        for name in SUBSTITUTION.findall(CODE.sub("", page.read_text()))
    }
    unknown = {name: str(page.relative_to(ROOT)) for name, page in used.items()}
    unknown = {k: v for k, v in unknown.items() if k not in numbers}
    assert unknown == {}
    # and every registered figure is quoted somewhere (no figure kept for nothing)
    quoted = set(used)
    for _, passage in results_numbers.QUOTES:
        quoted |= set(re.findall(r"\{(\w+)\}", passage))
    assert sorted(set(numbers) - quoted) == []


def test_a_missing_figure_is_a_clear_error(tmp_path, monkeypatch):
    (tmp_path / "x.txt").write_text("nothing here")
    monkeypatch.setattr(results_numbers, "RESULTS", tmp_path)
    with pytest.raises(ValueError, match=r"results/x.txt: no match"):
        results_numbers._find("x.txt", r"statistic (\d+)")
