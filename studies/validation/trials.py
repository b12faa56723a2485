"""Trial-structured data: stimulus drive, condition means and the trial-level null.

All data from ``mics.simulate_trials``: 64 trials x 20 samples (8 directions,
8 trials each; the first 5 samples before onset), p = 20 source, q = 15
target neurons, m = 2 modulators; fluctuations AR(1) within trials
(lag-1 autocorrelation 0.7), stimulus-locked responses of source, pupil-like
modulator and target with variance equal to the fluctuations'
(``stimulus_strength=1``), the target's including a product of the source
and modulator responses.

(a) Spurious communication: fluctuations with *no* communication (rank 0,
    K = 0), ``--n-comm`` data sets. ``ReducedRankRegressionCV(cv=5)`` with
    trial-blocked folds on the raw data and on condition-mean-subtracted
    data: how often it selects a rank > 0, and the CV score (1 - NSE) of the
    selected rank.
(b) Spurious modulation: fluctuations with rank 2 and no channel (K = 0),
    raw data, the circular-shift test (``null="circular"``, ``--n-perm``
    shifts, ``min_shift`` = one trial), on ``--n-raw`` data sets: its
    false-positive rate at 0.05.
(c) Calibration: the same null family (``--n-null`` >= 100 data sets) after
    ``subtract_condition_means(..., "direction")``, tested with the trial-level
    null (``null="trial"``, trials permuted within direction) and
    trial-blocked folds: FPR at 0.05 with its 95% Clopper-Pearson interval,
    and a KS distance of the p-values from the uniform law on their grid.
(d) Power: one true channel at each ``--snr`` (modulation SNR of the
    fluctuations; 0.03 and 0.1), ``--n-power`` data sets each, pipeline of (c).

The test's estimator is ``MICs(rank=2, cv=5, max_channels=1, n_init=1)``: a
permutation test is exact for any fixed statistic, the cheap one only costs
power. With ``--n-perm`` = 19 p-values live on the grid k/20, so 0.05 is
attainable (observed above all 19 null statistics).

Data sets are spread over ``--n-jobs`` worker processes (joblib), each with
one BLAS thread. Writes ``trials_runs.csv``, ``trials_summary.csv``,
``trials_summary.txt`` (what it printed), ``run.json`` and ``README.md`` into
``--out`` (default ``results/trials/``).

Usage::

    python studies/validation/trials.py               # full run (65 min on 2 cores shared 8-fold)
    python studies/validation/trials.py --quick       # smoke run
    python studies/validation/trials.py --report-only # README.md from the summary tables
"""

from __future__ import annotations

import argparse
import csv
import sys
import time
import warnings
from pathlib import Path

import numpy as np
from joblib import Parallel, delayed
from threadpoolctl import threadpool_limits

import mics
from mics.preprocessing import subtract_condition_means
from mics.simulation import detection_rates

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "studies"))
import study_tools as tools  # noqa: E402

OUT = ROOT / "results" / "trials"

DATA = dict(
    n_trials=64,
    n_samples_per_trial=20,
    n_conditions=8,
    n_source=20,
    n_target=15,
    n_modulators=2,
    stimulus_strength=1.0,
    autocorr=0.7,
)
TEST_EST = dict(rank=2, cv=5, max_channels=1, n_init=1, verbose=0)
ALPHA = 0.05
SEEDS = {"comm": 30_000, "null": 40_000, "power": 50_000}


def _arrays(ds):
    return ds.X, ds.Y, ds.Z


def _run(fn, *args):
    with warnings.catch_warnings(), threadpool_limits(1):
        warnings.simplefilter("ignore")  # capped CV fits warn about convergence
        t0 = time.perf_counter()
        out = fn(*args)
        out["seconds"] = time.perf_counter() - t0
        return out


def spurious_communication(seed):
    ds, _ = mics.simulate_trials(**DATA, rank=0, n_channels=0, random_state=SEEDS["comm"] + seed)
    out = dict(part="a_communication", seed=seed)
    for name, d in (("raw", ds), ("subtracted", subtract_condition_means(ds, "direction"))):
        model = mics.ReducedRankRegressionCV(cv=5).fit(d.X, d.Y)  # trial folds from coords
        res = model.cv_results_
        out[f"{name}_rank"] = model.rank_
        out[f"{name}_score"] = float(res["mean_score"][res["best_index"]])
    return out


