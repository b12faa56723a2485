"""Functions a reader can hold (issue 49): few functions over 100 lines of code, none over 150.

A function's size is its lines of code without its docstring (the docstring
is documentation): ``end_lineno - lineno + 1`` of its ``def`` (decorators
not counted), minus the lines of the docstring. A nested function counts
in its enclosing function and on its own.
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


def code_lines(node):
    """Lines of a function's code without its docstring."""
    n = node.end_lineno - node.lineno + 1
    body = node.body
    if (
        body
        and isinstance(body[0], ast.Expr)
        and isinstance(body[0].value, ast.Constant)
        and isinstance(body[0].value.value, str)
    ):
        n -= body[0].end_lineno - body[0].lineno + 1
    return n


def function_sizes(source):
    """``qualified name -> code lines`` of every function of a module's source.

    Qualified as Python does: ``Class.method``, ``outer.inner``.
    """
    sizes = {}

    def visit(node, prefix):
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                name = f"{prefix}{child.name}"
                if not isinstance(child, ast.ClassDef):
                    sizes[name] = code_lines(child)
                visit(child, f"{name}.")
            else:
                visit(child, prefix)

    visit(ast.parse(source), "")
    return sizes


def package_sizes():
    """``"path::name" -> code lines`` over every module of ``mics/``."""
    out = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(PACKAGE).as_posix()
        for name, n in function_sizes(path.read_text()).items():
            out[f"{rel}::{name}"] = n
    return out


def test_code_lines_leave_out_the_docstring_and_count_nested_functions():
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
    # outer: def line, b =, blank, def inner, docstring, return, blank, return
    assert function_sizes(source) == {"outer": 8, "outer.inner": 2, "bare": 2, "Model.fit": 2}


def test_few_long_functions_and_none_too_long():
    sizes = package_sizes()
    counted = {name: n for name, n in sizes.items() if name not in PENDING_SPLITS}
    too_long = {name: n for name, n in counted.items() if n > LONGEST}
    assert too_long == {}, f"functions over {LONGEST} lines of code: {too_long}"
    long = dict(sorted(((k, n) for k, n in counted.items() if n > LONG), key=lambda kv: -kv[1]))
    assert len(long) <= MAX_LONG, (
        f"{len(long)} functions over {LONG} lines of code (at most {MAX_LONG}): {long}"
    )


def test_pending_splits_are_still_pending():
    """An entry of PENDING_SPLITS that is gone or split is taken out of the set."""
    sizes = package_sizes()
    stale = {name for name in PENDING_SPLITS if sizes.get(name, 0) <= LONG}
    assert stale == set(), f"split already (remove from PENDING_SPLITS): {sorted(stale)}"
