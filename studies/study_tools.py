"""Shared pieces of the real-data studies: multiple testing, binomial CIs, the statistic,
effect sizes, power, asymmetry and the split-by-state comparison.

Kept outside the package: these are the studies' own bookkeeping, not
part of the ``mics`` API.
"""

from __future__ import annotations

import importlib.util
import json
import os
import shlex
import subprocess
import sys
import time
import warnings
from datetime import datetime
from pathlib import Path

import numpy as np
from scipy import stats
from sklearn.base import clone
from threadpoolctl import threadpool_limits

ROOT = Path(__file__).resolve().parents[1]


def _module_by_path(name, path):
    """Import a study script that is not on ``sys.path`` (once; kept in ``sys.modules``)."""
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


#: studies/validation/split_by_state.py: the split-by-state methods compared with
#: mics on simulations (results/split_by_state), reused on the real recordings.
split_by_state = _module_by_path(
    "mics_study_split_by_state", ROOT / "studies" / "validation" / "split_by_state.py"
)
SPLIT_METHODS = split_by_state.METHODS[1:]  # the four split-by-state methods (not mics)

# The cheapest estimator that keeps the permutation test exact: the test is
# exact for *any* fixed statistic because every null fit runs the same
# procedure as the real one; cheaper settings (5 folds, at most 2 channels,
# one start, 50 alternating sweeps) only cost power. Every fit scores K = 0,
# 1 and 2 (the grid): the sequential search, the estimator's default, skips
# K = 2 where K = 1 does not improve, which changes 11 of the Park study's
# 147 test statistics and costs power where two channels beat none but one
# does not (results/park2024_channel_search/).
CHEAP = dict(
    cv=5, max_channels=2, n_init=1, max_iter=50, tol=1e-5, channel_search="grid", verbose=0
)


def holm(p_values) -> np.ndarray:
    """Holm (1979) step-down adjusted p-values.

    Parameters
    ----------
    p_values : array-like of shape (n,)
        NaN entries are ignored (kept NaN) and do not count as tests.

    Returns
    -------
    ndarray of shape (n,)
        ``max_{j <= i} min(1, (m - j + 1) p_(j))`` at the position of each
        sorted ``p_(i)``; reject at level ``a`` where the adjusted value is
        ``<= a``.
    """
    p = np.asarray(p_values, dtype=float)
    out = np.full(p.shape, np.nan)
    ok = np.flatnonzero(~np.isnan(p))
    m = ok.size
    if m == 0:
        return out
    order = ok[np.argsort(p[ok], kind="stable")]
    adjusted = np.minimum(1.0, (m - np.arange(m)) * p[order])
    out[order] = np.maximum.accumulate(adjusted)
    return out


def binomial_ci(k: int, n: int, confidence: float = 0.95) -> tuple[float, float]:
    """Clopper-Pearson interval of a proportion ``k / n``."""
    if n == 0:
        return (np.nan, np.nan)
    ci = stats.binomtest(int(k), int(n)).proportion_ci(confidence, method="exact")
    return float(ci.low), float(ci.high)


def control_detail(n_nonsignificant: int, n: int, alpha: float = 0.05) -> str:
    """Fraction of non-significant controls, its Clopper-Pearson CI, and how likely
    that many significant ones are for an exact test (rate ``alpha``)."""
    lo, hi = binomial_ci(n_nonsignificant, n)
    k_sig = n - n_nonsignificant
    p_excess = stats.binomtest(k_sig, n, alpha, alternative="greater").pvalue if n else np.nan
    return (
        f"fraction {n_nonsignificant / max(n, 1):.3f}, 95% CP [{lo:.3f}, {hi:.3f}]; "
        f"P(>= {k_sig} significant | exact {alpha} test) = {p_excess:.3f}"
    )


