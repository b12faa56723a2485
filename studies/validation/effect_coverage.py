"""Does the effect size's interval cover, and how many refits does it need? (issue 47, item 4)

``mics.test_modulation`` reports the held-out variance fraction that the
selected channels add (``effect_size``) with an interval. With ``n_boot``
it is a refit bootstrap: each draw resamples whole trials (or contiguous
blocks), reruns the estimator's cross-validation on the draw and takes its
gain; the interval is the draws' percentile interval recentred on the
estimate (:func:`mics.workflows.inference.heldout_effect`). The draws are
refits, and they double the test's cost. By default it refits nothing
(``folds`` below).

This study measures the intervals' coverage over many simulated data sets,
and what fewer refits would give, from the same draws:

- ``percentile``: the refit bootstrap (``n_boot=``), percentile interval of
  the first ``n`` draws recentred on the estimate, for ``n`` = 20, 50, 100;
- ``normal``: the estimate +- z * (standard deviation of the first ``n``
  draws), which needs no tail quantile and so fewer draws;
- ``folds_naive``: ``folds`` below without its correction
  (``sd / sqrt(J)``), as first shipped; it under-covered;
- ``folds`` (no refit, ``n_draws`` 0): the package's default, a t interval
  over the per-fold gains of the estimate's own cross-validation (their
  mean is the estimate), its standard error corrected for the overlap of
  the folds' training sets (Nadeau & Bengio 2003,
  :func:`mics.workflows.inference.fold_t_intervals`).

The refits are costly, so those columns use a 5-fold estimator. The
package's default (``MICs(cv=10)``) is measured by the no-refit interval
alone, on the same data sets (part ``folds10``, ``folds10.csv``): its own
estimate, its expected value and its coverage. Part ``cost`` times the
README's 99-shift test with no interval, the default and the bootstrap
(``cost.csv``; run it on an idle machine).

Two targets:

- ``expected``: the mean of the estimate over the cell's data sets (Monte
  Carlo, its standard error in the table). What a bootstrap of the
  estimator can cover: the cross-validated gain of a model fit on
  ``(cv - 1) / cv`` of the data, averaged over data sets.
- ``oracle``: the gain of the true channels with the true parameters, on
  the data set itself (the estimate's target if nothing were estimated).
  The gap between the two is estimation error that no interval of the
  cross-validated gain is meant to cover.

Cells (``--n`` data sets each, 100 bootstrap draws per data set):

Each cell's data sets are consecutive pieces of one long simulation, so
they share the truth and differ in their noise:

- ``block``: ``mics.simulate``, pieces of 800 samples, two gated channels at
  the default modulation SNR, no trials (block bootstrap), rank 3, two
  channels scored;
- ``block_null``: the same with no gating, one channel scored (the
  expected gain is slightly negative: a channel fit to noise loses
  held-out variance);
- ``trial``: ``mics.simulate_trials``, pieces of 64 trials of 20 samples, one
  gated channel, no stimulus-locked part, trial bootstrap, rank 2, one
  channel scored;
- three departures from the model, otherwise as ``block``: ``calcium``
  (source and target observed through ``simulate``'s calcium model:
  softplus rates, a 1 s indicator decay, noise; no oracle, as the truth
  describes the latent rates), ``shared`` (``shared_variability`` at its
  defaults and AR(1) target noise of 0.5) and ``counts`` (source and target
  observed as Poisson spike counts, :func:`spike_counts`; no oracle).

Usage::

    python studies/validation/effect_coverage.py                # full run
    python studies/validation/effect_coverage.py --n 4          # smoke run
    python studies/validation/effect_coverage.py --parts folds10  # the 10-fold part only
    python studies/validation/effect_coverage.py --parts cost     # the test's time, 3 intervals
    python studies/validation/effect_coverage.py --report-only  # README from the tables
"""

from __future__ import annotations

import argparse
import sys
import time
import warnings
from pathlib import Path

import numpy as np
from scipy import stats
from threadpoolctl import threadpool_limits

import mics
from mics.data.problem import make_problem
from mics.workflows.inference import fold_t_halfwidth, heldout_effect

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "studies"))
import study_tools as tools  # noqa: E402

