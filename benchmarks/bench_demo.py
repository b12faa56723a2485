"""CPU and wall time of ``mics demo`` against the v0.1 demo, each in its own process.

The v0.1 demo fitted fixed ranks and drew four figures; the current one also
runs the cross-validated selection, the circular-shift test, the block
bootstrap, draws every report figure and writes ``index.html`` and
``model.nc``. This script prints what that costs, and what each stage adds,
against the v0.1 demo run in the same session (``git archive v0.1 mics``
into a temporary folder, imported with ``PYTHONPATH``).

Times are of the child process (``resource.getrusage(RUSAGE_CHILDREN)``
user + system CPU, and wall time); the machine may be shared, so CPU time is
the figure to compare. One run each (the demo is seeded, so runs do the same
work).

Usage::

    python benchmarks/bench_demo.py                 # table to stdout
    python benchmarks/bench_demo.py --out results/demo/demo_timing.csv
"""

from __future__ import annotations

import argparse
import csv
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _baseline import extract_v01

ROOT = Path(__file__).resolve().parents[1]

#: (name, package source, demo arguments); the output folder is appended.
NO_INFERENCE = ["--permutations", "0", "--boot", "0"]
VARIANTS = (
    ("v0.1 demo (fixed ranks, 3 figures)", "v0.1", []),
    ("current, fixed ranks, no inference", "current", ["--no-select", *NO_INFERENCE]),
    ("current, selection, no inference", "current", NO_INFERENCE),
    ("current, default (selection + 19 shifts + 10 resamples)", "current", []),
)


def _v01_tree(folder):
    extract_v01(folder)
    return folder


def _run(pythonpath, args, out, cwd):
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    subprocess.run(
        [sys.executable, "-m", "mics.cli", "demo", *args, "--output", str(out)],
        check=True,
        env={**os.environ, "PYTHONPATH": str(pythonpath), "MPLBACKEND": "Agg"},
        capture_output=True,
        cwd=cwd,  # not the repository: `python -m` puts the cwd ahead of PYTHONPATH
    )
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return cpu, wall, len(list(Path(out).glob("*.png")))


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", help="CSV file for the table")
    args = parser.parse_args(argv)
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        (tmp / "v01").mkdir()
        sources = {"v0.1": _v01_tree(tmp / "v01"), "current": ROOT}
        for i, (name, source, demo_args) in enumerate(VARIANTS):
            cpu, wall, n_png = _run(sources[source], demo_args, tmp / f"out{i}", tmp)
            rows.append({"variant": name, "cpu_s": cpu, "wall_s": wall, "figures": n_png})
    base = rows[0]["cpu_s"]
    print(f"mics demo (2000 samples, 60 source, 40 target, 2 modulators); load {os.getloadavg()}")
    print(f"{'variant':58s} {'CPU s':>7s} {'wall s':>7s} {'x v0.1':>7s} {'PNGs':>5s}")
    for row in rows:
        row["cpu_ratio_vs_v01"] = row["cpu_s"] / base
        print(
            f"{row['variant']:58s} {row['cpu_s']:7.1f} {row['wall_s']:7.1f} "
            f"{row['cpu_ratio_vs_v01']:7.1f} {row['figures']:5d}"
        )
    if args.out:
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        with open(args.out, "w", newline="") as fh:
            writer = csv.DictWriter(fh, fieldnames=list(rows[0]))
            writer.writeheader()
            writer.writerows(rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())
