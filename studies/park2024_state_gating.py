"""Does behavioural state gate communication between two groups of mouse V1 neurons?

Park et al. 2024 (Sur lab), every session in ``<data>/park2024``: two-photon
V1 activity during drifting gratings, 128 trials x 49 samples (16 Hz).

Per session:

1. The grating-direction mean response at each time in the trial is
   subtracted from every neuron (``mics.preprocessing.subtract_condition_means``),
   leaving trial-to-trial fluctuations.
2. The files carry no depth or position of the neurons, so the population
   is split into source and target halves at random; split seed 0 carries the
   tests, seeds ``0 .. n_splits - 1`` give the distribution of the statistic
   over splits (descriptive).
3. Modulators: pupil, running speed, and both together (raw, per sample).
4. ``mics.test_modulation`` with the trial-level null (each trial takes the
   modulator time course of another trial of the same grating direction),
   trial-blocked 5-fold CV, ``--n-perm`` permutations. The estimator is the
   cheapest that keeps the test exact: rank selected once on the real data
   and then fixed, ``cv=5, max_channels=2, n_init=1, max_iter=50``.
   The test also reports its effect size: the held-out target variance that
   max(K, 1) channels explain beyond the additive model, with a
   ``--effect-boot`` whole-trial bootstrap interval.
5. The model with the selected K (at least one channel) is refitted and its
   decomposition bootstrapped over whole trials (``mics.bootstrap_channels``);
   the same draws give the source-minus-target asymmetry (``mics.asymmetry``),
   reported for the significant tests.
6. Negative controls: the same analysis with the modulator of every other
   session (``--control-donors`` of them; all sessions have 128 trials of 49
   samples, so trials match by count), ``--control-perm`` permutations with
   Besag-Clifford early stopping after ``--control-stop`` exceedances (the
   p-value stays exact; a clearly null control stops early). A modulator
   recorded in another animal cannot gate this session, so about 5% of
   the controls should reach p <= 0.05 and no more.

7. Power on each session's own recording (``mics.power_analysis``) for the
   ``--power-modulators`` set: random channels of ``--power-strengths``
   planted into null copies of the target (the modulator's trials permuted
   within directions, as the test's null), ``--power-sims`` data sets each, the same
   estimator and trial null with ``--power-perm`` permutations (stopped once
   the data set can no longer reach p <= 0.05, which leaves every detection
   unchanged): the minimum detectable effect at 80% power.
8. Split-by-state reduced-rank regression (``studies/validation/split_by_state.py``)
   on the same split and sessions, with pupil and with running speed as the
   state: trials split at the median of their mean state, four statistics,
   the null from the first ``--split-perm`` of the mics test's own trial
   permutations.

Across sessions: Holm correction within each modulator set (7 tests) and
over all 21 tests, and a summed-statistic permutation test per modulator set.

Writes ``results/park2024/``: ``sessions.csv``, ``tests.csv``, ``splits.csv``,
``decomposition.csv``, ``asymmetry.csv``, ``power.csv``, ``split_by_state.csv``,
``summary.csv``, ``park2024.png`` and ``README.md``.

Usage::

    python studies/park2024_state_gating.py                # full study (resumes from
                                                           # results/park2024/cache)
    python studies/park2024_state_gating.py --sessions 1 --n-perm 9 --control-perm 9 \
        --n-splits 2 --n-boot 4 --effect-boot 4 --power-sims 2 --power-perm 19 \
        --split-perm 4 --out /tmp/park                     # smoke run
"""

from __future__ import annotations

import argparse
import os
import time
import warnings
from pathlib import Path

import numpy as np
import pandas as pd
from joblib import Parallel, delayed
from scipy import stats
from sklearn.base import clone
from tqdm import tqdm

import mics
import mics.datasets
from mics.model import PARTS, decompose
from mics.model.summaries import summarize_asymmetry

try:  # run as a script (studies/ on sys.path) or imported as studies.park2024_state_gating
    import report
    import study_tools as tools
except ImportError:  # pragma: no cover
    from studies import report
    from studies import study_tools as tools

MODULATORS = {"pupil": ["pupil"], "running": ["speed"], "pupil+running": ["pupil", "speed"]}
# Scalar states for the split-by-state comparison (a median split needs one variable).
STATES = {"pupil": "pupil", "running": "speed"}
ALPHA = 0.05


def load_sessions(n_sessions=None):
    """Condition-mean residuals, modulators and trial labels of each session.

    The recordings come from :mod:`mics.datasets`: a local copy
    (``$MICS_DATA_DIR`` or ``../shared/data``) or a verified download.

    Returns
    -------
    list of dict
        ``session``; ``activity`` (T, n_neurons) residuals; ``modulators``
        (T, 2) pupil and speed as recorded; ``trial`` and ``direction`` (T,).
    """
    sessions = []
    for name in mics.datasets.PARK2024_SESSIONS[:n_sessions]:
        ds = mics.datasets.park2024(name)
        resid = mics.preprocessing.subtract_condition_means(ds["activity"], "direction")
        sessions.append(
            dict(
                session=ds.attrs["session"],
                activity=np.asarray(resid.values, dtype=float),
                modulators=pd.DataFrame({"pupil": ds.pupil.values, "speed": ds.speed.values}),
                trial=ds.trial.values,
                direction=ds.direction.values,
            )
        )
    return sessions