OUT = ROOT / "results" / "effect_coverage"
CONFIDENCE = 0.95
N_BOOT = 100
DRAW_COUNTS = (20, 50, 100)
SEED0 = {
    "block": 30_000,
    "block_null": 31_000,
    "trial": 32_000,
    "calcium": 33_000,
    "shared": 34_000,
    "counts": 35_000,
}
#: Departures from the model: gated like ``block``, observed otherwise.
DEPARTURES = {
    "calcium": dict(calcium={}),
    "shared": dict(shared_variability={}, noise_autocorr=0.5),
}
#: The counts cell's spikes per bin where a neuron is at its mean activity.
COUNT_RATE = 5.0
#: Cells whose truth describes latent rates, not what is observed: no oracle gain.
NO_ORACLE = ("calcium", "counts")
#: Data sets per cell at most, the samples (or trials) of each.
MAX_N, SAMPLES, TRIALS = 100, 800, 64
KEY = ("cell", "seed")
FIELDS = (
    KEY
    + ("estimate", "oracle", "n_ok", "seconds", "fold_mean", "fold_sd", "n_folds")
    + tuple(f"{s}_{n}" for n in DRAW_COUNTS for s in ("lo", "med", "hi", "sd"))
)
#: The no-refit interval of the default 10-fold estimator (part ``folds10``).
FIELDS10 = KEY + ("estimate", "oracle", "fold_sd", "n_folds", "seconds")
PARTS = ("refits", "folds10", "cost")
#: The cost part: the README's test (99 shifts, T = 2000) with each interval, repeats each.
COST_SHIFTS, COST_REPEATS = 99, 3
COST_FIELDS = ("interval", "seconds", "repeats", "effect_low", "effect_high", "load")


def _recording(cell):
    """One long simulation per cell; its consecutive pieces are the cell's data sets.

    The pieces share the truth (patterns, weights) and differ in their noise,
    so the spread of the estimate over them is the sampling distribution a
    bootstrap interval is meant to reproduce. Each data set simulates it
    anew (a second at most): the workers get the study's functions by value,
    so a cache would not outlive a task.
    """
    rs = SEED0[cell]
    if cell == "trial":
        data, truth = mics.simulate_trials(
            n_trials=TRIALS * MAX_N, n_channels=1, stimulus_strength=0.0, random_state=rs
        )
        arrays = data["X"].values, data["Y"].values, data["Z"].values
        return arrays, data["trial"].values, truth
    n_channels = 0 if cell == "block_null" else 2
    X, Y, Z, truth = mics.simulate(
        **DEPARTURES.get(cell, {}),
        n_samples=SAMPLES * MAX_N,
        n_channels=n_channels,
        random_state=rs,
    )
    if cell == "counts":
        X, Y = spike_counts(X, rs + 1), spike_counts(Y, rs + 2)
    return (X, Y, Z), None, truth


def spike_counts(A, seed, mean_count=COUNT_RATE):
    """Poisson counts whose rate is a softplus of each standardised column (per time bin).

    ``rate = mean_count * log(1 + exp(a / sd)) / log(2)``: ``mean_count`` at
    the column's mean, rectified below it, so the counts are sparse,
    skewed and their variance grows with their mean, as binned spikes are.
    """
    rng = np.random.default_rng(seed)
    rate = mean_count * np.logaddexp(0.0, A / A.std(axis=0)) / np.log(2.0)
    return rng.poisson(rate).astype(float)


def _data(cell, seed):
    """``(problem, (X, Y, Z, truth), rank, n_channels scored)`` of the cell's data set ``seed``."""
    (X, Y, Z), trial, truth = _recording(cell)
    if trial is None:
        rows = slice(seed * SAMPLES, (seed + 1) * SAMPLES)
        groups, rank, k = None, 3, 1 if cell == "block_null" else 2
    else:
        codes = np.unique(trial)[seed * TRIALS : (seed + 1) * TRIALS]
        rows = np.flatnonzero(np.isin(trial, codes))
        groups, rank, k = trial[rows], 2, 1
    X, Y, Z = X[rows], Y[rows], Z[rows]
    return make_problem(X, Y, Z, groups=groups).unlabelled(), (X, Y, Z, truth), rank, k


