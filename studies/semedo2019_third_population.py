"""Communication subspaces of the Semedo et al. 2019 sample, and V1 as a modulator of V1 -> V2.

The sample data of the reference communication-subspace code: 400 trials x
10 bins of macaque V1 (79 source neurons), V2 (31 target neurons) and 31
held-out V1 neurons, stimulus means already subtracted.

1. Communication subspaces V1 -> V2 and V1 -> V1 (held-out neurons as target):
   ``mics.ReducedRankRegressionCV`` with 10 trial-blocked folds, the
   one-SEM rank and the CV performance of every rank.
2. The held-out V1 population as a multivariate modulator of V1 -> V2, in
   two forms: all its neurons (a 31-neuron third population, fitted on the
   data path) and its top ``--n-pcs`` principal components (computed once;
   a trial permutation of the modulator permutes them identically, so the
   null is unchanged). ``mics.test_modulation`` with the trial-level null
   among all trials (the data are already stimulus-mean residuals),
   ``--n-perm`` permutations, estimator ``MICs(cv=5, max_channels=1,
   n_init=1, max_iter=50)`` with the rank selected once on the real data
   and fixed: the statistic is the cross-validated gain of one channel over
   none. The test's effect size: the held-out V2 variance one channel
   explains beyond the additive model, with a ``--effect-boot`` whole-trial
   bootstrap interval. Then the decomposition of the K = 1 model
   bootstrapped over trials, whose draws also give the source-minus-target
   asymmetry (``mics.asymmetry``), reported for the significant tests.
3. Negative controls for each form, the same analysis with the modulator
   time-reversed (the whole series, so trials and bins run backwards) and
   with ``--n-controls - 1`` fixed random permutations of its trials,
   ``--control-perm`` permutations each with Besag-Clifford early stopping
   after ``--control-stop`` exceedances (the p-value stays exact).
4. Power for each form (``mics.power_analysis``): random channels of
   ``--power-strengths`` planted into null copies of V2 (the modulator's
   trials permuted, as the test's null), ``--power-sims`` data sets each,
   the real test's estimator and trial null with ``--power-perm``
   permutations (stopped once a data set can no longer reach p <= 0.05,
   which leaves every detection unchanged): the minimum detectable effect.
5. Split-by-state RRR (``studies/validation/split_by_state.py``) beside each
   test: trials split at the median of a scalar summary of the held-out V1
   (its population mean for the neurons form, its first PC for the PCs
   form), four statistics, the null from the first ``--split-perm`` of the
   mics test's own trial permutations.

Writes ``results/semedo2019/``: ``subspaces.csv``, ``tests.csv``,
``decomposition.csv``, ``asymmetry.csv``, ``power.csv``, ``split_by_state.csv``,
``summary.csv``, ``semedo2019.png`` and ``README.md``.

Usage::

    python studies/semedo2019_third_population.py             # full study
    python studies/semedo2019_third_population.py --n-perm 9 --control-perm 9 \
        --n-controls 2 --n-boot 4 --effect-boot 4 --power-sims 2 --power-perm 19 \
        --split-perm 4 --out /tmp/semedo                      # smoke run
"""

from __future__ import annotations

import argparse
import os
import time
import warnings
from pathlib import Path

import numpy as np
import pandas as pd
from scipy import io as sio
from sklearn.base import clone
from tqdm import tqdm

import mics
import mics.datasets
from mics.model import PARTS, decompose
from mics.model.summaries import summarize_asymmetry

try:  # run as a script (studies/ on sys.path) or imported as a package module
    import report
    import study_tools as tools
except ImportError:  # pragma: no cover
    from studies import report
    from studies import study_tools as tools

N_TRIALS, N_BINS = 400, 10
ALPHA = 0.05