def sum_test(observed, nulls) -> float:
    """Permutation p-value of the sum of per-unit statistics across independent units.

    Each unit (session) has its own observed statistic and null draws from
    independent permutations, so the ``i``-th null draws of all units added
    up are one draw of the summed statistic under the joint null.

    Parameters
    ----------
    observed : array-like of shape (n_units,)
    nulls : array-like of shape (n_units, n_permutations)

    Returns
    -------
    float
        ``(1 + #{sum of null draws >= sum of observed}) / (1 + n_permutations)``.
    """
    nulls = np.asarray(nulls, dtype=float)
    total = float(np.sum(observed))
    null_total = nulls.sum(axis=0)
    return float((1 + np.sum(null_total >= total)) / (1 + null_total.size))


def quiet_fit(estimator, X, Y, Z, groups):
    """Fit a clone with one BLAS thread, silencing the capped fits' convergence warnings."""
    with warnings.catch_warnings(), threadpool_limits(1):
        warnings.simplefilter("ignore")
        return clone(estimator).fit(X, Y, Z, groups=groups)


def percent(x) -> str:
    """A fraction as a percentage with two decimals (``"nan"`` for NaN), as the READMEs show it."""
    return "nan" if np.isnan(x) else f"{100 * x:.2f}%"


def markdown_table(df) -> str:
    """A pandas DataFrame as a GitHub markdown table (without the tabulate dependency)."""
    cols = list(df.columns)
    lines = ["| " + " | ".join(map(str, cols)) + " |", "|" + "---|" * len(cols)]
    for row in df.itertuples(index=False):
        cells = [f"{v:.4g}" if isinstance(v, float) else str(v) for v in row]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def read_markdown_table(text, first_header):
    """The markdown table of ``text`` whose first header cell is ``first_header``, as strings.

    For READMEs rebuilt from a study's markdown output (``--report-only``).

    Returns
    -------
    pandas.DataFrame
        One column per header cell, every cell a stripped string.
    """
    import pandas as pd

    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(f"| {first_header} |"))
    rows = []
    for line in lines[start:]:
        if not line.startswith("|"):
            break
        rows.append([cell.strip() for cell in line.strip().strip("|").split("|")])
    return pd.DataFrame(rows[2:], columns=rows[0])


def improvement(estimator, X, Y, Z, groups):
    """The statistic of :func:`mics.test_modulation` on the real alignment, and its model.

    As the test does with its defaults: the reduced model (the modulator's
    piecewise-linear additive effect, a quadratic and drifting map of the
    source's leading communicated components) is regressed out of ``Y``, the
    estimator selects K by cross-validation on what is left, and the
    statistic is the best CV improvement of a model with channels over K = 0.

    Returns
    -------
    statistic : float
    model : fitted MICs (``rank_``, ``n_channels_`` of the selection)
    """
    from mics.data.problem import make_problem
    from mics.workflows.inference import reduced_problem

    problem = make_problem(X, Y, Z, groups=groups).unlabelled()
    reduced = reduced_problem(
        estimator,
        problem,
        additive="nonlinear",
        source_map="quadratic",
        condition_on=("source", "drift"),
        drift_df=5,
    )
    with warnings.catch_warnings(), threadpool_limits(1):
        warnings.simplefilter("ignore")
        model = clone(estimator).set_params(n_channels=None).fit_problem(reduced.problem)
    loss = model.cv_results_["n_channels_mean_loss"]
    return float(loss[0] - np.min(loss[1:])), model


# ----------------------------------------------------------------- effect size, power, asymmetry
def effect_fields(res):
    """The effect size of a :class:`mics.ModulationTest` as table columns.

    ``verdict`` is the graded verdict at 0.05 (``ModulationTest.verdict``:
    gating, pairing or none); ``effect_size`` is the held-out target
    variance that ``effect_channels`` (= max(selected K, 1)) channels explain
    beyond the additive model, ``relative_effect`` the same as a share of
    the variance the baseline communicates; ``modulator_r2_*`` what the
    conditional null kept of the modulator; ``modulator_effective_units`` of
    ``modulator_units`` trials carry the modulator's variance;
    ``effect_low``/``effect_high`` its trial-bootstrap interval (NaN without
    a bootstrap); ``gain_k`` the per-channel gains.
    """
    lo, hi = (float(v) for v in res.effect_interval)
    return dict(
        verdict=res.verdict(),
        effect_size=float(res.effect_size),
        effect_low=lo,
        effect_high=hi,
        relative_effect=float(res.relative_effect),
        modulator_r2_drift=float(res.modulator_r2_drift),
        modulator_r2_source=float(res.modulator_r2_source),
        modulator_effective_units=float(res.modulator_effective_units),
        modulator_units=int(res.modulator_units),
        effect_channels=int(res.effect_channels),
        effect_n_boot=int(len(res.effect_draws)),
        channel_gains=" ".join(f"{g:.5f}" for g in res.channel_gains),
    )


