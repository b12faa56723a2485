"""Sequential channel search against the whole grid: same selections, same statistic?

``MICs(channel_search="sequential")`` (the default) scores K = 0, 1, ... and
stops at the first K that does not lower the mean held-out loss below that of
every smaller K; ``"grid"`` scores every K = 0 .. max_channels. Both run here
on the same simulated data sets (``mics.simulate``, p = 40, q = 30, true
rank 3): 48 without modulation and 288 with K = 1-3 channels at modulation
SNRs from undetectable to clear, two geometries, T = 500 and 2000, a
Gaussian (m = 3) or population (m = 20) modulator, three seeds each, with
the default estimator ``MICs(random_state=seed)`` (rank 0..10, K 0..4,
10 folds).

Printed and written to ``--out`` (default ``results/channel_search/``:
``channel_search_runs.csv``, ``channel_search_summary.txt``, ``run.json`` and
``README.md``):

- how often the two select the same (rank, K), with a 95% Clopper-Pearson
  interval (issue 10 asks for at least 95% agreement);
- how often the modulation test's statistic (the best CV gain of K >= 1 over
  K = 0, :func:`best_gain`) is the same to 1e-12;
- the channel counts each scored, and the time of each selection;
- every disagreement with both CV curves.

Usage::

    python studies/validation/channel_search.py
    python studies/validation/channel_search.py --quick --out /tmp/channel_search
    python studies/validation/channel_search.py --report-only  # README.md from the summary
"""

from __future__ import annotations

import argparse
import csv
import itertools
import os
import sys
import time
import warnings
from pathlib import Path

import numpy as np
from joblib import Parallel, delayed
from scipy import stats
from threadpoolctl import threadpool_limits

import mics

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "studies"))
import study_tools as tools  # noqa: E402

OUT = ROOT / "results" / "channel_search"

FULL = dict(
    n_channels=[0, 1, 2, 3],
    snr=[0.03, 0.1, 0.25, 0.5],
    geometry=["new", "reshape"],
    n_samples=[500, 2000],
    modulator=["gaussian", "population"],
    seeds=[0, 1, 2],
)
QUICK = dict(
    n_channels=[0, 2],
    snr=[0.25],
    geometry=["new"],
    n_samples=[500],
    modulator=["gaussian"],
    seeds=[0],
)


def configurations(grid):
    for K, snr, geom, T, mod, seed in itertools.product(
        grid["n_channels"],
        grid["snr"],
        grid["geometry"],
        grid["n_samples"],
        grid["modulator"],
        grid["seeds"],
    ):
        if K == 0 and geom != grid["geometry"][0]:
            # without channels SNR and geometry mean nothing: the SNR values
            # give null replicates (each data set has its own seed)
            continue
        yield dict(K=K, snr=snr, geometry=geom, T=T, modulator=mod, seed=seed)


def best_gain(model):
    """The modulation test's statistic on the data: CV loss of K = 0 minus the best of K >= 1.

    From the fitted estimator's ``cv_results_`` (the mean held-out loss of
    each scored channel count), as ``mics.test_modulation`` computes it.
    """
    loss = model.cv_results_["n_channels_mean_loss"]
    return float(loss[0] - np.min(loss[1:]))


def simulate_config(cfg, index):
    """``(X, Y, Z)`` and ``m`` of the ``index``-th configuration ``cfg``."""
    m = 3 if cfg["modulator"] == "gaussian" else 20
    X, Y, Z, _ = mics.simulate(
        n_samples=cfg["T"],
        n_source=40,
        n_target=30,
        n_modulators=m,
        rank=3,
        n_channels=cfg["K"],
        geometry=cfg["geometry"],
        modulation_snr=cfg["snr"],
        modulator_kind=cfg["modulator"],
        random_state=1000 * cfg["seed"] + index,
    )
    return X, Y, Z, m


def run_one(cfg, index):
    X, Y, Z, m = simulate_config(cfg, index)
    row = dict(cfg, m=m, index=index)
    with threadpool_limits(1), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for search in ("grid", "sequential"):
            est = mics.MICs(random_state=cfg["seed"], channel_search=search, verbose=0)
            t = time.perf_counter()
            est.fit(X, Y, Z)
            row[f"{search}_seconds"] = time.perf_counter() - t
            res = est.cv_results_
            row[f"{search}_rank"] = int(est.rank_)
            row[f"{search}_K"] = int(est.n_channels_)
            row[f"{search}_scored"] = int(res["n_channels"].size)
            row[f"{search}_gain"] = best_gain(est)
            row[f"{search}_curve"] = " ".join(f"{v:.5f}" for v in res["n_channels_mean_loss"])
    return row