def load():
    """Source (V1), V2 and held-out V1 responses, and the trial id of every sample.

    The file comes from :mod:`mics.datasets`: a local copy (``$MICS_DATA_DIR``
    or ``../shared/data``) or a verified download.
    """
    mat = sio.loadmat(mics.datasets.fetch("semedo2019/sample_data.mat"))
    X, Y_V2, Y_V1 = (np.asarray(mat[k], dtype=float) for k in ("X", "Y_V2", "Y_V1"))
    if X.shape[0] != N_TRIALS * N_BINS:
        raise ValueError(f"expected {N_TRIALS} trials x {N_BINS} bins, got {X.shape[0]} rows")
    return X, Y_V2, Y_V1, np.repeat(np.arange(N_TRIALS), N_BINS)


def principal_components(Z, n):
    """Scores of the top ``n`` principal components (centred, unit variance each)."""
    Zc = Z - Z.mean(axis=0)
    U, s, _ = np.linalg.svd(Zc, full_matrices=False)
    explained = s**2 / np.sum(s**2)
    return U[:, :n] * np.sqrt(len(Z)), explained[:n]


def subspaces(X, targets, groups):
    """Trial-blocked 10-fold rank selection for each target population."""
    rows = []
    for name, Y in targets.items():
        rrr = mics.ReducedRankRegressionCV(cv=10).fit(X, Y, groups=groups)
        res = rrr.cv_results_
        for i, rank in enumerate(res["rank"]):
            rows.append(
                dict(
                    target=name,
                    n_target=Y.shape[1],
                    rank=int(rank),
                    mean_score=float(res["mean_score"][i]),
                    sem_loss=float(res["sem_loss"][i]),
                    selected=int(rank) == rrr.rank_,
                )
            )
    return pd.DataFrame(rows)


def trial_permuted(Z, seed):
    """The modulator with its trials in a fixed random order (within-trial time kept)."""
    order = np.random.default_rng(seed).permutation(N_TRIALS)
    return Z.reshape(N_TRIALS, N_BINS, -1)[order].reshape(Z.shape)


# One channel at most: the statistic is the CV gain of K = 1 over K = 0. In a
# trial run (the real data and 9 permutations) allowing a second channel left
# all 10 statistics unchanged and cost 5x more time with the 31-neuron
# modulator; the test is exact for any fixed statistic.
ESTIMATOR = {**tools.CHEAP, "max_channels": 1}


def run_test(
    X, Y, Z, groups, modulator, label, n_perm, n_boot, n_jobs, seed, stop_after=None, n_effect=0
):
    """One test; ``extra`` holds the real test's ModulationTest and asymmetry."""
    est = mics.MICs(random_state=seed, **ESTIMATOR)
    _, selected = tools.improvement(est, X, Y, Z, groups)
    fixed = est.set_params(rank=selected.rank_)
    res = mics.test_modulation(
        fixed, X, Y, Z, n_permutations=n_perm, groups=groups, null="trial", n_jobs=n_jobs,
        verbose=0, random_state=seed, stop_after=stop_after, n_boot=n_effect,
    )  # fmt: skip
    null = res.null_distribution
    row = dict(
        analysis="real" if label == "real" else "control",
        modulator=modulator,
        control=label,
        n_modulators=Z.shape[1],
        rank=selected.rank_,
        n_channels=res.n_channels,
        statistic=res.statistic,
        null_mean=float(null.mean()),
        null_q95=float(np.quantile(null, 0.95)),
        n_perm=len(null),
        p_value=res.p_value,
        **tools.effect_fields(res),
    )
    decomp = []
    extra = dict(test=res) if label == "real" else {}
    if n_boot:
        k = max(res.n_channels, 1)
        # The geometry is the recording's own: its baseline rank selected on
        # the data (the test's reduced model has the communication regressed out).
        model = tools.quiet_fit(clone(fixed).set_params(rank=None, n_channels=k), X, Y, Z, groups)
        row["baseline_rank"] = model.rank_
        boot = mics.bootstrap_channels(
            model, X, Y, Z, n_boot=n_boot, groups=groups, n_jobs=n_jobs, verbose=0,
            random_state=seed,
        )  # fmt: skip
        dec = decompose(model)
        for part in PARTS:
            lo, hi = boot[f"total_{part}"].values
            decomp.append(
                dict(
                    modulator=modulator,
                    n_channels_fitted=k,
                    part=part,
                    fraction=float(dec[f"total_{part}"]),
                    ci_low=float(lo),
                    ci_high=float(hi),
                    n_boot=n_boot,
                )
            )
        extra["baseline_rank"] = model.rank_
        if model.rank_ > 0:  # with no baseline subspace every channel is "new"
            extra["asymmetry"] = mics.asymmetry(model, bootstrap=boot, test=res)
    return row, null, decomp, extra


