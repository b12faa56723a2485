"""Member lists at a false-discovery rate, in populations that share variability (issue 48).

Simulated data as in the issue's measured failure: p = 150 source neurons
driven by 8 latent factors plus private noise, one channel on 15 source and
20 target neurons (q = 100), a dense rank-3 baseline, one modulator; the
target noise shares 8 factors of its own. Every process is AR(1) with lag-1
autocorrelation 0.8 (source, modulator, target noise), as calcium signals
sampled at about 10 Hz. The shared variance (``strength``, the share of
each neuron's variance carried by the factors) runs from none (0) to strong
(0.8) and stronger (0.9); ``mics.simulate(shared_variability=...)``.

Parts (``--part``):

- ``sweep``: strength 0, 0.5, 0.8, 0.9 at T = 1000 and 2000, modulation
  SNR 0.25 (the "Done when" threshold); and SNR 0.1 and 0.5 at strength 0.8
  and 0.9, T = 2000.
- ``population``: the modulator is a population of 50 neurons (12 gate,
  sharing variability too), so that modulator members are a list:
  strength 0, 0.8 and 0.9, T = 1000 and 2000, SNR 0.25.
- ``spatial``: strength 0.8 of which half spatially clustered on the field
  of view (correlation exp(-d^2 / (2 * 0.1^2))), T = 2000, SNR 0.25; and
  the field-of-view figure.
- ``null``: no channel (``n_channels=0``), one channel forced in the fit:
  strength 0, 0.8 and 0.9, T = 2000. Are the lists empty?

Methods per data set (``method`` column):

- ``fdr_by``: ``mics.member_neurons(MICs(rank=3, n_channels=1).fit(...),
  fdr=0.1)``, the package's default (Benjamini-Yekutieli); ``fdr_bh``: the
  same tests with Benjamini-Hochberg; ``fdr_by_0.2``, ``fdr_bh_0.2``: at
  rate 0.2 (``MemberNeurons.at``).
- ``iid_bh``, ``iid_by``: the same tests as if samples were independent
  (``block_length=1``, ``prewhiten=False``): what row-wise i.i.d. inference
  does on autocorrelated data.
- ``sparse_cv``: ``MICs(sparsity="cv")`` at its defaults (rank, channels and
  sparsity selected), its non-zero neurons (the channel nearest the truth
  when it keeps several): what the issue measured. ``--sparse-seeds``
  data sets per cell.
- ``sparse_rrr``: source neurons with a non-zero row in
  ``ReducedRankRegression(rank=3, sparsity=8)`` (Kobak et al. 2021), the
  sparse-RRR baseline (source only; ``--rrr-seeds`` per cell).
- ``dense_oracle_cut``: the dense ``MICs(rank=3, n_channels=1)`` patterns
  cut at the threshold on ``|loading|`` that maximises F1 *given the
  truth* (an oracle: better than any cut a user could choose).

Per data set, role and method: neurons named, true positives, the false-
discovery proportion (0 when nothing is named) and recall. The realised
false-discovery rate of a cell is the mean proportion over data sets, with
a 95% percentile bootstrap interval over data sets (2000 draws); on null
data the share of data sets with an empty list has its exact
(Clopper-Pearson) interval.

Usage::

    python studies/validation/member_fdr.py run --part sweep --seeds 50
    python studies/validation/member_fdr.py run --part population --seeds 25
    python studies/validation/member_fdr.py run --part spatial --seeds 30
    python studies/validation/member_fdr.py run --part null --seeds 100
    python studies/validation/member_fdr.py report

``run`` writes ``results/member_fdr/runs/<part>_<cells>_s<first>-<last>.csv``
(a part can be split with ``--first-seed``, ``--cells``); ``report`` reads
them all and writes ``summary.csv``, ``summary.md``, ``null.md``,
``member_fdr.png``, ``fov.png`` and ``README.md``.
"""

from __future__ import annotations

import argparse
import json
import os
import time
import warnings
from pathlib import Path

import numpy as np
import pandas as pd
from scipy import stats

import mics

ROOT = Path(__file__).resolve().parents[2]
OUT = ROOT / "results" / "member_fdr"
ROLES = ("source", "target", "modulator")
FDR = 0.1
AR = 0.8
SIZES = dict(n_source=150, n_target=100, rank=3)
MEMBERS = dict(source_members=15, target_members=20)