def split(activity, seed):
    """Random source/target halves of the neurons (the files carry no position)."""
    order = np.random.default_rng(seed).permutation(activity.shape[1])
    half = activity.shape[1] // 2
    return activity[:, np.sort(order[:half])], activity[:, np.sort(order[half:])]


def capped(seed, search):
    """The study's estimator (``tools.CHEAP``) with the given ``channel_search``."""
    return mics.MICs(random_state=seed, **{**tools.CHEAP, "channel_search": search})


def run_test(
    sess,
    donor,
    modset,
    n_perm,
    n_boot,
    n_jobs,
    seed,
    stop_after=None,
    search="grid",
    n_effect=0,
):
    """One session, one modulator set: selection, trial-null test and bootstrap.

    ``search`` is the estimator's ``channel_search`` (the committed tables: grid).
    ``n_effect`` bootstrap draws give the effect size's interval (real tests;
    the controls report p-values only and pass 0).

    Returns
    -------
    row : dict
    null : ndarray
    decomp : list of dict
    extra : dict
        For a real test: ``test`` (the ModulationTest) and, with ``n_boot``,
        ``asymmetry`` (``mics.asymmetry`` of the K >= 1 model).
    """
    X, Y = split(sess["activity"], 0)
    Z = donor["modulators"][MODULATORS[modset]].to_numpy()
    groups = sess["trial"]
    est = capped(seed, search)
    _, selected = tools.improvement(est, X, Y, Z, groups)
    fixed = est.set_params(rank=selected.rank_)
    res = mics.test_modulation(
        fixed,
        X,
        Y,
        Z,
        n_permutations=n_perm,
        groups=groups,
        conditions=sess["direction"],
        null="trial",
        n_jobs=n_jobs,
        verbose=0,
        random_state=seed,
        stop_after=stop_after,
        n_boot=n_effect,
    )
    null = res.null_distribution
    row = dict(
        session=sess["session"],
        modulators=modset,
        analysis="real" if donor is sess else "control",
        modulator_session=donor["session"],
        n_source=X.shape[1],
        n_target=Y.shape[1],
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
    extra = dict(test=res) if donor is sess else {}
    if n_boot and donor is sess:
        k = max(res.n_channels, 1)
        # The geometry is the recording's own: its baseline rank selected on
        # the data (the test's reduced model has the communication regressed out).
        model = tools.quiet_fit(clone(fixed).set_params(rank=None, n_channels=k), X, Y, Z, groups)
        row["baseline_rank"] = model.rank_
        boot = mics.bootstrap_channels(
            model,
            X,
            Y,
            Z,
            n_boot=n_boot,
            groups=groups,
            n_jobs=n_jobs,
            verbose=0,
            random_state=seed,
        )
        dec = decompose(model)
        for part in PARTS:
            lo, hi = boot[f"total_{part}"].values
            decomp.append(
                dict(
                    session=sess["session"],
                    modulators=modset,
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


def session_power(sess, modset, rank, args):
    """``mics.power_analysis`` of one session: the real test's estimator and null."""
    X, Y = split(sess["activity"], 0)
    Z = sess["modulators"][MODULATORS[modset]].to_numpy()
    est = capped(args.seed, args.channel_search).set_params(rank=int(rank))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return mics.power_analysis(
            est,
            X,
            Y,
            Z,
            groups=sess["trial"],
            conditions=sess["direction"],
            null="trial",
            strengths=args.power_strengths,
            geometry="random",
            n_sims=args.power_sims,
            n_permutations=args.power_perm,
            stop_after=tools.detection_stop(args.power_perm, ALPHA),
            alpha=ALPHA,
            n_jobs=args.n_jobs,
            verbose=0,
            random_state=args.seed,
        )


def state_split(sess, state, permutations):
    """Split-by-state RRR on split 0 of one session, with the mics test's permutations."""
    X, Y = split(sess["activity"], 0)
    z = sess["modulators"][STATES[state]].to_numpy()
    row = tools.split_by_state_tests(X, Y, z, sess["trial"], permutations)
    return dict(session=sess["session"], state=state, **row)


def split_statistics(sessions, modsets, n_splits, seed, search="grid"):
    """The observed statistic over random splits (no permutations: descriptive)."""
    rows = []
    jobs = [(s, m, k) for s in sessions for m in modsets for k in range(n_splits)]
    for sess, modset, k in tqdm(jobs, desc="splits"):
        X, Y = split(sess["activity"], k)
        Z = sess["modulators"][MODULATORS[modset]].to_numpy()
        est = capped(seed, search)
        stat, model = tools.improvement(est, X, Y, Z, sess["trial"])
        rows.append(
            dict(
                session=sess["session"],
                modulators=modset,
                split_seed=k,
                rank=model.rank_,
                n_channels=model.n_channels_,
                statistic=stat,
            )
        )
    return pd.DataFrame(rows)


def asymmetry_table(tests, extras):
    """Asymmetry of every real test (``mics.asymmetry(..., test=...)``); ``reported`` marks
    the defined ones (the test rejected at 0.05 with a channel selected)."""
    real = tests[tests.analysis == "real"]
    criterion = "defined where the modulation test rejects at 0.05 with K >= 1"
    rows = []
    for _, row in real.iterrows():
        extra = extras.get((row.session, row.modulators), {})
        sig = "asymmetry" in extra and extra["asymmetry"].attrs["status"] == "tested"
        base = dict(
            session=row.session,
            modulators=row.modulators,
            p_value=row.p_value,
            p_holm_set=row.p_holm_set,
            rank=extra.get("baseline_rank", -1),
            criterion=criterion,
            reported=bool(sig),
        )
        if "asymmetry" in extra:
            a = extra["asymmetry"]
            rows.append(dict(base, **tools.asymmetry_fields(a), sentence=summarize_asymmetry(a)))
        elif "test" in extra and base["rank"] == 0:
            rows.append(dict(base, sentence=tools.RANK0_ASYMMETRY))
    return pd.DataFrame(rows)


def run_power(sessions, tests, args, cache):
    """Power analyses (cached) of the ``--power-modulators`` tests, one per session."""
    real = tests[tests.analysis == "real"].set_index(["session", "modulators"])
    rows, powers = [], {}
    jobs = [(sess, m) for m in args.power_modulators if m in args.modulators for sess in sessions]
    strengths = "-".join(f"{x:g}" for x in args.power_strengths)
    for sess, modset in tqdm(jobs, desc="power analyses"):
        rank = int(real.loc[(sess["session"], modset), "rank"])
        key = (
            f"power_{sess['session']}_{modset}_{strengths}_{args.power_sims}_"
            f"{args.power_perm}_{args.seed}"
        )
        path = cache / f"{key}.pkl"
        if path.exists():
            power = pd.read_pickle(path)
        else:
            power = session_power(sess, modset, rank, args)
            pd.to_pickle(power, path)
        powers[(sess["session"], modset)] = power
        rows += tools.power_rows(power, session=sess["session"], modulators=modset, rank=rank)
    return pd.DataFrame(rows), powers


def run_split_by_state(sessions, extras, args, cache):
    """Split-by-state RRR per session, pupil and running, on the tests' own permutations."""
    jobs, rows, keys = [], {}, []
    for state in STATES:
        for sess in sessions:
            extra = extras.get((sess["session"], state))
            if extra is None:  # the modulator set was not run
                continue
            perms = extra["test"].permutations[: args.split_perm]
            key = f"split_{sess['session']}_{state}_{len(perms)}_{args.seed}"
            keys.append(key)
            path = cache / f"{key}.pkl"
            if path.exists():
                rows[key] = pd.read_pickle(path)
            else:
                jobs.append((key, path, sess, state, perms))
    # The RRR fits are BLAS calls that release the GIL: threads suffice.
    done = Parallel(n_jobs=args.n_jobs, backend="threading")(
        delayed(state_split)(sess, state, perms) for _, _, sess, state, perms in jobs
    )
    for (key, path, *_), row in zip(jobs, done, strict=True):
        pd.to_pickle(row, path)
        rows[key] = row
    table = pd.DataFrame([rows[k] for k in keys])
    if len(table):
        mics_p = {k: v["test"].p_value for k, v in extras.items()}
        table.insert(
            4, "mics_p", [mics_p[(s, m)] for s, m in zip(table.session, table.state, strict=True)]
        )
    return table


def summarize(tests, nulls, asym=None, power=None, states=None):
    """Holm-corrected counts per modulator set, summed-statistic tests, control rate."""
    real = tests[tests.analysis == "real"]
    rows = []
    for modset in dict.fromkeys(real.modulators):
        sub = real[real.modulators == modset]
        rows.append(
            dict(
                quantity=f"significant_raw[{modset}]",
                value=int(np.sum(sub.p_value <= ALPHA)),
                n=len(sub),
                detail=f"p <= {ALPHA}",
            )
        )
        rows.append(
            dict(
                quantity=f"significant_holm_within_set[{modset}]",
                value=int(np.sum(sub.p_holm_set <= ALPHA)),
                n=len(sub),
                detail=f"Holm over the {len(sub)} sessions",
            )
        )
        obs = sub.statistic.to_numpy()
        null = np.stack([nulls[(s, modset, s)] for s in sub.session])
        rows.append(
            dict(
                quantity=f"summed_statistic_p[{modset}]",
                value=tools.sum_test(obs, null),
                n=null.shape[1],
                detail=f"sum over sessions = {obs.sum():.5f}",
            )
        )
    rows.append(
        dict(
            quantity="significant_holm_all",
            value=int(np.sum(real.p_holm_all <= ALPHA)),
            n=len(real),
            detail=f"Holm over all tests; smallest p = {1 / (real.n_perm.max() + 1):.4f}",
        )
    )
    ctrl = tests[tests.analysis == "control"]
    for modset in dict.fromkeys(ctrl.modulators):
        sub = ctrl[ctrl.modulators == modset]
        k = int(np.sum(sub.p_value > ALPHA))
        rows.append(
            dict(
                quantity=f"control_nonsignificant[{modset}]",
                value=k,
                n=len(sub),
                detail=tools.control_detail(k, len(sub)),
            )
        )
    k = int(np.sum(ctrl.p_value > ALPHA))
    rows.append(
        dict(
            quantity="control_nonsignificant",
            value=k,
            n=len(ctrl),
            detail=tools.control_detail(k, len(ctrl)),
        )
    )
    # Do the real tests reject more often than the controls, run through the
    # same analysis? (One-sided Fisher exact test on the two 2 x 2 counts.)
    k_real = int(np.sum(real.p_value <= ALPHA))
    k_ctrl = len(ctrl) - k
    table = [[k_real, len(real) - k_real], [k_ctrl, len(ctrl) - k_ctrl]]
    rows.append(
        dict(
            quantity="real_vs_control_fisher_p",
            value=float(stats.fisher_exact(table, alternative="greater").pvalue),
            n=len(real) + len(ctrl),
            detail=f"significant: real {k_real}/{len(real)}, controls {k_ctrl}/{len(ctrl)}",
        )
    )
    # Effect sizes: how many real intervals exclude 0 (descriptive).
    has_ci = real.effect_low.notna()
    rows.append(
        dict(
            quantity="effect_interval_above_0",
            value=int(np.sum(real.effect_low > 0)),
            n=int(has_ci.sum()),
            detail=f"effect sizes from {real.effect_size.min():.4f} to "
            f"{real.effect_size.max():.4f} (held-out variance fraction)",
        )
    )
    if power is not None and len(power):
        for (session, modset), g in power.groupby(["session", "modulators"], sort=False):
            rows.append(
                dict(
                    quantity=f"mde[{session}, {modset}]",
                    value=float(g.mde.iloc[0]),
                    n=int(g.n_sims.iloc[0]),
                    detail=tools.mde_words(g),
                )
            )
    if asym is not None and len(asym):
        rep = asym[asym.reported]
        rows.append(
            dict(
                quantity="asymmetry_reported",
                value=len(rep),
                n=len(asym),
                detail=f"criterion: {asym.criterion.iloc[0]}; interval excludes 0 in "
                f"{int(np.sum(rep.get('asymmetry_p', pd.Series(dtype=float)) < ALPHA))}",
            )
        )
    if states is not None and len(states):
        for state, g in states.groupby("state", sort=False):
            for method in tools.SPLIT_METHODS:
                rows.append(
                    dict(
                        quantity=f"split_by_state_significant[{state}, {method}]",
                        value=int(np.sum(g[f"{method}_p"] <= ALPHA)),
                        n=len(g),
                        detail=f"{int(g.n_perm.iloc[0])} trial permutations (the mics test's)",
                    )
                )
            rows.append(
                dict(
                    quantity=f"split_by_state_significant[{state}, mics]",
                    value=int(np.sum(g.mics_p <= ALPHA)),
                    n=len(g),
                    detail="the mics test of the same sessions",
                )
            )
    return pd.DataFrame(rows)


def figure(tests, decomp, power, path):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, grid = plt.subplots(2, 2, figsize=(14, 9), constrained_layout=True)
    axes = grid.ravel()
    real = tests[tests.analysis == "real"].reset_index(drop=True)
    sessions = list(dict.fromkeys(real.session))
    colors = dict(zip(MODULATORS, ["C0", "C1", "C2"], strict=True))
    ax = axes[0]
    modsets = list(dict.fromkeys(real.modulators))
    for j, modset in enumerate(modsets):
        sub = real[real.modulators == modset].set_index("session").loc[sessions]
        x = np.arange(len(sessions)) + (j - 1) * 0.25
        ax.scatter(x, sub.statistic, color=colors[modset], label=f"{modset} observed", zorder=3)
        ax.scatter(x, sub.null_q95, color=colors[modset], marker="_", s=120, label=None)
    ax.axhline(0, color="0.6", lw=0.8)
    ax.set_xticks(range(len(sessions)), [s.split("_")[1] for s in sessions], rotation=45)
    ax.set_ylabel("CV improvement over K = 0 (NSE)")
    ax.set_title("observed statistic (dot) vs null 95th percentile (bar)")
    ax.legend(fontsize=7)
    ax = axes[1]
    for j, (analysis, marker) in enumerate([("real", "o"), ("control", "x")]):
        sub = tests[tests.analysis == analysis]
        for i, modset in enumerate(modsets):
            p = sub[sub.modulators == modset].p_value
            x = np.full(len(p), i + (j - 0.5) * 0.3)
            ax.scatter(
                x,
                p,
                marker=marker,
                color=colors[modset],
                alpha=0.8,
                label=analysis if i == 0 else None,
            )
    ax.axhline(ALPHA, color="k", ls="--", lw=0.8)
    ax.set_yscale("log")
    ax.set_xticks(range(len(modsets)), modsets)
    ax.set_ylabel("permutation p-value")
    ax.set_title("real (o) vs other-session modulator (x)")
    ax.legend(fontsize=7)
    ax = axes[2]
    if len(decomp):
        piv = decomp.pivot_table(
            index=["modulators", "session"], columns="part", values="fraction"
        )[list(PARTS)]
        bottom = np.zeros(len(piv))
        for part in PARTS:
            ax.bar(range(len(piv)), piv[part], bottom=bottom, label=part)
            bottom += piv[part].to_numpy()
        short = {"pupil": "P", "running": "R", "pupil+running": "P+R"}
        labels = [f"{short[m]} {s.split('_')[1]}" for m, s in piv.index]
        ax.set_xticks(range(len(piv)), labels, rotation=90, fontsize=6)
        ax.set_ylabel("fraction of modulation tensor energy")
        ax.set_title("decomposition (descriptive unless significant)")
        ax.legend(fontsize=7)
    ax = axes[3]
    for j, modset in enumerate(modsets):
        sub = real[real.modulators == modset].set_index("session").loc[sessions]
        x = np.arange(len(sessions)) + (j - 1) * 0.25
        err = np.vstack([sub.effect_size - sub.effect_low, sub.effect_high - sub.effect_size])
        ax.errorbar(
            x,
            100 * sub.effect_size,
            yerr=100 * np.nan_to_num(err),
            fmt="o",
            color=colors[modset],
            label=f"{modset}: effect, 95% CI",
            capsize=2,
        )
    if len(power):
        for modset, g in power.groupby("modulators", sort=False):
            mde = g.groupby("session", sort=False).mde.first().reindex(sessions).to_numpy()
            top = g.strength.max()
            x = np.arange(len(sessions))
            shown = np.where(np.isnan(mde), top, mde)
            ax.scatter(
                x,
                100 * shown,
                marker="v",
                s=60,
                color=colors[modset],
                edgecolor="k",
                label=f"{modset}: minimum detectable effect (80% power)",
            )
            if np.isnan(mde).any():
                ax.scatter(
                    x[np.isnan(mde)],
                    100 * shown[np.isnan(mde)],
                    marker="^",
                    s=60,
                    facecolor="none",
                    edgecolor="k",
                    label="MDE above the largest strength",
                )
    ax.axhline(0, color="0.6", lw=0.8)
    ax.set_xticks(range(len(sessions)), [s.split("_")[1] for s in sessions], rotation=45)
    ax.set_ylabel("held-out target variance beyond additive (%)")
    title = "effect size of max(K, 1) channels vs minimum detectable effect"
    low = np.nanmin(100 * real.effect_low.to_numpy(dtype=float), initial=0.0)
    if low < -3:  # a few very wide intervals would flatten the rest
        top = ax.get_ylim()[1]
        ax.set_ylim(-3.2, top)
        title += "\n(axis cut at -3%: longer intervals in tests.csv)"
    ax.set_title(title)
    ax.legend(fontsize=7)
    fig.savefig(path, dpi=120)
    plt.close(fig)


def readme(out, info, tests, splits, decomp, summary, args, seconds, asym, power, states, extras):
    real = tests[tests.analysis == "real"]
    s = summary.set_index("quantity")
    lines = [
        "# Park et al. 2024: does pupil or running gate V1 -> V1 communication?",
        "",
        f"Generated by `python studies/park2024_state_gating.py` "
        f"({len(real.session.unique())} sessions, {args.n_perm} trial permutations per test, "
        f"{args.control_perm} per control, {args.n_boot} trial bootstraps of the decomposition, "
        f"{args.n_splits} random splits, {args.n_donors} other-session modulators per "
        f"session as controls, {args.effect_boot} trial bootstraps of each real test's effect "
        f"size, a power analysis per session for {', '.join(args.power_modulators) or 'none'} "
        f"and split-by-state RRR with {args.split_perm} permutations; run time "
        f"{seconds / 60:.1f} min with "
        f"n_jobs={args.n_jobs}, {args.cached} of {len(tests)} tests read from the cache of an "
        f"earlier run{args.time_note}"
        + ("" if args.channel_search == "grid" else f", channel_search={args.channel_search!r}")
        + "). Every number below is in the CSV tables beside this file.",
        "",
        "Method: condition-mean residuals (grating direction x time in trial); neurons split "
        "at random into source and target halves (the files carry no depth or position); "
        "`mics.test_modulation` with the trial-level null (modulator trials permuted within "
        "grating direction), trial-blocked 5-fold CV; estimator `MICs(cv=5, max_channels=2, "
        "n_init=1, max_iter=50, tol=1e-5)` with the rank selected once on the real data and "
        "then fixed -- the permutation test is exact for any fixed statistic, these settings "
        "only cost power.",
        "",
        "## Findings",
        "",
    ]
    n_run = len(real.session.unique())
    if n_run < args.n_available or len(args.modulators) < len(MODULATORS):
        lines += [
            f"**Partial run: {n_run} of the {args.n_available} sessions and the modulator "
            f"sets {', '.join(args.modulators)} only.** Rerunning the full command resumes "
            "from the cache and completes the study.",
            "",
        ]

    def count(q):
        return f"{int(s.loc[q, 'value'])}/{int(s.loc[q, 'n'])}"

    for modset in dict.fromkeys(real.modulators):
        lines.append(
            f"- **{modset}**: p <= 0.05 in {count(f'significant_raw[{modset}]')} "
            f"sessions before correction, "
            f"{int(s.loc[f'significant_holm_within_set[{modset}]', 'value'])} after Holm over "
            f"sessions; summed statistic across sessions p = "
            f"{float(s.loc[f'summed_statistic_p[{modset}]', 'value']):.3f} "
            f"(`summary.csv`)."
        )
    lines.append(
        f"- Holm over all {len(real)} tests: {int(s.loc['significant_holm_all', 'value'])} "
        f"significant ({s.loc['significant_holm_all', 'detail']})."
    )
    lines.append(
        report.control_line(
            "(each session with the modulator of each other session)",
            s,
            "control_nonsignificant",
            extra=" Per modulator set: "
            + "; ".join(
                f"{m} {count(f'control_nonsignificant[{m}]')}"
                for m in dict.fromkeys(tests[tests.analysis == "control"].modulators)
            )
            + ".",
        )
    )
    lines.append(
        f"- Real tests against controls: {s.loc['real_vs_control_fisher_p', 'detail']}; "
        f"one-sided Fisher exact p = {float(s.loc['real_vs_control_fisher_p', 'value']):.3f} "
        "for the real tests rejecting more often than the controls."
    )
    lines.append(
        f"- Selected channels on the real data (split 0): K = 0 in "
        f"{int(np.sum(real.n_channels == 0))}/{len(real)} tests; the observed statistic is "
        f"negative (channels predict worse than none under CV) in "
        f"{int(np.sum(real.statistic < 0))}/{len(real)}."
    )
    if len(splits):
        pos = splits.groupby(["session", "modulators"]).statistic.agg(["min", "max"])
        lines.append(
            f"- Over {args.n_splits} random splits the statistic's range per session and "
            f"modulator set spans [{pos['min'].min():.4f}, {pos['max'].max():.4f}]; K > 0 "
            f"selected in {int(np.sum(splits.n_channels > 0))}/{len(splits)} split fits "
            f"(`splits.csv`)."
        )
    if len(decomp):
        sig = set(map(tuple, real[real.p_value <= ALPHA][["session", "modulators"]].values))
        d = decomp[[(a, b) in sig for a, b in zip(decomp.session, decomp.modulators, strict=True)]]
        if len(d):
            mean = d.groupby("part").fraction.mean()
            lines.append(
                "- Decomposition of the tests with p <= 0.05 (mean whole-tensor fraction): "
                + ", ".join(f"{p} {mean[p]:.2f}" for p in PARTS)
                + " (`decomposition.csv`, with trial-bootstrap 95% intervals)."
            )
        else:
            lines.append(
                "- No test reached p <= 0.05, so the decomposition in `decomposition.csv` "
                "(of the K >= 1 model) describes fitted noise and is not interpreted."
            )
    lines += effect_section(tests, power, args)
    lines += asymmetry_section(asym)
    lines += split_section(states, args)
    lines += [
        "",
        "## Limits",
        "",
        "- One population split in two at random: 'source' and 'target' are not anatomically "
        "distinct areas, and the split changes the statistic (`splits.csv`).",
        f"- {len(info)} sessions of {info.n_neurons.min()}-{info.n_neurons.max()} neurons and "
        f"{info.n_trials.max()} trials each; the running speed is nonzero in only "
        f"{info.fraction_speed_nonzero.min():.1%}-{info.fraction_speed_nonzero.max():.1%} of "
        "the samples (`sessions.csv`), which limits the power for running.",
        f"- With {args.n_perm} permutations the smallest p-value is "
        f"{1 / (args.n_perm + 1):.4f}; Holm over all {len(real)} tests needs "
        f"{ALPHA / len(real):.4f} for the smallest"
        + (", so it cannot reject anything" if 1 / (args.n_perm + 1) > ALPHA / len(real) else "")
        + ". The primary family is the sessions within one modulator set, with the summed "
        "statistic as the across-session test.",
        f"- Controls use {args.control_perm} permutations, stopped early after "
        f"{args.control_stop} null statistics reach the observed one (Besag and Clifford "
        "1991), to fit the time budget; the p-values stay exact"
        + (
            ", and a control is significant at 0.05 exactly when the full test would be"
            if tools.same_decisions(args.control_stop, args.control_perm)
            else ""
        )
        + ". The controls share "
        "sessions and donors, so they are not independent and the interval above is "
        "approximate.",
        "",
        "![summary](park2024.png)",
        "",
        "## Tests",
        "",
        tools.markdown_table(
            tests[
                [
                    "session",
                    "modulators",
                    "analysis",
                    "modulator_session",
                    "rank",
                    "n_channels",
                    "statistic",
                    "null_q95",
                    "p_value",
                    "p_holm_set",
                    "effect_size",
                    "effect_low",
                    "effect_high",
                ]
            ]
        ),
        "",
    ]
    (out / "README.md").write_text("\n".join(lines))


#: The columns that name a test (``tests.csv``), for the shared report sections.
LABELS = ["session", "modulators"]


def effect_section(tests, power, args):
    """Effect sizes with intervals, minimum detectable effects, one sentence per test."""
    real = tests[tests.analysis == "real"]
    if int(np.sum(real.n_channels > 0)) == 0:
        intro = (
            "Effect size: the fraction of the target's held-out variance that max(K, 1) "
            "channels explain beyond the additive model (baseline of the selected rank plus the "
            "modulator's additive effect), mean over the 5 trial-blocked folds, with a 95% "
            f"interval from {args.effect_boot} whole-trial bootstraps "
            "(`ModulationTest.effect_size`, `effect_interval`; `tests.csv` columns `effect_*`). "
            "K = 0 was selected, so it is the one-channel value: how much gating the data leave "
            "room for."
        )
    else:
        intro = (
            "Effect size: the fraction of the target's held-out variance that max(K, 1) "
            "channels explain beyond the additive model, mean over the 5 trial-blocked folds, "
            f"with a 95% interval from {args.effect_boot} whole-trial bootstraps (`tests.csv` "
            "columns `effect_*`)."
        )
    power_text = None
    if len(power):
        power_text = (
            tools.power_method_text(args, args.n_perm, "target (split 0)")
            + " The planted data sets keep the session's trials, grating directions and "
            "modulator time courses (permuted among trials of the same direction); their "
            "test's null permutes them again, as the real test's does. Modulator set: "
            f"{', '.join(dict.fromkeys(power.modulators))} (one "
            "power analysis per session fits the time budget; the other modulator sets' "
            "MDEs were not measured)."
        )
    lines = report.effect_section(
        real, power, LABELS, intro=intro, power_text=power_text,
        holm=("p_holm_set", "p (Holm, set)"),
    )  # fmt: skip
    return lines + report.effect_range(real) + report.sentences(real, LABELS)


def asymmetry_section(asym):
    intro = (
        report.ASYMMETRY_METHOD + "), with the equivalence test of stable target patterns "
        "(private target below 0.1). It is defined only where the modulation test rejects at "
        "0.05 with a channel selected; elsewhere it is undefined and no p-value is given "
        "(`asymmetry.csv`, column `status`)."
    )
    undefined = (
        f"Undefined in all {len(asym)} real tests: no modulation test rejected with a "
        "channel selected, so there is no gating whose sides could be compared."
    )
    return report.asymmetry_section(asym, LABELS, intro=intro, undefined=undefined)


def split_section(states, args):
    lines = report.split_section(
        states,
        [("session", "session"), ("state", "state")],
        title="Split-by-state RRR on the same sessions",
        state="pupil (or running speed)",
        note=" Same sessions and split 0 of the neurons as the mics tests.",
        n_trials=128,
        empty="Not run (no pupil or running test).",
    )
    return lines + (report.split_counts(states, "state") if len(states) else [])


def report_only(parser, argv, out):
    """``README.md`` rebuilt from the tables in ``out``, with the settings of their run."""
    names = ("sessions", "tests", "splits", "decomposition", "summary", "asymmetry", "power",
             "split_by_state")  # fmt: skip
    args, run, tables = tools.report_inputs(parser, argv, out, names)
    tests = tables["tests"]
    control = tests[tests.analysis == "control"]
    args.n_available = len(mics.datasets.PARK2024_SESSIONS)
    args.n_donors = (
        int(control.groupby(["session", "modulators"]).size().max()) if len(control) else 0
    )
    args.modulators = list(dict.fromkeys(tests.modulators))
    readme(
        out, tables["sessions"], tests, tables["splits"], tables["decomposition"],
        tables["summary"], args, run["seconds"], tables["asymmetry"], tables["power"],
        tables["split_by_state"], {},
    )  # fmt: skip
    print(f"wrote {out / 'README.md'}")


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sessions", type=int, default=None, help="first N sessions only")
    parser.add_argument("--n-perm", type=int, default=499)
    parser.add_argument("--control-perm", type=int, default=39)
    parser.add_argument(
        "--control-stop",
        type=int,
        default=2,
        help="stop a control's test after this many null statistics reach the observed one "
        "(2 with 39 permutations: every decision at 0.05 is the full test's)",
    )
    parser.add_argument(
        "--control-donors",
        type=int,
        default=None,
        help="other sessions whose modulator each session borrows (default: all)",
    )
    parser.add_argument("--n-boot", type=int, default=50)
    parser.add_argument(
        "--effect-boot", type=int, default=50, help="trial bootstraps of the effect size"
    )
    parser.add_argument(
        "--power-modulators",
        nargs="*",
        choices=list(MODULATORS),
        default=["pupil"],
        help="modulator sets whose tests get a power analysis per session",
    )
    parser.add_argument(
        "--power-strengths", type=float, nargs="+", default=[0.0008, 0.002, 0.005, 0.0125]
    )
    parser.add_argument("--power-sims", type=int, default=10, help="data sets per strength")
    parser.add_argument("--power-perm", type=int, default=39)
    parser.add_argument(
        "--split-perm",
        type=int,
        default=99,
        help="trial permutations of the split-by-state comparison (the first of the test's)",
    )
    parser.add_argument("--n-splits", type=int, default=5)
    parser.add_argument(
        "--modulators", nargs="+", choices=list(MODULATORS), default=list(MODULATORS)
    )
    parser.add_argument("--n-jobs", type=int, default=2)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--channel-search",
        choices=["grid", "sequential"],
        default=tools.CHEAP["channel_search"],
        help="channel counts scored by every fit (the committed tables: grid)",
    )
    parser.add_argument("--out", default=str(tools.ROOT / "results" / "park2024"))
    parser.add_argument(
        "--report-only", action="store_true", help="rebuild README.md from the tables in --out"
    )
    args = parser.parse_args(argv)
    if args.report_only:
        return report_only(parser, argv, Path(args.out))
    args.cached = 0  # tests read from the cache of an earlier run (not re-timed)
    if args.sessions is not None and args.sessions < 1:
        parser.error("--sessions must be >= 1")
    # The capped fits warn about convergence in every worker process.
    os.environ.setdefault("PYTHONWARNINGS", "ignore")
    t0 = time.perf_counter()
    run = tools.RunRecord(__file__, argv, seeds=f"{args.seed} (splits, permutations, bootstraps)")
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    # The controls of session i borrow the modulators of sessions i + 1, i + 2,
    # ... among all sessions, so `--sessions N` runs the same tests as the
    # first N of a full run.
    donors = load_sessions()
    sessions = donors[: args.sessions]
    args.n_available = len(donors)
    n_donors = len(donors) - 1 if args.control_donors is None else args.control_donors
    if not 0 <= n_donors < len(donors):
        parser.error(f"--control-donors must be in 0..{len(donors) - 1}")
    args.n_donors = n_donors
    # Modulator-set major: an interrupted run leaves whole sets finished in the cache.
    jobs = [
        (sess, donor, modset, n_perm, stop)
        for modset in args.modulators
        for i, sess in enumerate(sessions)
        for donor, n_perm, stop in [(sess, args.n_perm, None)]
        + [
            (donors[(i + j) % len(donors)], args.control_perm, args.control_stop)
            for j in range(1, n_donors + 1)
        ]
    ]
    rows, nulls, decomp, extras = [], {}, [], {}
    # Each finished test is kept in out/cache, so an interrupted study resumes
    # where it stopped (and `--sessions N` can summarise the first N sessions).
    cache = out / "cache"
    cache.mkdir(exist_ok=True)
    for sess, donor, modset, n_perm, stop in tqdm(jobs, desc="tests (session x modulators)"):
        n_effect = args.effect_boot if donor is sess else 0
        key = (
            f"{sess['session']}_{donor['session']}_{modset}_{n_perm}_{stop}_{args.n_boot}_"
            f"{args.seed}_e{n_effect}"
        )
        if args.channel_search != "grid":  # the grid runs' cache keys predate the option
            key += f"_{args.channel_search}"
        path = cache / f"{key}.pkl"
        if path.exists():
            row, null, dec, extra = pd.read_pickle(path)
            args.cached += 1
        else:
            row, null, dec, extra = run_test(
                sess,
                donor,
                modset,
                n_perm,
                args.n_boot,
                args.n_jobs,
                args.seed,
                stop,
                args.channel_search,
                n_effect,
            )
            pd.to_pickle((row, null, dec, extra), path)
        rows.append(row)
        nulls[(row["session"], modset, row["modulator_session"])] = null
        decomp += dec
        if extra:
            extras[(row["session"], modset)] = extra
    tests = pd.DataFrame(rows)
    real = tests.analysis == "real"
    tests["p_holm_set"] = np.nan
    for modset in args.modulators:
        sel = real & (tests.modulators == modset)
        tests.loc[sel, "p_holm_set"] = tools.holm(tests.loc[sel, "p_value"])
    tests["p_holm_all"] = np.nan
    tests.loc[real, "p_holm_all"] = tools.holm(tests.loc[real, "p_value"])
    splits = split_statistics(
        sessions, args.modulators, args.n_splits, args.seed, args.channel_search
    )
    decomp = pd.DataFrame(decomp)
    asym = asymmetry_table(tests, extras)
    power, powers = run_power(sessions, tests, args, cache)
    states = run_split_by_state(sessions, extras, args, cache)
    tests["sentence"] = ""
    for i, row in tests[real].iterrows():
        test = extras[(row.session, row.modulators)]["test"]
        tests.loc[i, "sentence"] = test.summary(
            power=powers.get((row.session, row.modulators)), alpha=ALPHA
        )
    summary = summarize(tests, nulls, asym, power, states)
    tests.to_csv(out / "tests.csv", index=False)
    splits.to_csv(out / "splits.csv", index=False)
    decomp.to_csv(out / "decomposition.csv", index=False)
    asym.to_csv(out / "asymmetry.csv", index=False)
    power.to_csv(out / "power.csv", index=False)
    states.to_csv(out / "split_by_state.csv", index=False)
    summary.to_csv(out / "summary.csv", index=False)
    figure(tests, decomp, power, out / "park2024.png")
    seconds = time.perf_counter() - t0
    info = pd.DataFrame(
        [
            dict(
                session=x["session"],
                n_neurons=x["activity"].shape[1],
                n_trials=len(np.unique(x["trial"])),
                n_samples=len(x["trial"]),
                fraction_speed_nonzero=float(np.mean(x["modulators"].speed > 0)),
                speed_sd=float(x["modulators"].speed.std()),
                pupil_sd=float(x["modulators"].pupil.std()),
            )
            for x in sessions
        ]
    )
    info.to_csv(out / "sessions.csv", index=False)
    args.time_note = tools.run_time_note(cache, seconds, args.cached, len(tests))
    run.finish(out, cached=args.cached, time_note=args.time_note)
    readme(out, info, tests, splits, decomp, summary, args, seconds, asym, power, states, extras)
    print(summary.to_string(index=False))
    print(f"run time {seconds:.0f} s ({seconds / 60:.1f} min); wrote {out}")
    return tests, splits, decomp, summary


if __name__ == "__main__":
    main()
