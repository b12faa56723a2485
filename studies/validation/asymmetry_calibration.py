"""Is the asymmetry test calibrated where modulation is symmetric, and does it find one side?

``mics.asymmetry`` tests private-source against private-target modulation on
chance-corrected energies (``mics.workflows.reconfiguration``). This study
measures it where the truth is symmetric (``d = 0``) at any population
sizes, where there is no gating at all, at its equivalence margin, and its
power against one-sided reconfiguration.

Data: ``mics.simulate`` (T = 1500 samples, rank-2 baseline, one modulator
pair, the channels' geometry planted exactly) and, for a Park-like split,
``mics.simulate_trials`` (128 trials x 49 samples, 20 / 20 neurons, whole
trials resampled). The model is ``MICs(rank=2, n_channels=K, n_init=1,
tol=1e-5)`` with K the number of planted channels, and the test
``mics.asymmetry(model, X, Y, Z, n_boot=40)``.

- ``reshape``: one channel inside both baseline subspaces (both private
  fractions 0);
- ``new``: one channel outside both (both 0);
- ``pair``: a private-source and a private-target channel of equal energy;
- ``none``: no gating; the joint workflow ``mics.test_reconfiguration``
  (19 trial-free circular shifts) decides whether asymmetry is defined;
- ``private_source`` / ``private_target``: power;
- ``margin``: one channel with ``private_target = 0.1`` exactly (its source
  pattern in the baseline subspace, 10% of its target pattern's energy
  outside), for the equivalence test of target stability.

Usage::

    python studies/validation/asymmetry_calibration.py --plan calibration
    python studies/validation/asymmetry_calibration.py --plan power
    python studies/validation/asymmetry_calibration.py --plan report

Every finished data set is appended to ``runs.csv`` (a rerun skips those);
``summary.csv``, ``asymmetry_calibration.png`` and ``README.md`` are written
into ``--out`` (default ``results/asymmetry_calibration/``).
"""

from __future__ import annotations

import argparse
import sys
import time
import warnings
from pathlib import Path

import numpy as np
import pandas as pd
from threadpoolctl import threadpool_limits

import mics

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
import study_tools as tools  # noqa: E402

OUT = HERE.parents[1] / "results" / "asymmetry_calibration"
T = 1500
N_BOOT = 40
MARGIN = 0.1
#: Source / target neurons: the ratios 1/4 .. 4, the Semedo sizes, a Park split.
SIZES = {
    "1/4": (15, 60),
    "1/2": (25, 50),
    "1": (30, 30),
    "2": (50, 25),
    "4": (60, 15),
    "semedo": (79, 31),
    "park": (20, 20),
}
SYMMETRIC = ("reshape", "new", "pair")
KEY = ("family", "size", "snr", "seed")
FIELDS = KEY + (
    "difference",
    "difference_observed",
    "p_value",
    "stable_p_value",
    "target_fraction",
    "modulation_p",
    "status",
    "seconds",
)
FIT = dict(n_init=1, tol=1e-5, verbose=0, random_state=0)


def _data(family, size, snr, seed):
    """Simulated recording and the number of channels to fit."""
    p, q = SIZES[size]
    geometry = {
        "pair": ["private_source", "private_target"],
        "margin": "reshape",
        "none": "random",
    }.get(family, family)
    k = 2 if family == "pair" else (0 if family == "none" else 1)
    common = dict(
        n_source=p,
        n_target=q,
        n_modulators=2,
        rank=2,
        n_channels=k,
        modulation_snr=snr if k else 0.0,
        random_state=seed,
    )
    if k:
        common["geometry"] = geometry
    if size == "park":
        ds, truth = mics.simulate_trials(
            n_trials=128, n_samples_per_trial=49, stimulus_strength=0.0, **common
        )
        X, Y, Z = (np.asarray(ds[v]) for v in "XYZ")
        groups = ds.trial.values
    else:
        X, Y, Z, truth = mics.simulate(n_samples=T, **common)
        groups = None
    if family in ("pair", "margin"):
        # Equal channel energies (pair) or a target pattern with exactly MARGIN of
        # its energy outside the baseline target subspace (margin), the noise kept.
        noise = Y - truth.predict(X, Z)
        if family == "pair":
            truth.channel_weights_ = np.full(2, truth.channel_weights_.mean())
        else:
            V = truth.target_subspace_
            b = truth.target_patterns_[:, 0]
            out = np.random.default_rng(seed).standard_normal(q)
            out -= V @ (V.T @ out)
            b_new = np.sqrt(1 - MARGIN) * b + np.sqrt(MARGIN) * out / np.linalg.norm(out)
            truth.target_patterns_ = b_new[:, None]
        Y = truth.predict(X, Z) + noise
    return X, Y, Z, groups, max(k, 1)


