"""Cholesky or warm-started conjugate gradients for the large source solves (issue 34, item 3)?

With thousands of source neurons (or as many sample coordinates, p > T),
each ALS sweep solves one ridge system of order ``d`` per channel for the
source patterns (``mics.core.als._solve_factor``, channel by channel). A
fresh Cholesky factorisation costs ``d^3 / 3`` flops, and on the data path
forming the system first costs ``T d^2``. From an operator's
``cg_min_order`` up, the fits use :class:`mics.core.linalg.WarmStartedSolves`
instead: conjugate gradients started from the present patterns and
preconditioned by the Cholesky factor of an earlier system of the same
channel, to a relative residual of 1e-10, refactorised past the operator's
``cg_iterations`` (on the data path the system enters only through
products with the data).

Two measurements say where each wins:

1. **One of each, by order** (one BLAS thread, as the fits run): a
   factorisation plus solve against one iteration (a product with the
   system and a preconditioner solve). Their ratio is the number of
   iterations at which the two break even.
2. **Whole fits, both ways, in the same run**: ``MICs(rank=3,
   n_channels=2).fit`` on ``benchmarks.data`` on each path, with
   ``cg_min_order`` below the case's order (conjugate gradients) and
   infinite (Cholesky only), alternating, ``--repeats`` times each.
   Reports median times, their ratio, sweeps, how many solves each way,
   and the difference of the final losses.

Writes ``results/source_solve/`` (``--out``): ``source_solve.md`` (the two
tables), ``run.json`` and ``README.md``.

Usage::

    python studies/performance/source_solve.py
    python studies/performance/source_solve.py --cases T2000_p3000_moments --repeats 3
    python studies/performance/source_solve.py --report-only   # README.md only
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

import numpy as np
from scipy import linalg

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "studies"))

import study_tools as tools  # noqa: E402

import mics  # noqa: E402
from benchmarks import data, quiet, warm_up  # noqa: E402
from mics.core import als  # noqa: E402
from mics.core.linalg import WarmStartedSolves, single_blas_thread  # noqa: E402

#: (T, p, q) of each whole-fit case (m = 3) and its path. The order of the
#: source solves is min(T, p): with p > T the source is fitted in its T
#: sample coordinates.
CASES = {
    "T1000_p1500_moments": dict(T=1000, p=1500, q=200, solver="moments"),
    "T20000_p1000_moments": dict(T=20000, p=1000, q=500, solver="moments"),
    "T2000_p3000_moments": dict(T=2000, p=3000, q=200, solver="moments"),
    "T20000_p1000_data": dict(T=20000, p=1000, q=500, solver="data"),
    "T20000_p2000_data": dict(T=20000, p=2000, q=500, solver="data"),
}
OPERATORS = (als.MomentOperator, als.DataOperator)
OUT = ROOT / "results" / "source_solve"


def unit_costs(orders, repeats=5, seed=0):
    """Median seconds of one factorisation + solve and of one CG iteration, by order."""
    rng = np.random.default_rng(seed)
    out = []
    for d in orders:
        A = rng.standard_normal((d, d + 10))
        H = A @ A.T + d * np.eye(d)
        g = rng.standard_normal(d)
        factor = linalg.cho_factor(H, check_finite=False)
        chol, step = [], []
        with single_blas_thread():
            for _ in range(repeats):
                t = time.perf_counter()
                linalg.cho_solve(linalg.cho_factor(H, check_finite=False), g, check_finite=False)
                chol.append(time.perf_counter() - t)
                t = time.perf_counter()
                linalg.cho_solve(factor, H @ g, check_finite=False)
                step.append(time.perf_counter() - t)
        out.append((d, float(np.median(chol)), float(np.median(step))))
    return out


def whole_fits(case, repeats):
    """Median seconds, sweeps, solve counts and final loss of the fit, CG on and off."""
    sizes = {k: v for k, v in CASES[case].items() if k != "solver"}
    X, Y, Z = data(**sizes, m=3, rank=3, n_channels=2)
    made = []

    class Counted(WarmStartedSolves):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            made.append(self)

    original = [op.cg_min_order for op in OPERATORS], als.WarmStartedSolves
    runs = {"cholesky": [], "cg": []}
    try:
        als.WarmStartedSolves = Counted
        for _ in range(repeats):
            for how in runs:
                for op in OPERATORS:
                    op.cg_min_order = np.inf if how == "cholesky" else 2
                made.clear()
                est = mics.MICs(
                    rank=3, n_channels=2, random_state=0, verbose=0, solver=CASES[case]["solver"]
                )
                t = time.perf_counter()
                with quiet():
                    est.fit(X, Y, Z)
                seconds = time.perf_counter() - t
                counts = {k: sum(s.counts[k] for s in made) for k in ("cg", "factorised")}
                runs[how].append((seconds, est.n_iter_, counts, est.loss_history_[-1]))
    finally:
        for op, order in zip(OPERATORS, original[0], strict=True):
            op.cg_min_order = order
        als.WarmStartedSolves = original[1]
    return runs


def readme(out):
    """``README.md`` from ``source_solve.md`` and the run record: where each way wins."""
    text = (out / "source_solve.md").read_text()
    units = tools.read_markdown_table(text, "order")
    fits = tools.read_markdown_table(text, "case")
    even = units["break-even iterations"].astype(float)
    orders = units["order"]
    findings = [
        f"- One conjugate-gradient iteration costs 1/{even.min():.0f} to 1/{even.max():.0f} of a "
        f"factorisation and solve at orders {orders.iloc[0]} to {orders.iloc[-1]} (one BLAS "
        "thread).",
    ]
    for path, g in fits.groupby("path", sort=False):
        cells = ", ".join(
            f"{r['case']} {r['ratio']} ({r['CG (s)']} s against {r['Cholesky (s)']} s)"
            for _, r in g.iterrows()
        )
        loss = max(float(v) for v in g["final loss, relative difference"])
        findings.append(
            f"- {path.capitalize()} path, whole fits with conjugate gradients against Cholesky "
            f"only (time ratio): {cells}; final losses within {loss:.1e} of each other."
        )
    about = (
        "With thousands of source neurons (or as many sample coordinates, p > T) each ALS sweep "
        "solves one ridge system of order d per channel. From an operator's `cg_min_order` up "
        "the fits solve it by conjugate gradients started from the present patterns and "
        "preconditioned by an earlier Cholesky factor of the same channel "
        "(`mics.core.linalg.WarmStartedSolves`). Measured both ways: one factorisation against "
        "one iteration by order, and whole fits `MICs(rank=3, n_channels=2).fit` on each path "
        "with conjugate gradients on and off, alternating in one run."
    )
    lines = tools.readme_head(
        "Cholesky or warm-started conjugate gradients for the source solves",
        "studies/performance/source_solve.py",
        out,
        about=about,
        missing="`source_solve.md` gives the load at its start and end.",
    )
    body = text[text.index("## One of each") :].rstrip()
    lines += ["## Where each wins", "", *findings, "", body, ""]
    (out / "README.md").write_text("\n".join(lines))


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=OUT)
    parser.add_argument("--orders", nargs="+", type=int, default=[500, 1000, 2000, 3000])
    parser.add_argument("--cases", nargs="+", choices=list(CASES), default=list(CASES))
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument(
        "--report-only", action="store_true", help="rebuild README.md from source_solve.md"
    )
    args = parser.parse_args(argv)
    if args.report_only:
        readme(args.out)
        return
    run = tools.RunRecord(__file__, argv, seeds="0 (data and fits)")
    warm_up()
    load = os.getloadavg()[0]
    lines = [
        "# Cholesky or warm-started conjugate gradients for the source solves",
        "",
        "Written by `studies/performance/source_solve.py` (load "
        f"{load:.1f} at the start). The package's `cg_min_order` / `cg_iterations`: "
        + ", ".join(f"{op.__name__} {op.cg_min_order} / {op.cg_iterations}" for op in OPERATORS)
        + ".",
        "",
        "## One of each, by order (one BLAS thread)",
        "",
        "| order | factorisation + solve (ms) | one CG iteration (ms) | break-even iterations |",
        "|---|---|---|---|",
    ]
    for d, chol, step in unit_costs(args.orders):
        lines.append(f"| {d} | {1e3 * chol:.1f} | {1e3 * step:.2f} | {chol / step:.1f} |")
    lines += [
        "",
        "## Whole fits, `MICs(rank=3, n_channels=2)`, both ways alternating "
        f"({args.repeats} each)",
        "",
        "| case | path | order | Cholesky (s) | CG (s) | ratio | sweeps | source solves by "
        "CG / factorised | final loss, relative difference |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for case in args.cases:
        runs = whole_fits(case, args.repeats)
        T, p, solver = (CASES[case][k] for k in ("T", "p", "solver"))
        chol = float(np.median([r[0] for r in runs["cholesky"]]))
        cg = float(np.median([r[0] for r in runs["cg"]]))
        _, n_chol, _, loss_chol = runs["cholesky"][0]
        _, n_cg, counts, loss_cg = runs["cg"][0]
        lines.append(
            f"| T={T}, p={p} | {solver} | {min(T, p)} | {chol:.1f} | {cg:.1f} | {cg / chol:.2f} | "
            f"{n_chol} / {n_cg} | {counts['cg']} / {counts['factorised']} | "
            f"{abs(loss_cg - loss_chol) / loss_chol:.1e} |"
        )
        print(lines[-1], flush=True)
    lines += ["", f"Load {os.getloadavg()[0]:.1f} at the end."]
    text = "\n".join(lines) + "\n"
    print(text)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "source_solve.md").write_text(text)
    run.finish(args.out)
    readme(args.out)


if __name__ == "__main__":
    main()
