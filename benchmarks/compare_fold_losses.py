"""Before/after for changes meant to move nothing beyond rounding: the CV fold losses.

Runs the default selection ``MICs(random_state=0).fit`` on a fixed set of
simulated data sets with an earlier version (a git ref, extracted and
imported in a subprocess) and with the working tree, and prints per data
set the selected (rank, K) of both and the largest absolute difference of
their fold losses (rank stage and channel stage, held-out NSE). A change
that only reorganises arithmetic should give differences at the level of
floating-point rounding (1e-15 to 1e-12) and the same selections.

The data sets: Gaussian modulators (m = 3) with K = 0, 1 and 2 channels,
a weak channel (modulation SNR 0.05), and a population modulator
(m = 20), at T = 500-2000, four seeds each.

The earlier version must have ``simulate(..., modulator_kind=)`` (the
population modulator, issue 17).

Usage::

    python benchmarks/compare_fold_losses.py 8ecd18c [--out results/speed/fold_losses.txt]
"""

from __future__ import annotations

import argparse
import json
import tempfile
from pathlib import Path

import numpy as np
from _baseline import extract_ref, run_worker

ROOT = Path(__file__).resolve().parents[1]

# (T, p, q, m, K, modulation_snr, modulator_kind)
CASES = [
    (500, 20, 15, 3, 0, 0.3, "gaussian"),
    (500, 20, 15, 3, 1, 0.3, "gaussian"),
    (2000, 40, 20, 3, 2, 0.2, "gaussian"),
    (800, 25, 15, 2, 1, 0.05, "gaussian"),
    (1000, 30, 20, 20, 1, 0.3, "population"),
]
SEEDS = range(4)

WORKER = r"""
import json, sys, warnings
import numpy as np
import mics
warnings.simplefilter("ignore")
cases, seeds = json.loads(sys.argv[1])
out = []
for T, p, q, m, K, snr, kind in cases:
    for seed in seeds:
        X, Y, Z = mics.simulate(n_samples=T, n_source=p, n_target=q, n_modulators=m,
                                n_channels=K, modulation_snr=snr, modulator_kind=kind,
                                random_state=seed)[:3]
        est = mics.MICs(random_state=0, verbose=0).fit(X, Y, Z)
        cv = est.cv_results_
        out.append(dict(case=[T, p, q, m, K, snr, kind, seed],
                        selected=[int(est.rank_), int(est.n_channels_)],
                        rank=np.asarray(cv["rank_fold_loss"]).tolist(),
                        channels=np.asarray(cv["n_channels_fold_loss"]).tolist()))
print("RESULT " + json.dumps(dict(mics=mics.__file__, runs=out)))
"""


def run(path):
    return run_worker(path, WORKER, json.dumps([CASES, list(SEEDS)]))["runs"]


def _max_diff(a, b):
    a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    if a.shape != b.shape:
        return np.inf  # different candidates scored
    both = np.isfinite(a) & np.isfinite(b)
    if not np.array_equal(np.isfinite(a), np.isfinite(b)):
        return np.inf
    return float(np.max(np.abs(a[both] - b[both]), initial=0.0))


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("ref", help="git ref of the earlier version")
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        old = run(extract_ref(args.ref, tmp))
    new = run(ROOT)
    lines = [
        f"default selection, {args.ref} against the working tree, {len(new)} data sets",
        "",
        "| T | p | q | m | K | SNR | modulator | seed | selected (old) | selected (new) "
        "| rank-stage fold losses, largest difference "
        "| channel-stage fold losses, largest difference |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    worst_rank = worst_channels = 0.0
    same = 0
    for a, b in zip(old, new, strict=True):
        dr, dc = _max_diff(a["rank"], b["rank"]), _max_diff(a["channels"], b["channels"])
        worst_rank, worst_channels = max(worst_rank, dr), max(worst_channels, dc)
        same += a["selected"] == b["selected"]
        cells = [str(c) for c in a["case"]] + [
            str(tuple(a["selected"])),
            str(tuple(b["selected"])),
        ]
        lines.append("| " + " | ".join(cells) + f" | {dr:.1e} | {dc:.1e} |")
    lines += [
        "",
        f"same (rank, K): {same}/{len(new)}",
        f"largest fold-loss difference: rank stage {worst_rank:.1e}, "
        f"channel stage {worst_channels:.1e}",
    ]
    text = "\n".join(lines)
    print(text)
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(text + "\n")


if __name__ == "__main__":
    main()
