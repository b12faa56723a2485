"""Sweeps to convergence with and without the ALS line search, where there is nothing to find.

The fits that crawl are the over-specified and null ones: channels fitted
to data without modulation. Here every fit is of data without modulation
(a rank-3 baseline, white source and modulator), with K = 1 and 2
channels, ``MICs``' penalties, one HOSVD start and the fold fits' tolerance
(1e-6), once with the line search (``fit_mic_model(accelerate=True)``, the
default) and once without, in the same process, on the same operator:

- m = 3 (moment path) and m = 100 (data path) at T = 3000, p = 60, q = 40;
- m = 200 (data path) at T = 20000, p = 300, q = 100 (``--large``).

For each: sweeps (``n_iter``), whether the stage converged before
``max_iter`` (200), the final penalised loss (lower is better) and the
time. Written to ``results/convergence/`` (``convergence.txt``, with the
load average, ``run.json`` and ``README.md``): on a shared machine the sweep
counts and losses are the figures to trust, the times only as ratios within
the same run.

Usage::

    python studies/performance/convergence.py              # m = 3 and 100, three seeds
    python studies/performance/convergence.py --large      # also m = 200 at the population size
    python studies/performance/convergence.py --report-only  # README.md from convergence.txt
"""

from __future__ import annotations

import argparse
import os
import sys
import time
import warnings
from pathlib import Path

import numpy as np

from mics.core import (
    DataOperator,
    InputScales,
    MomentOperator,
    compute_moments,
    fit_mic_model,
    penalties,
)

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "studies"))
import study_tools as tools  # noqa: E402

OUT = ROOT / "results" / "convergence"


def null_operator(T, p, q, m, seed):
    """The operator of one standardised data set without modulation (data path for m > 20)."""
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((T, p))
    B = rng.standard_normal((p, 3)) @ rng.standard_normal((3, q)) / np.sqrt(p)
    Y = X @ B + rng.standard_normal((T, q))
    Z = rng.standard_normal((T, m))
    X, Y, Z = InputScales.from_data(X, Y, Z).standardize(X, Y, Z)
    data = m > 20
    cm = compute_moments(X, Y, Z, interaction=not data).centered()
    return DataOperator(cm, X, Y, Z) if data else MomentOperator(cm)


def run(op, K, accelerate):
    t = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        fit = fit_mic_model(
            op, 3, K, **penalties(op, 0.05, 0.25), n_init=0, max_iter=200, tol=1e-6,
            random_state=0, accelerate=accelerate,
        )  # fmt: skip
    return fit, time.perf_counter() - t


def readme(out):
    """``README.md`` from ``convergence.txt`` and the run record."""
    text = (out / "convergence.txt").read_text().rstrip()
    about = (
        "Sweeps to convergence of the ALS with and without its line search, on fits where "
        "there is nothing to find: data without modulation (a rank-3 baseline, white source "
        "and modulator) fitted with K = 1 and 2 channels, `MICs`' penalties, one HOSVD start "
        "and the fold fits' tolerance (1e-6), both ways in the same process on the same "
        "operator: m = 3 (moment path) and m = 100 (data path) at T = 3000, p = 60, q = 40, "
        "and with `--large` m = 200 (data path) at T = 20000, p = 300, q = 100. The sweep "
        "counts and final losses are the figures to trust; the times only as ratios within "
        "the run."
    )
    lines = tools.readme_head(
        "Convergence of null fits with and without the ALS line search",
        "studies/performance/convergence.py",
        out,
        about=about,
        missing="The table's first and last lines give the load at the start and the end.",
    )
    lines += [
        "## Findings",
        "",
        "- Over all fits: "
        + text.splitlines()[-1].removeprefix("all fits: ").split("; load")[0]
        + ".",
        "",
        "## The fits (`convergence.txt`)",
        "",
        "`capped`: stopped at `max_iter` = 200 before converging; `loss`: the final "
        "penalised loss (lower is better); `s`: seconds.",
        "",
        "```text",
        text,
        "```",
        "",
    ]
    (out / "README.md").write_text("\n".join(lines))


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--large", action="store_true", help="also m = 200 at T = 20000")
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--out", type=Path, default=OUT)
    parser.add_argument(
        "--report-only", action="store_true", help="rebuild README.md from convergence.txt"
    )
    args = parser.parse_args(argv)
    if args.report_only:
        readme(args.out)
        return
    run = tools.RunRecord(__file__, argv, seeds=f"0-{args.seeds - 1} (data), 0 (fits)")
    sizes = [(3000, 60, 40, 3), (3000, 60, 40, 100)]
    if args.large:
        sizes.append((20000, 300, 100, 200))
    lines = [
        f"null fits, K = 1 and 2, tol 1e-6, max_iter 200; load {os.getloadavg()[0]:.2f} at start",
        f"{'T':>6} {'p':>4} {'q':>4} {'m':>4} {'seed':>4} {'K':>2} | "
        f"{'plain sweeps':>12} {'capped':>6} {'loss':>14} {'s':>6} | "
        f"{'line search':>11} {'capped':>6} {'loss':>14} {'s':>6}",
    ]
    totals = {False: [0, 0.0, 0], True: [0, 0.0, 0]}
    for T, p, q, m in sizes:
        for seed in range(args.seeds if m < 200 else 1):
            op = null_operator(T, p, q, m, seed)
            for K in (1, 2):
                row = f"{T:>6} {p:>4} {q:>4} {m:>4} {seed:>4} {K:>2} |"
                for accelerate in (False, True):
                    fit, seconds = run(op, K, accelerate)
                    capped = not fit.converged
                    totals[accelerate][0] += fit.n_iter
                    totals[accelerate][1] += seconds
                    totals[accelerate][2] += capped
                    row += f" {fit.n_iter:>12} {capped!s:>6} {fit.loss_history[-1]:>14.6f}"
                    row += f" {seconds:>6.2f} |"
                lines.append(row.rstrip(" |"))
                print(lines[-1], flush=True)
    (plain_n, plain_s, plain_c), (fast_n, fast_s, fast_c) = totals[False], totals[True]
    lines += [
        f"all fits: plain {plain_n} sweeps, {plain_c} capped, {plain_s:.1f} s; "
        f"line search {fast_n} sweeps, {fast_c} capped, {fast_s:.1f} s "
        f"(sweeps {plain_n / fast_n:.2f}x fewer, time {plain_s / fast_s:.2f}x less); "
        f"load {os.getloadavg()[0]:.2f} at end",
    ]
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "convergence.txt").write_text("\n".join(lines) + "\n")
    run.finish(args.out)
    readme(args.out)
    print(lines[-1])


if __name__ == "__main__":
    main()
