"""Which neurons interact (issue 33), null data: does the sparse selection still find no channel?

Issue 33's "Null data" target: on data without a channel the selection
with sparsity chosen by the data, ``MICs(sparsity="cv")`` at its defaults
(rank, channels and sparsity all on the same 10 folds), chooses K = 0 on at
least 19 of 20 data sets, and where it does choose a channel its member
lists are empty or flagged as not significant.

Data: ``mics.simulate(n_channels=0)`` with the recovery study's sizes
(``sparse_members.py``: T = 2000, p = 150 sources, q = 100 targets, one
modulator, a rank-2 baseline, ``geometry="random"``), seeds 0-19. The
count of K = 0 is reported with its exact (Clopper-Pearson) 95% interval
(``scipy.stats.binomtest``).

For a data set where K > 0 is chosen: the members of the fit (neurons with
a non-zero weight in the chosen sparse patterns, per channel and role),
and their stability selection (``mics.stability_selection``, 20 subsamples of
half the blocks, threshold 0.6): how many neurons reach the threshold and the
Meinshausen-Buhlmann bound on the expected number of false members
(a list no longer than its bound is flagged: not distinguishable from
false selections).

A user may also insist on a channel. So every data set is also fitted with
one channel forced (``n_channels=1`` at the chosen rank): with the sparsity
chosen on the folds (``mics.workflows.choose_sparsity``) and at the fixed
weights 0.25 (below the grid of ``sparsity="cv"``), 1, 2, 4 and 8; the
number of source and target neurons with a non-zero weight is reported for
each (a forced fit with members gets the stability selection above).

Usage::

    python studies/validation/sparse_null.py [--seeds 20] [--T 2000] [--p 150] [--q 100]

Results: ``results/sparse_null/``: ``null.md`` (summary and one row per data
set), ``run.json`` and ``README.md`` (``--report-only`` rebuilds the README
from ``null.md``).
"""

from __future__ import annotations

import argparse
import os
import sys
import time
import warnings
from pathlib import Path

import numpy as np
import pandas as pd
from scipy import stats
from sklearn.base import clone

import mics
from mics.workflows import choose_sparsity

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "studies"))
import study_tools as tools  # noqa: E402

OUT = ROOT / "results" / "sparse_null"
ROLES = ("source", "target", "modulator")
N_BOOT = 20
#: Fixed weights of the forced one-channel fits: the grid's 1 to 8 and a weight
#: below the grid (0.25), small enough to leave neurons in a channel of noise.
FORCED = (0.25, 1.0, 2.0, 4.0, 8.0)


def simulate_null(seed, T, p, q):
    """One data set without a channel, in the recovery study's setting."""
    X, Y, Z = mics.simulate(
        n_samples=T,
        n_source=p,
        n_target=q,
        n_modulators=1,
        rank=2,
        n_channels=0,
        geometry="random",
        random_state=seed,
    )[:3]
    return X, Y, Z


def n_members(model):
    """Neurons with a non-zero weight in any channel, per role."""
    return {
        role: int(np.sum(np.any(getattr(model, f"{role}_patterns_") != 0, axis=1)))
        for role in ROLES
    }


def stable_members(model, X, Y, Z, seed):
    """Stability selection of a sparse fit with members: (members, bound) per role.

    The bound is the Meinshausen-Buhlmann bound on the expected number of
    false members (largest over channels); None where there is nothing to
    resample (no channel, a dense fit or no neuron selected).
    """
    counts = n_members(model)
    if model.n_channels_ == 0 or model.sparsity_ == 0 or counts["source"] + counts["target"] == 0:
        return None
    result = mics.stability_selection(
        model, X, Y, Z, n_boot=N_BOOT, verbose=0, n_jobs=1, random_state=seed
    )
    return {
        role: (
            int(np.sum(result[f"{role}_n_members"])),
            float(np.max(result[f"{role}_expected_false"])),
        )
        for role in ROLES
    }