def cells(part):
    """The (strength, T, snr, m, spatial, n_channels) cells of a part."""
    if part == "sweep":
        out = [(s, T, 0.25, 1, 0.0, 1) for T in (2000, 1000) for s in (0.9, 0.8, 0.5, 0.0)]
        out += [(s, 2000, snr, 1, 0.0, 1) for s in (0.9, 0.8) for snr in (0.1, 0.5)]
        return out
    if part == "population":
        return [(s, T, 0.25, 50, 0.0, 1) for T in (2000, 1000) for s in (0.9, 0.8, 0.0)]
    if part == "spatial":
        return [(0.8, 2000, 0.25, 1, 0.5, 1)]
    if part == "null":
        return [(s, 2000, 0.0, 1, 0.0, 0) for s in (0.9, 0.8, 0.0)]
    raise ValueError(f"unknown part {part!r}")


def simulate(strength, T, snr, m, spatial, n_channels, seed):
    shared = None
    if strength > 0:
        shared = dict(n_factors=8, strength=strength, spatial=spatial)
    kwargs = dict(
        n_samples=T, n_modulators=m, n_channels=n_channels, geometry="random",
        modulation_snr=snr if n_channels else 0.5, shared_variability=shared,
        source_autocorr=AR, modulator_autocorr=AR, noise_autocorr=AR, random_state=seed,
        **SIZES,
    )  # fmt: skip
    if m > 1:
        kwargs.update(modulator_kind="population", n_gating=12)
    if n_channels:
        kwargs.update(MEMBERS)
    return mics.simulate(**kwargs)


def _quiet(fn, *args, **kwargs):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return fn(*args, **kwargs)


def best_cut(values, truth):
    """Named set of ``|values| > cut`` at the cut maximising F1 given the truth (an oracle)."""
    mags = np.abs(values)
    best, chosen = -1.0, mags > np.inf
    for cut in np.concatenate([[0.0], np.sort(mags)[:-1]]):
        sel = mags > cut
        tp = np.sum(sel & truth)
        f1 = 2 * tp / (sel.sum() + truth.sum()) if sel.sum() + truth.sum() else 0.0
        if f1 > best:
            best, chosen = f1, sel
    return chosen


def _row(meta, role, method, named, truth):
    n_named, tp = int(named.sum()), int(np.sum(named & truth)) if truth is not None else 0
    n_true = int(truth.sum()) if truth is not None else 0
    return dict(
        **meta, role=role, method=method, n_named=n_named, true_pos=tp, n_true=n_true,
        fdp=(n_named - tp) / n_named if n_named else 0.0,
        recall=tp / n_true if n_true else np.nan, nonempty=n_named > 0,
    )  # fmt: skip


def _lists(res, roles):
    return {role: np.asarray(res[f"{role}_members"])[:, 0] for role in roles}