def detection_stop(n_permutations, alpha=0.05):
    """Exceedances after which a test with ``n_permutations`` can no longer reach ``alpha``.

    ``p = (1 + e) / (1 + n) <= alpha`` needs ``e <= alpha (n + 1) - 1``, so the
    sequential test stopped at ``floor(alpha (n + 1))`` exceedances (Besag and
    Clifford's ``p = h / L >= h / n > alpha``) makes the same detections as the
    full test, and a data set that is not detected costs a few fits.
    """
    stop = int(np.floor(alpha * (n_permutations + 1) + 1e-9))
    if stop < 1 or stop / n_permutations <= alpha:
        raise ValueError(f"{n_permutations} permutations cannot reach p <= {alpha}.")
    return stop


def same_decisions(stop_after, n_permutations, alpha=0.05):
    """Whether stopping after ``stop_after`` exceedances leaves every decision at ``alpha``.

    True when a stopped test is surely not significant (``h / n > alpha``) and
    the full test would not have been either (``h > alpha (n + 1) - 1``).
    """
    h, n = stop_after, n_permutations
    return h / n > alpha and h > alpha * (n + 1) - 1


def power_rows(power, **keys):
    """One row per planted strength of a :class:`mics.PowerAnalysis` (first geometry)."""
    mde = float(power.minimum_detectable_effect[0])
    return [
        dict(
            **keys,
            geometry=power.geometries[0],
            strength=float(s),
            detections=int(power.detections[0, j]),
            n_sims=int(power.n_sims),
            rate=float(power.rates[0, j]),
            ci_low=float(power.rate_intervals[0, j, 0]),
            ci_high=float(power.rate_intervals[0, j, 1]),
            mde=mde,
            n_perm=int(power.settings["n_permutations"]),
        )
        for j, s in enumerate(power.strengths)
    ]


def mde_words(rows):
    """The minimum detectable effect of one power table (rows of :func:`power_rows`), as text.

    With the rates and Clopper-Pearson intervals at the strengths that bracket
    80% power, so the coarseness is visible.
    """
    mde = float(rows.mde.iloc[0])
    top = float(rows.strength.max())
    cells = ", ".join(
        f"{100 * r.strength:.2g}%: {r.detections}/{r.n_sims} [{r.ci_low:.2f}, {r.ci_high:.2f}]"
        for r in rows.itertuples()
    )
    head = f"above {100 * top:.2g}%" if np.isnan(mde) else f"{100 * mde:.2g}%"
    if not np.isnan(mde) and mde <= float(rows.strength.min()):
        head = f"at most {100 * mde:.2g}% (the smallest strength tried already reached 80%)"
    return f"{head} (detections {cells})"


RANK0_ASYMMETRY = (
    "undefined: the selected baseline rank is 0 (no communication subspace), so every "
    "channel is a new interaction and neither side can be reconfigured"
)


def asymmetry_fields(asym):
    """The source-minus-target asymmetry (``mics.asymmetry``) as table columns."""
    lo, hi = (float(v) for v in asym["difference_interval"].values)
    out = dict(
        status=asym.attrs.get("status", ""),
        difference=float(asym["difference"]),
        difference_low=lo,
        difference_high=hi,
        difference_fitted=float(asym["difference_observed"]),
        asymmetry_p=float(asym["p_value"]),
        target_upper=float(asym["target_upper"]),
        stable_p=float(asym["stable_p_value"]),
        n_boot=int(asym.attrs.get("n_boot", 0)),
    )
    for part in asym["fraction"].part.values:
        out[f"fraction_{part}"] = float(asym["fraction"].sel(part=part))
    return out