def oracle_gain(X, Y, Z, truth):
    """Share of the target's variance the true channels add to the true model, on this data set."""
    if truth.channel_weights_.size == 0:
        return 0.0
    gains = (X @ truth.source_patterns_) * (Z @ truth.modulator_patterns_)
    term = (gains * truth.channel_weights_) @ truth.target_patterns_.T
    noise = Y - truth.predict(X, Z)

    def ss(a):
        return np.sum((a - a.mean(axis=0)) ** 2)

    return float((ss(noise + term) - ss(noise)) / ss(Y))


def fold_gains(estimator, problem, rank, k):
    """The estimate's folds: mean and SD of the per-fold gains (outlier folds left out).

    The package's own no-refit interval (``heldout_effect(interval="folds")``,
    the same cross-validation as the estimate), so the study checks what
    ships; the interval is rebuilt from these in :func:`intervals` by the
    package's :func:`mics.workflows.inference.fold_t_halfwidth`.
    """
    _, folds, _, _ = heldout_effect(estimator, problem, rank, k, interval="folds")
    d = folds[:, -1]
    return dict(fold_mean=float(d.mean()), fold_sd=float(d.std(ddof=1)), n_folds=d.size)


def run_one(cell, seed):
    """One data set: the estimate, its 100 draws' summaries and the oracle gain."""
    t0 = time.perf_counter()
    problem, (X, Y, Z, truth), rank, k = _data(cell, seed)
    est = mics.MICs(cv=5, n_init=1, random_state=seed, verbose=0)
    with warnings.catch_warnings(), threadpool_limits(1):
        warnings.simplefilter("ignore")  # capped fold fits warn about convergence
        gains, draws, _, _ = heldout_effect(
            est, problem, rank, k, n_boot=N_BOOT, confidence=CONFIDENCE, random_state=seed
        )
        row = fold_gains(est, problem, rank, k)
    last = draws[:, -1]
    row.update(cell=cell, seed=seed, estimate=float(gains[-1]))
    # Under calcium the truth describes latent rates, not the traces the gain is measured on.
    row["oracle"] = np.nan if cell in NO_ORACLE else oracle_gain(X, Y, Z, truth)
    row["n_ok"] = int(np.isfinite(last).sum())
    tail = (1 - CONFIDENCE) / 2
    for n in DRAW_COUNTS:
        d = last[:n][np.isfinite(last[:n])]
        lo, med, hi = np.quantile(d, [tail, 0.5, 1 - tail])
        row.update({f"lo_{n}": lo, f"med_{n}": med, f"hi_{n}": hi, f"sd_{n}": d.std(ddof=1)})
    row["seconds"] = round(time.perf_counter() - t0, 2)
    return row


def run_folds10(cell, seed):
    """One data set: the default 10-fold estimate and its per-fold spread (no refit)."""
    t0 = time.perf_counter()
    problem, (X, Y, Z, truth), rank, k = _data(cell, seed)
    est = mics.MICs(n_init=1, random_state=seed, verbose=0)  # the default cv=10
    with warnings.catch_warnings(), threadpool_limits(1):
        warnings.simplefilter("ignore")
        gains, folds, _, _ = heldout_effect(est, problem, rank, k, interval="folds")
    d = folds[:, -1]
    return dict(
        cell=cell,
        seed=seed,
        estimate=float(gains[-1]),
        oracle=np.nan if cell in NO_ORACLE else oracle_gain(X, Y, Z, truth),
        fold_sd=float(d.std(ddof=1)),
        n_folds=d.size,
        seconds=round(time.perf_counter() - t0, 2),
    )


