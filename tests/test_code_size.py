"""Functions a reader can hold (issue 49): few functions over 100 lines, none over 150.

A function's size is counted as the issue counted it: every line from its
``def`` to its last line, signature and docstring included
(``end_lineno - lineno + 1``; decorators not counted). A reader holds the
docstring too, so a long parameter list is a reason to split, not an
exemption. A nested function counts in its enclosing function and on its
own.
"""

import ast
import textwrap
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "mics"

#: Past this, a function counts as long.
LONG = 100
#: No function may be longer than this.
LONGEST = 150
#: At most this many long functions in the package.
MAX_LONG = 5

#: Functions still being split by the lead engineer (``path::name``, relative
#: to ``mics/``): not counted until split. Empty this set as they are; an
#: entry that no longer exists or is no longer long fails the test, so the
#: set only shrinks.
PENDING_SPLITS: set[str] = set()


def function_lines(node):
    """Lines of a function from its ``def`` to its end, docstring included."""
    return node.end_lineno - node.lineno + 1


def function_sizes(source):
    """``qualified name -> lines`` of every function of a module's source.

    Qualified as Python does: ``Class.method``, ``outer.inner``.
    """
    sizes = {}

    def visit(node, prefix):
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                name = f"{prefix}{child.name}"
                if not isinstance(child, ast.ClassDef):
                    sizes[name] = function_lines(child)
                visit(child, f"{name}.")
            else:
                visit(child, prefix)

    visit(ast.parse(source), "")
    return sizes


def package_sizes():
    """``"path::name" -> lines`` over every module of ``mics/``."""
    out = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(PACKAGE).as_posix()
        for name, n in function_sizes(path.read_text()).items():
            out[f"{rel}::{name}"] = n
    return out


def test_lines_count_the_docstring_and_nested_functions():
    source = textwrap.dedent(
        '''
        import functools


        @functools.cache
        def outer(a):
            """A docstring
            of three
            lines."""
            b = a + 1

            def inner(c):
                """One line."""
                return c * 2

            return inner(b)


        def bare():
            return 1


        class Model:
            def fit(self):
                return self
        '''
    )
    # outer: def line, 3 docstring lines, b =, blank, def inner, docstring, return,
    # blank, return; the decorator is not counted
    assert function_sizes(source) == {"outer": 11, "outer.inner": 3, "bare": 2, "Model.fit": 2}


def test_few_long_functions_and_none_too_long():
    sizes = package_sizes()
    counted = {name: n for name, n in sizes.items() if name not in PENDING_SPLITS}
    too_long = {name: n for name, n in counted.items() if n > LONGEST}
    assert too_long == {}, f"functions over {LONGEST} lines: {too_long}"
    long = dict(sorted(((k, n) for k, n in counted.items() if n > LONG), key=lambda kv: -kv[1]))
    assert len(long) <= MAX_LONG, (
        f"{len(long)} functions over {LONG} lines (at most {MAX_LONG}): {long}"
    )


def test_pending_splits_are_still_pending():
    """An entry of PENDING_SPLITS that is gone or split is taken out of the set."""
    sizes = package_sizes()
    stale = {name for name in PENDING_SPLITS if sizes.get(name, 0) <= LONG}
    assert stale == set(), f"split already (remove from PENDING_SPLITS): {sorted(stale)}"
