"""A small mutation check of the core modules (no dependency beyond the test suite).

Each mutant changes one operator or constant in one module:

* arithmetic: ``+`` <-> ``-``, ``*`` <-> ``/``, ``**`` -> ``*``;
* a term dropped: ``a + b`` or ``a - b`` -> ``a``;
* comparisons: ``<`` <-> ``<=``, ``>`` <-> ``>=``, ``==`` <-> ``!=``;
* numeric constants: ``0`` -> ``1``, ``1`` -> ``0`` or ``2``, other ``c`` -> ``2 c``;
* a unary minus dropped; ``and`` <-> ``or``; ``True`` <-> ``False``.

Code that only builds messages (``raise`` statements, f-strings, warnings)
and docstrings is left alone. The package and the tests are copied to a
temporary directory once; each mutant is written there, the test subset runs
against that copy (``PYTHONPATH``; the editable install's finder comes after
the path finder), and the original is restored. A mutant is *killed* when
the subset fails, or runs past the time limit (recorded as "timeout",
counted as killed).

Usage::

    python tools/mutation.py --per-module 20 --out results/mutation/mutants.csv

The subset (``TESTS``) is CI-sized: about 20 s on two shared cores (slow
and shared-data tests deselected). The golden
tests (bitwise frozen outputs) are left out on purpose: they would kill
nearly every mutant without saying whether the answer was right.
"""

from __future__ import annotations

import argparse
import ast
import csv
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
MODULES = ["mics/core/als.py", "mics/core/stats.py", "mics/model/selection.py"]
TESTS = [
    "tests/test_als_reference.py",
    "tests/test_moments.py",
    "tests/test_tensorly_crosscheck.py",
    "tests/test_reduced_rank.py",
    "tests/test_channel_search.py",
    "tests/test_selection_inference.py",
]

_SWAP_BIN = {
    ast.Add: ast.Sub,
    ast.Sub: ast.Add,
    ast.Mult: ast.Div,
    ast.Div: ast.Mult,
    ast.Pow: ast.Mult,
}
_SWAP_CMP = {
    ast.Lt: ast.LtE,
    ast.LtE: ast.Lt,
    ast.Gt: ast.GtE,
    ast.GtE: ast.Gt,
    ast.Eq: ast.NotEq,
    ast.NotEq: ast.Eq,
}


def _skipped_lines(tree):
    """Lines of docstrings, raise statements, f-strings and warnings calls."""
    skip = set()
    for node in ast.walk(tree):
        spans = []
        message = isinstance(node, ast.Call) and "warn" in ast.unparse(node.func)
        if message or isinstance(node, (ast.Raise, ast.JoinedStr, ast.Assert)):
            spans.append(node)
        elif isinstance(node, (ast.FunctionDef, ast.ClassDef, ast.Module)) and ast.get_docstring(
            node
        ):
            spans.append(node.body[0])
        elif isinstance(node, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id == "__all__" for t in node.targets
        ):
            spans.append(node)
        for s in spans:
            skip.update(range(s.lineno, s.end_lineno + 1))
    return skip


def _sites(tree):
    """(node id in walk order, kind, description) of every mutation."""
    skip = _skipped_lines(tree)
    out = []
    for i, node in enumerate(ast.walk(tree)):
        line = getattr(node, "lineno", None)
        if line is None or line in skip:
            continue
        if isinstance(node, ast.BinOp) and type(node.op) in _SWAP_BIN:
            new = _SWAP_BIN[type(node.op)].__name__
            out.append((i, "binop", f"L{line}: {type(node.op).__name__} -> {new}"))
            if isinstance(node.op, (ast.Add, ast.Sub)):
                out.append((i, "drop", f"L{line}: drop right term of {type(node.op).__name__}"))
        elif isinstance(node, ast.AugAssign) and type(node.op) in _SWAP_BIN:
            new = _SWAP_BIN[type(node.op)].__name__
            out.append((i, "binop", f"L{line}: {type(node.op).__name__}= -> {new}="))
        elif isinstance(node, ast.Compare) and type(node.ops[0]) in _SWAP_CMP:
            new = _SWAP_CMP[type(node.ops[0])].__name__
            out.append((i, "cmp", f"L{line}: {type(node.ops[0]).__name__} -> {new}"))
        elif isinstance(node, ast.BoolOp):
            out.append((i, "bool", f"L{line}: {type(node.op).__name__} swapped"))
        elif isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
            out.append((i, "neg", f"L{line}: unary minus dropped"))
        elif isinstance(node, ast.Constant) and type(node.value) in (int, float, bool):
            v = node.value
            if isinstance(v, bool):
                out.append((i, "const", f"L{line}: {v} -> {not v}"))
            elif v == 1:
                out.append((i, "const0", f"L{line}: 1 -> 0"))
                out.append((i, "const", f"L{line}: 1 -> 2"))
            else:
                out.append((i, "const", f"L{line}: {v!r} -> {1 if v == 0 else 2 * v!r}"))
    return out


