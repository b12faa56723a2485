"""Sphinx configuration of the mics documentation.

Build (the tutorials are executed during the build)::

    python -m sphinx -W -b html docs docs/_build/html

Nothing here needs the network except the example recordings of
:mod:`mics.datasets`. A tutorial that reads one runs only when its files are
available (on disk, in the download cache, or downloadable now); otherwise it
is rendered without running, under a visible note saying so, and the build
still succeeds. ``tests/test_docs.py`` runs the same build with warnings as
errors, with the recordings and without them (no network).
"""

from __future__ import annotations

import os
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# Document this checkout even when another mics is installed.
sys.path.insert(0, str(ROOT))
# The tutorial kernels inherit the environment: a non-interactive MPLBACKEND (Agg,
# as CI machines often set) would make their figures vanish from the pages.
os.environ["MPLBACKEND"] = "module://matplotlib_inline.backend_inline"
# The executed tutorials run in kernels that inherit the environment: make them
# import this checkout too.
os.environ["PYTHONPATH"] = os.pathsep.join(
    [str(ROOT), *filter(None, [os.environ.get("PYTHONPATH")])]
)

import mics  # noqa: E402

project = "mics"
author = "mics developers"
copyright = "2026, mics developers"
version = release = mics.__version__

extensions = [
    "sphinx.ext.autodoc",
    "sphinx.ext.autosummary",
    "sphinx.ext.mathjax",
    "numpydoc",
    "myst_nb",
]

source_suffix = {".rst": "restructuredtext", ".md": "myst-nb"}
exclude_patterns = ["_build", "scaling.md", "model.md", "**.ipynb_checkpoints"]
templates_path = ["_templates"]

# API reference: one page per public name, generated from the docstrings.
autosummary_generate = True
autosummary_imported_members = True
autosummary_ignore_module_all = False
autodoc_default_options = {"members": False}
numpydoc_show_class_members = False
numpydoc_class_members_toctree = False
numpydoc_validation_checks: set[str] = set()

# Tutorials: MyST markdown notebooks, executed at every build (no stored outputs).
# Their jupytext-paired notebooks are in the top-level tutorials/ folder
# (tools/sync_tutorials.py writes them; tests/test_tutorials.py checks the pairs).
myst_enable_extensions = ["dollarmath", "amsmath", "colon_fence", "substitution"]
myst_heading_anchors = 3
# Study figures the pages quote as {{ name }}, read from results/ at each build
# (docs/results_numbers.py; tests/test_quoted_numbers.py checks every name).
sys.path.insert(0, str(Path(__file__).parent))
from results_numbers import numbers  # noqa: E402

myst_substitutions = numbers()
# MICS_DOCS_EXECUTE=off skips execution (quick checks of the text only).
nb_execution_mode = os.environ.get("MICS_DOCS_EXECUTE", "force")
nb_execution_timeout = 600
# A failing tutorial is reported as a warning carrying the notebook's traceback
# (the cell and the error), which -W turns into a failed build. Raising instead
# would print only "ExecutionError: <path>" and leave the cause in a temp log.
nb_execution_raise_on_error = False
nb_execution_show_tb = True
nb_merge_streams = True


# Tutorials that read an example recording (a call to mics.datasets.<loader>(...))
# and the registry files each loader needs. A loader missing here needs them all.
_TUTORIALS = Path(__file__).parent / "tutorials"
_LOADER_FILES = {
    "semedo2019": "semedo2019/",
    "park2024": "park2024/",
    "suite2p_example": "suite2p_pynapple/",
    "suite2p_example_folder": "suite2p_pynapple/",
}
_NO_FILES = {"local_folders", "cache_folder"}
_DATASET_CALL = re.compile(r"\bdatasets\.([A-Za-z_]\w*)\s*\(")


def _missing_recordings(path: Path) -> list[str]:
    """Registry files the tutorial at ``path`` reads, from the first that cannot be had now.

    A file counts as available when :func:`mics.datasets.fetch` returns it: a
    local copy (``$MICS_DATA_DIR``, ``../shared/data``), an earlier download, or
    a download now. Offline, the download fails at once.
    """
    import mics.datasets

    loaders = set(_DATASET_CALL.findall(path.read_text())) - _NO_FILES
    needed = sorted(
        key
        for key in mics.datasets.REGISTRY
        if any(key.startswith(_LOADER_FILES.get(loader, "")) for loader in loaders)
    )
    for i, key in enumerate(needed):
        try:
            mics.datasets.fetch(key)
        except mics.datasets.DatasetNotFoundError:
            return needed[i:]  # not tried further: offline, each would fail alike
    return []