def modulator_power(X, Y, Z, groups, rank, args):
    """``mics.power_analysis`` of one form of the modulator: the real test's estimator and null."""
    est = mics.MICs(random_state=args.seed, **{**ESTIMATOR, "rank": int(rank)})
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return mics.power_analysis(
            est, X, Y, Z, groups=groups, null="trial", strengths=args.power_strengths,
            geometry="random", n_sims=args.power_sims, n_permutations=args.power_perm,
            stop_after=tools.detection_stop(args.power_perm, ALPHA), alpha=ALPHA,
            n_jobs=args.n_jobs, verbose=0, random_state=args.seed,
        )  # fmt: skip


def figure(subs, tests, nulls, power, path):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, grid = plt.subplots(2, 2, figsize=(13, 8), constrained_layout=True)
    axes = grid.ravel()
    ax = axes[0]
    for name, sub in subs.groupby("target", sort=False):
        ax.errorbar(sub["rank"], sub.mean_score, yerr=sub.sem_loss, marker="o", label=name)
        best = sub[sub.selected]
        ax.scatter(best["rank"], best.mean_score, s=150, facecolor="none", edgecolor="k")
    ax.set_xlabel("rank")
    ax.set_ylabel("CV predictive performance (1 - NSE)")
    ax.set_title("communication subspaces (circle: selected)")
    ax.legend()
    ax = axes[1]
    real = tests[tests.analysis == "real"]
    for i, row in enumerate(real.itertuples()):
        color = f"C{i}"
        ax.hist(nulls[row.modulator], bins=30, color=color, alpha=0.4,
                label=f"{row.modulator}: null")  # fmt: skip
        ax.axvline(row.statistic, color=color, lw=2,
                   label=f"{row.modulator}: observed, p = {row.p_value:.3f}")  # fmt: skip
    ax.set_xlabel("CV gain of one channel over none (NSE)")
    ax.set_title("held-out V1 gating V1 -> V2")
    ax.legend(fontsize=7)
    ax = axes[2]
    ctrl = tests[tests.analysis == "control"]
    for i, modulator in enumerate(dict.fromkeys(real.modulator)):
        sub = ctrl[ctrl.modulator == modulator]
        x = np.arange(len(sub)) + 0.3 * i
        ax.scatter(x, sub.p_value, marker="x", color=f"C{i}", label=f"controls, {modulator}")
        r = real[real.modulator == modulator].iloc[0]
        ax.scatter([-2 + 0.3 * i], [r.p_value], color=f"C{i}", label=f"real, {modulator}")
    ax.axhline(ALPHA, color="k", ls="--", lw=0.8)
    ax.set_yscale("log")
    ax.set_xlabel("control (0 = time-reversed, others trial-permuted)")
    ax.set_ylabel("permutation p-value")
    ax.legend(fontsize=7)
    ax = axes[3]
    for i, r in enumerate(real.itertuples()):
        lo, hi = r.effect_size - r.effect_low, r.effect_high - r.effect_size
        ax.errorbar(
            [i],
            [100 * r.effect_size],
            yerr=100 * np.nan_to_num([[lo], [hi]]),
            fmt="o",
            color=f"C{i}",
            capsize=3,
            label=f"{r.modulator}: effect, 95% CI",
        )
        g = power[power.modulator == r.modulator]
        if len(g):
            mde = float(g.mde.iloc[0])
            shown = g.strength.max() if np.isnan(mde) else mde
            ax.scatter(
                [i + 0.15],
                [100 * shown],
                marker="^" if np.isnan(mde) else "v",
                s=70,
                color=f"C{i}",
                edgecolor="k",
                label=f"{r.modulator}: MDE" + (" above this" if np.isnan(mde) else ""),
            )
    ax.axhline(0, color="0.6", lw=0.8)
    ax.set_xticks(range(len(real)), list(real.modulator))
    ax.set_xlim(-0.6, len(real) - 0.4)
    ax.set_ylabel("held-out V2 variance beyond additive (%)")
    ax.set_title("effect size of one channel vs minimum detectable effect (80% power)")
    ax.legend(fontsize=7)
    fig.savefig(path, dpi=120)
    plt.close(fig)


