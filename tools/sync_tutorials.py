"""Write the tutorial notebooks of tutorials/ from their sources in docs/tutorials/.

The tutorials have one source of truth: the MyST markdown notebooks in
``docs/tutorials/*.md`` (readable diffs; the documentation executes them). Each
is paired by jupytext with a notebook without outputs in the top-level
``tutorials/`` folder, for users who open them in Jupyter directly::

    python tools/sync_tutorials.py           # rewrite tutorials/*.ipynb from the .md
    python tools/sync_tutorials.py --check   # exit 1 when a pair differs (the tests run it)

The pairing is recorded in each file's metadata
(``formats: tutorials//ipynb,docs/tutorials//md:myst``), so Jupyter with jupytext
installed saves an edited notebook back to its .md, and ``jupytext --sync``
works on either file. Edit the .md, or the notebook with jupytext on; then run
this script.
"""

from __future__ import annotations

import argparse
import hashlib
import sys
from pathlib import Path

import jupytext
import nbformat

ROOT = Path(__file__).resolve().parents[1]
SOURCES = ROOT / "docs" / "tutorials"
NOTEBOOKS = ROOT / "tutorials"
PAIRING = "tutorials//ipynb,docs/tutorials//md:myst"


def sources(folder: Path = SOURCES) -> list[Path]:
    """The tutorial sources: every .md of ``folder`` but its index page."""
    return sorted(p for p in folder.glob("*.md") if p.stem != "index")


def notebook_text(source: Path) -> str:
    """The notebook paired with ``source``, as the text of an .ipynb file (no outputs)."""
    nb = jupytext.read(source)
    formats = nb.metadata.get("jupytext", {}).get("formats")
    if formats != PAIRING:
        raise ValueError(
            f"{source}: its front matter must pair it with tutorials/ "
            f"(jupytext: formats: {PAIRING}), found {formats!r}"
        )
    # Cell ids from the cell's content, not random: rewriting an unchanged
    # notebook leaves it byte for byte the same.
    seen: set[str] = set()
    for cell in nb.cells:
        base = hashlib.sha1(f"{cell.cell_type}\n{cell.source}".encode()).hexdigest()[:8]
        cell.id = base
        k = 1
        while cell.id in seen:
            cell.id, k = f"{base}-{k}", k + 1
        seen.add(cell.id)
    return jupytext.writes(nb, fmt="ipynb") + "\n"  # as Jupyter saves it


def cell_sources(nb: nbformat.NotebookNode) -> list[tuple[str, str]]:
    """(cell type, source) of every cell: what the pairing keeps in sync."""
    return [(cell.cell_type, cell.source) for cell in nb.cells]


def differences(source_dir: Path = SOURCES, notebook_dir: Path = NOTEBOOKS) -> list[str]:
    """What is out of sync between the sources and the notebooks, one line each."""
    problems = []
    expected = {p.stem: p for p in sources(source_dir)}
    present = {p.stem for p in notebook_dir.glob("*.ipynb")}
    for name in sorted(present - set(expected)):
        problems.append(f"tutorials/{name}.ipynb has no source .md")
    for name, source in expected.items():
        path = notebook_dir / f"{name}.ipynb"
        if not path.is_file():
            problems.append(f"tutorials/{name}.ipynb is missing")
            continue
        want = nbformat.reads(notebook_text(source), as_version=4)
        have = nbformat.read(path, as_version=4)
        if cell_sources(have) != cell_sources(want):
            problems.append(f"tutorials/{name}.ipynb differs from docs/tutorials/{name}.md")
        if any(cell.get("outputs") for cell in have.cells):
            problems.append(f"tutorials/{name}.ipynb holds outputs (commit it without them)")
    return problems


def write(source_dir: Path = SOURCES, notebook_dir: Path = NOTEBOOKS) -> list[Path]:
    """Rewrite every notebook from its source; return those that changed."""
    notebook_dir.mkdir(exist_ok=True)
    changed = []
    for source in sources(source_dir):
        path = notebook_dir / f"{source.stem}.ipynb"
        text = notebook_text(source)
        if not path.is_file() or path.read_text() != text:
            path.write_text(text)
            changed.append(path)
    return changed


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="only report differences")
    args = parser.parse_args(argv)
    if args.check:
        problems = differences()
        for line in problems:
            print(line)
        if problems:
            print("run: python tools/sync_tutorials.py")
        return 1 if problems else 0
    for path in write():
        print(f"wrote {path.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