_UNAVAILABLE = {
    f"tutorials/{path.stem}": missing
    for path in sorted(_TUTORIALS.glob("*.md"))
    if (missing := _missing_recordings(path))
}
nb_execution_excludepatterns = [f"{docname}.md" for docname in _UNAVAILABLE]

_NOT_RUN_NOTE = """
:::{{admonition}} Rendered without running
:class: warning

This page needs the example recordings: see
{{doc}}`mics.datasets </api/generated/mics.datasets>` for where they are looked
for (`$MICS_DATA_DIR`, `../shared/data`) and how they are downloaded. They were
not available when this site was built ({missing}), so it was rendered without
running: the code is shown without its output.
:::
"""


def _note_unrun_tutorials(app, docname, source) -> None:
    """Put the note under the title of a tutorial that was not executed."""
    missing = _UNAVAILABLE.get(docname)
    if not missing:
        return
    more = f" and {len(missing) - 1} more" if len(missing) > 1 else ""
    note = _NOT_RUN_NOTE.format(missing=f"`{missing[0]}`{more}")
    text = source[0]
    title = re.search(r"^# .*$", text, flags=re.MULTILINE)
    at = title.end() if title else 0
    source[0] = text[:at] + "\n" + note + text[at:]


html_theme = "pydata_sphinx_theme"
html_title = f"mics {release}"
html_theme_options = {
    "navigation_with_keys": False,
    "show_toc_level": 2,
    "secondary_sidebar_items": ["page-toc"],
}
html_static_path: list[str] = []


def _write_api_index() -> None:
    """Write api/index.rst from ``mics.__all__`` and the public submodules.

    Generated at every build so that a name added to ``mics.__all__`` gets its
    page without anyone editing the docs (``tests/test_docs.py`` checks it).
    """
    import inspect

    names = list(mics.__all__)
    module_names = {n for n in names if inspect.ismodule(getattr(mics, n))} | set(mics._LAZY)
    modules = [f"mics.{n}" for n in sorted(module_names)]
    classes = [f"mics.{n}" for n in names if inspect.isclass(getattr(mics, n))]
    functions = [
        f"mics.{n}" for n in names if f"mics.{n}" not in classes and n not in module_names
    ]

    def table(title: str, items: list[str]) -> str:
        rows = "\n".join(f"   {item}" for item in items)
        return (
            f"{title}\n{'-' * len(title)}\n\n.. autosummary::\n   :toctree: generated\n"
            f"   :nosignatures:\n\n{rows}\n\n"
        )

    text = (
        "API reference\n=============\n\n"
        ".. Generated by docs/conf.py from mics.__all__; do not edit.\n\n"
        "Every public name of ``mics`` and its public submodules, from the docstrings.\n\n"
        + table("Estimators and results", classes)
        + table("Functions", functions)
        + table("Submodules", modules)
    )
    path = Path(__file__).parent / "api" / "index.rst"
    path.parent.mkdir(exist_ok=True)
    if not path.is_file() or path.read_text() != text:
        path.write_text(text)


_write_api_index()


# The docstrings write fitted attributes the scikit-learn way (``rank_``) and
# norms as |x|, also outside literals; in reStructuredText a trailing underscore
# is a link and |x| a substitution. Escape both outside inline literals and roles.
_LITERAL = re.compile(r"(``.*?``|:\w+:`[^`]*`|`[^`]*`)")
_TRAILING_UNDERSCORE = re.compile(r"(?<=[A-Za-z0-9])_(?=[\s,.;:)\]]|$)")


def _escape(text: str) -> str:
    parts = _LITERAL.split(text)
    for i in range(0, len(parts), 2):  # even parts lie outside literals
        parts[i] = _TRAILING_UNDERSCORE.sub(r"\\_", parts[i].replace("|", "\\|"))
    return "".join(parts)


def _escape_docstring(app, what, name, obj, options, lines) -> None:
    lines[:] = [_escape(line) for line in lines]


def setup(app):
    # Before numpydoc (priority 500) turns the sections into reST.
    app.connect("autodoc-process-docstring", _escape_docstring, priority=100)
    app.connect("source-read", _note_unrun_tutorials)
    from sphinx.util import logging

    logger = logging.getLogger("mics.docs")
    for docname, missing in _UNAVAILABLE.items():
        more = " ..." if len(missing) > 1 else ""
        logger.info(
            f"{docname}: rendered without running, the example recordings are not "
            f"available ({missing[0]}{more}; see mics.datasets)"
        )
