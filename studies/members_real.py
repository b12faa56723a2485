"""Which neurons interact, on real recordings: member lists at a false-discovery rate,
sparse members and their stability, against permuted-modulator controls.

Issues 33 (part 6) and 48. The member analyses of ``docs/guide/members.md`` on
the two recordings the studies already test for gating:

- **Semedo et al. 2019 sample** (400 trials x 10 bins): V1 source (79
  neurons) -> V2 target (31), the 31 held-out V1 neurons as a multivariate
  modulator. Rank and channel count are those of
  ``studies/semedo2019_third_population.py`` (``results/semedo2019/tests.csv``,
  the test with the held-out neurons); where its selection kept K = 0 the
  analysis fits K = 1 and says it is **exploratory**.
- **Park et al. 2024** (128 trials x 49 samples per session): the sessions
  where ``studies/park2024_state_gating.py`` found a channel (selected
  K >= 1 and p <= 0.05 after Holm within its modulator set,
  ``results/park2024/tests.csv``); where there is none, the test with the
  smallest p-value, fitted with K = 1 as an **exploratory** fit. The study's
  source/target split 0 and condition-mean residuals.

Per recording:

0. **Member lists at a false-discovery rate** (issue 48):
   ``mics.member_neurons`` on the dense ``MICs(rank, n_channels=K)`` fit,
   with the trials as clusters (``groups``), at FDR 0.1 and 0.2
   (Benjamini-Yekutieli, the package's default; Benjamini-Hochberg beside
   it), and the same on ``--n-fdr-controls`` fits whose modulator's trials
   are permuted (as in step 3): how many members each recording yields,
   and how many a modulator that cannot gate yields.
1. ``mics.workflows.choose_sparsity`` on the study's trial-blocked folds
   (``cv=5``, whole trials) over :data:`GRID`: the one-SEM rule towards
   sparser fits, paired over folds. An empty channel (every neuron zeroed)
   is the K = 0 model, so a chosen sparsity with a non-empty channel says
   that a sparse channel predicts held-out trials better than none.
2. ``MICs(rank, n_channels=K, sparsity=s)`` on all data, then
   ``mics.stability_selection`` with ``--n-boot`` subsamples of half the
   trials, drawn without replacement (``groups`` = trial ids), at the
   package's threshold (0.6) and its
   Meinshausen-Buhlmann bound on the expected false members
   (``expected_false``); ``mics.workflows.member_table`` lists the members.
3. **Negative control**: the same analysis with the modulator's trials
   permuted (``mics.data.folds.trial_permutation_indices``: among all
   trials for Semedo, within grating direction for Park), ``--n-controls``
   fixed permutations. Each control chooses its own sparsity (the same
   analysis end to end; its frequencies are computed when its channel
   survives) *and* is run at the real data's sparsity (the same penalty, the
   stricter comparison of frequencies), ``--n-boot-control`` subsamples each.
   Permuting the trials
   keeps every neuron's statistics and destroys the same-trial gating, so
   no neuron should be stably selected.

Where a full-data fit has an empty channel, ``stability_selection`` refuses
it (the model without channels has no members, and an empty pattern gives
the resamples nothing to be aligned to). For the exploratory look the
frequencies are then counted directly from the same kind of half-trial
refits (one channel needs no alignment); ``frequency_method`` says which was
used.

Writes ``results/members_real/``: ``fdr_summary.csv`` (one row per recording,
analysis, rate and method), ``fdr_members.csv`` (the members at FDR 0.1 and
0.2, with p- and q-values), ``fdr_members.png`` (their loadings);
``summary.csv``/``.md`` (one row per sparse analysis), ``members.csv``/``.md``
(the stability member tables), ``frequencies.csv`` (every neuron of every
analysis), ``sparsity_path.csv``, ``semedo_members.png``, ``frequencies.png``
and ``README.md``. Nothing is cached. Neither recording comes with the
neurons' places on the field of view (the Semedo sample is a Utah array
without electrode positions, the Park files hold traces only), so the
member figures are drawn over the neuron index, not on a field of view.

Usage::

    python studies/members_real.py                      # full run (see README for time)
    python studies/members_real.py --n-boot 8 --n-boot-control 8 --n-controls 1 \
        --grid 2 1 0 --out /tmp/members                 # smoke run
"""

from __future__ import annotations

import argparse
import os
import time
import warnings
from pathlib import Path

import numpy as np
import pandas as pd
import xarray as xr
from joblib import Parallel, delayed
from sklearn.base import clone
from threadpoolctl import threadpool_limits

import mics
import mics.datasets
from mics.data.folds import check_groups, trial_permutation_indices, trial_subsample_indices
from mics.workflows import choose_sparsity, member_table, stability_selection

try:  # run as a script (studies/ on sys.path) or imported as a package module
    import park2024_state_gating as park
    import study_tools as tools
except ImportError:  # pragma: no cover
    from studies import park2024_state_gating as park
    from studies import study_tools as tools

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "results" / "members_real"
ROLES = ("source", "target", "modulator")
ALPHA = 0.05
THRESHOLD = 0.6  # the package's default stability threshold
N_TRIALS_SEMEDO, N_BINS_SEMEDO = 400, 10
NOT_RUN = "not run (empty channel: no members)"  # frequency_method without a bootstrap
SEMEDO_MODULATOR = "V1 held-out neurons"  # the row of results/semedo2019/tests.csv
#: Sparsity candidates, largest first: on the Semedo sample every value >= 2
#: zeroes the channel (the K = 0 model), so the grid is finer below 2; 4 and 8
#: reach the weights at which the Park session's channel empties.
GRID = (8.0, 4.0, 2.0, 1.5, 1.25, 1.0, 0.75, 0.5, 0.0)
#: One start (the studies' capped estimator) but the default tolerance and
#: sweeps: a capped sparse fit (tol 1e-5, 50 sweeps) changed which borderline
#: neurons were non-zero on the Semedo sample (23 against 24 source neurons).
ESTIMATOR = dict(cv=5, n_init=1, verbose=0)