def run_cost():
    """The README's test with no interval, the default (fold) one and the refit bootstrap.

    ``mics.test_modulation(MICs(random_state=0), X, Y, Z, n_permutations=99)``
    on ``mics.simulate(n_samples=2000, random_state=0)``, the three settings
    alternating, median of ``COST_REPEATS``: what each interval adds to the
    test (issue 47: at most 1.3 times the test without one).
    """
    import os

    import pandas as pd

    X, Y, Z = mics.simulate(n_samples=2000, random_state=0)[:3]
    est = mics.MICs(random_state=0, verbose=0)
    mics.test_modulation(est, X, Y, Z, n_permutations=2, verbose=0)  # compile first
    settings = {"none (n_boot=0)": dict(n_boot=0), "default (folds)": {},
                "bootstrap": dict(interval="bootstrap")}  # fmt: skip
    times, last = {k: [] for k in settings}, {}
    for _ in range(COST_REPEATS):
        for name, kw in settings.items():
            start = time.perf_counter()
            last[name] = mics.test_modulation(
                est, X, Y, Z, n_permutations=COST_SHIFTS, verbose=0, random_state=0, **kw
            )
            times[name].append(time.perf_counter() - start)
    return pd.DataFrame(
        [
            dict(
                interval=name,
                seconds=float(np.median(t)),
                repeats=len(t),
                effect_low=float(last[name].effect_interval[0]),
                effect_high=float(last[name].effect_interval[1]),
                load=os.getloadavg()[0],
            )  # fmt: skip
            for name, t in times.items()
        ]
    )


def intervals(runs, method, n, cv):
    """``(low, high)`` arrays of one interval method from the first ``n`` draws (``cv`` folds)."""
    est = runs["estimate"].to_numpy()
    if method == "percentile":
        shift = est - runs[f"med_{n}"].to_numpy()
        return runs[f"lo_{n}"].to_numpy() + shift, runs[f"hi_{n}"].to_numpy() + shift
    if method == "folds_naive":  # the same without the correction (sd / sqrt(J)): the baseline
        f = runs["n_folds"].to_numpy()
        half = stats.t.ppf(0.5 + CONFIDENCE / 2, f - 1) * runs["fold_sd"].to_numpy() / np.sqrt(f)
        return est - half, est + half
    if method == "folds":  # no refit: the package's corrected t interval over the folds
        half = fold_t_halfwidth(
            runs["fold_sd"].to_numpy(), runs["n_folds"].to_numpy(), cv, CONFIDENCE
        )
        return est - half, est + half
    half = stats.norm.ppf(0.5 + CONFIDENCE / 2) * runs[f"sd_{n}"].to_numpy()
    return est - half, est + half


def _plans(runs, runs10):
    """``(cell, cv, data sets, method, n_draws)`` of every interval compared, in table order."""
    for cell, sub in runs.groupby("cell", sort=False):
        for method in ("percentile", "normal", "folds_naive", "folds"):
            for n in DRAW_COUNTS if not method.startswith("folds") else (0,):
                yield cell, 5, sub, method, n
        sub10 = runs10[runs10["cell"] == cell]
        if len(sub10):
            yield cell, 10, sub10, "folds_naive", 0
            yield cell, 10, sub10, "folds", 0


def summarize(runs, runs10):
    """One row per cell, folds, method and number of draws: coverage of each target, width.

    Each estimator's interval is scored against its own expected estimate
    (the 5- and 10-fold gains differ: more folds train on more data).
    """
    import pandas as pd

    rows = []
    for cell, cv, sub, method, n in _plans(runs, runs10):
        expected = sub["estimate"].mean()
        se = sub["estimate"].std(ddof=1) / np.sqrt(len(sub))
        lo, hi = intervals(sub, method, n, cv)
        row = dict(cell=cell, cv=cv, method=method, n_draws=n, n=len(sub))
        for name, target in (("expected", expected), ("oracle", sub["oracle"])):
            if np.isnan(target).all():  # no oracle (calcium): no coverage either
                row.update({f"covers_{name}": -1, f"{name}_ci_low": np.nan})
                row[f"{name}_ci_high"] = np.nan
                continue
            k = int(np.sum((lo <= target) & (target <= hi)))
            c_lo, c_hi = tools.binomial_ci(k, len(sub))
            row.update({f"covers_{name}": k, f"{name}_ci_low": c_lo})
            row[f"{name}_ci_high"] = c_hi
        row.update(
            mean_width=float(np.mean(hi - lo)),
            expected=expected,
            expected_se=se,
            mean_oracle=float(sub["oracle"].mean()),
            sd_estimate=float(sub["estimate"].std(ddof=1)),
            mean_sd_100=float(sub["sd_100"].mean()) if cv == 5 else np.nan,
        )
        rows.append(row)
    return pd.DataFrame(rows)