def _finding(row, explained=None):
    what = (
        f"all {row.n_modulators} held-out V1 neurons"
        if explained is None
        else f"top {row.n_modulators} PCs of the held-out V1, {explained:.1%} of its variance"
    )
    text = (
        f"- **{row.modulator}** ({what}) as a modulator of V1 -> V2 (rank "
        f"{int(row.rank)} selected on what the test's reduced model leaves of V2): "
        f"statistic {row.statistic:.5f} vs null mean {row.null_mean:.5f} and 95th percentile "
        f"{row.null_q95:.5f}; p = {row.p_value:.4f} with {int(row.n_perm)} permutations; "
        f"K = {int(row.n_channels)} channels selected. "
    )
    if row.p_value > ALPHA:
        return text + "No modulation detected at 0.05 (a negative result)."
    if row.verdict == "gating":
        return text + "Gating detected at 0.05, with an effect interval above 0."
    text += (
        "The modulator's pairing matters at 0.05, but no gating channel predicts held-out "
        "activity (effect interval covering 0 or an estimate at or below 0)."
    )
    if row.statistic < 0:
        text += (
            " The statistic is negative: one channel predicts held-out trials worse than "
            "none, only less badly than with the modulator's trials permuted."
        )
    elif row.n_channels == 0:
        text += (
            " The one-SEM rule still keeps K = 0: the gain of a channel is small compared "
            "with its fold-to-fold spread, though larger than under most permutations."
        )
    return text


