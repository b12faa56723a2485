"""Does ``mics.test_modulation`` find gating and nothing else? Calibration on null families.

Each family of ``mics.simulation.simulate_null_family`` is a trial-structured
recording in which nothing gates the communication but which departs from
the MIC model in one realistic way (drift of coupling and state over the
session, a nonlinear source -> target map with the modulator driving the
source, a saturating calcium indicator, a bursty modulator, Poisson counts,
a lagged or nonlinear additive effect). The test is run as a user would:
condition means subtracted, trial ids and conditions given, the trial null
permuting trials within conditions (19 permutations, so p <= 0.05 means the
observed statistic beats all 19), no effect-size bootstrap.

Two versions of the test are compared on the same data sets:

- ``default`` (``test_modulation``'s defaults): the null permutes only the
  part of the modulator that a smooth function of session position and a
  ridge regression on the source do not predict; the reduced model removes a
  piecewise-linear additive effect of the modulator, a quadratic map of the
  source's three leading communicated components and their drift over the
  session;
- ``previous`` (``condition_on=None, additive="linear",
  source_map="linear"``): the package's test before, the modulator's trials
  permuted whole after a linear reduced model.

Power: the same families with one true gate of strength ``gate`` (variance
per target neuron relative to the target's private noise), in three forms:
a multiplicative interaction channel (``channel``), a discrete switch of the
coupling (``switch``), and a threshold gain of the baseline read-out
(``threshold``); for the last two, split-by-state reduced-rank regression
(``studies/validation/split_by_state.py``, the oracle state ``Z @ c`` split
at its trial-mean median, the test's own trial permutations as its null)
runs beside the test.

Usage::

    python studies/validation/null_families.py --plan calibration  # 100 null data sets per cell
    python studies/validation/null_families.py --plan bursty     # its ingredients, one at a time
    python studies/validation/null_families.py --plan power
    python studies/validation/null_families.py --plan report       # tables, figure, README only

Every finished data set is appended to ``runs.csv``; a rerun skips those
already there, so the plans can be run one after the other (or resumed).
Writes ``runs.csv``, ``summary.csv``, ``null_families.png`` and ``README.md``
into ``--out`` (default ``results/null_families/``).
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
from threadpoolctl import threadpool_limits

import mics
from mics.preprocessing import subtract_condition_means
from mics.simulation.null_families import FAMILIES, simulate_null_family

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
import study_tools as tools  # noqa: E402

ROOT = HERE.parents[1]
OUT = ROOT / "results" / "null_families"

#: Rows of the tables: a family and its settings.
SUBFAMILIES = {
    "linear": ("linear", {}),
    "drift": ("drift", {}),
    "nonlinear_quadratic": ("nonlinear", {"nonlinearity": "quadratic"}),
    "nonlinear_softplus": ("nonlinear", {"nonlinearity": "softplus"}),
    "nonlinear_threshold": ("nonlinear", {"nonlinearity": "threshold"}),
    "calcium": ("calcium", {}),
    "bursty": ("bursty", {}),
    "poisson": ("poisson", {}),
    "lagged": ("lagged", {"additive": "lagged"}),
    "additive_nonlinear": ("lagged", {"additive": "nonlinear"}),
}
#: The bursty family with one of its two ingredients taken away (plan
#: ``bursty``): which departure makes the default test over-reject there?
BURSTY_FACTORS = {
    "bursty_undriven": ("bursty", {"source_drive": 0.0}),
    "bursty_finite_variance": ("bursty", {"tail_index": 3.0}),
}
#: The test as the package now runs it by default, and as it ran before (the
#: whole modulator's trials permuted, a linear reduced model).
METHODS = {
    "default": {},
    "previous": dict(condition_on=None, additive="linear", source_map="linear"),
}
#: Gate strengths for power, per recording size (gate SNR, see the module docstring).
GATES = {"park": (0.01, 0.03), "semedo": (0.01, 0.03)}
#: The estimator of the runs: the studies' capped settings (5 trial-blocked
#: folds, up to 2 channels, one start); the test is exact for any fixed
#: procedure, so capping costs power only. ``--estimator default`` uses MICs().
CHEAP = dict(cv=5, max_channels=2, n_init=1, max_iter=100, tol=1e-5, verbose=0)
#: Settings of the cheap estimator per size: the Semedo study fits one channel.
SIZE_SETTINGS = {"semedo": dict(max_channels=1)}
N_PERM = 19
KEY = ("subfamily", "size", "gate_kind", "gate", "method", "estimator", "seed")
FIELDS = KEY + (
    "statistic",
    "p_value",
    "n_channels",
    "rank",
    "r2_drift",
    "r2_source",
    "gate_fraction",
    "split_cv_p",
    "split_subspace_p",
    "split_cv_resid_p",
    "split_subspace_resid_p",
    "seconds",
)


def estimator(kind, size="park"):
    """The runs' estimator; at the Semedo size, one channel at most, as that study's."""
    if kind != "cheap":
        return mics.MICs(random_state=0, verbose=0)
    return mics.MICs(random_state=0, **{**CHEAP, **SIZE_SETTINGS.get(size, {})})


def run_one(subfamily, size, gate_kind, gate, method, est_kind, seed):
    """One data set: simulate, subtract condition means, test; a row of ``runs.csv``."""
    family, options = {**SUBFAMILIES, **BURSTY_FACTORS}[subfamily]
    t0 = time.perf_counter()
    data, truth = simulate_null_family(
        family,
        size=size,
        gate=gate,
        gate_kind=gate_kind,
        random_state=seed,
        **options,
    )
    data = subtract_condition_means(data, "direction")
    with warnings.catch_warnings(), threadpool_limits(1):
        warnings.simplefilter("ignore")
        test = mics.test_modulation(
            estimator(est_kind, size),
            data.X,
            data.Y,
            data.Z,
            n_permutations=N_PERM,
            conditions="direction",
            n_boot=0,
            verbose=0,
            random_state=seed,
            **METHODS[method],
        )
    row = dict(
        zip(KEY, (subfamily, size, gate_kind, gate, method, est_kind, seed), strict=True),
        statistic=test.statistic,
        p_value=test.p_value,
        n_channels=test.n_channels,
        rank=test.rank,
        r2_drift=test.modulator_r2_drift,
        r2_source=test.modulator_r2_source,
        gate_fraction=truth["gate_fraction"],
    )
    if gate_kind in ("switch", "threshold") and gate > 0 and method == "default":
        row.update(_split_by_state(data, truth, test))
    row["seconds"] = time.perf_counter() - t0
    return row


def _split_by_state(data, truth, test):
    state = np.asarray(data.Z) @ truth["modulator_pattern"]
    res = tools.split_by_state_tests(data.X, data.Y, state, data.trial.values, test.permutations)
    return {k: v for k, v in res.items() if k.endswith("_p")}


def plan_cells(plan, sizes, n_null, n_power, n_default, n_previous=30):
    """The (cell, seeds) to run for a plan."""
    cells = []
    for size in sizes:
        if plan in ("calibration", "all"):
            for sub in SUBFAMILIES:
                cells.append(((sub, size, "channel", 0.0, "default", "cheap"), n_null))
                cells.append(((sub, size, "channel", 0.0, "previous", "cheap"), n_previous))
            for sub in ("drift", "nonlinear_quadratic"):
                cells.append(((sub, size, "channel", 0.0, "default", "default"), n_default))
        if plan in ("bursty", "all"):
            cells += [((sub, size, "channel", 0.0, "default", "cheap"), n_null)
                      for sub in ("bursty", *BURSTY_FACTORS)]  # fmt: skip
        if plan in ("power", "all"):
            for gate in GATES[size]:
                for sub in SUBFAMILIES:
                    cells.append(((sub, size, "channel", gate, "default", "cheap"), n_power))
                for sub in ("linear", "drift", "nonlinear_quadratic"):
                    cells.append(((sub, size, "channel", gate, "previous", "cheap"), n_power))
                for kind in ("switch", "threshold"):
                    cells.append((("linear", size, kind, gate, "default", "cheap"), n_power))
    return cells


def run(plan, args):
    todo = [
        (*cell, seed)
        for cell, n in plan_cells(
            plan, args.sizes, args.n_null, args.n_power, args.n_default, args.n_previous
        )
        for seed in range(n)
    ]
    tools.run_cached(args.out / "runs.csv", KEY, FIELDS, todo, run_one, n_jobs=args.n_jobs)


def summarize(runs):
    rows = []
    group = ["subfamily", "size", "gate_kind", "gate", "method", "estimator"]
    for key, df in runs.groupby(group, sort=False):
        base = dict(zip(group, key, strict=True))
        rows.append(
            dict(
                base,
                test="mics",
                **tools.rate_row(df.p_value),
                gate_fraction=df.gate_fraction.mean(),
                r2_drift=df.r2_drift.mean(),
                r2_source=df.r2_source.mean(),
            )
        )
        for col in (
            "split_cv_p",
            "split_subspace_p",
            "split_cv_resid_p",
            "split_subspace_resid_p",
        ):
            if col in df and df[col].notna().any():
                rows.append(
                    dict(base, test=col[:-2], **tools.rate_row(df[col]), gate_fraction=np.nan)
                )
    return pd.DataFrame(rows)


def figure(summary, path):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    null = summary[(summary.gate == 0) & (summary.test == "mics") & (summary.estimator == "cheap")]
    sizes = list(dict.fromkeys(null["size"]))
    fig, axes = plt.subplots(1, len(sizes), figsize=(6.5 * len(sizes), 4.2), squeeze=False)
    for ax, size in zip(axes[0], sizes, strict=True):
        sub = null[null["size"] == size]
        names = list(SUBFAMILIES)
        for j, (method, color) in enumerate((("previous", "C3"), ("default", "C0"))):
            d = sub[sub.method == method].set_index("subfamily").reindex(names)
            y = np.arange(len(names)) + (0.18 if j else -0.18)
            err = np.vstack([d.rate - d.ci_low, d.ci_high - d.rate])
            ax.errorbar(d.rate, y, xerr=err, fmt="o", color=color, label=method, capsize=2)
        ax.axvline(0.05, color="k", lw=0.8, ls="--")
        ax.set_yticks(np.arange(len(names)), [n.replace("_", " ") for n in names])
        ax.invert_yaxis()
        ax.set_xlim(-0.02, 1.02)
        ax.set_xlabel("rejected at 0.05 (95% Clopper-Pearson)")
        ax.set_title(f"no gating, {size} size")
        ax.legend(loc="lower right", fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def readme(summary, runs, out):
    def table(df, cols):
        return tools.markdown_table(df[cols])

    s = summary.copy()
    s["rejected at 0.05"] = [tools.rate_text(r) for r in s.itertuples()]
    s["P(>=k)"] = s.p_excess.map(lambda v: f"{v:.3f}")
    s["R2 drift"] = s.r2_drift.map(lambda v: f"{v:.2f}")
    s["R2 source"] = s.r2_source.map(lambda v: f"{v:.2f}")
    s["gate share"] = s.gate_fraction.map(lambda v: "" if np.isnan(v) else f"{100 * v:.2f}%")
    null = s[(s.gate == 0) & (s.test == "mics")]
    power = s[s.gate > 0]
    cal = null[(null.method == "default") & (null.estimator == "cheap")]
    worst = cal.sort_values("rate").iloc[-1] if len(cal) else None
    hours = runs.seconds.sum() / 3600
    lines = [
        "# Null families: calibration of the modulation test where nothing gates",
        "",
        "Generated by `python studies/validation/null_families.py` (plans `calibration`, "
        f"`power`, then `report`); {len(runs)} data sets, {hours:.1f} CPU-hours. "
        "Every number below is in `summary.csv` (one row per cell) and `runs.csv` "
        "(one row per data set).",
        "",
        "Data: `mics.simulation.simulate_null_family` at the sizes of a Park session "
        "(128 trials x 49 samples, 20 source, 20 target neurons, 2 modulators) and of the "
        "Semedo sample (400 trials x 10 bins, 79 / 31 neurons, 3 modulators); condition "
        "means subtracted; `mics.test_modulation(..., conditions='direction', "
        f"n_permutations={N_PERM}, n_boot=0)` with the trial null. Estimator: "
        f"`MICs({', '.join(f'{k}={v}' for k, v in CHEAP.items())})` (`cheap`; at the Semedo "
        "size `max_channels=1`, as the Semedo study's) or `MICs()` (`default`). "
        "Method `default`: the test's defaults (the null keeps the modulator's "
        "part that the session drift and the source predict; the reduced model removes a "
        "piecewise-linear additive modulator effect, a quadratic source -> target map of the "
        "three leading communicated components and their drift over the session). Method "
        "`previous`: `condition_on=None, additive='linear', source_map='linear'`, the "
        "package's test before (whole trials of the modulator permuted, a linear reduced "
        "model).",
        "",
        "A calibrated test rejects 5% of null data sets; `P(>=k)` is the binomial "
        "probability of at least that many rejections for an exact test at 0.05.",
        "",
    ]
    if worst is not None:
        lines += [
            "## Findings",
            "",
            f"- Default test, {len(cal)} cells of >= {int(cal.n.min())} data sets: "
            f"rates {cal.rate.min():.3f} to {cal.rate.max():.3f}; the highest is "
            f"{worst.subfamily} ({worst['size']}) at {tools.rate_text(worst)}.",
        ]
        ex = null[null.method == "previous"]
        for sub in ("drift", "nonlinear_quadratic"):
            for r in ex[ex.subfamily == sub].itertuples():
                lines.append(f"- Previous test, {sub} ({r.size}): {tools.rate_text(r)}.")
        lines.append("")
    factors = cal[cal.subfamily.isin(["bursty", *BURSTY_FACTORS])]
    if factors.subfamily.isin(list(BURSTY_FACTORS)).any():
        lines += [
            "## What the bursty over-rejection needs (plan `bursty`)",
            "",
            "The bursty modulator is zero in most trials and has Pareto amplitudes "
            "(tail index 1.5, an infinite variance) in the rest, and it adds to the source "
            "(`source_drive` 0.2). Each row below takes one ingredient away on the same seeds: "
            "`bursty_undriven` sets `source_drive=0`, `bursty_finite_variance` "
            "`tail_index=3`.",
            "",
            table(
                factors, ["subfamily", "size", "rejected at 0.05", "P(>=k)", "R2 source"]
            ),  # fmt: skip
            "",
        ]
    cols = [
        "subfamily",
        "size",
        "method",
        "estimator",
        "rejected at 0.05",
        "P(>=k)",
        "R2 drift",
        "R2 source",
    ]
    lines += ["## No gating (false-positive rates)", "", table(null, cols), ""]
    if len(power):
        cols = [
            "subfamily",
            "size",
            "gate_kind",
            "gate",
            "gate share",
            "method",
            "test",
            "rejected at 0.05",
        ]
        lines += [
            "## Power (one true gate)",
            "",
            "`gate share`: the gate's share of the target's variance (the effect size's units). "
            "Split-by-state rows use the true gating state, split at its median trial mean: an "
            "oracle no user has, which favours them.",
            "",
            table(power, cols),
            "",
        ]
    lines += ["![rates](null_families.png)", ""]
    (out / "README.md").write_text("\n".join(lines))


def price_in_power(summary, path):
    """The table the user guide includes: power of the default and the previous test."""
    mics_rows = summary[(summary.test == "mics") & (summary.gate_kind == "channel")]
    power = mics_rows[mics_rows.gate > 0]
    lines = [
        "| recording | gate share | default test | previous test |",
        "|---|---|---|---|",
    ]
    for (sub, size, _), g in power.groupby(["subfamily", "size", "gate"], sort=False):
        cells = {r.method: tools.rate_text(r) for r in g.itertuples()}
        share = g.gate_fraction.mean()
        lines.append(
            f"| {sub.replace('_', ' ')} ({size}) | {100 * share:.2f}% | "
            f"{cells.get('default', '-')} | {cells.get('previous', '-')} |"
        )
    if len(lines) == 2:
        lines.append("| (not measured yet: `--plan power`) | | | |")
    lines += [
        "",
        "Detections at 0.05 of a true channel, 95% Clopper-Pearson intervals "
        "(`results/null_families/`, generated by `studies/validation/null_families.py`).",
    ]
    path.write_text("\n".join(lines) + "\n")


def report(args):
    runs = tools.read_runs(args.out / "runs.csv", FIELDS)
    if runs.empty:
        raise SystemExit(f"no runs in {args.out / 'runs.csv'}: run a plan first.")
    summary = summarize(runs)
    summary.to_csv(args.out / "summary.csv", index=False, float_format="%.5g")
    price_in_power(summary, args.out / "price_in_power.md")
    figure(summary, args.out / "null_families.png")
    readme(summary, runs, args.out)
    print(f"wrote {args.out}")


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument(
        "--plan", choices=("calibration", "bursty", "power", "all", "report"), default="all"
    )
    parser.add_argument("--sizes", nargs="+", default=["park", "semedo"])
    parser.add_argument("--n-null", type=int, default=100)
    parser.add_argument("--n-power", type=int, default=40)
    parser.add_argument("--n-default", type=int, default=30)
    parser.add_argument("--n-previous", type=int, default=30)
    parser.add_argument("--n-jobs", type=int, default=2)
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    assert set(f for f, _ in SUBFAMILIES.values()) == set(FAMILIES)
    t0 = time.perf_counter()
    if args.plan != "report":
        os.environ.setdefault("OMP_NUM_THREADS", "1")
        run(args.plan, args)
    report(args)
    print(f"run time {(time.perf_counter() - t0) / 60:.1f} min")


if __name__ == "__main__":
    main()