# ------------------------------------------------------------------------------- split by state
def trial_codes(trial):
    """Trials numbered 0, 1, ... in their order in time (as ``mics`` codes them)."""
    trial = np.asarray(trial)
    return np.r_[0, np.cumsum(trial[1:] != trial[:-1])]


def split_by_state_tests(X, Y, state, trial, permutations):
    """Split-by-state RRR (``studies/validation/split_by_state.py``) on one recording.

    The trials are split at the median of their mean ``state``; the null
    labellings are the mics test's own trial permutations, so the two
    analyses share their null exactly.

    Parameters
    ----------
    X, Y : ndarray of shape (T, p), (T, q)
    state : ndarray of shape (T,)
        Scalar state variable per sample (e.g. pupil or running speed).
    trial : array-like of shape (T,)
        Trial id of every sample (contiguous).
    permutations : ndarray of shape (n_perm, n_trials)
        ``ModulationTest.permutations`` (or its first rows).

    Returns
    -------
    dict
        ``n_high`` (trials in the high state), ``n_perm``, and
        ``{method}_stat``, ``{method}_p`` for the four split-by-state methods.
    """
    codes = trial_codes(trial)
    state = np.asarray(state, dtype=float)
    high = split_by_state.median_split(state, codes)
    with warnings.catch_warnings(), threadpool_limits(1):
        warnings.simplefilter("ignore")
        row = split_by_state.split_tests(
            np.asarray(X, float), np.asarray(Y, float), state, codes, high, permutations
        )
    return dict(n_high=int(high.sum()), n_perm=len(permutations), **row)


def power_method_text(args, n_perm_real, target):
    """How the minimum detectable effect was obtained, for a study's README."""
    strengths = ", ".join(f"{100 * x:g}%" for x in args.power_strengths)
    lo, hi = binomial_ci(int(round(0.8 * args.power_sims)), args.power_sims)
    return (
        "Minimum detectable effect (MDE, `power.csv`): `mics.power_analysis` plants one "
        "channel with random source, target and modulator patterns into null copies of the "
        f"recorded {target} (its additive dependence on the modulator regressed out and the "
        "modulator's trials permuted, as the test's null draws them, so gating the recording "
        f"may hold is not counted as power) at strengths {strengths} of its variance (the "
        "effect size's units), "
        f"{args.power_sims} planted data sets per strength, and runs the real test's estimator "
        f"(same fixed rank) and trial null with {args.power_perm} permutations, stopped once a "
        f"data set can no longer reach p <= 0.05 (after {detection_stop(args.power_perm)} "
        "null statistics reach the observed one: the detections are those of the full test). "
        "The MDE is the strength "
        "where the detection rate reaches 80% (linear interpolation between strengths). It is "
        f"coarse: with {args.power_sims} data sets per strength a rate of 80% has the "
        f"Clopper-Pearson interval [{lo:.2f}, {hi:.2f}]"
        + (
            f", and the strengths are a factor "
            f"{args.power_strengths[-1] / args.power_strengths[-2]:.2g} apart"
            if len(args.power_strengths) > 1
            else ""
        )
        + (
            f"; and {args.power_perm} permutations instead of the real test's {n_perm_real} "
            "make the test, and so the MDE, slightly conservative."
            if args.power_perm < n_perm_real
            else "."
        )
    )