def readme(out, subs, tests, decomp, summary, explained, args, seconds, asym, power, states):
    s = summary.set_index("quantity")
    real = tests[tests.analysis == "real"]
    sel = subs[subs.selected].set_index("target")
    lines = [
        "# Semedo et al. 2019 sample: communication subspaces and V1 gating V1 -> V2",
        "",
        f"Generated by `python studies/semedo2019_third_population.py` ({args.n_perm} trial "
        f"permutations for each real test, {args.n_controls} controls per modulator with up "
        f"to {args.control_perm} each (stopped after {args.control_stop} exceedances), "
        f"{args.n_boot} trial bootstraps of the decomposition, {args.effect_boot} of each "
        f"real test's effect size, a power analysis per form of the modulator "
        f"({args.power_sims} data sets per strength, {args.power_perm} permutations) and "
        f"split-by-state RRR with {args.split_perm} permutations; run time "
        f"{seconds / 60:.1f} min with "
        f"n_jobs={args.n_jobs}, {args.cached} of {len(tests)} tests read from the cache of "
        f"an earlier run{args.time_note}). Every number below is in the CSV tables beside "
        "this file.",
        "",
        "## Findings",
        "",
        f"- Communication subspaces (10 trial-blocked folds, one-SEM rule, `subspaces.csv`): "
        f"V1 -> V2 rank {int(sel.loc['V2', 'rank'])} (performance "
        f"{sel.loc['V2', 'mean_score']:.3f}), V1 -> V1 rank {int(sel.loc['V1', 'rank'])} "
        f"(performance {sel.loc['V1', 'mean_score']:.3f})"
        + (
            ": fewer predictive dimensions to V2 than within V1, as in the paper."
            if sel.loc["V2", "rank"] < sel.loc["V1", "rank"]
            else ": the paper's ordering (fewer dimensions to V2) is not reproduced here."
        ),
    ]
    for row in real.itertuples():
        pcs = row.modulator == MODULATOR_PCS
        lines.append(_finding(row, float(np.sum(explained)) if pcs else None))
    holm = {m: float(s.loc[f"modulation_p_holm[{m}]", "value"]) for m in real.modulator}
    lines.append(
        f"- Holm over the {len(holm)} forms of the modulator: "
        + ", ".join(f"{m} {p:.3f}" for m, p in holm.items())
        + "; significant at 0.05 after correction: "
        + (", ".join(m for m, p in holm.items() if p <= ALPHA) or "none")
        + "."
    )
    for modulator in real.modulator:
        lines.append(
            report.control_line(
                f"for {modulator} (time-reversed and trial-permuted modulator)",
                s,
                f"control_nonsignificant[{modulator}]",
            )
        )
    for modulator, d in decomp.groupby("modulator", sort=False):
        sig = float(real.set_index("modulator").loc[modulator, "p_value"]) <= ALPHA
        lines.append(
            f"- Decomposition of the K = {int(d.n_channels_fitted.iloc[0])} model with "
            f"{modulator} (whole-tensor fractions, trial-bootstrap 95% intervals, "
            "`decomposition.csv`): "
            + ", ".join(
                f"{r.part} {r.fraction:.2f} [{r.ci_low:.2f}, {r.ci_high:.2f}]"
                for r in d.itertuples()
            )
            + ("." if sig else "; the test is not significant, so these describe fitted noise.")
        )
    lines += _effect_section(tests, power, args)
    lines += _asymmetry_section(asym)
    lines += _split_section(states)
    lines += [
        "",
        "## Limits",
        "",
        "- One recording (one animal, one array); 400 trials of 10 bins (the file does not say "
        "how its rows are ordered; trial by trial, 10 consecutive bins each, is assumed).",
        "- The modulator (held-out V1) is simultaneous with and correlated to the source "
        "(V1): a product of source and modulator is then partly a nonlinear function of the "
        "source alone, which the trial null also destroys. A significant test says V2 "
        "depends on the same-trial pairing of V1 source and held-out V1 activity beyond "
        "additive terms; it cannot by itself separate gating by the held-out neurons from "
        "a nonlinear V1 -> V2 mapping. The controls keep the modulator's own statistics "
        "and break only its pairing with the source and target trials.",
        "- The estimator is capped (cv=5, at most one channel, one start, 50 sweeps): the "
        "test stays exact, but power is lower than with the default selection.",
        f"- Controls stop after {args.control_stop} null statistics reach the observed one "
        "(Besag and Clifford 1991): their p-values stay exact"
        + (
            ", and a control is significant at 0.05 exactly when the full "
            f"{args.control_perm}-permutation test would be."
            if tools.same_decisions(args.control_stop, args.control_perm)
            else "."
        ),
        "- The controls of one modulator share its data, so they are not independent; "
        "the intervals above are approximate.",
        "",
        "![summary](semedo2019.png)",
        "",
        "## Tests",
        "",
        tools.markdown_table(
            tests[
                [
                    "analysis",
                    "modulator",
                    "control",
                    "rank",
                    "n_channels",
                    "statistic",
                    "null_q95",
                    "n_perm",
                    "p_value",
                    "effect_size",
                ]
            ]
        ),  # fmt: skip
        "",
    ]
    (out / "README.md").write_text("\n".join(lines))


#: The column that names a test (``tests.csv``), for the shared report sections.
LABELS = ["modulator"]


def _effect_section(tests, power, args):
    real = tests[tests.analysis == "real"]
    intro = (
        "Effect size: the fraction of V2's held-out variance that one channel (max(K, 1); "
        "K = 0 selected gives the one-channel value) explains beyond the additive model "
        "(rank-2 baseline plus the held-out V1's additive effect), mean over the 5 "
        f"trial-blocked folds, with a 95% interval from {args.effect_boot} whole-trial "
        "bootstraps (`ModulationTest.effect_size`, `effect_interval`; `tests.csv` columns "
        "`effect_*`; the controls report the estimate only)."
    )
    power_text = tools.power_method_text(args, args.n_perm, "V2 target")
    lines = report.effect_section(real, power, LABELS, intro=intro, power_text=power_text)
    return lines + report.sentences(real, LABELS)


