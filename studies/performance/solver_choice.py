"""Does ``solver="auto"`` pick the faster path? Both paths timed on a grid of modulator sizes.

For each modulator size ``m`` the same simulated data are fitted with
``solver="moments"``, ``solver="data"`` and ``solver="auto"`` in three
settings: a fixed-rank fit, a capped selection of the channels (the
estimator the real-data studies use: ``cv=5, max_channels=2, n_init=1,
max_iter=50``) and the default selection of the channels. The two paths
give the same fit (``tests/test_population_modulator.py``), so the only
question is time. ``auto`` runs the path it picks, so the picked path's
time is the better of its two measurements. A row is a miss when that is
more than 1.25x the other path's time. Both paths are warmed up (numba
compilation, BLAS threads) on a tiny problem first.

Prints the table and writes it to ``results/solver_choice/`` (``--out``):
``solver_choice.txt``, ``run.json`` and ``README.md``.

Usage::

    python studies/performance/solver_choice.py                      # both sizes
    python studies/performance/solver_choice.py --size semedo --m 3 31 --out /tmp/choice
    python studies/performance/solver_choice.py --report-only        # README.md only
"""

from __future__ import annotations

import argparse
import os
import sys
import time
import warnings
from pathlib import Path

import mics

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "studies"))
import study_tools as tools  # noqa: E402

OUT = ROOT / "results" / "solver_choice"

SIZES = {
    # the Semedo et al. 2019 sample's shape (V1 source, V2 target)
    "semedo": dict(T=4000, p=79, q=31, ms=[3, 10, 31, 60]),
    # the size of issue 17's ratio benchmark
    "issue17": dict(T=3000, p=60, q=40, ms=[3, 10, 30, 100]),
}
SETTINGS = {
    "fixed": dict(rank=2, n_channels=1),
    "capped selection": dict(rank=2, cv=5, max_channels=2, n_init=1, max_iter=50, tol=1e-5),
    "default selection": dict(rank=2),
}


def readme(out):
    """``README.md`` from ``solver_choice.txt`` and the run record."""
    text = (out / "solver_choice.txt").read_text().rstrip()
    verdicts = [line for line in text.splitlines() if line.startswith("auto within")]
    about = (
        'Does `solver="auto"` pick the faster path? The same simulated data fitted with '
        '`solver="moments"`, `"data"` and `"auto"` at the Semedo sample\'s shape (T = 4000, '
        "p = 79, q = 31) and issue 17's (T = 3000, p = 60, q = 40), for several modulator "
        "sizes m, in three settings: a fixed-rank fit, the capped selection of the real-data "
        "studies and the default selection. The two paths give the same fit "
        "(`tests/test_population_modulator.py`), so the only question is time. A row is a "
        "miss when the picked path takes more than 1.25x the other's time."
    )
    lines = tools.readme_head(
        'Which path `solver="auto"` picks, against both paths',
        "studies/performance/solver_choice.py",
        out,
        about=about,
        missing="The table's first line gives its command, date and load.",
    )
    lines += [
        "## Findings",
        "",
        *(
            [f"- {verdicts[0]}."]
            if len(verdicts) == 1
            else [f"- Table {i}: {v}." for i, v in enumerate(verdicts, 1)]
        ),
        "",
        "## The fits (`solver_choice.txt`)",
        "",
        "```text",
        text,
        "```",
        "",
    ]
    (out / "README.md").write_text("\n".join(lines))


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", nargs="+", choices=list(SIZES), default=list(SIZES))
    parser.add_argument("--m", nargs="+", type=int, default=None, help="modulator sizes")
    parser.add_argument("--out", type=Path, default=OUT)
    parser.add_argument(
        "--report-only", action="store_true", help="rebuild README.md from solver_choice.txt"
    )
    args = parser.parse_args(argv)
    if args.report_only:
        readme(args.out)
        return
    run = tools.RunRecord(__file__, argv, seeds="0 (data and fits)")
    warnings.simplefilter("ignore")  # capped fits warn about convergence
    lines = []

    def say(line):
        print(line, flush=True)
        lines.append(line)

    command = " ".join(sys.argv[1:] if argv is None else argv)
    say(
        f"# python studies/performance/solver_choice.py {command} "
        f"({time.strftime('%Y-%m-%d')}, load {os.getloadavg()[0]:.1f}, {os.cpu_count()} cores)"
    )
    say(f"{'size':8s} {'m':>4s} {'setting':18s} {'moments':>9s} {'data':>9s} "
        f"{'auto':>9s} {'pick':8s} {'faster':8s} verdict")  # fmt: skip
    misses = total = 0
    Xw, Yw, Zw, _ = mics.simulate(n_samples=200, n_source=5, n_target=4, n_modulators=2)
    for solver in ("moments", "data"):
        mics.MICs(rank=1, n_channels=1, solver=solver, verbose=0).fit(Xw, Yw, Zw)
    for name in args.size:
        size = SIZES[name]
        for m in args.m or size["ms"]:
            X, Y, Z, _ = mics.simulate(
                n_samples=size["T"],
                n_source=size["p"],
                n_target=size["q"],
                n_modulators=m,
                rank=2,
                n_channels=1,
                random_state=0,
            )
            for label, kw in SETTINGS.items():
                times = {}
                for solver in ("moments", "data", "auto"):
                    est = mics.MICs(random_state=0, solver=solver, verbose=0, **kw)
                    t0 = time.perf_counter()
                    est.fit(X, Y, Z)
                    times[solver] = time.perf_counter() - t0
                pick = est.solver_
                other = "data" if pick == "moments" else "moments"
                picked = min(times[pick], times["auto"])
                faster = pick if picked <= times[other] else other
                ok = picked <= 1.25 * times[other]
                misses += not ok
                total += 1
                say(
                    f"{name:8s} {m:4d} {label:18s} {times['moments']:8.2f}s "
                    f"{times['data']:8.2f}s {times['auto']:8.2f}s {pick:8s} {faster:8s} "
                    f"{'ok' if ok else 'MISS'} ({picked / times[other]:.2f}x the other)"
                )
    say(f"auto within 1.25x of the faster path in {total - misses}/{total} rows")
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "solver_choice.txt").write_text("\n".join(lines) + "\n")
    run.finish(args.out)
    readme(args.out)


if __name__ == "__main__":
    main()