def run_time_from_readme(path):
    """Seconds, jobs, cached tests and run-time note from a real-data study's README header.

    For README rebuilt from tables made before run records existed: the
    header said ``run time X min with n_jobs=J, C of N tests read from the
    cache of an earlier run<note>)``. Returns None where it does not.
    """
    import re

    path = Path(path)
    text = path.read_text() if path.exists() else ""
    found = re.search(
        r"run time ([\d.]+) min with\s+n_jobs=(\d+), (\d+) of \d+ tests read from the cache of"
        r"\s+an earlier run([^)]*)\)",
        text,
    )
    if found is None:
        return None
    minutes, jobs, cached, note = found.groups()
    return dict(seconds=60 * float(minutes), n_jobs=int(jobs), cached=int(cached), time_note=note)


def run_args(parser, out, argv):
    """The options of the run that wrote ``out`` (its run record), else those of ``argv``.

    ``--report-only`` rebuilds a README from the tables: the settings it
    quotes must be the run's, not the defaults of today's script.
    """
    import shlex

    run = read_run_record(out).get("all")
    if run is None:
        return parser.parse_args(argv), None
    return parser.parse_args(shlex.split(run["command"])[2:]), run


def report_inputs(parser, argv, out, names):
    """What a real-data study's ``--report-only`` needs: the run's options and its tables.

    Returns
    -------
    args : argparse.Namespace
        The run's options (:func:`run_args`), with ``cached`` and ``time_note``.
    run : dict
        Its run record (``seconds``, ...); for tables made before run records,
        what the README's header says.
    tables : dict of pandas.DataFrame
        ``out / f"{name}.csv"`` for each of ``names``.
    """
    import pandas as pd

    args, run = run_args(parser, out, argv)
    if run is None:  # tables made before run records: the README's header has the run time
        run = run_time_from_readme(out / "README.md") or dict(seconds=float("nan"))
        args.n_jobs = run.get("n_jobs", args.n_jobs)
    args.cached, args.time_note = run.get("cached", 0), run.get("time_note", "")
    return args, run, {name: pd.read_csv(out / f"{name}.csv") for name in names}


def run_time_note(cache, seconds, n_cached, n_tests):
    """Remember how long a run that computed every test took; quote it when all come from cache.

    Returns the text to append to a README's run-time statement.
    """
    path = Path(cache) / "run_time.txt"
    if n_cached == 0:
        path.write_text(f"{seconds:.0f}\n")
        return ""
    if n_cached == n_tests and path.exists():
        minutes = float(path.read_text()) / 60
        return f"; the run that computed every test took {minutes:.1f} min"
    return ""


def split_null_rejections(folder=ROOT / "results" / "split_by_state"):
    """``{method: "k/n"}``: each split-by-state method's rejections of null data sets."""
    import pandas as pd

    summary = pd.read_csv(Path(folder) / "summary.csv", keep_default_na=False)
    null = summary[summary.family == "null"]
    return {r.method: f"{r.rejections}/{r.n}" for r in null.itertuples()}


def split_method_text(n_perm, state):
    """What the split-by-state comparison does, for a study's README.

    Quotes the false-positive rates of ``studies/validation/split_by_state.py``
    from its ``summary.csv``.
    """
    null = split_null_rejections()
    return (
        "What labs often do instead (`studies/validation/split_by_state.py`, "
        f"`results/split_by_state/`): split the trials at the median of their mean {state}, "
        "fit reduced-rank regression in each state, and compare the two fits: `split_cv` "
        "|R2_cv(high) - R2_cv(low)| of the CV-selected rank, `split_subspace` the mean squared "
        "sine of the principal angles between the two states' rank-2 source subspaces, and "
        "`*_resid` the same after regressing the state's additive effect out of source and "
        f"target first. The null is the first {n_perm} of the mics test's own trial "
        "permutations, so the p-values sit beside the mics test's on the same footing "
        "(`split_by_state.csv`). On simulations where the state also adds to both "
        f"populations, the subspace comparison without `_resid` rejected {null['split_subspace']} "
        f"*null* data sets and the CV comparison {null['split_cv']} "
        "(`results/split_by_state/README.md`): their rejections alone are not evidence of gating."
    )


# ----------------------------------------------------------------- cached validation runs
def read_runs(path, fields):
    """The rows of a validation's ``runs.csv`` (an empty table when it does not exist)."""
    import pandas as pd

    path = Path(path)
    return pd.read_csv(path) if path.exists() else pd.DataFrame(columns=list(fields))