def _asymmetry_section(asym):
    intro = (
        report.ASYMMETRY_METHOD + ": calibrated at 79 / 31 neurons), with the equivalence "
        "test of stable target patterns (private target below 0.1). Defined only where the "
        "modulation test rejects at 0.05 with a channel selected (`asymmetry.csv`, column "
        "`status`)."
    )
    undefined = (
        "Undefined for both forms: no modulation test rejected with a channel selected, "
        "so there is no gating whose sides could be compared."
    )
    return report.asymmetry_section(asym, LABELS, intro=intro, undefined=undefined, holm="p_holm")


def _split_section(states):
    return report.split_section(
        states,
        [("modulator", "modulator")],
        title="Split-by-state RRR beside the test",
        state="held-out V1 state (the population mean of the 31 held-out neurons beside the "
        "neurons form; the first principal component beside the PCs form)",
        note=" The held-out V1 is no behavioural state: here the split asks whether V1 -> V2 "
        "differs between trials of high and low held-out V1 activity.",
        n_trials=N_TRIALS,
    )


def asymmetry_table(tests, extras):
    """Asymmetry of each real test (``mics.asymmetry(..., test=...)``); ``reported`` marks
    the defined ones (the test rejected at 0.05 with a channel selected)."""
    real = tests[tests.analysis == "real"]
    criterion = "defined where the modulation test rejects at 0.05 with K >= 1"
    rows = []
    for _, row in real.iterrows():
        extra = extras.get(row.modulator, {})
        base = dict(
            modulator=row.modulator,
            p_value=row.p_value,
            p_holm=row.p_holm,
            rank=extra.get("baseline_rank", -1),
            criterion=criterion,
            reported="asymmetry" in extra and extra["asymmetry"].attrs["status"] == "tested",
        )
        if "asymmetry" in extra:
            a = extra["asymmetry"]
            rows.append(dict(base, **tools.asymmetry_fields(a), sentence=summarize_asymmetry(a)))
        elif base["rank"] == 0:
            rows.append(dict(base, sentence=tools.RANK0_ASYMMETRY))
    return pd.DataFrame(rows)


MODULATOR_NEURONS = "V1 held-out neurons"
MODULATOR_PCS = "V1 held-out PCs"