def modulation_test(seed, kind, n_perm, snr):
    family = "power" if kind == "power" else "null"
    K = 1 if kind == "power" else 0
    extra = dict(modulation_snr=snr) if K else {}
    ds, _ = mics.simulate_trials(
        **DATA, rank=2, n_channels=K, random_state=SEEDS[family] + seed, **extra
    )
    est = mics.MICs(random_state=seed, **TEST_EST)
    if kind == "raw_circular":
        res = mics.test_modulation(
            est,
            *_arrays(ds),
            null="circular",
            min_shift=DATA["n_samples_per_trial"],
            n_permutations=n_perm,
            verbose=0,
            random_state=seed,
        )
    else:
        d = subtract_condition_means(ds, "direction")
        res = mics.test_modulation(
            est,
            *_arrays(d),
            null="trial",
            conditions="direction",
            n_permutations=n_perm,
            verbose=0,
            random_state=seed,
        )
    name = {"raw_circular": "b_raw_circular", "null": "c_null", "power": "d_power"}[kind]
    return dict(
        part=name if K == 0 else f"{name}_snr{snr:g}",
        seed=seed,
        null=res.null,
        statistic=res.statistic,
        p_value=res.p_value,
        n_channels=res.n_channels,
        null_mean=float(res.null_distribution.mean()),
        null_sd=float(res.null_distribution.std(ddof=1)),
    )


def ks_grid(p_values, n_perm):
    """Largest gap between the empirical CDF of p-values and the uniform on k/(n_perm+1)."""
    grid = np.arange(1, n_perm + 2) / (n_perm + 1)
    p = np.asarray(p_values)
    ecdf = np.array([np.mean(p <= g + 1e-12) for g in grid])
    return float(np.max(np.abs(ecdf - grid))), float(np.max(ecdf - grid))


#: What each part of ``trials_summary.csv`` measures, for the README.
PART_WORDS = {
    "a_communication": "(a) no communication (rank 0): rank > 0 selected",
    "b_raw_circular": "(b) raw data, circular-shift null, no channel: rejections at 0.05",
    "c_null": "(c) means subtracted, trial null, no channel: rejections at 0.05",
    "d_power": "(d) means subtracted, trial null, one channel: detections at 0.05",
}


