"""Issue 31's "what must not change": the same selections before and after the line search.

A comparison of two commits, not a study: it writes no ``results/`` folder
(its last output is recorded in ``benchmarks/README.md``, issue 31).

Runs the default selection of the trial validation and of the channel-search
study on their own data sets, with whichever ``mics`` is importable, and
writes one row per data set (selected rank and K, the modulation test's
statistic, the final fit's penalised loss and sweeps). Run it once with the
code before (a worktree of an older commit on ``PYTHONPATH``) and once with
the current code, then ``--compare`` the two files:

- how many data sets keep the same (rank, K), with a 95% Clopper-Pearson
  interval (the issue asks for at least 95%);
- for every changed one, whether the new final fit's penalised loss is lower
  or equal (same rank and K) or, when the selection changed, both losses;
- the largest relative change of the test statistic.

Data sets:

- ``trials``: ``studies/validation/trials.py`` parts (c) and (d): 64 trials
  x 20 samples, condition means removed, trial-blocked folds, the test's
  estimator ``MICs(rank=2, cv=5, max_channels=1, n_init=1)``; ``--n-null``
  data sets without a channel and ``--n-power`` per SNR (0.03, 0.1) with one.
- ``channel_search``: ``studies/validation/channel_search.py``'s grid at
  seed 0 (112 data sets: K = 0-3, four SNRs, two geometries, T = 500 and
  2000, m = 3 and 20), the default ``MICs(random_state=0)``.

Usage::

    PYTHONPATH=/path/to/old/worktree python -P tools/convergence_selections.py \\
        --label before --out /tmp/before.csv
    python tools/convergence_selections.py --label after --out /tmp/after.csv
    python tools/convergence_selections.py --compare /tmp/before.csv /tmp/after.csv
"""

from __future__ import annotations

import argparse
import ast
import csv
import importlib.util
import sys
import warnings
from pathlib import Path
from types import SimpleNamespace

import numpy as np
from joblib import Parallel, delayed
from scipy import stats
from threadpoolctl import threadpool_limits

import mics

ROOT = Path(__file__).resolve().parents[1]
HERE = ROOT / "studies" / "validation"  # the studies whose data sets it rebuilds