def flagged(counts, stable):
    """Whether the source and target member lists are empty or no longer than their bound."""
    for role in ("source", "target"):
        if counts[role] == 0:
            continue
        if stable is None:
            return False
        n, bound = stable[role]
        if n > bound:
            return False
    return True


def run_one(seed, T, p, q):
    """The default sparse selection and the forced one-channel fits on one null data set."""
    X, Y, Z = simulate_null(seed, T, p, q)
    start = time.perf_counter()
    with warnings.catch_warnings():
        # forced fits on null data warn that the penalty emptied the channel: expected here
        warnings.simplefilter("ignore")
        model = mics.MICs(sparsity="cv", random_state=0, verbose=0, n_jobs=1).fit(X, Y, Z)
        seconds = time.perf_counter() - start
        counts = n_members(model)
        stable = stable_members(model, X, Y, Z, seed)
        row = {
            "seed": seed,
            "rank": model.rank_,
            "n_channels": model.n_channels_,
            "sparsity": model.sparsity_,
            "seconds": seconds,
            "members": counts,
            "stable": stable,
            "flagged": flagged(counts, stable),
        }
        forced = mics.MICs(rank=model.rank_, n_channels=1, random_state=0, verbose=0, n_jobs=1)
        chosen = choose_sparsity(forced, X, Y, Z, n_jobs=1)
        fits = {"cv": chosen["model"]}
        for weight in FORCED:
            fits[weight] = clone(forced).set_params(sparsity=weight).fit(X, Y, Z)
        row["forced_sparsity"] = chosen["sparsity_"]
        row["forced"] = {}
        for key, fit in fits.items():
            c = n_members(fit)
            s = stable_members(fit, X, Y, Z, seed)
            row["forced"][key] = (c, s, flagged(c, s))
    return row


def _count(counts, role):
    return str(counts[role])


def write_markdown(rows, args, elapsed, out):
    n = len(rows)
    k0 = sum(r["n_channels"] == 0 for r in rows)
    ci = stats.binomtest(k0, n).proportion_ci(confidence_level=0.95, method="exact")
    load = os.getloadavg()[0]
    seconds = np.array([r["seconds"] for r in rows])
    ranks = pd.Series([r["rank"] for r in rows]).value_counts().sort_index()
    chosen = [r for r in rows if r["n_channels"] > 0]
    lines = [
        "# Null data: sparse selection on data without a channel (issue 33)",
        "",
        "Produced by `studies/validation/sparse_null.py` "
        f"(`--seeds {args.seeds} --T {args.T} --p {args.p} --q {args.q}`): "
        f"`mics.simulate(n_channels=0)`, T = {args.T}, p = {args.p} sources, "
        f"q = {args.q} targets, m = 1, rank-2 baseline, seeds 0-{args.seeds - 1}; "
        '`MICs(sparsity="cv")` at its defaults (rank, channels and sparsity chosen '
        "on the same 10 folds, one-SEM rules). "
        f"{elapsed:.0f} s in all on 1 core (1-minute load {load:.1f} at the end).",
        "",
        f"**K = 0 chosen on {k0}/{n} data sets** (exact 95% interval "
        f"{ci.low:.2f}-{ci.high:.2f}; target >= 19/20). Ranks chosen: "
        + ", ".join(f"{k} ({v} data sets)" for k, v in ranks.items())
        + f". The default selection took a median {np.median(seconds):.1f} s per data "
        f"set (max {seconds.max():.1f} s): with K = 0 there are no patterns and the "
        "sparsity path is not run.",
        "",
    ]
    if chosen:
        n_flag = sum(r["flagged"] for r in chosen)
        lines += [
            f"Data sets with K > 0: {len(chosen)}, of which {n_flag} have every source "
            "and target member list empty or flagged (no longer than its "
            f"Meinshausen-Buhlmann bound over {N_BOOT} subsamples of half the blocks, "
            "threshold 0.6).",
            "",
        ]
    else:
        lines += [
            "No data set chose a channel, so no member list came out of the default selection.",
            "",
        ]
    n_forced = sum(all(v[2] for v in r["forced"].values()) for r in rows)
    empty = {
        key: sum(v[0]["source"] + v[0]["target"] == 0 for v in (r["forced"][key] for r in rows))
        for key in ["cv", *FORCED]
    }
    lines += [
        "**A channel forced** (`n_channels=1` at the chosen rank): the member lists "
        "(source and target neurons with a non-zero weight) were empty on "
        + ", ".join(f"{empty[key]}/{n} at sparsity {key:g}" for key in FORCED)
        + f" and {empty['cv']}/{n} at the sparsity `choose_sparsity` chose on the folds; "
        f"{n_forced}/{n} data sets have every forced list empty or flagged. "
        f"Where a list is not empty: its stability selection ({N_BOOT} subsamples "
        "of half the blocks): neurons at frequency >= 0.6 (stable) and the "
        "Meinshausen-Buhlmann bound on the expected number of false members "
        "(bound), source/target.",
        "",
        "| seed | rank | K | sparsity | members s/t | forced: chosen sparsity "
        "| members s/t at it | " + " | ".join(f"s/t at {w:g}" for w in FORCED) + " |",
        "|" + "---|" * (7 + len(FORCED)),
    ]
    for r in rows:
        forced = r["forced"]
        cells = [
            str(r["seed"]),
            str(r["rank"]),
            str(r["n_channels"]),
            f"{r['sparsity']:g}",
            f"{r['members']['source']}/{r['members']['target']}",
            f"{r['forced_sparsity']:g}",
        ]
        for key in ["cv", *FORCED]:
            c, s, flag = forced[key]
            cell = f"{c['source']}/{c['target']}"
            if s is not None:
                cell += (
                    f" (stable {s['source'][0]}/{s['target'][0]}, bound "
                    f"{s['source'][1]:.0f}/{s['target'][1]:.0f}, "
                    + ("flagged)" if flag else "not flagged)")
                )
            cells.append(cell)
        lines.append("| " + " | ".join(cells) + " |")
    lines.append("")
    (out / "null.md").write_text("\n".join(lines))