def _mutate(source, site):
    tree = ast.parse(source)
    index, kind, _ = site
    node = next(n for i, n in enumerate(ast.walk(tree)) if i == index)
    parent_of = {id(c): p for p in ast.walk(tree) for c in ast.iter_child_nodes(p)}
    if kind == "binop":
        node.op = _SWAP_BIN[type(node.op)]()
    elif kind == "drop":
        _replace(parent_of[id(node)], node, node.left)
    elif kind == "cmp":
        node.ops[0] = _SWAP_CMP[type(node.ops[0])]()
    elif kind == "bool":
        node.op = ast.Or() if isinstance(node.op, ast.And) else ast.And()
    elif kind == "neg":
        _replace(parent_of[id(node)], node, node.operand)
    elif kind == "const0":
        node.value = 0
    elif kind == "const":
        v = node.value
        node.value = (not v) if isinstance(v, bool) else (1 if v == 0 else 2 * v)
    return ast.unparse(tree)


def _replace(parent, old, new):
    for field, value in ast.iter_fields(parent):
        if value is old:
            setattr(parent, field, new)
            return
        if isinstance(value, list):
            for j, item in enumerate(value):
                if item is old:
                    value[j] = new
                    return
    raise RuntimeError("child not found")


def _run(work, tests, timeout):
    env = {**os.environ, "PYTHONPATH": str(work), "PYTHONDONTWRITEBYTECODE": "1"}
    cmd = [
        sys.executable,
        "-m",
        "pytest",
        "-x",
        "-q",
        "-p",
        "no:cacheprovider",
        "-m",
        "not slow and not shared_data",
        *tests,
    ]
    t0 = time.perf_counter()
    try:
        rc = subprocess.run(
            cmd, cwd=work, env=env, capture_output=True, timeout=timeout
        ).returncode
    except subprocess.TimeoutExpired:
        rc = "timeout"
    return rc, time.perf_counter() - t0


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--per-module", type=int, default=20, help="mutants sampled per module")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--modules", nargs="*", default=MODULES)
    ap.add_argument("--tests", nargs="*", default=TESTS)
    ap.add_argument(
        "--only",
        nargs="*",
        default=None,
        help="module:description of mutants to rerun (e.g. after new tests)",
    )
    ap.add_argument("--out", default="results/mutation/mutants.csv")
    args = ap.parse_args(argv)

    work = Path(tempfile.mkdtemp(prefix="mics-mutation-"))
    shutil.copytree(ROOT / "mics", work / "mics", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copytree(ROOT / "tests", work / "tests", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / "pyproject.toml", work / "pyproject.toml")
    check = subprocess.run(
        [sys.executable, "-c", "import mics; print(mics.__file__)"],
        env={**os.environ, "PYTHONPATH": str(work)},
        capture_output=True,
        text=True,
        cwd=work,
    ).stdout.strip()
    assert check.startswith(str(work)), f"the copy is not the one imported: {check}"

    rc, base_time = _run(work, args.tests, timeout=600)
    if rc != 0:
        raise SystemExit(f"the unmutated subset fails (rc={rc}) in {work}")
    timeout = max(5 * base_time, 120)  # generous: the machine is shared
    print(f"subset passes unmutated in {base_time:.1f} s; timeout {timeout:.0f} s", flush=True)

    rng = random.Random(args.seed)
    rows = []
    out = ROOT / args.out
    out.parent.mkdir(parents=True, exist_ok=True)
    fields = ["module", "mutant", "status", "seconds", "total_in_module"]
    with open(out, "w", newline="") as f:
        csv.DictWriter(f, fieldnames=fields).writeheader()
    for module in args.modules:
        path = work / module
        original = path.read_text()
        sites = _sites(ast.parse(original))
        if args.only is not None:
            wanted = {o.split(":", 1)[1] for o in args.only if o.split(":", 1)[0] == module}
            chosen = [s for s in sites if s[2] in wanted]
        else:
            chosen = sites if len(sites) <= args.per_module else rng.sample(sites, args.per_module)
            chosen.sort(key=lambda s: int(s[2][1:].split(":")[0]))
        print(f"{module}: {len(sites)} mutants, running {len(chosen)}", flush=True)
        for site in chosen:
            try:
                path.write_text(_mutate(original, site))
                rc, elapsed = _run(work, args.tests, timeout)
            finally:
                path.write_text(original)
            status = "survived" if rc == 0 else ("timeout" if rc == "timeout" else "killed")
            row = {
                "module": module,
                "mutant": site[2],
                "status": status,
                "seconds": f"{elapsed:.1f}",
                "total_in_module": len(sites),
            }
            rows.append(row)
            with open(out, "a", newline="") as f:  # written as it goes
                csv.DictWriter(f, fieldnames=fields).writerow(row)
            print(f"  {status:8s} {site[2]} ({elapsed:.1f} s)", flush=True)
    shutil.rmtree(work, ignore_errors=True)
    for module in args.modules:
        mine = [r for r in rows if r["module"] == module]
        if mine:
            killed = sum(r["status"] != "survived" for r in mine)
            print(f"{module}: {killed}/{len(mine)} killed ({killed / len(mine):.0%})")


if __name__ == "__main__":
    main()