def report_only(parser, argv, out):
    """``README.md`` rebuilt from the tables in ``out``, with the settings of their run."""
    names = ("subspaces", "tests", "decomposition", "summary", "asymmetry", "power",
             "split_by_state")  # fmt: skip
    args, run, tables = tools.report_inputs(parser, argv, out, names)
    explained = tables["summary"].set_index("quantity").loc["modulator_variance_explained"]
    readme(
        out, tables["subspaces"], tables["tests"], tables["decomposition"], tables["summary"],
        [float(explained["value"])], args, run["seconds"], tables["asymmetry"],
        tables["power"], tables["split_by_state"],
    )  # fmt: skip
    print(f"wrote {out / 'README.md'}")


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n-pcs", type=int, default=3)
    parser.add_argument("--n-perm", type=int, default=199)
    parser.add_argument("--n-controls", type=int, default=40, help="per modulator form")
    parser.add_argument("--control-perm", type=int, default=39)
    parser.add_argument(
        "--control-stop",
        type=int,
        default=2,
        help="stop a control's test after this many null statistics reach the observed one "
        "(2 with 39 permutations: every decision at 0.05 is the full test's)",
    )
    parser.add_argument("--n-boot", type=int, default=100)
    parser.add_argument(
        "--effect-boot", type=int, default=100, help="trial bootstraps of the effect size"
    )
    parser.add_argument("--power-strengths", type=float, nargs="+", default=[0.001, 0.0025, 0.006])
    parser.add_argument("--power-sims", type=int, default=10, help="data sets per strength")
    parser.add_argument("--power-perm", type=int, default=39)
    parser.add_argument(
        "--split-perm",
        type=int,
        default=99,
        help="trial permutations of the split-by-state comparison (the first of the test's)",
    )
    parser.add_argument("--n-jobs", type=int, default=2)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", default=str(tools.ROOT / "results" / "semedo2019"))
    parser.add_argument(
        "--report-only", action="store_true", help="rebuild README.md from the tables in --out"
    )
    args = parser.parse_args(argv)
    if args.report_only:
        return report_only(parser, argv, Path(args.out))
    args.cached = 0  # tests read from the cache of an earlier run (not re-timed)
    if args.n_controls < 1:
        parser.error("--n-controls must be >= 1")
    os.environ.setdefault("PYTHONWARNINGS", "ignore")
    t0 = time.perf_counter()
    run = tools.RunRecord(
        __file__, argv, seeds=f"{args.seed} (permutations, bootstraps, controls)"
    )
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    X, Y_V2, Y_V1, groups = load()
    subs = subspaces(X, {"V2": Y_V2, "V1": Y_V1}, groups)
    pcs, explained = principal_components(Y_V1, args.n_pcs)
    forms = {MODULATOR_NEURONS: Y_V1, MODULATOR_PCS: pcs}
    # Scalar states for the split-by-state comparison: the held-out population's
    # mean activity, and its first principal component.
    states = {MODULATOR_NEURONS: Y_V1.mean(axis=1), MODULATOR_PCS: pcs[:, 0]}
    cases = []
    for modulator, Z in ((MODULATOR_NEURONS, Y_V1), (MODULATOR_PCS, pcs)):
        cases += [
            (modulator, "real", Z, args.n_perm, args.n_boot, None),
            (modulator, "time-reversed", Z[::-1], args.control_perm, 0, args.control_stop),
        ]
        cases += [
            (modulator, f"trial-permuted {k}", trial_permuted(Z, k), args.control_perm, 0,
             args.control_stop)
            for k in range(1, args.n_controls)
        ]  # fmt: skip
    rows, decomp, nulls, extras = [], [], {}, {}
    # Each finished test is kept in out/cache, so an interrupted study resumes.
    cache = out / "cache"
    cache.mkdir(exist_ok=True)
    for modulator, label, Z, n_perm, n_boot, stop in tqdm(cases, desc="tests"):
        n_effect = args.effect_boot if label == "real" else 0
        key = f"{modulator}_{label}_{args.n_pcs}_{n_perm}_{stop}_{n_boot}_{args.seed}_e{n_effect}"
        path = cache / f"{key.replace(' ', '_')}.pkl"
        if path.exists():
            row, null, dec, extra = pd.read_pickle(path)
            args.cached += 1
        else:
            row, null, dec, extra = run_test(
                X, Y_V2, Z, groups, modulator, label, n_perm, n_boot, args.n_jobs, args.seed,
                stop, n_effect,
            )  # fmt: skip
            pd.to_pickle((row, null, dec, extra), path)
        rows.append(row)
        decomp += dec
        if label == "real":
            nulls[modulator] = null
            extras[modulator] = extra
    tests = pd.DataFrame(rows)
    decomp = pd.DataFrame(decomp)
    real = tests[tests.analysis == "real"]
    tests["p_holm"] = np.nan
    tests.loc[real.index, "p_holm"] = tools.holm(real.p_value)
    power, powers = [], {}
    strengths = "-".join(f"{x:g}" for x in args.power_strengths)
    for modulator in tqdm(list(nulls), desc="power analyses"):
        rank = int(real.set_index("modulator").loc[modulator, "rank"])
        key = f"power_{modulator}_{args.n_pcs}_{strengths}_{args.power_sims}_{args.power_perm}"
        path = cache / f"{key.replace(' ', '_')}_{args.seed}.pkl"
        if path.exists():
            pw = pd.read_pickle(path)
        else:
            pw = modulator_power(X, Y_V2, forms[modulator], groups, rank, args)
            pd.to_pickle(pw, path)
        powers[modulator] = pw
        power += tools.power_rows(pw, modulator=modulator, rank=rank)
    power = pd.DataFrame(power)
    split_rows = []
    for modulator in tqdm(list(nulls), desc="split by state"):
        perms = extras[modulator]["test"].permutations[: args.split_perm]
        key = f"split_{modulator}_{args.n_pcs}_{len(perms)}_{args.seed}"
        path = cache / f"{key.replace(' ', '_')}.pkl"
        if path.exists():
            row = pd.read_pickle(path)
        else:
            row = tools.split_by_state_tests(X, Y_V2, states[modulator], groups, perms)
            pd.to_pickle(row, path)
        split_rows.append(
            dict(modulator=modulator, mics_p=extras[modulator]["test"].p_value, **row)
        )
    split_table = pd.DataFrame(split_rows)
    tests["sentence"] = ""
    for i, row in tests[tests.analysis == "real"].iterrows():
        tests.loc[i, "sentence"] = extras[row.modulator]["test"].summary(
            power=powers.get(row.modulator), alpha=ALPHA
        )
    asym = asymmetry_table(tests, extras)
    rank = subs[subs.selected].set_index("target")["rank"]
    summary = [
        ("rank_V1_to_V2", int(rank["V2"]), 10, "trial-blocked folds"),
        ("rank_V1_to_V1", int(rank["V1"]), 10, "trial-blocked folds"),
        ("modulator_variance_explained", float(np.sum(explained)), args.n_pcs, "top PCs"),
    ]
    for modulator in nulls:
        real = tests[(tests.analysis == "real") & (tests.modulator == modulator)].iloc[0]
        ctrl = tests[(tests.analysis == "control") & (tests.modulator == modulator)]
        k = int(np.sum(ctrl.p_value > ALPHA))
        summary += [
            (
                f"modulation_p[{modulator}]",
                real.p_value,
                int(real.n_perm),
                f"statistic {real.statistic:.5f}",
            ),
            (
                f"control_nonsignificant[{modulator}]",
                k,
                len(ctrl),
                tools.control_detail(k, len(ctrl)),
            ),
        ]
    # The two forms of the modulator are two tests of one question: Holm over them.
    real = tests[tests.analysis == "real"]
    for modulator, p_holm in zip(real.modulator, tools.holm(real.p_value), strict=True):
        summary.append((f"modulation_p_holm[{modulator}]", float(p_holm), len(real), "Holm"))
    for r in real.itertuples():
        summary.append(
            (
                f"effect_size[{r.modulator}]",
                r.effect_size,
                r.effect_n_boot,
                f"95% trial-bootstrap CI [{r.effect_low:.5f}, {r.effect_high:.5f}]",
            )
        )
    for modulator, g in power.groupby("modulator", sort=False):
        summary.append(
            (f"mde[{modulator}]", float(g.mde.iloc[0]), int(g.n_sims.iloc[0]), tools.mde_words(g))
        )
    for r in asym.itertuples():
        if r.reported:
            summary.append(
                (
                    f"asymmetry[{r.modulator}]",
                    r.difference,
                    r.n_boot,
                    f"95% CI [{r.difference_low:.3f}, {r.difference_high:.3f}], "
                    f"p = {r.asymmetry_p:.3g}; targets stable p = {r.stable_p:.3g}",
                )
            )
    for r in split_table.itertuples():
        for method in tools.SPLIT_METHODS:
            summary.append(
                (
                    f"split_by_state_p[{r.modulator}, {method}]",
                    getattr(r, f"{method}_p"),
                    r.n_perm,
                    "the mics test's trial permutations",
                )
            )
    summary = pd.DataFrame(summary, columns=["quantity", "value", "n", "detail"])
    subs.to_csv(out / "subspaces.csv", index=False)
    tests.to_csv(out / "tests.csv", index=False)
    decomp.to_csv(out / "decomposition.csv", index=False)
    asym.to_csv(out / "asymmetry.csv", index=False)
    power.to_csv(out / "power.csv", index=False)
    split_table.to_csv(out / "split_by_state.csv", index=False)
    summary.to_csv(out / "summary.csv", index=False)
    figure(subs, tests, nulls, power, out / "semedo2019.png")
    seconds = time.perf_counter() - t0
    args.time_note = tools.run_time_note(cache, seconds, args.cached, len(tests))
    run.finish(out, cached=args.cached, time_note=args.time_note)
    readme(out, subs, tests, decomp, summary, explained, args, seconds, asym, power, split_table)
    print(summary.to_string(index=False))
    print(f"run time {seconds:.0f} s ({seconds / 60:.1f} min); wrote {out}")
    return subs, tests, decomp, summary


if __name__ == "__main__":
    main()