def run_one(family, size, snr, seed):
    t0 = time.perf_counter()
    X, Y, Z, groups, k = _data(family, size, snr, seed)
    with warnings.catch_warnings(), threadpool_limits(1):
        warnings.simplefilter("ignore")
        if family == "none":
            est = mics.MICs(rank=2, cv=5, max_channels=1, **FIT)
            res = mics.test_reconfiguration(
                est, X, Y, Z, groups=groups, n_permutations=19, n_boot=N_BOOT,
                margin=MARGIN, verbose=0, random_state=seed, n_jobs=1,
            )  # fmt: skip
            asym, mod_p = res.asymmetry, res.test.p_value
        else:
            model = mics.MICs(rank=2, n_channels=k, **FIT).fit(X, Y, Z, groups=groups)
            asym = mics.asymmetry(
                model, X, Y, Z, groups=groups, n_boot=N_BOOT, margin=MARGIN,
                random_state=seed, n_jobs=1,
            )  # fmt: skip
            mod_p = np.nan
    return dict(
        family=family,
        size=size,
        snr=snr,
        seed=seed,
        difference=float(asym["difference"]),
        difference_observed=float(asym["difference_observed"]),
        p_value=float(asym["p_value"]),
        stable_p_value=float(asym["stable_p_value"]),
        target_fraction=float(asym["fraction"].sel(part="private_target")),
        modulation_p=mod_p,
        status=asym.attrs["status"],
        seconds=time.perf_counter() - t0,
    )


def plan(name, n):
    cells = []
    if name in ("calibration", "all"):
        for family in SYMMETRIC:
            for size in SIZES:
                for snr in (0.1, 0.5):
                    cells.append(((family, size, snr), n))
        for size in ("1/4", "4"):
            cells.append((("none", size, 0.0), n))
        cells.append((("margin", "1", 0.5), n))
    if name in ("power", "all"):
        for snr in (0.05, 0.1, 0.2, 0.3, 0.5):
            cells.append((("private_source", "1", snr), 50))
        for size in SIZES:
            cells.append((("private_source", size, 0.3), 50))
            cells.append((("private_target", size, 0.3), 50))
    return [(*cell, seed) for cell, k in cells for seed in range(k)]


def summarize(runs):
    rows = []
    for (family, size, snr), df in runs.groupby(["family", "size", "snr"], sort=False):
        p = df.p_value.where(np.isfinite(df.p_value), 1.0)  # undefined: not a rejection
        row = dict(family=family, size=size, snr=snr, **tools.rate_row(p))
        side = np.sign(df.difference)
        row["right_side"] = int(
            np.sum((df.p_value <= 0.05) & (side == (1 if family == "private_source" else -1)))
        )
        row["undefined"] = int(df.status.str.startswith("undefined").sum())
        stable = tools.rate_row(df.stable_p_value.where(np.isfinite(df.stable_p_value), 1.0))
        row.update(
            stable_rejected=stable["rejected"],
            stable_rate=stable["rate"],
            stable_ci_low=stable["ci_low"],
            stable_ci_high=stable["ci_high"],
            mean_difference=df.difference.mean(),
            mean_difference_observed=df.difference_observed.mean(),
            mean_target_fraction=df.target_fraction.mean(),
        )
        rows.append(row)
    return pd.DataFrame(rows)