# ----------------------------------------------------------------------------- designs
def _baseline_rank(row):
    """The recording's own baseline rank (the study's decomposition model); the rank the
    test selected is that of its reduced target, with the communication regressed out."""
    rank = row.get("baseline_rank", np.nan)
    return int(rank) if pd.notna(rank) else int(row["rank"])


def semedo_design(tests_csv=ROOT / "results" / "semedo2019" / "tests.csv"):
    """Baseline rank, selected K and p-value of the Semedo study's test (held-out neurons)."""
    tests = pd.read_csv(tests_csv)
    row = tests[(tests.analysis == "real") & (tests.modulator == SEMEDO_MODULATOR)].iloc[0]
    return dict(
        dataset="semedo2019",
        recording="Semedo 2019 sample",
        modulator=SEMEDO_MODULATOR,
        rank=_baseline_rank(row),
        selected_k=int(row.n_channels),
        p_value=float(row.p_value),
        p_holm=np.nan,
    )


def park_designs(tests_csv=ROOT / "results" / "park2024" / "tests.csv"):
    """The Park tests with a channel found; the smallest p-value as exploratory when none.

    Returns
    -------
    designs : list of dict
    found : bool
        Whether any test selected K >= 1 and was significant after Holm.
    """
    tests = pd.read_csv(tests_csv)
    real = tests[tests.analysis == "real"].reset_index(drop=True)
    hits = real[(real.n_channels > 0) & (real.p_holm_set <= ALPHA)]
    found = len(hits) > 0
    rows = hits if found else real.iloc[[int(np.argmin(real.p_value.values))]]
    designs = [
        dict(
            dataset="park2024",
            recording=r.session,
            modulator=r.modulators,
            rank=_baseline_rank(r._asdict()),
            selected_k=int(r.n_channels),
            p_value=float(r.p_value),
            p_holm=float(r.p_holm_set),
        )
        for r in rows.itertuples()
    ]
    return designs, found


# ----------------------------------------------------------------------------- data
def load_semedo():
    """Labelled V1 source, V2 and held-out V1 (time, neuron), trial codes, no conditions."""
    ds = mics.datasets.semedo2019()
    X, Y, _ = mics.io.build_inputs(ds, source={"population": "V1 source"},
                                   target={"population": "V2"})  # fmt: skip
    _, Z, _ = mics.io.build_inputs(ds, source={"population": "V1 source"},
                                   target={"population": "V1 held-out"})  # fmt: skip
    if X.sizes["time"] != N_TRIALS_SEMEDO * N_BINS_SEMEDO:
        raise ValueError(f"expected {N_TRIALS_SEMEDO} trials x {N_BINS_SEMEDO} bins.")
    codes = np.repeat(np.arange(N_TRIALS_SEMEDO), N_BINS_SEMEDO)
    return X, Y, Z, codes, None