def readme(out):
    """``README.md`` from ``trials_summary.csv``, ``trials_summary.txt`` and the run record."""
    import pandas as pd

    summary = pd.read_csv(out / "trials_summary.csv")
    rows = []
    for r in summary.itertuples():
        part = "d_power" if r.part.startswith("d_power") else r.part
        what = PART_WORDS[part]
        if part == "d_power":
            what += f", SNR {r.part.removeprefix('d_power_snr')}"
        k = int(round(r.rate * r.n))
        mean = f"CV score {r.mean:+.4f}" if part == "a_communication" else f"p {r.mean:.3f}"
        ks = "" if pd.isna(r.ks) else f"{r.ks:.3f}"
        rows.append(
            f"| {what} | {r.data} | {k}/{r.n} = {r.rate:.3f} [{r.ci_low:.3f}, {r.ci_high:.3f}] "
            f"| {mean} | {ks} |"
        )
    cal = summary[summary.part == "c_null"].iloc[0]
    about = (
        "Trial-structured data from `mics.simulate_trials` (64 trials x 20 samples, 8 "
        "directions, p = 20, q = 15, m = 2, AR(1) fluctuations, stimulus-locked responses): "
        "does the stimulus drive fake communication and modulation, and do condition-mean "
        "subtraction, trial-blocked folds and the trial null remove it? The test's estimator "
        f"is `MICs({', '.join(f'{k}={v}' for k, v in TEST_EST.items())})`."
    )
    lines = tools.readme_head(
        "Trial-structured data: condition means and the trial-level null",
        "studies/validation/trials.py",
        out,
        about=about,
        missing="The printed summary below ends with the run's wall time and its jobs.",
    )
    lines += [
        "## Findings",
        "",
        f"- Calibration of the trial null after condition-mean subtraction: "
        f"{int(round(cal.rate * cal.n))}/{cal.n} null data sets rejected at 0.05 "
        f"({cal.rate:.3f}, 95% Clopper-Pearson [{cal.ci_low:.3f}, {cal.ci_high:.3f}]).",
        "",
        "| part | data | rate [95% Clopper-Pearson] | mean | KS to the uniform grid |",
        "|---|---|---|---|---|",
        *rows,
        "",
        "`mean`: the selected rank's CV score (1 - NSE) for (a), the mean p-value otherwise.",
        "",
        "## What it printed (`trials_summary.txt`)",
        "",
        "```text",
        (out / "trials_summary.txt").read_text().rstrip(),
        "```",
        "",
    ]
    (out / "README.md").write_text("\n".join(lines))


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small smoke run")
    parser.add_argument("--n-comm", type=int, default=100)
    parser.add_argument("--n-raw", type=int, default=30)
    parser.add_argument("--n-null", type=int, default=100)
    parser.add_argument("--n-power", type=int, default=20, help="data sets per SNR")
    parser.add_argument("--n-perm", type=int, default=19)
    parser.add_argument("--snr", type=float, nargs="+", default=[0.03, 0.1])
    parser.add_argument("--n-jobs", type=int, default=2)
    parser.add_argument("--out", default=str(OUT))
    parser.add_argument(
        "--report-only", action="store_true", help="rebuild README.md from the summary tables"
    )
    args = parser.parse_args(argv)
    if args.quick:
        args.n_comm, args.n_raw, args.n_null, args.n_power = 4, 2, 4, 2
    out = Path(args.out)
    if args.report_only:
        readme(out)
        return
    out.mkdir(parents=True, exist_ok=True)
    run = tools.RunRecord(
        __file__,
        argv,
        seeds=", ".join(f"{v}+ ({k})" for k, v in SEEDS.items()) + "; the seed of each data set "
        "also seeds its estimator and permutations",
    )
    lines = []

    def say(s=""):
        print(s, flush=True)
        lines.append(s)

    t0 = time.perf_counter()
    tasks = [delayed(_run)(spurious_communication, s) for s in range(args.n_comm)]
    for kind, n in (("raw_circular", args.n_raw), ("null", args.n_null)):
        tasks += [delayed(_run)(modulation_test, s, kind, args.n_perm, None) for s in range(n)]
    for snr in args.snr:
        tasks += [
            delayed(_run)(modulation_test, s, "power", args.n_perm, snr)
            for s in range(args.n_power)
        ]
    rows = Parallel(n_jobs=args.n_jobs, verbose=5)(tasks)
    wall = time.perf_counter() - t0

    keys = sorted({k for r in rows for k in r})
    with open(out / "trials_runs.csv", "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=keys)
        w.writeheader()
        w.writerows(rows)

    def part(name):
        return [r for r in rows if r["part"] == name]

    summary = []
    say(f"simulate_trials {DATA}")
    say(f"test estimator MICs({TEST_EST}), {args.n_perm} permutations, alpha = {ALPHA}")
    say("")
    a = part("a_communication")
    say(f"(a) no communication in the fluctuations (rank 0), {len(a)} data sets, cv=5 trial folds")
    for name in ("raw", "subtracted"):
        ranks = np.array([r[f"{name}_rank"] for r in a])
        scores = np.array([r[f"{name}_score"] for r in a])
        rate = detection_rates([], ranks)
        lo, hi = rate.false_positive_rate_ci
        say(
            f"    {name:<11} rank > 0 in {int((ranks > 0).sum())}/{len(a)} "
            f"(95% CI {lo:.3f}-{hi:.3f}); mean CV score "
            f"{scores.mean():+.4f} (max {scores.max():+.4f})"
        )
        summary.append(
            dict(
                part="a_communication",
                data=name,
                n=len(a),
                rate=float((ranks > 0).mean()),
                ci_low=rate.false_positive_rate_ci[0],
                ci_high=rate.false_positive_rate_ci[1],
                mean=float(scores.mean()),
            )
        )
    for name, label in [
        ("b_raw_circular", "(b) raw data, circular-shift null (K = 0)"),
        ("c_null", "(c) condition means subtracted, trial null (K = 0)"),
    ] + [
        (f"d_power_snr{snr:g}", f"(d) means subtracted, trial null, one channel at SNR {snr:g}")
        for snr in args.snr
    ]:
        rs = part(name)
        if not rs:
            continue
        p = np.array([r["p_value"] for r in rs])
        hits = (p <= ALPHA + 1e-12).astype(int)
        rate = detection_rates([], hits)
        ks, ks_up = ks_grid(p, args.n_perm)
        z = np.array([(r["statistic"] - r["null_mean"]) / r["null_sd"] for r in rs])
        say(label)
        say(
            f"    rejections at {ALPHA}: {hits.sum()}/{len(rs)} = {hits.mean():.3f} "
            f"(95% CI {rate.false_positive_rate_ci[0]:.3f}-{rate.false_positive_rate_ci[1]:.3f}); "
            f"KS to uniform grid {ks:.3f} (excess {ks_up:+.3f}); "
            f"median z vs null {np.median(z):+.2f}"
        )
        summary.append(
            dict(
                part=name,
                data="raw" if name.startswith("b") else "subtracted",
                n=len(rs),
                rate=float(hits.mean()),
                ci_low=rate.false_positive_rate_ci[0],
                ci_high=rate.false_positive_rate_ci[1],
                mean=float(np.mean(p)),
                ks=ks,
            )
        )
    say("")
    say(f"wall time {wall / 60:.1f} min with {args.n_jobs} jobs")
    with open(out / "trials_summary.csv", "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=sorted({k for s in summary for k in s}))
        w.writeheader()
        w.writerows(summary)
    (out / "trials_summary.txt").write_text("\n".join(lines) + "\n")
    run.finish(out)
    readme(out)


if __name__ == "__main__":
    main()