def readme(out=OUT):
    """``README.md``: the run record, then the report ``null.md``."""
    text = (out / "null.md").read_text()
    lines = tools.readme_head(
        "Sparse selection on data without a channel",
        "studies/validation/sparse_null.py",
        out,
        about=(
            'Issue 33\'s "null data" target: on data without a channel, `MICs(sparsity="cv")` at '
            "its defaults chooses K = 0 on at least 19 of 20 data sets, and where a channel is "
            "chosen or forced its member lists are empty or flagged as not distinguishable from "
            "false selections (the Meinshausen-Buhlmann bound)."
        ),
        missing="The report below gives its command, run time and load.",
    )
    body = text.split("\n", 1)[1].strip()  # the report without its title
    lines += ["The report (`null.md`):", "", body, ""]
    (out / "README.md").write_text("\n".join(lines))


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=20)
    parser.add_argument("--T", type=int, default=2000)
    parser.add_argument("--p", type=int, default=150)
    parser.add_argument("--q", type=int, default=100)
    parser.add_argument("--out", type=Path, default=OUT)
    parser.add_argument("--report-only", action="store_true", help="rebuild README.md only")
    args = parser.parse_args()
    if args.report_only:
        readme(args.out)
        return
    run = tools.RunRecord(__file__, seeds=f"0-{args.seeds - 1} (data sets and fits)")
    args.out.mkdir(parents=True, exist_ok=True)
    start = time.perf_counter()
    rows = []
    for seed in range(args.seeds):
        row = run_one(seed, args.T, args.p, args.q)
        rows.append(row)
        print(
            f"seed {seed}: rank {row['rank']}, K {row['n_channels']}, "
            f"sparsity {row['sparsity']:g}, {row['seconds']:.1f} s; forced K=1: "
            + ", ".join(f"{k}: {v[0]}" for k, v in row["forced"].items()),
            flush=True,
        )
    write_markdown(rows, args, time.perf_counter() - start, args.out)
    run.finish(args.out)
    readme(args.out)
    print((args.out / "null.md").read_text())


if __name__ == "__main__":
    main()