def figure(summary, path):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(11, 4))
    sym = summary[summary.family.isin(SYMMETRIC)]
    sizes = list(SIZES)
    for j, family in enumerate(SYMMETRIC):
        for snr, marker in ((0.1, "o"), (0.5, "s")):
            d = sym[(sym.family == family) & (sym.snr == snr)].set_index("size").reindex(sizes)
            x = np.arange(len(sizes)) + 0.12 * (j - 1) + (0.04 if snr == 0.5 else -0.04)
            err = np.vstack([d.rate - d.ci_low, d.ci_high - d.rate])
            axes[0].errorbar(x, d.rate, yerr=err, fmt=marker, color=f"C{j}", capsize=2,
                             label=f"{family}, SNR {snr}")  # fmt: skip
    axes[0].axhline(0.05, color="k", ls="--", lw=0.8)
    axes[0].set_xticks(range(len(sizes)), [f"{s}\n{SIZES[s][0]}/{SIZES[s][1]}" for s in sizes])
    axes[0].set_xlabel("source / target neurons")
    axes[0].set_ylabel("'asymmetric' at 0.05 (95% CI)")
    axes[0].set_title("symmetric truth (d = 0)")
    axes[0].legend(fontsize=7, ncol=2)
    pw = summary[(summary.family == "private_source") & (summary["size"] == "1")]
    pw = pw.sort_values("snr")
    axes[1].errorbar(pw.snr, pw.rate, yerr=[pw.rate - pw.ci_low, pw.ci_high - pw.rate],
                     fmt="o-", capsize=2, label="private source, 30 / 30")  # fmt: skip
    axes[1].axhline(0.8, color="k", ls="--", lw=0.8)
    axes[1].set_xlabel("modulation SNR")
    axes[1].set_ylabel("detected on the source side")
    axes[1].set_ylim(0, 1.02)
    axes[1].set_title("power")
    axes[1].legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def readme(summary, runs, out):
    s = summary.copy()
    s["asymmetric at 0.05"] = [tools.rate_text(r) for r in s.itertuples()]
    s["P(>=k)"] = s.p_excess.map(lambda v: f"{v:.3f}")
    s["neurons"] = s["size"].map(lambda k: f"{SIZES[k][0]}/{SIZES[k][1]}")
    s["mean d (fitted -> corrected)"] = [
        f"{r.mean_difference_observed:+.3f} -> {r.mean_difference:+.3f}" for r in s.itertuples()
    ]
    sym = s[s.family.isin(SYMMETRIC)]
    cols = ["family", "size", "neurons", "snr", "asymmetric at 0.05", "P(>=k)",
            "mean d (fitted -> corrected)"]  # fmt: skip
    hours = runs.seconds.sum() / 3600
    lines = [
        "# Asymmetry test: calibration where modulation is symmetric, and power",
        "",
        f"Generated by `python studies/validation/asymmetry_calibration.py` ({len(runs)} data "
        f"sets, {hours:.1f} CPU-hours). Every number is in `summary.csv` and `runs.csv`.",
        "",
        f"Test: `mics.asymmetry(MICs(rank=2, n_channels=K, n_init=1, tol=1e-5).fit(...), "
        f"n_boot={N_BOOT})`, the chance-corrected t-test of private source against private "
        f"target energy; T = {T} (Park: 128 trials x 49 samples, whole trials resampled). A "
        "calibrated test says 'asymmetric' in 5% of data sets where the truth is symmetric; "
        "`P(>=k)` is the binomial probability of at least that many for an exact test at 0.05.",
        "",
    ]
    if len(sym):
        worst = sym.sort_values("rate").iloc[-1]
        lines += [
            "## Findings",
            "",
            f"- Symmetric truth, {len(sym)} rows of {int(sym.n.min())}-{int(sym.n.max())} data "
            f"sets: rates {sym.rate.min():.3f} to {sym.rate.max():.3f}; highest "
            f"{worst.family} at {worst.neurons}, SNR {worst.snr}: "
            f"{tools.rate_text(worst)}.",
        ]
        for r in s[s.family == "none"].itertuples():
            lines.append(
                f"- No gating, {r.neurons}: undefined (modulation not detected) in "
                f"{r.undefined}/{r.n}; 'asymmetric' in {tools.rate_text(r)}."
            )
        for r in s[s.family == "margin"].itertuples():
            lines.append(
                f"- At the equivalence margin (private target = {MARGIN}): 'targets stable' in "
                f"{r.stable_rejected}/{r.n} ({r.stable_rate:.3f}, 95% CI "
                f"[{r.stable_ci_low:.3f}, {r.stable_ci_high:.3f}])."
            )
        pw = s[(s.family == "private_source") & (s["size"] == "1") & (s.snr == 0.3)]
        for r in pw.itertuples():
            lines.append(
                f"- Power, private-source channel, 30 / 30, SNR 0.3: {tools.rate_text(r)}, "
                f"on the source side in {r.right_side}/{r.n}."
            )
        lines.append("")
    lines += ["## Symmetric truth (d = 0)", "", tools.markdown_table(sym[cols]), ""]
    rest = s[~s.family.isin(SYMMETRIC)]
    if len(rest):
        cols2 = ["family", "size", "neurons", "snr", "asymmetric at 0.05", "right_side",
                 "undefined", "stable_rejected"]  # fmt: skip
        lines += [
            "## No gating, margin and power",
            "",
            "`right_side`: significant with the planted sign; `undefined`: modulation not "
            "detected (no p-value); `stable_rejected`: 'target patterns stable' (private "
            f"target shown below {MARGIN}).",
            "",
            tools.markdown_table(rest[cols2]),
            "",
        ]
    lines += ["![asymmetry](asymmetry_calibration.png)", ""]
    (out / "README.md").write_text("\n".join(lines))
    headline(s, out / "headline.md")