CELL_WORDS = {
    "block": "block bootstrap, two gated channels (T = 800, p = 80, q = 60)",
    "block_null": "block bootstrap, no gating (one channel scored)",
    "trial": "trial bootstrap, one gated channel (64 trials x 20 samples)",
    "calcium": "as block, observed through the calcium model (softplus, decay 1 s, noise)",
    "counts": "as block, both populations observed as Poisson spike counts (softplus rates)",
    "shared": "as block, with shared variability (8 factors) and AR(1) noise (0.5)",
}


def reading(summary):
    """The README's reading of the coverage table, in figures taken from it."""
    at = {(r.cell, r.cv, r.method, r.n_draws): r for r in summary.itertuples()}
    lines = ["## Reading", ""]
    for cell in summary["cell"].drop_duplicates():
        boot, folds = at[(cell, 5, "percentile", 100)], at[(cell, 5, "folds", 0)]
        normal = at[(cell, 5, "normal", 20)]
        line = (
            f"- {cell}: the refit bootstrap (100 refits) held the expected gain in "
            f"{boot.covers_expected}/{boot.n}, the no-refit fold interval in "
            f"{folds.covers_expected}/{folds.n} at {folds.mean_width / boot.mean_width:.2f} "
            f"times its width, and the normal interval of 20 refits in "
            f"{normal.covers_expected}/{normal.n}. The refits spread "
            f"{boot.mean_sd_100 / boot.sd_estimate:.1f} times as widely as the estimate "
            "varies between data sets."
        )
        ten, naive = at.get((cell, 10, "folds", 0)), at.get((cell, 10, "folds_naive", 0))
        if ten is not None:
            line += (
                f" With the default 10 folds the fold interval held its own expected gain "
                f"in {ten.covers_expected}/{ten.n} ({naive.covers_expected}/{naive.n} "
                "without the correction)."
            )
        lines.append(line)
    lines += [
        "",
        "The oracle column is not what these intervals are for: without gating the "
        "cross-validated gain of a channel fit to noise is below 0, so an interval that "
        "covers its own expectation need not cover 0.",
        "",
    ]
    return lines