def run_cached(path, key, fields, todo, func, n_jobs=2):
    """Run ``func(*item)`` for each item of ``todo`` not yet in ``path``, appending its row.

    A validation over hundreds of simulated data sets runs for a long time;
    each finished data set is appended (and flushed) at once, so a run can be
    stopped and resumed, and plans can be added one after the other.

    Parameters
    ----------
    path : path-like
        The ``runs.csv`` file.
    key : tuple of str
        Columns that identify a data set; ``todo`` items are those values in order.
    fields : tuple of str
        Every column of a row (``func`` returns a dict with these keys).
    todo : list of tuple
    func : callable
        Picklable (module-level), run in joblib worker processes.
    n_jobs : int
    """
    import csv

    from joblib import Parallel, delayed

    path = Path(path)

    def ident(values):
        return tuple(str(v) for v in values)

    done = {ident(r[k] for k in key) for r in read_runs(path, fields).to_dict("records")}
    # each data set once, even where a plan lists a cell twice
    todo = [t for t in dict.fromkeys(todo) if ident(t) not in done]
    print(f"{len(todo)} data sets to run ({len(done)} already in {path})", flush=True)
    if not todo:
        return
    new = not path.exists()
    with open(path, "a", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=list(fields))
        if new:
            writer.writeheader()
        results = Parallel(n_jobs=n_jobs, return_as="generator_unordered")(
            delayed(func)(*t) for t in todo
        )
        for i, row in enumerate(results, 1):
            writer.writerow(row)
            fh.flush()
            if i % 20 == 0 or i == len(todo):
                print(f"{i}/{len(todo)}", flush=True)


def rate_row(p_values, alpha=0.05):
    """Rejections at ``alpha`` with their Clopper-Pearson interval and the binomial excess p.

    ``p_excess`` is the probability of at least that many rejections for an
    exact test (rate ``alpha``).
    """
    p = np.asarray(p_values, dtype=float)
    p = p[np.isfinite(p)]
    k, n = int(np.sum(p <= alpha)), p.size
    if n == 0:
        return dict(n=0, rejected=0, rate=np.nan, ci_low=np.nan, ci_high=np.nan, p_excess=np.nan)
    low, high = binomial_ci(k, n)
    excess = stats.binomtest(k, n, alpha, alternative="greater").pvalue
    return dict(n=n, rejected=k, rate=k / n, ci_low=low, ci_high=high, p_excess=excess)


def rate_text(row):
    """``"3/100 (0.030, 95% CI [0.006, 0.085])"`` from a row of :func:`rate_row`."""
    return f"{row.rejected}/{row.n} ({row.rate:.3f}, 95% CI [{row.ci_low:.3f}, {row.ci_high:.3f}])"


# ------------------------------------------------------------------------- run records
class RunRecord:
    """How one run of a study was made: its command, seeds, run time and load.

    Start it when the study starts and :meth:`finish` it into the results
    folder; the study's README then says how its tables were made
    (:func:`run_lines`), and a report-only pass (the README rebuilt from the
    tables) reads the same record instead of re-timing anything.

    Parameters
    ----------
    script : path-like
        The study's file (``__file__``): the command names it from the
        repository root.
    argv : list of str, optional
        The arguments of the run (default: ``sys.argv[1:]``).
    seeds : str
        The seeds in words (e.g. ``"0-49 (null data sets), 100-102 (power)"``).
    part : str
        For a study run in parts (one command per part): the part's name;
        each part keeps its own record in the same file.
    """

    def __init__(self, script, argv=None, *, seeds="", part="all"):
        argv = sys.argv[1:] if argv is None else list(argv)
        try:
            where = Path(script).resolve().relative_to(ROOT)
        except ValueError:  # a copy of a study outside the repository
            where = Path(script).name
        self.part = part
        self.record = dict(
            command=shlex.join(["python", str(where), *map(str, argv)]),
            seeds=seeds,
            started=datetime.now().isoformat(timespec="minutes"),
            commit=_commit(),
            cores=os.cpu_count(),
            load_start=round(os.getloadavg()[0], 2),
        )
        self._t0 = time.perf_counter()

    @property
    def seconds(self) -> float:
        """Seconds since the run started."""
        return time.perf_counter() - self._t0

    def finish(self, out, **extra) -> dict:
        """Write the record (with the run time and load now) to ``out/run.json``.

        ``extra`` adds fields (e.g. how many results came from a cache).
        Returns every part's record, as :func:`read_run_record` reads them.
        """
        self.record.update(
            seconds=round(self.seconds, 1), load_end=round(os.getloadavg()[0], 2), **extra
        )
        path = Path(out) / "run.json"
        runs = read_run_record(out)
        runs[self.part] = self.record
        path.write_text(json.dumps(runs, indent=1) + "\n")
        return runs