def summarize(rows):
    n = len(rows)
    same = sum(
        (r["grid_rank"], r["grid_K"]) == (r["sequential_rank"], r["sequential_K"]) for r in rows
    )
    same_gain = sum(abs(r["grid_gain"] - r["sequential_gain"]) <= 1e-12 for r in rows)
    agree = stats.binomtest(same, n).proportion_ci(0.95, method="exact")
    stat = stats.binomtest(same_gain, n).proportion_ci(0.95, method="exact")
    t_grid = sum(r["grid_seconds"] for r in rows)
    t_seq = sum(r["sequential_seconds"] for r in rows)
    lines = [
        f"{n} data sets (p=40, q=30, true rank 3; K 0-3, SNR 0.03-0.5, geometry, T, "
        "modulator vary)",
        f"same (rank, K) as the grid: {same}/{n} = {same / n:.3f} "
        f"[{agree.low:.3f}, {agree.high:.3f}] (95% Clopper-Pearson)",
        f"same test statistic (to 1e-12): {same_gain}/{n} = {same_gain / n:.3f} "
        f"[{stat.low:.3f}, {stat.high:.3f}]",
        f"channel counts scored: grid {np.mean([r['grid_scored'] for r in rows]):.2f}, "
        f"sequential {np.mean([r['sequential_scored'] for r in rows]):.2f} on average",
        f"selection time, all data sets: grid {t_grid:.1f} s, sequential {t_seq:.1f} s "
        f"({t_grid / t_seq:.2f}x; two data sets at a time, one BLAS thread each, "
        f"load {os.getloadavg()[0]:.1f})",
    ]
    by_k = {}
    for r in rows:
        by_k.setdefault(r["K"], []).append(r)
    for K, rs in sorted(by_k.items()):
        s = sum((r["grid_K"] == r["sequential_K"]) for r in rs)
        hits = sum(r["grid_K"] == K for r in rs)
        lines.append(
            f"  true K={K}: {len(rs)} data sets, same K {s}/{len(rs)}, "
            f"grid selects the true K on {hits}, time grid/sequential "
            f"{sum(r['grid_seconds'] for r in rs) / sum(r['sequential_seconds'] for r in rs):.2f}x"
        )
    for r in rows:
        if (r["grid_rank"], r["grid_K"]) != (r["sequential_rank"], r["sequential_K"]) or abs(
            r["grid_gain"] - r["sequential_gain"]
        ) > 1e-12:
            lines.append(
                f"  differs: {r['index']} K={r['K']} snr={r['snr']} {r['geometry']} T={r['T']} "
                f"{r['modulator']}: grid K={r['grid_K']} gain {r['grid_gain']:.5f} "
                f"[{r['grid_curve']}], sequential K={r['sequential_K']} gain "
                f"{r['sequential_gain']:.5f} [{r['sequential_curve']}]"
            )
    return lines


def readme(out):
    """``README.md`` from ``channel_search_summary.txt`` and the run record."""
    summary = (out / "channel_search_summary.txt").read_text().rstrip()
    about = (
        'Does the sequential channel search (`MICs(channel_search="sequential")`, the '
        "default: K = 0, 1, ... until a K does not lower the held-out loss) select what the "
        "whole grid of K = 0 .. max_channels selects, with the same modulation-test "
        "statistic? Both run on the same `mics.simulate` data sets (p = 40, q = 30, rank 3; "
        "no channel, or K = 1-3 at modulation SNRs 0.03-0.5, two geometries, T = 500 and "
        "2000, a Gaussian or a population modulator, three seeds) with the default "
        "estimator `MICs(random_state=seed)`. Issue 10 asks for at least 95% agreement."
    )
    lines = tools.readme_head(
        "The sequential channel search against the whole grid",
        "studies/validation/channel_search.py",
        out,
        about=about,
        missing="Its summary below gives the selection times and the load when it was written.",
    )
    lines += [
        "## Summary (`channel_search_summary.txt`; one row per data set in "
        "`channel_search_runs.csv`)",
        "",
        "```text",
        summary,
        "```",
        "",
    ]
    (out / "README.md").write_text("\n".join(lines))


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small smoke run")
    parser.add_argument("--n-jobs", type=int, default=2)
    parser.add_argument("--out", type=Path, default=OUT)
    parser.add_argument(
        "--report-only", action="store_true", help="rebuild README.md from the summary"
    )
    args = parser.parse_args(argv)
    if args.report_only:
        readme(args.out)
        return
    run = tools.RunRecord(__file__, argv, seeds="1000 * seed + index of each data set")
    cfgs = list(configurations(QUICK if args.quick else FULL))
    rows = Parallel(n_jobs=args.n_jobs)(delayed(run_one)(c, i) for i, c in enumerate(cfgs))
    lines = summarize(rows)
    print("\n".join(lines))
    if args.out:
        args.out.mkdir(parents=True, exist_ok=True)
        with open(args.out / "channel_search_runs.csv", "w", newline="") as f:
            writer = csv.DictWriter(f, fieldnames=list(rows[0]))
            writer.writeheader()
            writer.writerows(rows)
        (args.out / "channel_search_summary.txt").write_text("\n".join(lines) + "\n")
        run.finish(args.out)
        readme(args.out)


if __name__ == "__main__":
    main()
