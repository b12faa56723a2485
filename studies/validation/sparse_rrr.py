"""Sparse RRR of the baseline against sparse MICs of the channel: which source neurons (issue 33).

Sparse reduced-rank regression (Kobak et al. 2021,
``ReducedRankRegression(rank=2, sparsity=S)``) answers "which source
neurons carry the communication subspace"; sparse MICs
(``MICs(rank=2, n_channels=1, sparsity=8)``, as in ``sparse_members.py``)
answers "which source neurons carry the gated channel". This study puts
the two on one footing: the same data, the same truth, precision and
recall of the *source* members each selects, beside the dense RRR
thresholded at its best cut (the cut on the row norms of its coefficients
that maximises F1 *given the truth*: an oracle, an upper bound of any cut a
user could choose).

Two kinds of data, both from the simulations of ``sparse_members.py``
(``mics.simulate(..., source_members=0.1, target_members=0.2,
geometry="random")``, p = 150, q = 100, one channel, m = 1 or a 50-neuron
modulator population):

- ``dense_baseline``: exactly those simulations (rank-2 baseline of
  ``mics.simulate``, dense over all source neurons). The channel's 15 source
  neurons are the truth; every source neuron carries the baseline.
- ``sparse_baseline``: the same channel, but the rank-2 baseline is planted
  on the channel's 15 source members too (magnitudes uniform in [0.5, 1]
  with random signs, baseline SNR 1 as in ``mics.simulate``). Both models
  should then find the same 15 neurons.

Sparse RRR is run at the fixed sparsities 4 and 8 (standard errors) and,
on the T = 2000 cells of ``sparse_baseline`` and one cell of
``dense_baseline``, with the sparsity chosen by 5-fold blocked
cross-validation (``ReducedRankRegressionCV(ranks=(2,), sparsity="cv")``).
About 3 minutes with 3 seeds on 2 cores at load 2.7.

Usage::

    python studies/validation/sparse_rrr.py [--seeds 3]

Results: ``results/sparse_rrr/``: ``sparse_rrr.md`` (means over seeds),
``sparse_rrr_runs.csv`` (one row per data set and method), ``run.json`` and
``README.md`` (``--report-only`` rebuilds the README from ``sparse_rrr.md``).
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import sys
import time
import warnings
from pathlib import Path

import numpy as np
import pandas as pd

import mics

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
sys.path.insert(0, str(ROOT / "studies"))
import study_tools as tools  # noqa: E402

OUT = ROOT / "results" / "sparse_rrr"
MIC_SPARSITY = 8.0  # the setting of sparse_members.py
RRR_SPARSITIES = (4.0, 8.0)
SCENARIOS = ("dense_baseline", "sparse_baseline")
CV_DENSE_CELL = (2000, 1, 0.25)  # (T, m, SNR) where dense_baseline gets the CV choice too


def _study(name):
    """A sibling study module, loaded by path (studies are scripts, not a package)."""
    spec = importlib.util.spec_from_file_location(f"_study_{name}", HERE / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


members_study = _study("sparse_members")
precision_recall, best_cut = members_study.precision_recall, members_study.best_cut


def planted(T, m, snr, seed, scenario):
    """The data of ``sparse_members.run_one``; ``sparse_baseline`` re-plants its baseline.

    Returns
    -------
    X, Y, Z : ndarray
    members : ndarray of bool, shape (150,)
        The channel's source members (also the baseline's in ``sparse_baseline``).
    """
    X, Y, Z, truth = mics.simulate(
        n_samples=T, n_source=150, n_target=100, n_modulators=m,
        modulator_kind="population" if m > 1 else "gaussian", rank=2, n_channels=1,
        geometry="random", modulation_snr=snr, source_members=0.1, target_members=0.2,
        random_state=seed,
    )  # fmt: skip
    members = truth.source_members_[:, 0]
    if scenario == "sparse_baseline":
        # swap the dense baseline X B for one carried by the channel's members only
        rng = np.random.default_rng(10_000 + seed)
        W = np.zeros((150, 2))
        k = int(members.sum())
        W[members] = rng.uniform(0.5, 1.0, (k, 2)) * rng.choice([-1.0, 1.0], (k, 2))
        V = np.linalg.qr(rng.standard_normal((100, 2)))[0]
        B = W * [1.0, 0.5] @ V.T
        signal = X @ B
        B *= np.sqrt(1.0 / signal.var(axis=0).mean())  # baseline SNR 1, noise variance 1
        Y = Y - X @ truth.coef_.T + X @ B
    return X, Y, Z, members


def run_one(T, m, snr, seed, scenario):
    X, Y, Z, members = planted(T, m, snr, seed, scenario)
    fits = {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the channel-lost warning is counted below
        t0 = time.perf_counter()
        mic = mics.MICs(
            rank=2, n_channels=1, sparsity=MIC_SPARSITY, verbose=0, random_state=seed
        ).fit(X, Y, Z)
        selected = np.asarray(mic.source_patterns_)[:, 0] != 0
        fits["sparse_mic_channel"] = (selected, None, time.perf_counter() - t0)
    for s in RRR_SPARSITIES:
        t0 = time.perf_counter()
        rrr = mics.ReducedRankRegression(rank=2, sparsity=s).fit(X, Y)
        selected = np.zeros(150, dtype=bool)
        selected[rrr.source_members_] = True
        fits[f"sparse_rrr_s{s:g}"] = (selected, None, time.perf_counter() - t0)
    if (scenario == "sparse_baseline" and T == 2000) or (T, m, snr) == CV_DENSE_CELL:
        # 9 candidates x 5 folds per data set: a subset of the cells, to keep the
        # run short (dense baselines keep ~140 neurons, seconds per fit: one cell)
        t0 = time.perf_counter()
        cv = mics.ReducedRankRegressionCV(ranks=(2,), cv=5, sparsity="cv").fit(X, Y)
        selected = np.isin(np.arange(150), cv.source_members_)
        fits["sparse_rrr_cv"] = (selected, None, time.perf_counter() - t0)
        chosen = cv.sparsity_
    else:
        chosen = np.nan
    t0 = time.perf_counter()
    dense = mics.ReducedRankRegression(rank=2).fit(X, Y)
    row_norms = np.linalg.norm(np.asarray(dense.coef_), axis=0)
    fits["dense_rrr_oracle_cut"] = (None, row_norms, time.perf_counter() - t0)
    rows = []
    for method, (selected, values, secs) in fits.items():
        if selected is None:
            (prec, rec), n_sel = best_cut(values, members), np.nan
        else:
            (prec, rec), n_sel = precision_recall(selected, members), int(selected.sum())
        rows.append(
            dict(
                scenario=scenario, T=T, m=m, snr=snr, seed=seed, method=method,
                precision=prec, recall=rec, n_selected=n_sel, n_true=int(members.sum()),
                seconds=secs, cv_sparsity=chosen if method == "sparse_rrr_cv" else np.nan,
            )
        )  # fmt: skip
    return rows


def report(df, seeds, elapsed, load):
    """The markdown report of the runs."""
    table = (
        df.groupby(["scenario", "T", "m", "snr", "method"])[["precision", "recall", "n_selected"]]
        .mean()
        .round(3)
        .reset_index()
    )
    overall = (
        df.groupby(["scenario", "method"])[["precision", "recall", "n_selected"]]
        .agg(["mean", "min"])
        .round(3)
    )
    n_sets = len(df.drop_duplicates(["scenario", "T", "m", "snr", "seed"]))
    chosen = df[df.method == "sparse_rrr_cv"].groupby("scenario")["cv_sparsity"]
    chosen = "; ".join(
        f"{name}: {', '.join(f'{v:g}' for v in sorted(vals))}" for name, vals in chosen
    )
    lines = [
        "# Source members: sparse RRR of the baseline against sparse MICs of the channel",
        "",
        f"`python studies/validation/sparse_rrr.py --seeds {seeds}` (seeds 0-{seeds - 1} per "
        f"cell; {n_sets} data sets; {elapsed:.0f} s wall time at "
        f"load average {load:.1f} on 2 cores). p = 150, q = 100, one channel on 15 source "
        "(10%) and 20 target neurons, rank-2 baseline; T = 1000, 2000; m = 1 (Gaussian "
        "modulator) or 50 (population, 12 gating); modulation SNR 0.1, 0.25, 0.5.",
        "",
        "- `dense_baseline`: the simulations of `sparse_members.py` unchanged; the baseline "
        "is dense over all 150 source neurons, the truth is the channel's 15 source members.",
        "- `sparse_baseline`: the same, with the rank-2 baseline re-planted on the same 15 "
        "source neurons (SNR 1).",
        "",
        "Methods: `sparse_mic_channel` = source neurons with a non-zero weight in "
        f"`MICs(rank=2, n_channels=1, sparsity={MIC_SPARSITY:g})`; `sparse_rrr_sS` = "
        "non-zero rows of `ReducedRankRegression(rank=2, sparsity=S)` (Kobak et al. 2021); "
        "`sparse_rrr_cv` = the same with the sparsity chosen by 5-fold blocked CV "
        "(`ReducedRankRegressionCV(ranks=(2,), cv=5, sparsity='cv')`, one-SEM rule towards "
        "sparser; only at T = 2000, and in `dense_baseline` only at m = 1, SNR 0.25, to "
        "keep the run short); "
        "`dense_rrr_oracle_cut` = row norms of the dense rank-2 RRR cut at the threshold "
        "maximising F1 **chosen with the truth (an oracle)**, so its figures are an upper "
        "bound for any cut a user could set. A fit that selects nothing has precision 0.",
        "",
        f"Sparsities chosen by CV (per data set): {chosen}.",
        "",
        "## Over all cells (mean and worst data set)",
        "",
        overall.to_markdown(),
        "",
        "## Per cell (means over seeds)",
        "",
        table.to_markdown(index=False),
        "",
    ]
    return "\n".join(lines)


def readme(out=OUT):
    """``README.md``: the run record, then the report ``sparse_rrr.md``."""
    text = (out / "sparse_rrr.md").read_text()
    lines = tools.readme_head(
        "Sparse RRR of the baseline against sparse MICs of the channel",
        "studies/validation/sparse_rrr.py",
        out,
        about=(
            "Which source neurons? Sparse reduced-rank regression (Kobak et al. 2021) answers "
            "which carry the communication subspace, sparse MICs which carry the gated "
            "channel: the two on the same planted-member data, by precision and recall of the "
            "source members each selects, beside the dense RRR cut at its best threshold "
            "chosen with the truth (an oracle)."
        ),
        missing="The report below gives its command, run time and load.",
    )
    body = text.split("\n", 1)[1].strip()  # the report without its title
    lines += ["The report (`sparse_rrr.md`):", "", body, ""]
    (out / "README.md").write_text("\n".join(lines))


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--out", type=Path, default=OUT)
    parser.add_argument("--report-only", action="store_true", help="rebuild README.md only")
    args = parser.parse_args(argv)
    if args.report_only:
        readme(args.out)
        return
    run = tools.RunRecord(__file__, argv, seeds=f"0-{args.seeds - 1} per cell")
    args.out.mkdir(parents=True, exist_ok=True)
    start = time.perf_counter()
    rows = []
    for scenario in SCENARIOS:
        for T in (1000, 2000):
            for m in (1, 50):
                for snr in (0.1, 0.25, 0.5):
                    for seed in range(args.seeds):
                        rows.extend(run_one(T, m, snr, seed, scenario))
                    print(f"{scenario} T={T} m={m} snr={snr} done", flush=True)
    df = pd.DataFrame(rows)
    df.to_csv(args.out / "sparse_rrr_runs.csv", index=False)
    text = report(df, args.seeds, time.perf_counter() - start, os.getloadavg()[0])
    (args.out / "sparse_rrr.md").write_text(text)
    run.finish(args.out)
    readme(args.out)
    print(text)


if __name__ == "__main__":
    main()