def headline(s, path):
    """The short table the user guide includes (every number from ``summary.csv``)."""
    lines = [
        "| truth | neurons (source / target) | modulation SNR | 'asymmetric' at 0.05 |",
        "|---|---|---|---|",
    ]
    for r in s[s.family.isin(SYMMETRIC)].sort_values("rate").groupby("size").tail(1).itertuples():
        lines.append(
            f"| {r.family} (the highest of its sizes' rows) | {r.neurons} | {r.snr} | "
            f"{tools.rate_text(r)} |"
        )
    for r in s[s.family == "none"].itertuples():
        lines.append(
            f"| no gating (undefined in {r.undefined}/{r.n}) | {r.neurons} | - | "
            f"{tools.rate_text(r)} |"
        )
    for r in s[s.family == "margin"].itertuples():
        lines.append(
            f"| private target = {MARGIN} ('targets stable' in {r.stable_rejected}/{r.n}) | "
            f"{r.neurons} | {r.snr} | - |"
        )
    for r in s[s.family.isin(("private_source", "private_target"))
               & (s.snr == 0.3)].itertuples():  # fmt: skip
        lines.append(
            f"| {r.family} (power; right side in {r.right_side}/{r.n}) | {r.neurons} | "
            f"{r.snr} | {tools.rate_text(r)} |"
        )
    if len(lines) == 2:
        lines.append("| (not run yet) | | | |")
    lines += [
        "",
        "95% Clopper-Pearson intervals; `results/asymmetry_calibration/README.md` has every "
        "row (generated by `studies/validation/asymmetry_calibration.py`).",
    ]
    path.write_text("\n".join(lines) + "\n")


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--plan", choices=("calibration", "power", "all", "report"),
                        default="all")  # fmt: skip
    parser.add_argument("--n", type=int, default=100, help="data sets per calibration row")
    parser.add_argument("--n-jobs", type=int, default=2)
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    if args.plan != "report":
        tools.run_cached(
            args.out / "runs.csv", KEY, FIELDS, plan(args.plan, args.n), run_one, args.n_jobs
        )
    runs = tools.read_runs(args.out / "runs.csv", FIELDS)
    summary = summarize(runs)
    summary.to_csv(args.out / "summary.csv", index=False, float_format="%.5g")
    figure(summary, args.out / "asymmetry_calibration.png")
    readme(summary, runs, args.out)
    print(f"wrote {args.out}; run time {(time.perf_counter() - t0) / 60:.1f} min")


if __name__ == "__main__":
    main()