def run_one(cell, seed, sparse, rrr):
    """Every method on one data set; rows of the run table."""
    strength, T, snr, m, spatial, K = cell
    X, Y, Z, truth = simulate(*cell, seed)
    roles = ROLES if m > 1 else ROLES[:2]
    meta = dict(strength=strength, T=T, snr=snr, m=m, spatial=spatial, n_channels=K, seed=seed)
    truths = {r: (getattr(truth, f"{r}_members_")[:, 0] if K else None) for r in roles}
    rows, named = [], {}
    t0 = time.perf_counter()
    dense = _quiet(mics.MICs(rank=3, n_channels=1, verbose=0, random_state=seed).fit, X, Y, Z)
    res = _quiet(mics.member_neurons, dense, X, Y, Z, fdr=FDR, verbose=0, random_state=seed)
    seconds = time.perf_counter() - t0
    iid = _quiet(mics.member_neurons, dense, X, Y, Z, fdr=FDR, block_length=1,
                 prewhiten=False, verbose=0, random_state=seed)  # fmt: skip
    named["fdr_by"] = _lists(res, roles)
    named["fdr_bh"] = _lists(res.at(FDR, "bh"), roles)
    named["fdr_by_0.2"] = _lists(res.at(0.2), roles)
    named["fdr_bh_0.2"] = _lists(res.at(0.2, "bh"), roles)
    named["iid_by"] = _lists(iid, roles)
    named["iid_bh"] = _lists(iid.at(FDR, "bh"), roles)
    if K:
        named["dense_oracle_cut"] = {
            r: best_cut(np.asarray(getattr(dense, f"{r}_patterns_"))[:, 0], truths[r])
            for r in roles
        }
    if sparse:
        model = _quiet(mics.MICs(sparsity="cv", verbose=0, random_state=seed).fit, X, Y, Z)
        lists = {}
        for r in roles:
            P = np.asarray(getattr(model, f"{r}_patterns_"))
            if P.shape[1] == 0:
                lists[r] = np.zeros(P.shape[0], dtype=bool)
                continue
            k = 0
            if K and P.shape[1] > 1:  # the channel nearest the planted one
                k = int(np.argmax(np.abs(P.T @ getattr(truth, f"{r}_patterns_")[:, 0])))
            lists[r] = P[:, k] != 0
        named["sparse_cv"] = lists
    if rrr:
        fit = _quiet(mics.ReducedRankRegression(rank=3, sparsity=8.0).fit, X, Y)
        named["sparse_rrr"] = {"source": np.any(np.asarray(fit.coef_) != 0, axis=0)}
    for method, lists in named.items():
        for role, sel in lists.items():
            row = _row(meta, role, method, sel, truths[role])
            row["seconds"] = seconds if method == "fdr_by" else np.nan
            row["channel_p"] = float(res["channel_p_value"][0])
            rows.append(row)
    return rows, (X, Y, Z, truth, dense, res, named)


def run(args):
    out = args.out / "runs"
    out.mkdir(parents=True, exist_ok=True)
    todo = cells(args.part)
    if args.cells:
        todo = [todo[i] for i in args.cells]
    seeds = range(args.first_seed, args.first_seed + args.seeds)
    rows = []
    start = time.perf_counter()
    label = "all" if not args.cells else "c" + "-".join(map(str, args.cells))
    path = out / f"{args.part}_{label}_s{seeds[0]}-{seeds[-1]}.csv"
    for cell in todo:
        t0 = time.perf_counter()
        for seed in seeds:
            # the expensive baselines on the first seeds of every cell
            sparse = seed < args.sparse_seeds
            rrr = cell[5] == 1 and seed < args.rrr_seeds
            new, _ = run_one(cell, seed, sparse, rrr)
            rows += new
        pd.DataFrame(rows).to_csv(path, index=False)  # after every cell: partial results kept
        print(f"{args.part} {cell}: {len(seeds)} data sets in {time.perf_counter() - t0:.0f} s",
              flush=True)  # fmt: skip
    meta = dict(part=args.part, cells=[list(c) for c in todo], seeds=[seeds[0], seeds[-1]],
                sparse_seeds=args.sparse_seeds, rrr_seeds=args.rrr_seeds,
                seconds=time.perf_counter() - start,
                load=", ".join(f"{x:.1f}" for x in os.getloadavg()))  # fmt: skip
    path.with_suffix(".json").write_text(json.dumps(meta))
    if args.part == "spatial":
        fov_figure(args.out / "fov.png", seed=args.first_seed)


# ------------------------------------------------------------------------------ report
def bootstrap_mean(x, n_boot=2000, seed=0):
    """Mean and 95% percentile bootstrap interval over data sets."""
    x = np.asarray(x, dtype=float)
    x = x[np.isfinite(x)]
    if x.size == 0:
        return np.nan, np.nan, np.nan
    rng = np.random.default_rng(seed)
    means = x[rng.integers(0, x.size, size=(n_boot, x.size))].mean(axis=1)
    return x.mean(), *np.quantile(means, [0.025, 0.975])


def summarize(df):
    keys = ["strength", "T", "snr", "m", "spatial", "n_channels", "role", "method"]
    out = []
    for key, g in df.groupby(keys, sort=False):
        fdr, lo, hi = bootstrap_mean(g.fdp)
        rec, rlo, rhi = bootstrap_mean(g.recall)
        empty = int(np.sum(~g.nonempty.astype(bool)))
        ci = stats.binomtest(empty, len(g)).proportion_ci(method="exact")
        out.append(dict(zip(keys, key, strict=True), n_datasets=len(g), fdr=fdr, fdr_low=lo,
                        fdr_high=hi, recall=rec, recall_low=rlo, recall_high=rhi,
                        named=g.n_named.mean(), share_empty=empty / len(g), empty_low=ci.low,
                        empty_high=ci.high))  # fmt: skip
    return pd.DataFrame(out)