def readme(summary, runs, runs10, out, cost=None):
    """``README.md`` from the summary table and the run record."""
    import pandas as pd

    about = (
        "Coverage of the effect size's 95% interval (`mics.test_modulation`'s "
        "`effect_interval`, computed by `heldout_effect`) over simulated data sets, and of "
        "intervals from fewer bootstrap refits, all from the same draws. See the script's "
        "docstring for the cells and the two targets."
    )
    lines = tools.readme_head(
        "Effect-size interval: coverage and refits",
        "studies/validation/effect_coverage.py",
        out,
        about=about,
    )
    table = summary.copy()
    for name in ("expected", "oracle"):
        table[f"covers {name}"] = [
            f"{r[f'covers_{name}']}/{r.n} [{r[f'{name}_ci_low']:.2f}, {r[f'{name}_ci_high']:.2f}]"
            if r[f"covers_{name}"] >= 0
            else "n/a"
            for _, r in summary.iterrows()
        ]
    table["mean width"] = summary["mean_width"].map(lambda v: f"{v:.4f}")
    lines += ["## Coverage (95% intervals; binomial 95% CI of the rate)", ""]
    lines += [
        tools.markdown_table(
            table[
                [
                    "cell",
                    "cv",
                    "method",
                    "n_draws",
                    "covers expected",
                    "covers oracle",
                    "mean width",
                ]
            ]
        ),
        "",
    ]
    cells = summary[summary["cv"] == 5].drop_duplicates("cell")
    lines += ["## The cells", ""]
    lines += [
        tools.markdown_table(
            pd.DataFrame(
                {
                    "cell": cells["cell"],
                    "what": [CELL_WORDS[c] for c in cells["cell"]],
                    "data sets": cells["n"],
                    "expected estimate (SE)": [
                        f"{r.expected:.4f} ({r.expected_se:.4f})" for r in cells.itertuples()
                    ],
                    "mean oracle gain": cells["mean_oracle"].map(lambda v: f"{v:.4f}"),
                    "SD of the estimate": cells["sd_estimate"].map(lambda v: f"{v:.4f}"),
                    "mean bootstrap SD": cells["mean_sd_100"].map(lambda v: f"{v:.4f}"),
                }
            )
        ),
        "",
    ]
    lines += reading(summary)
    seconds = runs.groupby("cell", sort=False)["seconds"].median()
    lines += [
        "Median seconds per data set (estimate and 100 refits, one core): "
        + ", ".join(f"{c} {s:.1f} s" for c, s in seconds.items())
        + ".",
        "",
    ]
    if len(runs10):
        ten = summary[(summary["cv"] == 10) & (summary["method"] == "folds")].set_index("cell")
        lines += [
            "The default 10-fold estimator (`folds10.csv`), no refit: expected estimate "
            + ", ".join(
                f"{c} {r.expected:.4f} (SD {r.sd_estimate:.4f})" for c, r in ten.iterrows()
            )
            + "; median seconds per data set "
            + ", ".join(
                f"{c} {v:.1f} s"
                for c, v in runs10.groupby("cell", sort=False)["seconds"].median().items()
            )
            + ".",
            "",
        ]
    if cost is not None and len(cost):
        base = cost.set_index("interval").seconds.iloc[0]
        lines += [
            "## What each interval costs the test (`cost.csv`)",
            "",
            f"`mics.test_modulation(MICs(random_state=0), X, Y, Z, n_permutations={COST_SHIFTS})` "
            "on `mics.simulate(n_samples=2000, random_state=0)`, the settings alternating, median "
            "of the repeats (the run record above gives the load).",
            "",
            "| interval | seconds | ratio to none | effect interval |",
            "|---|---|---|---|",
        ]
        lines += [
            f"| {r.interval} | {r.seconds:.2f} | {r.seconds / base:.2f} | "
            + (
                f"[{r.effect_low:.4f}, {r.effect_high:.4f}] |"
                if np.isfinite(r.effect_low)
                else "none |"
            )
            for r in cost.itertuples()
        ]
        lines.append("")
    (out / "README.md").write_text("\n".join(lines))


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--n", type=int, default=100, help="data sets per cell")
    parser.add_argument("--n-jobs", type=int, default=2)
    parser.add_argument("--parts", nargs="+", choices=PARTS, default=list(PARTS))
    parser.add_argument("--out", type=Path, default=OUT)
    parser.add_argument("--report-only", action="store_true")
    args = parser.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    if not args.report_only:
        if not 1 <= args.n <= MAX_N:
            parser.error(f"--n must be between 1 and {MAX_N}")
        seeds = ", ".join(f"{c} {s}" for c, s in SEED0.items())
        todo = [(cell, seed) for cell in SEED0 for seed in range(args.n)]
        tables = {
            "refits": ("runs.csv", FIELDS, run_one),
            "folds10": ("folds10.csv", FIELDS10, run_folds10),
        }
        if "cost" in args.parts:
            record = tools.RunRecord(__file__, argv, seeds="0 (data, fits, shifts)", part="cost")
            run_cost().to_csv(args.out / "cost.csv", index=False)
            record.finish(args.out)
        for part in [p for p in args.parts if p in tables]:
            name, fields, func = tables[part]
            record = tools.RunRecord(
                __file__, argv, seeds=f"{seeds}; pieces 0-{args.n - 1}", part=part
            )
            tools.run_cached(args.out / name, KEY, fields, todo, func, args.n_jobs)
            record.finish(args.out)
    runs = tools.read_runs(args.out / "runs.csv", FIELDS)
    runs10 = tools.read_runs(args.out / "folds10.csv", FIELDS10)
    summary = summarize(runs, runs10)
    summary.to_csv(args.out / "summary.csv", index=False, float_format="%.5g")
    cost = tools.read_runs(args.out / "cost.csv", COST_FIELDS)
    readme(summary, runs, runs10, args.out, cost)
    print((args.out / "README.md").read_text())


if __name__ == "__main__":
    main()