def _study(name):
    """A sibling study module, loaded by path (studies are scripts, not a package)."""
    spec = importlib.util.spec_from_file_location(f"_study_{name}", HERE / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _trial_settings():
    """``DATA``, ``TEST_EST`` and ``SEEDS`` of ``trials.py``, read without importing it.

    (Its imports need the current package; the code before may lack them.)
    """
    tree = ast.parse((HERE / "trials.py").read_text())
    wanted = {"DATA", "TEST_EST", "SEEDS"}
    found = {}
    for node in tree.body:
        if isinstance(node, ast.Assign) and node.targets[0].id in wanted:
            call = node.value  # dict(key=value, ...) or a literal
            if isinstance(call, ast.Call):
                found[node.targets[0].id] = {
                    kw.arg: ast.literal_eval(kw.value) for kw in call.keywords
                }
            else:
                found[node.targets[0].id] = ast.literal_eval(call)
    return SimpleNamespace(**found)


def trial_jobs(n_null, n_power):
    jobs = [("trials", "null", seed, 0.0) for seed in range(n_null)]
    jobs += [("trials", "power", seed, snr) for snr in (0.03, 0.1) for seed in range(n_power)]
    return jobs


def channel_search_jobs():
    grid = dict(_study("channel_search").FULL, seeds=[0])
    configs = list(_study("channel_search").configurations(grid))
    return [("channel_search", cfg, index, None) for index, cfg in enumerate(configs)]


def _row(est, **key):
    loss = est.cv_results_["n_channels_mean_loss"]
    return dict(
        key,
        rank=int(est.rank_),
        K=int(est.n_channels_),
        statistic=float(loss[0] - np.min(loss[1:])) if loss.size > 1 else np.nan,
        loss=float(est.loss_history_[-1]) if len(est.loss_history_) else np.nan,
        n_iter=int(est.n_iter_),
    )


def run_one(study, a, b, snr):
    with threadpool_limits(1), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if study == "trials":
            trials = _trial_settings()
            from mics.preprocessing import subtract_condition_means

            kind, seed = a, b
            K = 1 if kind == "power" else 0
            extra = dict(modulation_snr=snr) if K else {}
            family = "power" if K else "null"
            ds, _ = mics.simulate_trials(
                **trials.DATA,
                rank=2,
                n_channels=K,
                random_state=trials.SEEDS[family] + seed,
                **extra,
            )
            d = subtract_condition_means(ds, "direction")
            est = mics.MICs(random_state=seed, **trials.TEST_EST).fit(d.X, d.Y, d.Z)
            return _row(est, study=study, case=f"{kind}_snr{snr:g}_seed{seed}")
        cfg, index = a, b
        X, Y, Z, _ = _study("channel_search").simulate_config(cfg, index)
        est = mics.MICs(random_state=cfg["seed"], verbose=0).fit(X, Y, Z)
        return _row(est, study=study, case=f"cs{index}")


def run(args):
    jobs = trial_jobs(args.n_null, args.n_power) + channel_search_jobs()
    rows = Parallel(n_jobs=args.n_jobs, verbose=5)(delayed(run_one)(*job) for job in jobs)
    with open(args.out, "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    print(f"{args.label}: mics from {Path(mics.__file__).parent}, {len(rows)} rows -> {args.out}")


def compare(before_path, after_path, out):
    def load(path):
        with open(path) as f:
            return {(r["study"], r["case"]): r for r in csv.DictReader(f)}

    before, after = load(before_path), load(after_path)
    lines = []
    for study in ("trials", "channel_search"):
        keys = [k for k in before if k[0] == study and k in after]
        same = [
            k
            for k in keys
            if (before[k]["rank"], before[k]["K"]) == (after[k]["rank"], after[k]["K"])
        ]
        n, s = len(keys), len(same)
        lo, hi = stats.binomtest(s, n).proportion_ci(method="exact") if n else (np.nan, np.nan)
        lines.append(f"{study}: same (rank, K) on {s}/{n} data sets (95% CI {lo:.3f}-{hi:.3f})")
        # "equal": within 1e-9 relative, the final fit's own tolerance scale
        rise = [float(after[k]["loss"]) / float(before[k]["loss"]) - 1 for k in same]
        lower = sum(r < -1e-9 for r in rise)
        equal = sum(abs(r) <= 1e-9 for r in rise)
        lines.append(
            f"    same selection: final penalised loss lower in {lower}/{s}, equal to 1e-9 "
            f"in {equal}/{s}, higher in {s - lower - equal}/{s} "
            f"(largest relative rise {max(rise, default=0):.2e})"
        )
        rel = [
            abs(float(after[k]["statistic"]) - float(before[k]["statistic"]))
            / max(abs(float(before[k]["statistic"])), 1e-12)
            for k in keys
            if np.isfinite(float(before[k]["statistic"]))
        ]
        absd = [
            abs(float(after[k]["statistic"]) - float(before[k]["statistic"]))
            for k in keys
            if np.isfinite(float(before[k]["statistic"]))
        ]
        if rel:
            worst = max(
                keys,
                key=lambda k: abs(float(after[k]["statistic"]) - float(before[k]["statistic"])),
            )
            lines.append(
                f"    largest statistic change at {worst[1]}: "
                f"{float(before[worst]['statistic']):+.6f} -> "
                f"{float(after[worst]['statistic']):+.6f}"
            )
            lines.append(
                f"    test statistic: median |change| {np.median(absd):.2e} NSE, "
                f"largest {max(absd):.2e} "
                f"(median relative {np.median(rel):.2e})"
            )
        sweeps_b = sum(int(before[k]["n_iter"]) for k in keys)
        sweeps_a = sum(int(after[k]["n_iter"]) for k in keys)
        lines.append(f"    final-fit sweeps: {sweeps_b} before, {sweeps_a} after")
        for k in sorted(set(keys) - set(same)):
            b, a = before[k], after[k]
            lines.append(
                f"    changed {k[1]}: ({b['rank']}, {b['K']}) -> ({a['rank']}, {a['K']}); "
                f"statistic {float(b['statistic']):+.5f} -> {float(a['statistic']):+.5f}; "
                f"final loss {float(b['loss']):.6f} -> {float(a['loss']):.6f}"
            )
    text = "\n".join(lines)
    print(text)
    if out:
        Path(out).write_text(text + "\n")


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--label", default="after")
    parser.add_argument("--out", default="selections.csv")
    parser.add_argument("--n-null", type=int, default=100)
    parser.add_argument("--n-power", type=int, default=20)
    parser.add_argument("--n-jobs", type=int, default=1)
    parser.add_argument("--compare", nargs=2, metavar=("BEFORE", "AFTER"))
    parser.add_argument("--summary", help="with --compare: write the comparison here")
    args = parser.parse_args(argv)
    if args.compare:
        compare(*args.compare, args.summary)
    else:
        run(args)


if __name__ == "__main__":
    sys.exit(main())