def load_park(session, modset):
    """The Park study's split 0 of one session as labelled arrays, trial codes, directions."""
    ds = mics.datasets.park2024(session)
    resid = mics.preprocessing.subtract_condition_means(ds["activity"], "direction")
    n = resid.sizes["neuron"]
    # park.split draws the halves from this same generator; the check below
    # guarantees the neurons are those of the study's tests.
    order = np.random.default_rng(0).permutation(n)
    src, tgt = np.sort(order[: n // 2]), np.sort(order[n // 2 :])
    X0, Y0 = park.split(np.asarray(resid.values, dtype=float), 0)
    X, Y = resid.isel(neuron=src), resid.isel(neuron=tgt)
    if not (np.array_equal(X.values, X0) and np.array_equal(Y.values, Y0)):
        raise RuntimeError("the neurons differ from the Park study's split 0.")
    names = park.MODULATORS[modset]
    Z = xr.DataArray(
        np.column_stack([ds[v].values for v in names]),
        dims=("time", "modulator"),
        coords={"time": ds.time.values, "modulator": names},
    )
    X = X.drop_vars([c for c in X.coords if c not in ("time", "neuron")])
    Y = Y.drop_vars([c for c in Y.coords if c not in ("time", "neuron")])
    return X, Y, Z, check_groups(ds.trial.values, ds.sizes["time"]), ds.direction.values


def permuted(Z, codes, conditions, seed):
    """The modulator with its trials permuted (within condition), each trial's time course kept."""
    idx = trial_permutation_indices(codes, np.random.RandomState(seed), conditions)
    return Z.copy(data=np.asarray(Z.values)[idx])


# ----------------------------------------------------------------------------- analysis
def _quiet(fn, *args, **kwargs):
    """Run with one BLAS thread per process and without the capped/empty-channel warnings."""
    with warnings.catch_warnings(), threadpool_limits(1):
        warnings.simplefilter("ignore")
        return fn(*args, **kwargs)


def _refit_selected(model, X, Y, Z, codes, seed):
    """Neurons with a non-zero weight in one refit on half the trials (K = 1)."""
    idx, new_codes = trial_subsample_indices(codes, np.random.RandomState(seed))
    fit = _quiet(
        clone(model).set_params(random_state=int(seed)).fit,
        X.values[idx], Y.values[idx], Z.values[idx], groups=new_codes,
    )  # fmt: skip
    return {r: np.asarray(getattr(fit, f"{r}_patterns_"))[:, 0] != 0 for r in ROLES}


def refit_frequencies(model, X, Y, Z, codes, n_boot, n_jobs, seed):
    """Selection frequencies counted from refits on half the trials (one channel).

    Used where the full-data fit's channel is empty, which
    :func:`mics.stability_selection` refuses (no pattern to align the
    resamples to); the subsamples are those it draws.

    Returns
    -------
    xarray.Dataset
        The variables of :func:`mics.stability_selection` that the tables use.
    """
    seeds = np.random.RandomState(seed).randint(np.iinfo(np.int32).max, size=n_boot)
    draws = Parallel(n_jobs=n_jobs)(
        delayed(_refit_selected)(model, X, Y, Z, codes, s) for s in seeds
    )
    ds = xr.Dataset(attrs={"threshold": THRESHOLD, "n_boot": n_boot, "resampling": "trial-half"})
    for role, arr in (("source", X), ("target", Y), ("modulator", Z)):
        selected = np.stack([d[role] for d in draws])[:, :, None]  # (boot, n, 1)
        freq = selected.mean(axis=0)
        q_hat = selected.sum(axis=1).mean(axis=0)
        coords = {role: np.asarray(arr[arr.dims[1]].values), "channel": [0]}
        pattern = np.asarray(getattr(model, f"{role}_patterns_"))
        for name, values in (("frequency", freq), ("members", freq >= THRESHOLD),
                             ("pattern", pattern)):  # fmt: skip
            ds[f"{role}_{name}"] = xr.DataArray(values, dims=(role, "channel"), coords=coords)
        n = freq.shape[0]
        ds[f"{role}_mean_selected"] = ("channel", q_hat)
        ds[f"{role}_n_members"] = ("channel", (freq >= THRESHOLD).sum(axis=0))
        ds[f"{role}_expected_false"] = ("channel", q_hat**2 / ((2 * THRESHOLD - 1) * n))
    return ds


def _empty(model):
    """Whether the penalty zeroed the (first) channel: the K = 0 model."""
    return not np.any(np.asarray(model.source_patterns_))


def frequencies(model, X, Y, Z, codes, n_boot, args, seed):
    """Stability selection of a fitted sparse model; ``(dataset, method)``."""
    if _empty(model):
        return refit_frequencies(model, X, Y, Z, codes, n_boot, args.n_jobs, seed), "refits"
    res = _quiet(
        stability_selection, model, X, Y, Z, groups=codes, n_boot=n_boot,
        threshold=THRESHOLD, n_jobs=args.n_jobs, verbose=0, random_state=seed,
    )  # fmt: skip
    return res, "stability_selection"


def sparsity_path(design, X, Y, Z, codes, args, analysis):
    """choose_sparsity over the grid.

    Returns
    -------
    s_rule : float
        The package's choice (its one-SEM rule towards sparser fits).
    s_min : float
        The candidate with the lowest mean held-out loss (among ties the
        sparsest), the rule an exploratory look may use instead.
    rows : list of dict
        One per candidate: mean and SEM of the held-out loss.
    """
    est = mics.MICs(rank=design["rank"], n_channels=design["k"], random_state=args.seed,
                    **ESTIMATOR)  # fmt: skip
    path = _quiet(choose_sparsity, est, X, Y, Z, grid=args.grid, groups=codes,
                  n_jobs=args.n_jobs)  # fmt: skip
    # candidates run from the sparsest, so argmin takes the sparsest of tied losses
    i_min = int(np.argmin(path["mean_loss"]))
    rows = [
        dict(
            dataset=design["dataset"],
            recording=design["recording"],
            analysis=analysis,
            sparsity=float(s),
            mean_loss=float(m),
            sem_loss=float(e),
            chosen=i == path["best_index"],
            minimum=i == i_min,
        )  # fmt: skip
        for i, (s, m, e) in enumerate(
            zip(path["sparsity"], path["mean_loss"], path["sem_loss"], strict=True)
        )
    ]
    return float(path["sparsity_"]), float(path["sparsity"][i_min]), rows


def member_analysis(design, X, Y, Z, codes, sparsity, n_boot, args, analysis, which, seed):
    """Sparse fit at ``sparsity`` and its selection frequencies; summary row and tables.

    With ``n_boot=0`` only the full-data fit is summarised (no frequencies).
    """
    est = mics.MICs(rank=design["rank"], n_channels=design["k"], sparsity=sparsity,
                    random_state=args.seed, **ESTIMATOR)  # fmt: skip
    model = _quiet(est.fit, X, Y, Z, groups=codes)
    if n_boot:
        res, method = frequencies(model, X, Y, Z, codes, n_boot, args, seed)
    else:
        res, method = None, NOT_RUN
    keys = dict(dataset=design["dataset"], recording=design["recording"],
                modulator=design["modulator"], analysis=analysis, sparsity_from=which,
                sparsity=float(sparsity))  # fmt: skip
    row = dict(
        **keys,
        rank=design["rank"],
        n_channels=design["k"],
        k_label=design["k_label"],
        channel_weight=float(np.asarray(model.channel_weights_)[0]),
        frequency_method=method,
        n_boot=n_boot,
    )
    freq_rows = []
    for role in ROLES:
        P = np.asarray(getattr(model, f"{role}_patterns_"))[:, 0]
        row[f"{role}_n"] = P.size
        row[f"{role}_nonzero"] = int(np.sum(P != 0))
        if res is None:
            continue
        f = np.asarray(res[f"{role}_frequency"])[:, 0]
        row[f"{role}_q_hat"] = float(res[f"{role}_mean_selected"][0])
        row[f"{role}_members"] = int(res[f"{role}_n_members"][0])
        row[f"{role}_expected_false"] = float(res[f"{role}_expected_false"][0])
        row[f"{role}_max_frequency"] = float(f.max())
        labels = res[f"{role}_frequency"].coords[role].values
        freq_rows += [
            dict(
                **keys,
                role=role,
                neuron=str(n),
                frequency=float(fi),
                weight=float(w),
                member=bool(fi >= THRESHOLD),
            )  # fmt: skip
            for n, fi, w in zip(labels, f, P, strict=True)
        ]
    members = member_table(res) if res is not None else pd.DataFrame()
    members.insert(0, "analysis", analysis)
    members.insert(0, "recording", design["recording"])
    members.insert(0, "dataset", design["dataset"])
    return row, freq_rows, members, model, res


def own_analysis(design, X, Y, Z, codes, n_boot, args, analysis, seed):
    """choose_sparsity, then the members at its one-SEM choice or, if that empties the
    channel, at the minimum of the path (exploratory); the same steps for real and control.

    Returns
    -------
    rows : list of (summary row, frequency rows, member table, model, stability)
    s_used : float or None
        The sparsity whose members were analysed (None: every fit was empty).
    path_rows : list of dict
    """
    s_rule, s_min, path_rows = sparsity_path(design, X, Y, Z, codes, args, analysis)
    out = []
    first = member_analysis(design, X, Y, Z, codes, s_rule, 0, args, analysis,
                            "one-SEM rule", seed)  # fmt: skip
    if not _empty(first[3]):
        out.append(member_analysis(design, X, Y, Z, codes, s_rule, n_boot, args, analysis,
                                   "one-SEM rule", seed))  # fmt: skip
        return out, s_rule, path_rows
    out.append(first)  # the package's answer: an empty channel, no members
    if s_min == s_rule:
        return out, None, path_rows
    second = member_analysis(design, X, Y, Z, codes, s_min, 0, args, analysis,
                             "CV minimum (exploratory)", seed)  # fmt: skip
    if _empty(second[3]):
        out.append(second)
        return out, None, path_rows
    out.append(member_analysis(design, X, Y, Z, codes, s_min, n_boot, args, analysis,
                               "CV minimum (exploratory)", seed))  # fmt: skip
    return out, s_min, path_rows


def run_recording(design, data, args):
    """Real data and the permuted-modulator controls of one recording."""
    X, Y, Z, codes, conditions = data
    design = dict(design)
    design["k"] = max(design["selected_k"], 1)
    design["k_label"] = (
        f"selected K = {design['selected_k']}"
        if design["selected_k"] > 0
        else "exploratory K = 1 (the study's selection kept K = 0)"
    )
    summary, freqs, members, paths = [], [], [], []

    def keep(results):
        for row, f, m, _, _ in results:
            summary.append(row)
            freqs.extend(f)
            members.append(m)

    t0 = time.perf_counter()
    results, s_real, rows = own_analysis(design, X, Y, Z, codes, args.n_boot, args, "real",
                                         args.seed)  # fmt: skip
    paths += rows
    keep(results)
    row, _, _, model, res = results[-1]
    real = dict(model=model, stability=res, sparsity=s_real, which=row["sparsity_from"])
    print(f"{design['recording']}: real, members at sparsity {s_real} "
          f"({time.perf_counter() - t0:.0f} s)", flush=True)  # fmt: skip
    for c in range(args.n_controls):
        t0 = time.perf_counter()
        name = f"control {c + 1}"
        Zc = permuted(Z, codes, conditions, seed=1000 + c)
        seed = args.seed + 1 + c
        results, s_own, rows = own_analysis(design, X, Y, Zc, codes, args.n_boot_control, args,
                                            name, seed)  # fmt: skip
        paths += rows
        keep(results)
        # the stricter comparison: the real data's penalty, only the gating destroyed
        if s_real is not None and s_own != s_real:
            keep([member_analysis(design, X, Y, Zc, codes, s_real, args.n_boot_control, args,
                                  name, "real's", seed)])  # fmt: skip
        print(f"{design['recording']}: {name}, own members at sparsity {s_own} "
              f"({time.perf_counter() - t0:.0f} s)", flush=True)  # fmt: skip
    return summary, freqs, members, paths, real


# ----------------------------------------------------------------------------- FDR lists
FDR_RATES = (0.1, 0.2)


def fdr_lists(design, X, Y, Z, codes, args, analysis, seed):
    """``mics.member_neurons`` at FDR 0.1 and 0.2 (BY and BH) on one data set.

    Returns
    -------
    rows : list of dict
        One per rate and method: the channel test and the number of members.
    table : pandas.DataFrame
        The members at every rate and method.
    model, result
        The dense fit and the ``member_neurons`` result (BY, FDR 0.1).
    """
    est = mics.MICs(rank=design["rank"], n_channels=design["k"], random_state=args.seed,
                    **ESTIMATOR)  # fmt: skip
    model = _quiet(est.fit, X, Y, Z, groups=codes)
    res = _quiet(mics.member_neurons, model, X, Y, Z, groups=codes, fdr=FDR_RATES[0],
                 n_jobs=args.n_jobs, verbose=0, random_state=seed)  # fmt: skip
    rows, tables = [], []
    for method in ("by", "bh"):
        for rate in FDR_RATES:
            r = res.at(rate, method)
            row = dict(dataset=design["dataset"], recording=design["recording"],
                       modulator=design["modulator"], analysis=analysis, fdr=rate,
                       method=method, rank=design["rank"], n_channels=design["k"],
                       k_label=design["k_label"],
                       channel_p=float(r["channel_p_value"][0]),
                       channel_named=bool(r["channel_named"][0]),
                       autocorrelation=float(r["channel_autocorrelation"][0]),
                       n_trials=int(r.attrs["n_clusters"]),
                       controls=r.attrs["controls"])  # fmt: skip
            for role in ROLES:
                row[f"{role}_n"] = int(r.dataset.sizes[role])
                row[f"{role}_members"] = int(r[f"{role}_n_members"][0])
                row[f"{role}_min_q"] = float(np.nanmin(np.asarray(r[f"{role}_q_value"])))
            rows.append(row)
            t = r.table()
            t.insert(0, "method", method)
            t.insert(0, "fdr", rate)
            t.insert(0, "analysis", analysis)
            t.insert(0, "recording", design["recording"])
            tables.append(t)
    return rows, pd.concat(tables, ignore_index=True), model, res


def fdr_recording(design, data, args):
    """FDR lists of the real data and of ``args.n_fdr_controls`` permuted-modulator controls."""
    X, Y, Z, codes, conditions = data
    design = dict(design)
    design["k"] = max(design["selected_k"], 1)
    design["k_label"] = (
        f"selected K = {design['selected_k']}"
        if design["selected_k"] > 0
        else "exploratory K = 1 (the study's selection kept K = 0)"
    )
    t0 = time.perf_counter()
    rows, table, model, res = fdr_lists(design, X, Y, Z, codes, args, "real", args.seed)
    tables = [table]
    for c in range(args.n_fdr_controls):
        Zc = permuted(Z, codes, conditions, seed=1000 + c)
        r, t, _, _ = fdr_lists(design, X, Y, Zc, codes, args, f"control {c + 1}",
                               args.seed + 1 + c)  # fmt: skip
        rows += r
        tables.append(t)
    print(f"{design['recording']}: FDR lists, real and {args.n_fdr_controls} controls "
          f"({time.perf_counter() - t0:.0f} s)", flush=True)  # fmt: skip
    return rows, pd.concat(tables, ignore_index=True), dict(model=model, result=res,
                                                            design=design)  # fmt: skip


def fdr_figure(fits, path):
    """Loadings of every recording's dense fit, members at FDR 0.1 (BY) in red."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from mics.plotting import plot_members

    fig = plt.figure(figsize=(13, 3.3 * len(fits)), layout="constrained")
    subfigs = np.atleast_1d(fig.subfigures(len(fits), 1))
    for sub, f in zip(subfigs, fits, strict=True):
        plot_members(f["model"], f["result"], fig=sub)
        d, res = f["design"], f["result"]
        sub.suptitle(
            f"{d['recording']} ({d['k_label']}): loadings of the dense fit; red: members at "
            f"FDR {res.fdr:g} (Benjamini-Yekutieli), channel test p = "
            f"{float(res['channel_p_value'][0]):.3g}",
            fontsize="small",
        )
    fig.savefig(path, dpi=110)
    plt.close(fig)


def _fdr_words(fdr_summary, d):
    """Brief and detailed lines of one recording's FDR lists against its controls."""
    here = fdr_summary[(fdr_summary.dataset == d["dataset"])
                       & (fdr_summary.recording == d["recording"])]  # fmt: skip
    head = "Semedo sample" if d["dataset"] == "semedo2019" else f"Park {d['recording']}"
    real = here[here.analysis == "real"]
    ctrl = here[here.analysis != "real"]
    n_ctrl = ctrl.analysis.nunique()
    parts = []
    for rate in FDR_RATES:
        r = real[(real.fdr == rate) & (real.method == "by")].iloc[0]
        c = ctrl[(ctrl.fdr == rate) & (ctrl.method == "by")]
        any_member = c[[f"{role}_members" for role in ROLES]].sum(axis=1) > 0
        parts.append(
            f"at FDR {rate:g}: "
            + ", ".join(
                f"{role} {int(r[f'{role}_members'])}/{int(r[f'{role}_n'])}" for role in ROLES
            )  # fmt: skip
            + f"; controls with any member {int(any_member.sum())}/{n_ctrl}"
        )
    r = real[(real.fdr == FDR_RATES[0]) & (real.method == "by")].iloc[0]
    c = ctrl[(ctrl.fdr == FDR_RATES[0]) & (ctrl.method == "by")]
    named = int(c.channel_named.sum())
    verdict = (
        "the channel test is significant and members are named"
        if r.channel_named
        else "the channel's cross-fitted test is not significant at 0.1, so no list is drawn"
    )
    brief = (
        f"- **{head}**, {r.k_label}: channel test p = {r.channel_p:.3g} "
        f"({r.n_trials} trials as clusters): {verdict}. Members (Benjamini-Yekutieli) "
        + "; ".join(parts)
        + f". Permuted-modulator controls: channel test significant at 0.1 in "
        f"{named}/{n_ctrl}, p from {c.channel_p.min():.3g} to {c.channel_p.max():.3g}."
    )
    bh = real[real.method == "bh"]
    detail = (
        f"- {head}: with Benjamini-Hochberg (valid for positively dependent p-values only) "
        + "; ".join(
            f"FDR {row.fdr:g}: "
            + ", ".join(f"{role} {int(row[f'{role}_members'])}" for role in ROLES)
            for _, row in bh.iterrows()
        )
        + ". Smallest q-value per role (BY; "
        + (
            ""
            if r.channel_named
            else "not a claim while the channel test is not significant: "
            "the member tests pool the folds, which is valid only where the channel is real; "
        )
        + ", ".join(f"{role} {r[f'{role}_min_q']:.3g}" for role in ROLES)
        + ")"
        + f"; lag-1 autocorrelation used to prewhiten {r.autocorrelation:.2f}."
    )
    return brief, detail


# ----------------------------------------------------------------------------- outputs
def frequency_figure(freqs, path):
    """Sorted selection frequencies per role: the real data against the controls."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    recs = list(dict.fromkeys(zip(freqs.dataset, freqs.recording, strict=True)))
    fig, axes = plt.subplots(len(recs), 3, figsize=(12, 3.2 * len(recs)), squeeze=False,
                             layout="constrained")  # fmt: skip
    for i, (dataset, recording) in enumerate(recs):
        sub = freqs[(freqs.dataset == dataset) & (freqs.recording == recording)]
        if not np.any(sub.analysis == "real"):
            axes[i, 0].set_title(f"{recording}: every real fit empty, no frequencies")
            continue
        s_real = float(sub[sub.analysis == "real"].sparsity.iloc[0])
        for j, role in enumerate(ROLES):
            ax = axes[i, j]
            r = sub[sub.role == role]
            for (analysis, which), g in r.groupby(["analysis", "sparsity_from"], sort=False):
                f = np.sort(g.frequency.values)[::-1]
                x = np.arange(1, f.size + 1)
                if analysis == "real":
                    ax.plot(x, f, "o-", color="C3", ms=3, lw=1.5, label=f"real (s = {s_real:g})")
                elif which == "real's" or float(g.sparsity.iloc[0]) == s_real:
                    ax.plot(x, f, ".-", color="0.3", lw=0.9, ms=4, alpha=0.8,
                            label=f"controls at s = {s_real:g}")  # fmt: skip
                else:
                    ax.plot(x, f, ".--", color="C0", lw=0.8, ms=4, alpha=0.8,
                            label="controls at their own CV sparsity")  # fmt: skip
            ax.axhline(THRESHOLD, color="k", ls=":", lw=0.8)
            ax.set_ylim(-0.03, 1.03)
            n = r.neuron.nunique()
            what = "neurons" if role != "modulator" or n > 3 else "variables"
            ax.set_xlabel(f"{role} {what}, sorted by frequency")
            title = f"{recording}: {role}"
            if n <= 3:  # a behavioural modulator: one or two variables, ticks at each
                ax.set_xticks(np.arange(1, n + 1))
                ax.set_xlim(0.5, n + 0.5)
            if role == "modulator" and n == 1:
                title += f" ({r.neuron.iloc[0]}: not penalised)"
            ax.set_title(title, fontsize="small")
            if j == 0:
                ax.set_ylabel("selection frequency")
            handles, labels = ax.get_legend_handles_labels()
            keep = dict(zip(labels, handles, strict=True))
            ax.legend(keep.values(), keep.keys(), fontsize="x-small")
    fig.savefig(path, dpi=110)
    plt.close(fig)


def members_figure(real, path):
    """``mics.plotting.plot_members`` of the Semedo fit with its stability selection."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from mics.plotting import plot_members

    fig = plot_members(real["model"], real["stability"])
    fig.set_size_inches(13, 3.6)
    fig.suptitle(
        f"Semedo sample, exploratory: K = 1 at sparsity {real['sparsity']:g} "
        f"({real['which']}); loadings of the full-data fit, red: selected in >= "
        f"{THRESHOLD:.0%} of the half-trial subsamples (a member may have loading 0 in the "
        "full fit)",
        fontsize="small",
    )
    fig.savefig(path, dpi=110)
    plt.close(fig)


def _path_words(paths, dataset, recording, analysis="real"):
    """The CV losses along the sparsity path of one analysis, as text."""
    p = paths[(paths.dataset == dataset) & (paths.recording == recording)
              & (paths.analysis == analysis)].reset_index(drop=True)  # fmt: skip
    chosen, low = p[p.chosen].iloc[0], p[p.minimum].iloc[0]
    dense = p[p.sparsity == 0].iloc[0]
    top = p.iloc[0]  # the largest sparsity
    return (
        f"held-out loss (1 - R2, mean over 5 trial-blocked folds, +- SEM) "
        f"{top.mean_loss:.5f} +- {top.sem_loss:.5f} at the largest sparsity {top.sparsity:g}, "
        f"lowest {low.mean_loss:.5f} +- {low.sem_loss:.5f} at {low.sparsity:g}, "
        f"{dense.mean_loss:.5f} +- {dense.sem_loss:.5f} for the dense channel (0); "
        f"the one-SEM rule chose {chosen.sparsity:g}"
    )


def _role_words(row, role):
    return (
        f"{role} {int(row[f'{role}_members'])}/{int(row[f'{role}_n'])} members "
        f"(largest frequency {row[f'{role}_max_frequency']:.2f}, {row[f'{role}_nonzero']} "
        f"non-zero in the full fit, q_hat {row[f'{role}_q_hat']:.1f}, bound on false members "
        f"{row[f'{role}_expected_false']:.1f})"
    )


def _verdict(above, n_members):
    """One sentence: do the real members stand above every control neuron?"""
    if all(above[r] == n_members[r] for r in ROLES) and sum(n_members.values()):
        return (
            "Every member stands above the controls: stable beside a modulator that cannot "
            "gate, though not certified by the bound."
        )
    if above["source"] == 0 and above["target"] == 0:
        return (
            "No source or target member stands above the controls: these member lists "
            "cannot be told from those of a modulator that cannot gate."
        )
    n_above, n_all = sum(above.values()), sum(n_members.values())
    return (
        f"{n_above} of {n_all} members stand above the controls, the others do not: "
        "only those are stable beside a modulator that cannot gate, and none is "
        "certified by the bound."
    )


def _fit_words(row):
    return f"sparsity {row.sparsity:g}, channel weight {row.channel_weight:.3g}" + (
        " (empty channel: the K = 0 model, no members)" if row.channel_weight == 0 else ""
    )


def readme(
    out,
    summary,
    members,
    freqs,
    paths,
    designs,
    park_found,
    args,
    seconds,
    load,
    fdr_summary=None,
    fdr_members=None,
):
    real = summary[summary.analysis == "real"]
    ctrl = summary[summary.analysis != "real"]
    lines = [
        "# Which neurons interact, on real recordings (issues 33 and 48)",
        "",
        f"Generated by `python studies/members_real.py` ({args.n_boot} half-trial subsamples "
        f"per stability selection of the real data, {args.n_boot_control} per control, "
        f"{args.n_controls} permuted-modulator controls per recording for those and "
        f"{args.n_fdr_controls} for the FDR lists per "
        f"recording, sparsity grid {', '.join(f'{g:g}' for g in args.grid)}, "
        f"n_jobs={args.n_jobs}; run time {seconds / 60:.1f} min, load average {load}). "
        "Every number below is in the CSV tables beside this file; nothing is cached.",
        "",
        "Method: `MICs(rank, n_channels=K, sparsity=s, cv=5, n_init=1)` with the rank of the "
        "recording's study. `s` is chosen by `mics.workflows.choose_sparsity` on 5 "
        "trial-blocked folds (the package's one-SEM rule towards sparser fits). A weight that "
        "empties the channel is the K = 0 model: where the rule chooses one, that is the "
        "package's answer (no members), and the members are then read, as an **exploratory** "
        "look, at the minimum of the same CV path. "
        "`mics.stability_selection` with subsamples of half the trials drawn without "
        "replacement (`groups` = trial ids), "
        f"members at frequency >= {THRESHOLD} with the Meinshausen-Buhlmann bound on the "
        "expected number of false members (`expected_false`; q_hat = neurons selected per "
        "resample); `mics.workflows.member_table`. Negative control: the modulator's trials "
        "permuted (`mics.data.folds.trial_permutation_indices`; within grating direction for "
        "Park), the same steps end to end (its own path, rule and minimum), and stability "
        "selection at the real data's sparsity (the same penalty, only the gating destroyed).",
        "",
    ]
    if fdr_summary is not None:
        words = [_fdr_words(fdr_summary, d) for d in designs]
        lines += [
            "## Member lists at a false-discovery rate (issue 48)",
            "",
            "`mics.member_neurons(MICs(rank, n_channels=K, cv=5, n_init=1).fit(...), "
            "groups=trials)`: every neuron tested with cross-fitted channel factors and "
            "trial-clustered, prewhitened regressions; members only for a channel whose own "
            "cross-fitted test is significant at the rate; lists by Benjamini-Yekutieli (valid "
            "under any dependence between neurons). Controls: "
            f"{args.n_fdr_controls} fits with the modulator's trials permuted "
            "(within grating direction for Park), the same steps end to end. "
            "`fdr_summary.csv`, `fdr_members.csv`.",
            "",
            *[w[0] for w in words],
            "",
            *[w[1] for w in words],
            "",
            "Neither recording comes with the neurons' places (the Semedo sample is a Utah "
            "array without electrode positions, the Park files hold traces only), so the "
            "members are drawn over the neuron index below; on recordings loaded with "
            "positions (`mics.io`), `mics.plotting.plot_members_fov(model, stability=result)` "
            "draws these lists on the field of view (see `results/member_fdr/fov.png` for "
            "simulated fields).",
            "",
            "![members at FDR 0.1](fdr_members.png)",
            "",
        ]
        if fdr_members is not None and len(fdr_members):
            real_members = fdr_members[(fdr_members.analysis == "real")]
            lines += [
                "Members of the real data (`fdr_members.csv`):",
                "",
                tools.markdown_table(real_members),
                "",
            ]
        lines += [
            "The sections below are the sparse fits and their stability selection "
            "(issue 33), kept for comparison: their Meinshausen-Buhlmann bounds certify no "
            "list.",
            "",
        ]
    lines += [
        "## Findings (sparse fits and stability selection)",
        "",
    ]
    brief = []
    for d in designs:
        here = (summary.dataset == d["dataset"]) & (summary.recording == d["recording"])
        r_all = real[here[real.index]]
        c = ctrl[here[ctrl.index]]
        rule = r_all[r_all.sparsity_from == "one-SEM rule"].iloc[0]
        analysed = r_all[r_all.frequency_method != NOT_RUN]
        which = (
            f"the study's test with {d['modulator']} (p = {d['p_value']:.3g}"
            + (f", Holm {d['p_holm']:.3g}" if np.isfinite(d["p_holm"]) else "")
            + f"; rank {d['rank']}, selected K = {d['selected_k']})"
        )
        head = "Semedo sample" if d["dataset"] == "semedo2019" else f"Park {d['recording']}"
        lines += [f"### {head}: {rule.k_label}", "", f"- Design: {which}."]
        lines.append(
            f"- Sparsity path: {_path_words(paths, d['dataset'], d['recording'])} "
            "(`sparsity_path.csv`)."
        )
        lines.append(f"- **The package's answer** (one-SEM rule): {_fit_words(rule)}.")
        answer = (
            "the package's one-SEM sparsity keeps no channel, so no members"
            if rule.channel_weight == 0
            else f"the package's one-SEM sparsity ({rule.sparsity:g}) keeps a channel"
        )
        if not len(analysed):
            brief.append(f"- **{head}**, {rule.k_label}: {answer}.")
            lines.append("- Even the minimum of the path empties the channel: no members to read.")
        else:
            r = analysed.iloc[-1]
            label = (
                "Members" if r.sparsity_from == "one-SEM rule" else
                "**Exploratory** members at the minimum of the CV path"
            )  # fmt: skip
            lines.append(
                f"- {label} ({_fit_words(r)}, {int(r.n_boot)} subsamples): "
                + "; ".join(_role_words(r, role) for role in ROLES)
                + "."
            )
            certified = [
                role for role in ROLES
                if r[f"{role}_members"] > 0 and r[f"{role}_expected_false"] < 1
            ]  # fmt: skip
            lines.append(
                f"- Error control (threshold {THRESHOLD}, Meinshausen-Buhlmann bound): "
                + (
                    "fewer than one expected false member for " + ", ".join(certified) + "."
                    if certified
                    else "for no role is the bound below one false member: it certifies none "
                    "of these members (where it exceeds the number of candidates it is vacuous)."
                    if any(r[f"{role}_members"] for role in ROLES)
                    else "no neuron reaches the threshold: no members."
                )
            )
            c_same = c[(c.sparsity == r.sparsity) & (c.frequency_method != NOT_RUN)]
            if len(c_same):
                mx = {role: c_same[f"{role}_max_frequency"].max() for role in ROLES}
                nm = {role: int(c_same[f"{role}_members"].max()) for role in ROLES}
                f_real = freqs[(freqs.dataset == d["dataset"])
                               & (freqs.recording == d["recording"])
                               & (freqs.analysis == "real")]  # fmt: skip
                above = {
                    role: int(np.sum(f_real[(f_real.role == role) & f_real.member].frequency
                                     > mx[role]))
                    for role in ROLES
                }  # fmt: skip
                n_ctrl = c_same.analysis.nunique()
                n_mem = {role: int(r[f"{role}_members"]) for role in ROLES}
                brief.append(
                    f"- **{head}**, {rule.k_label}: {answer}. At "
                    + ("its" if r.sparsity_from == "one-SEM rule" else "the exploratory")
                    + f" sparsity {r.sparsity:g}, members selected more often than any neuron "
                    f"of {n_ctrl} permuted-modulator controls: "
                    + ", ".join(f"{role} {above[role]}/{n_mem[role]}" for role in ROLES)
                    + " (largest control frequency "
                    + ", ".join(f"{role} {mx[role]:.2f}" for role in ROLES)
                    + "); bound on false members "
                    + ", ".join(f"{role} {r[f'{role}_expected_false']:.1f}" for role in ROLES)
                    + ". "
                    + _verdict(above, n_mem)
                )
                lines.append(
                    f"- **Negative control at the same sparsity {r.sparsity:g}** ({n_ctrl} "
                    f"trial permutations of the modulator, {int(c_same.n_boot.iloc[0])} "
                    "subsamples each): largest frequency "
                    + ", ".join(f"{role} {mx[role]:.2f}" for role in ROLES)
                    + "; most members in one control: "
                    + ", ".join(f"{role} {nm[role]}" for role in ROLES)
                    + ". Real members selected more often than any neuron of any control: "
                    + ", ".join(f"{role} {above[role]}" for role in ROLES)
                    + "."
                )
        c_rule = c[c.sparsity_from == "one-SEM rule"]
        c_min = c[c.sparsity_from == "CV minimum (exploratory)"]
        n_ctrl = c.analysis.nunique()
        lines.append(
            f"- Negative control, the same steps on its own data: the one-SEM rule emptied the "
            f"channel in {int(np.sum(c_rule.channel_weight == 0))}/{n_ctrl} controls (sparsity "
            + ", ".join(f"{v:g}" for v in c_rule.sparsity)
            + "); the minimum of the path kept a channel in "
            f"{int(np.sum(c_min.channel_weight > 0))}/{n_ctrl}"
            + (
                " (sparsity " + ", ".join(f"{v:g}" for v in c_min.sparsity) + ")"
                if len(c_min)
                else ""
            )
            + "."
        )
        lines.append("")
    at = lines.index("## Findings (sparse fits and stability selection)") + 2
    lines[at:at] = ["In brief:", "", *brief, ""]
    if not park_found:
        lines += [
            "No Park session has a channel: every test of `results/park2024/tests.csv` selected "
            "K = 0 and none is significant after Holm within its modulator set. The Park "
            "analysis above is the test with the smallest p-value, fitted with K = 1: "
            "**exploratory**, not a finding.",
            "",
        ]
    lines += [
        "## Reading",
        "",
        "- A member list is a claim only where the real data's frequencies stand above "
        "those of the controls *at the same sparsity* and the bound on false members is "
        "well below the number of members. The bound `q_hat^2 / ((2 * 0.6 - 1) p)` is "
        "informative only when few neurons are selected per resample (q_hat well below "
        "sqrt(p)).",
        "- The resamples are half of the trials, drawn without replacement, the subsamples "
        "for which Meinshausen and Buhlmann's bound holds. Whole trials drawn with "
        'replacement (`scheme="bootstrap"`) duplicate trials, so each refit selects more '
        "neurons than the full-data fit, which lifts every frequency and voids the bound.",
        "- Where a full-data fit has an empty channel, `mics.stability_selection` refuses "
        "it (the model without channels has no members); for the exploratory look those "
        "frequencies are counted here from the same half-trial refits "
        "(`frequency_method` = `refits`).",
        "- A control choosing an empty channel by CV is the analysis working as meant "
        "(no channel, no members); the stricter comparison is the control at the real "
        "data's sparsity, where the penalty is the same and only the gating is destroyed.",
        "",
        "## Limits",
        "",
        "- One sample recording for Semedo, and Park sessions in which no channel was "
        "detected: the fits with K = 1 are exploratory wherever the study kept K = 0.",
        "- The Semedo modulator (held-out V1) is simultaneous with and correlated to the "
        "source (V1): a member of its modulator pattern is a neuron whose same-trial "
        "activity shapes the fitted product term, which may also stand for a nonlinear "
        "V1 -> V2 mapping (see results/semedo2019/README.md).",
        f"- {args.n_controls} control permutations per recording show the spread under the "
        "null only roughly; the largest control frequency is the number to compare against.",
        "",
        "![selection frequencies](frequencies.png)",
        "",
        *(
            ["![Semedo members](semedo_members.png)", ""]
            if (out / "semedo_members.png").exists()
            else []
        ),
        "## Summary (`summary.csv`)",
        "",
        tools.markdown_table(
            summary[
                [
                    "recording",
                    "analysis",
                    "sparsity_from",
                    "sparsity",
                    "channel_weight",
                    "frequency_method",
                ]
                + [
                    f"{r}_{k}"
                    for r in ROLES
                    for k in ("members", "max_frequency", "expected_false")
                ]
            ]
        ),  # fmt: skip
        "",
        "## Members of the real data (`members.csv`)",
        "",
        tools.markdown_table(members[members.analysis == "real"].drop(columns="dataset")),
        "",
    ]
    (out / "README.md").write_text("\n".join(lines))


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n-boot", type=int, default=100)
    parser.add_argument("--n-boot-control", type=int, default=50)
    parser.add_argument("--n-controls", type=int, default=3)
    parser.add_argument("--n-fdr-controls", type=int, default=10,
                        help="permuted-modulator controls of the FDR lists")  # fmt: skip
    parser.add_argument("--grid", type=float, nargs="+", default=list(GRID))
    parser.add_argument("--n-jobs", type=int, default=2)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    start = time.perf_counter()
    designs = [semedo_design()]
    park_list, park_found = park_designs()
    designs += park_list
    summary, freqs, members, paths = [], [], [], []
    fdr_rows, fdr_tables, fdr_fits = [], [], []
    semedo_real = None
    for d in designs:
        data = (
            load_semedo()
            if d["dataset"] == "semedo2019"
            else load_park(d["recording"], d["modulator"])
        )
        r, t, fit = fdr_recording(d, data, args)
        fdr_rows += r
        fdr_tables.append(t)
        fdr_fits.append(fit)
        s, f, m, p, real = run_recording(d, data, args)
        summary += s
        freqs += f
        members += m
        paths += p
        if d["dataset"] == "semedo2019":
            semedo_real = real
    fdr_summary = pd.DataFrame(fdr_rows)
    fdr_members = pd.concat(fdr_tables, ignore_index=True)
    fdr_summary.to_csv(args.out / "fdr_summary.csv", index=False)
    fdr_members.to_csv(args.out / "fdr_members.csv", index=False)
    fdr_figure(fdr_fits, args.out / "fdr_members.png")
    summary = pd.DataFrame(summary)
    freqs = pd.DataFrame(freqs)
    members = pd.concat(members, ignore_index=True)
    paths = pd.DataFrame(paths)
    summary.to_csv(args.out / "summary.csv", index=False)
    freqs.to_csv(args.out / "frequencies.csv", index=False)
    members.to_csv(args.out / "members.csv", index=False)
    paths.to_csv(args.out / "sparsity_path.csv", index=False)
    (args.out / "summary.md").write_text(tools.markdown_table(summary) + "\n")
    (args.out / "members.md").write_text(tools.markdown_table(members) + "\n")
    frequency_figure(freqs, args.out / "frequencies.png")
    if semedo_real is not None and semedo_real["stability"] is not None:
        members_figure(semedo_real, args.out / "semedo_members.png")
    seconds = time.perf_counter() - start
    load = ", ".join(f"{x:.1f}" for x in os.getloadavg())
    readme(
        args.out,
        summary,
        members,
        freqs,
        paths,
        designs,
        park_found,
        args,
        seconds,
        load,
        fdr_summary=fdr_summary,
        fdr_members=fdr_members,
    )
    print(f"done in {seconds / 60:.1f} min; wrote {args.out}")


if __name__ == "__main__":
    main()
