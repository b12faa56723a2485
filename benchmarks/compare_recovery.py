"""Before/after: v0.1 and the current code on the same seeds of recovery.py.

Run ``recovery.py`` twice with the same arguments (v0.1 from the git tag on
``PYTHONPATH``, the current tree), each with its own ``--out``, then::

    python benchmarks/compare_recovery.py OLD_DIR NEW_DIR --out results/speed

``recovery.py`` fits at the true (rank, K), so the selected (rank, K) agree by
construction; what can move is the fit. Printed and written to
``recovery_before_after.md``: per run the factor-match score, the relative
tensor error, the held-out NSE and the fit time of both versions, and the
largest absolute change of each metric.
"""

from __future__ import annotations

import argparse
import csv
from pathlib import Path

import numpy as np

KEYS = ("fms", "tensor_error", "nse_mics", "fit_seconds")


def read(path):
    with open(Path(path) / "recovery_runs.csv") as f:
        rows = list(csv.DictReader(f))
    key = ("geometry", "n_source", "n_target", "n_samples", "seed")
    return {tuple(r[k] for k in key): r for r in rows}


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("old", type=Path)
    parser.add_argument("new", type=Path)
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args(argv)
    old, new = read(args.old), read(args.new)
    common = sorted(set(old) & set(new))
    lines = [
        "| geometry | p | q | T | seed | " + " | ".join(f"{k} v0.1 / new" for k in KEYS) + " |"
    ]
    lines.append("|" + "---|" * (5 + len(KEYS)))
    diffs = {k: [] for k in KEYS[:-1]}
    for c in common:
        cells = [f"{float(old[c][k]):.4f} / {float(new[c][k]):.4f}" for k in KEYS]
        lines.append("| " + " | ".join(c) + " | " + " | ".join(cells) + " |")
        for k in diffs:
            diffs[k].append(abs(float(old[c][k]) - float(new[c][k])))
    lines.append("")
    lines.append(
        f"{len(common)} runs; largest |v0.1 - new|: "
        + ", ".join(f"{k} {max(v):.4f}" for k, v in diffs.items())
    )
    # median, not total: recovery.py does not warm up, so v0.1's first fit
    # includes the numba compilation
    ratio = np.median(
        [float(old[c]["fit_seconds"]) / float(new[c]["fit_seconds"]) for c in common]
    )
    lines.append(f"median fit-time ratio v0.1 / new: {ratio:.1f}x (shared, loaded machine)")
    text = "\n".join(lines)
    print(text)
    if args.out:
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / "recovery_before_after.md").write_text(text + "\n")


if __name__ == "__main__":
    main()