METHOD_ORDER = ["fdr_by", "fdr_bh", "fdr_by_0.2", "fdr_bh_0.2", "iid_by", "iid_bh",
                "sparse_cv", "sparse_rrr", "dense_oracle_cut"]  # fmt: skip
LABELS = {
    "fdr_by": "member_neurons, BY (default)",
    "fdr_bh": "member_neurons, BH",
    "iid_bh": "same tests, i.i.d. samples, BH",
    "iid_by": "same tests, i.i.d. samples, BY",
    "sparse_cv": 'MICs(sparsity="cv")',
    "sparse_rrr": "sparse RRR (sparsity 8)",
    "dense_oracle_cut": "dense fit, oracle cut",
}


def _fmt(v, lo, hi):
    return f"{v:.3f} [{lo:.3f}, {hi:.3f}]" if np.isfinite(v) else "n/a"


def table(summ, methods, roles, cond):
    lines = [
        "| strength | T | SNR | role | method | data sets | named | FDR [95% CI] "
        "| recall [95% CI] |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    sub = summ[cond(summ)]
    for _, r in sub.iterrows():
        if r.method not in methods or r.role not in roles:
            continue
        lines.append(
            f"| {r.strength:g} | {int(r['T'])} | {r.snr:g} | {r.role} | {r.method} "
            f"| {r.n_datasets} | {r.named:.1f} | {_fmt(r.fdr, r.fdr_low, r.fdr_high)} "
            f"| {_fmt(r.recall, r.recall_low, r.recall_high)} |"
        )
    return lines


def figure(summ, path):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(2, 3, figsize=(13, 6.4), layout="constrained", sharex=True)
    methods = ["fdr_by", "fdr_bh", "iid_bh", "sparse_cv", "sparse_rrr", "dense_oracle_cut"]
    colours = dict(zip(methods, ["C3", "C1", "C7", "C0", "C4", "C2"], strict=True))
    for j, role in enumerate(ROLES):
        m = 50 if role == "modulator" else 1
        sub = summ[(summ.role == role) & (summ.m == m) & (summ.snr == 0.25)
                   & (summ.spatial == 0) & (summ.n_channels == 1)]  # fmt: skip
        for method in methods:
            for T, ls in ((2000, "-"), (1000, "--")):
                s = sub[(sub.method == method) & (sub["T"] == T)].sort_values("strength")
                if not len(s):
                    continue
                label = LABELS[method] if T == 2000 else None
                for i, (col, lo, hi) in enumerate(
                    (("fdr", "fdr_low", "fdr_high"), ("recall", "recall_low", "recall_high"))
                ):
                    ax = axes[i, j]
                    ax.errorbar(s.strength + (0.006 if T == 1000 else 0), s[col],
                                yerr=[s[col] - s[lo], s[hi] - s[col]], color=colours[method],
                                ls=ls, marker="o", ms=3, lw=1.2, capsize=2,
                                label=label if i == 0 else None)  # fmt: skip
        axes[0, j].axhline(FDR, color="k", ls=":", lw=0.8)
        axes[1, j].axhline(0.8, color="k", ls=":", lw=0.8)
        axes[0, j].set_ylim(-0.02, 1.0)
        axes[1, j].set_ylim(0.0, 1.03)
        axes[0, j].set_title(f"{role} members" + (" (50-neuron modulator)" if m > 1 else
                                                   " (p = 150, q = 100, m = 1)"),
                             fontsize="small")  # fmt: skip
        axes[1, j].set_xlabel("shared variance (strength of the 8 latent factors)")
    axes[0, 0].set_ylabel("realised FDR (mean false share)")
    axes[1, 0].set_ylabel("recall")
    axes[0, 0].legend(fontsize="x-small", loc="upper left")
    fig.suptitle("Member lists at FDR 0.1, SNR 0.25, AR(1) 0.8; solid T = 2000, dashed "
                 "T = 1000 (95% bootstrap intervals over data sets)",
                 fontsize="small")  # fmt: skip
    fig.savefig(path, dpi=110)
    plt.close(fig)


def fov_figure(path, seed=0):
    """Source members on a simulated field of view: truth, member_neurons, sparse fit."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import xarray as xr

    cell = cells("spatial")[0]
    _, (X, Y, Z, truth, dense, res, named) = run_one(cell, seed, sparse=True, rrr=False)
    positions = {"source": truth.source_positions_, "target": truth.target_positions_}
    fig, axes = plt.subplots(2, 3, figsize=(12, 8), layout="constrained")
    panels = [
        ("truth", {r: getattr(truth, f"{r}_members_") for r in ("source", "target")}),
        (
            "member_neurons, FDR 0.1 (BY)",
            {r: named["fdr_by"][r][:, None] for r in ("source", "target")},
        ),  # fmt: skip
        (
            'MICs(sparsity="cv")',
            {r: named["sparse_cv"][r][:, None] for r in ("source", "target")},
        ),  # fmt: skip
    ]
    for j, (title, lists) in enumerate(panels):
        ds = xr.Dataset(
            {
                f"{r}_members": xr.DataArray(
                    lists[r], dims=(r, "channel"), coords={r: np.arange(lists[r].shape[0])}
                )
                for r in lists
            }  # fmt: skip
        )
        mics.plotting.plot_members_fov(dense, positions=positions, stability=ds,
                                       same_field=False, annotate=False,
                                       ax=[axes[0, j], axes[1, j]])  # fmt: skip
        for i, r in enumerate(("source", "target")):
            true = getattr(truth, f"{r}_members_")[:, 0]
            sel = lists[r][:, 0]
            false = sel & ~true
            if false.any():  # named but not members: a red cross over the point
                xy = positions[r][false]
                axes[i, j].scatter(xy[:, 0], xy[:, 1], marker="x", color="C3", s=60, zorder=5,
                                   label="named, not a member")  # fmt: skip
                axes[i, j].legend(fontsize="x-small")
            axes[i, j].set_title(f"{title}: {r}, {sel.sum()} named, {np.sum(sel & ~true)} "
                                 "not members", fontsize="small")  # fmt: skip
    fig.suptitle(
        f"Simulated fields of view, seed {seed}: shared variance 0.8 (half of it "
        "spatially clustered, length 0.1), T = 2000, SNR 0.25",
        fontsize="small",
    )
    fig.savefig(path, dpi=110)
    plt.close(fig)


def verdicts(summ):
    """The issue's "Done when", each with its number and interval."""
    lines = []
    strong = summ[(summ.strength >= 0.8) & (summ["T"] == 2000) & (summ.snr == 0.25)
                  & (summ.m == 1) & (summ.spatial == 0) & (summ.n_channels == 1)
                  & (summ.method == "fdr_by")]  # fmt: skip
    for _, r in strong.iterrows():
        ok = r.fdr_high <= FDR
        lines.append(
            f"- {r.role} list, strength {r.strength:g}, T = 2000, SNR 0.25 "
            f"({r.n_datasets} data sets): realised FDR {_fmt(r.fdr, r.fdr_low, r.fdr_high)}, "
            + ("at or below 0.1 with its whole interval" if ok else
               "mean " + ("<=" if r.fdr <= FDR else ">") + " 0.1, interval reaching "
               f"{r.fdr_high:.3f}")
            + f"; recall {_fmt(r.recall, r.recall_low, r.recall_high)} "
            + ("(>= 0.8)." if r.recall >= 0.8 else "(below 0.8).")
        )  # fmt: skip
    recall = summ[(summ.snr >= 0.25) & (summ.n_channels == 1) & (summ.method == "fdr_by")]
    worst = recall.loc[recall.recall.idxmin()] if len(recall) else None
    if worst is not None:
        lines.append(
            f"- Lowest recall of the default lists at SNR >= 0.25 over every cell: "
            f"{worst.recall:.3f} ({worst.role}, strength {worst.strength:g}, T = "
            f"{int(worst['T'])}, m = {int(worst.m)}) "
            + ("(>= 0.8)." if worst.recall >= 0.8 else "(below 0.8).")
        )
    null = summ[(summ.n_channels == 0) & (summ.method == "fdr_by")]
    for _, r in null.iterrows():
        lines.append(
            f"- Null data (no channel, one forced), strength {r.strength:g}: {r.role} list "
            f"empty in {r.share_empty:.0%} of {r.n_datasets} data sets "
            f"(95% CI {r.empty_low:.2f}-{r.empty_high:.2f}) "
            + ("(>= 90%)." if r.share_empty >= 0.9 else "(below 90%).")
        )
    return lines


def report(args):
    runs = sorted((args.out / "runs").glob("*.csv"))
    if not runs:
        raise SystemExit(f"no runs in {args.out / 'runs'}: run a part first.")
    df = pd.concat([pd.read_csv(p) for p in runs], ignore_index=True)
    df = df.drop_duplicates(["strength", "T", "snr", "m", "spatial", "n_channels", "seed",
                             "role", "method"])  # fmt: skip
    summ = summarize(df)
    summ["order"] = summ.method.map({m: i for i, m in enumerate(METHOD_ORDER)})
    summ = summ.sort_values(["n_channels", "m", "spatial", "snr", "T", "strength", "role",
                             "order"], ascending=[False, True, True, True, False, True, True,
                                                  True]).drop(columns="order")  # fmt: skip
    summ.to_csv(args.out / "summary.csv", index=False)
    figure(summ, args.out / "member_fdr.png")
    metas = [json.loads(p.read_text()) for p in sorted((args.out / "runs").glob("*.json"))]
    main_methods = ["fdr_by", "fdr_bh", "iid_bh", "sparse_cv", "sparse_rrr", "dense_oracle_cut"]
    sweep = table(summ, main_methods, ROLES[:2], lambda s: (s.m == 1) & (s.spatial == 0)
                  & (s.n_channels == 1) & (s.snr == 0.25))  # fmt: skip
    snr = table(summ, ["fdr_by", "fdr_bh", "sparse_cv"], ROLES[:2],
                lambda s: (s.m == 1) & (s.spatial == 0) & (s.n_channels == 1)
                & (s.snr != 0.25))  # fmt: skip
    pop = table(summ, main_methods, ROLES, lambda s: (s.m > 1) & (s.n_channels == 1))
    spatial = table(summ, main_methods, ROLES[:2], lambda s: s.spatial > 0)
    rates = table(summ, ["fdr_by", "fdr_by_0.2", "fdr_bh", "fdr_bh_0.2", "iid_by", "iid_bh"],
                  ROLES, lambda s: (s.n_channels == 1) & (s.snr == 0.25)
                  & (s.strength >= 0.8) & (s["T"] == 2000))  # fmt: skip
    null = summ[summ.n_channels == 0]
    null_lines = [
        "| strength | role | method | data sets | list empty | 95% CI | mean named |",
        "|---|---|---|---|---|---|---|",
    ] + [
        f"| {r.strength:g} | {r.role} | {r.method} | {r.n_datasets} | {r.share_empty:.2f} "
        f"| {r.empty_low:.2f}-{r.empty_high:.2f} | {r.named:.2f} |"
        for _, r in null.iterrows()
    ]
    gate = []
    for s_, g in df[(df.n_channels == 0) & (df.method == "fdr_by")].groupby("strength"):
        per = g.groupby("seed").channel_p.first()
        hits = int(np.sum(per <= FDR))
        ci = stats.binomtest(hits, len(per)).proportion_ci(method="exact")
        gate.append(f"| {s_:g} | {len(per)} | {hits / len(per):.2f} | {ci.low:.2f}-{ci.high:.2f} "
                    f"| {np.median(per):.2f} |")  # fmt: skip
    any_empty = []
    for (s, method), g in df[df.n_channels == 0].groupby(["strength", "method"]):
        per = g.groupby("seed").nonempty.any()
        ci = stats.binomtest(int((~per).sum()), len(per)).proportion_ci(method="exact")
        any_empty.append(f"| {s:g} | {method} | {len(per)} | {(~per).mean():.2f} "
                         f"| {ci.low:.2f}-{ci.high:.2f} |")  # fmt: skip
    (args.out / "summary.md").write_text("\n".join(sweep + [""] + snr + [""] + pop + [""]
                                                   + spatial + [""]) + "\n")  # fmt: skip
    (args.out / "null.md").write_text("\n".join(null_lines) + "\n")
    seconds = sum(m["seconds"] for m in metas)
    run_lines = [
        f"- `run --part {m['part']}` seeds {m['seeds'][0]}-{m['seeds'][1]} "
        f'({len(m["cells"])} cell(s); `MICs(sparsity="cv")` on the first {m["sparse_seeds"]}'
        f", sparse RRR on the first {m['rrr_seeds']} seeds of each): {m['seconds'] / 60:.1f} "
        f"min at load {m['load']}"
        for m in metas
    ]
    per_set = df[df.method == "fdr_by"].drop_duplicates(
        ["strength", "T", "snr", "m", "spatial", "n_channels", "seed"]
    )
    med = per_set.groupby("m").seconds.median()
    lines = [
        "# Member lists at a false-discovery rate, with shared variability (issue 48)",
        "",
        "Generated by `python studies/validation/member_fdr.py report` from the runs below "
        "(`runs/*.csv`, one row per data set, role and method). Data: "
        "`mics.simulate(n_source=150, n_target=100, rank=3, n_channels=1, "
        "geometry='random', source_members=15, target_members=20, n_modulators=1, "
        "source_autocorr=0.8, modulator_autocorr=0.8, noise_autocorr=0.8, "
        "shared_variability=dict(n_factors=8, strength=s))`, the issue's failure case with "
        "calcium-like autocorrelation (`population`: 50 modulator neurons, 12 gating, "
        "sharing variability too). Seeds are the data sets' `random_state`. Methods: see the "
        "script's docstring. FDR = mean false-discovery proportion over data sets (0 for an "
        "empty list), with a 95% percentile bootstrap interval over data sets.",
        "",
        *run_lines,
        f"- total {seconds / 60:.1f} min on a shared 2-core machine; median time of one "
        "dense fit plus `member_neurons` per data set: "
        + ", ".join(f"{v:.1f} s (m = {k})" for k, v in med.items())
        + " (under load; not a benchmark).",
        "",
        '## Verdicts (the issue\'s "Done when")',
        "",
        *verdicts(summ),
        "",
        "![FDR and recall against shared variance](member_fdr.png)",
        "",
        "## FDR and recall against shared variance (one modulator, SNR 0.25)",
        "",
        *sweep,
        "",
        "## Against the modulation SNR (T = 2000)",
        "",
        *snr,
        "",
        "## A modulator population (m = 50, 12 gating neurons)",
        "",
        *pop,
        "",
        "## Spatially clustered shared variability",
        "",
        *spatial,
        "",
        "![members on simulated fields of view](fov.png)",
        "",
        "## The rate and the inference (strength >= 0.8, T = 2000)",
        "",
        "`_0.2`: the same tests at FDR 0.2. `iid_*`: the same regressions with every sample "
        "its own cluster and no prewhitening, i.e. row-wise i.i.d. inference on "
        "autocorrelated samples.",
        "",
        *rates,
        "",
        "## Null data (no channel; the fit forced to one channel)",
        "",
        *null_lines,
        "",
        "The channel test (fold by fold, merged by twice the median p-value) on the same "
        "null data sets, at 0.1: it is what keeps the lists empty, and it is conservative "
        "(the merging is valid under any dependence between folds).",
        "",
        "| strength | data sets | channel test p <= 0.1 | 95% CI | median p |",
        "|---|---|---|---|---|",
        *gate,
        "",
        "Every list of the data set empty:",
        "",
        "| strength | method | data sets | all empty | 95% CI |",
        "|---|---|---|---|---|",
        *any_empty,
        "",
    ]
    (args.out / "README.md").write_text("\n".join(lines))
    print("\n".join(lines))


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    r = sub.add_parser("run")
    r.add_argument("--part", required=True, choices=["sweep", "population", "spatial", "null"])
    r.add_argument("--seeds", type=int, default=50)
    r.add_argument("--first-seed", type=int, default=0)
    r.add_argument("--cells", type=int, nargs="*", help="indices into the part's cells")
    r.add_argument("--sparse-seeds", type=int, default=20)
    r.add_argument("--rrr-seeds", type=int, default=10)
    r.add_argument("--out", type=Path, default=OUT)
    p = sub.add_parser("report")
    p.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    (run if args.command == "run" else report)(args)


if __name__ == "__main__":
    main()