def _commit() -> str:
    """The checkout's commit (``+`` when files differ from it), or ``""`` outside git."""
    try:
        head = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "--untracked-files=no", "mics"],
            cwd=ROOT,
            capture_output=True,
            text=True,
        ).stdout.strip()
    except OSError:
        return ""
    return head + ("+" if head and dirty else "")


def read_run_record(out) -> dict:
    """The run records of a results folder (``{part: record}``; empty when there are none)."""
    path = Path(out) / "run.json"
    return json.loads(path.read_text()) if path.exists() else {}


def run_sentence(record) -> str:
    """One run record in words: command, seeds, run time, cores and load."""
    minutes = record["seconds"] / 60
    took = f"{record['seconds']:.0f} s" if minutes < 2 else f"{minutes:.1f} min"
    seeds = f"; seeds {record['seeds']}" if record.get("seeds") else ""
    commit = f" at {record['commit']}" if record.get("commit") else ""
    return (
        f"`{record['command']}`{seeds}; run time {took} on {record['cores']} cores, load "
        f"average {record['load_start']:.1f} at the start and {record['load_end']:.1f} at the "
        f"end (started {record['started']}{commit})."
    )


def run_lines(out, missing="") -> list[str]:
    """README lines saying how the tables of ``out`` were made, from its run records.

    Parameters
    ----------
    out : path-like
        The results folder.
    missing : str
        What to say when the folder has no record (tables made before run
        records existed): how they were made, as far as is known.
    """
    runs = read_run_record(out)
    if not runs:
        return [
            (
                "How it was made: no run record (`run.json`) beside these tables; they predate "
                "it. " + missing
            ).rstrip()
        ]
    if list(runs) == ["all"]:
        lines = ["How it was made: " + run_sentence(runs["all"])]
    else:
        lines = ["How it was made, one command per part:", ""]
        lines += [f"- {part}: {run_sentence(r)}" for part, r in runs.items()]
    busy = max(max(r["load_start"], r["load_end"]) / max(r["cores"], 1) for r in runs.values())
    if busy > 0.75:
        lines[-1] += (
            " The machine was busy: times are not benchmarks; compare only figures measured "
            "in the same run."
        )
    return lines


def readme_head(title, script, out, *, about="", missing="", rebuild="--report-only"):
    """The first lines of a generated README: title, writer, how the tables were made.

    Parameters
    ----------
    title : str
        The README's heading.
    script : str
        The study that writes the folder, from the repository root.
    out : path-like
        The results folder (its ``run.json`` gives the command, seeds, run time, load).
    about : str
        What the study does, in a paragraph.
    missing : str
        For :func:`run_lines`: how the tables were made, when there is no run record.
    rebuild : str or None
        The study's option that rebuilds the README from the tables alone.

    Returns
    -------
    list of str
    """
    again = f" (`{rebuild}` rebuilds this file from them alone)" if rebuild else ""
    lines = [f"# {title}", "", f"Generated by `{script}` from the tables beside it{again}.", ""]
    if about:
        lines += [about, ""]
    return lines + run_lines(out, missing) + [""]
