"""Before/after: v0.1 and the current code on the same seeds of validate_detection.py.

Run ``validate_detection.py`` twice with the same arguments (v0.1 imported
from the git tag, e.g. ``git archive v0.1 mics | tar -x -C /tmp/v01`` and
``PYTHONPATH=/tmp/v01``; the current code from the tree), each with its own
``--out``, then::

    python benchmarks/compare_detection.py OLD_DIR NEW_DIR --out results/speed

Datasets are matched by (part, seed), so the comparison covers the seeds both
runs did (the v0.1 side may run fewer null datasets to save CPU). Printed and
written to ``detection_before_after.md``: agreement of the selected
(rank, K), the per-seed p-values of the null tests (identical, or how far
apart on the k/40 grid), the false-positive rate at 0.05 of each side with
its 95% Clopper-Pearson interval, and the power runs.
"""

from __future__ import annotations

import argparse
import csv
from pathlib import Path

import numpy as np
from scipy import stats


def read(path):
    with open(Path(path) / "detection_runs.csv") as f:
        return {(r["part"], int(r["seed"])): r for r in csv.DictReader(f)}


def fpr(p_values, alpha=0.05):
    k, n = int(np.sum(np.asarray(p_values) <= alpha)), len(p_values)
    ci = stats.binomtest(k, n).proportion_ci(0.95) if n else None
    return f"{k}/{n} = {k / max(n, 1):.3f} [{ci.low:.3f}, {ci.high:.3f}]" if n else "-"


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("old", type=Path)
    parser.add_argument("new", type=Path)
    parser.add_argument("--out", type=Path, default=None)
    parser.add_argument("--old-label", default="v0.1", help="name of OLD in the output")
    args = parser.parse_args(argv)
    old, new = read(args.old), read(args.new)
    common = sorted(set(old) & set(new))
    label = args.old_label
    lines = [f"{label}: {args.old}  new: {args.new}", ""]

    sel = [k for k in common if k[0].endswith("_selection")]
    same = [
        k
        for k in sel
        if (old[k]["rank"], old[k]["n_channels"]) == (new[k]["rank"], new[k]["n_channels"])
    ]
    lines.append(f"selection (rank_, n_channels_) identical: {len(same)}/{len(sel)}")
    for k in sel:
        if k not in same:
            lines.append(
                f"  differs {k}: {label} ({old[k]['rank']},{old[k]['n_channels']}) "
                f"new ({new[k]['rank']},{new[k]['n_channels']})"
            )
    nulls = [k for k in common if k[0] == "i_null_test"]
    po = np.array([float(old[k]["p_value"]) for k in nulls])
    pn = np.array([float(new[k]["p_value"]) for k in nulls])
    if nulls:
        grid = 1 / 40
        steps = np.round(np.abs(po - pn) / grid).astype(int)
        lines.append(
            f"null-test p-values, same seeds: identical {int(np.sum(steps == 0))}/{len(nulls)}, "
            f"within one grid step {int(np.sum(steps <= 1))}/{len(nulls)}, "
            f"max |diff| {np.max(np.abs(po - pn)):.3f}, "
            f"Spearman {stats.spearmanr(po, pn)[0]:.3f}"
        )
        lines.append(f"FPR at 0.05 on these seeds: {label} {fpr(po)}   new {fpr(pn)}")
    all_new = [float(r["p_value"]) for (part, _), r in new.items() if part == "i_null_test"]
    all_old = [float(r["p_value"]) for (part, _), r in old.items() if part == "i_null_test"]
    lines.append(f"FPR at 0.05, all seeds run: {label} {fpr(all_old)}   new {fpr(all_new)}")
    for k in [k for k in common if k[0] == "iii_signal_test"]:
        lines.append(
            f"power seed {k[1]}: p {label} {float(old[k]['p_value']):.4f} new "
            f"{float(new[k]['p_value']):.4f}; z {label} {float(old[k]['z_score']):.1f} "
            f"new {float(new[k]['z_score']):.1f}"
        )
    text = "\n".join(lines)
    print(text)
    if args.out:
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / "detection_before_after.md").write_text("```\n" + text + "\n```\n")


if __name__ == "__main__":
    main()
