"""A third population as the modulator (issue 17): memory, speed against a peer, recovery, null.

Three parts, each fit run in a fresh subprocess so that its peak resident
memory (``ru_maxrss``) is its own:

``large``
    T = 20000, p = 300, q = 100, m = 200 (a 200-neuron modulator population).
    ``MICs(rank=2, n_channels=1)`` (``solver="auto"``) and the default
    selection ``MICs()``, each with its wall time and peak memory, and as the
    peer, measured in the same run, 30 sweeps of a plain NumPy ALS that
    passes over the data each sweep (weighted Grams by ``(F * w).T @ F``, the
    same ridge solves; no moments, no restarts). Data from an independent
    generator written here (latent-driven populations, one planted channel).
``recovery``
    Fixed rank and K = 1 at T = 3000, p = 60, q = 40 for m = 3, 30, 100, 300:
    cosine of each fitted pattern with the truth and the factor match score
    (``mics.simulation.factor_match_score``).
``null``
    Data sets without modulation (K = 0) at m = 100: the rate of K_hat = 0
    under the default channel selection, with a Clopper-Pearson interval.

The time of the selection against the modulator's size (m = 3 against
m = 100) and the fit's peak memory are benchmarks of the asv suite
(``benchmarks/population.py``); ``asv continuous`` compares them between
commits.

Usage::

    python studies/validation/population.py large [--n-jobs N] [--skip-select]
    python studies/validation/population.py recovery
    python studies/validation/population.py null --n-null 20

Results go to ``results/population/<part>.txt`` (``recovery`` also
``recovery.csv``; ``large`` with ``--n-jobs N`` > 1 ``large_njobsN.txt``),
each part's run record to ``run.json``, and ``README.md`` is rebuilt from
them after each part (``--report-only``: the README alone). The load
average is printed with every timing: on a shared machine, ratios measured
in the same run are the figures to compare.
"""

from __future__ import annotations

import argparse
import ast
import json
import os
import resource
import subprocess
import sys
import time
import warnings
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "studies"))
import study_tools as tools  # noqa: E402

OUT = ROOT / "results" / "population"


def _peak_mb():
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def _load():
    return os.getloadavg()[0]


# ----------------------------------------------------------------------------- data
def independent_data(T, p, q, m, rank=2, seed=0, modulation=0.5):
    """Latent-driven source and modulator populations, one planted channel.

    Written independently of ``mics.simulate``: X and Z each have a 5-d
    shared latent (half the variance) plus private noise; Y = X B + Z D +
    lambda (c . z)(a . x) b + noise, with the gating carried by a fifth of
    the modulator neurons.
    """
    rng = np.random.default_rng(seed)

    def population(n):
        L = rng.standard_normal((n, 5)) / np.sqrt(5)
        return np.sqrt(0.5) * rng.standard_normal((T, 5)) @ L.T + np.sqrt(
            0.5
        ) * rng.standard_normal((T, n))

    X, Z = population(p), population(m)
    U = np.linalg.qr(rng.standard_normal((p, rank)))[0]
    V = np.linalg.qr(rng.standard_normal((q, rank)))[0]
    B = U @ V.T * 0.3
    D = rng.standard_normal((m, q)) * 0.02
    a = rng.standard_normal(p)
    b = rng.standard_normal(q)
    c = np.zeros(m)
    gating = rng.choice(m, size=max(1, m // 5), replace=False)
    c[gating] = rng.standard_normal(gating.size)
    a, b, c = (v / np.linalg.norm(v) for v in (a, b, c))
    gate = (Z @ c) * (X @ a)
    lam = modulation / gate.std()
    Y = X @ B + Z @ D + lam * np.outer(gate, b) + rng.standard_normal((T, q))
    return X, Y, Z, dict(a=a, b=b, c=c)


def plain_als(X, Y, Z, rank, n_sweeps=30, alpha=1e-3):
    """The obvious data-space ALS: RRR baseline, then sweeps over (a, c, b).

    Every sweep forms the weighted Grams ``X^T diag(g^2) X`` and
    ``Z^T diag(h^2) Z`` from the data, solves the three ridge problems and
    refits the baseline given the channel (K = 1).
    """
    Xc, Zc, Yc = (v - v.mean(0) for v in (X, Z, Y))
    XZ = np.hstack([Xc, Zc])
    G = XZ.T @ XZ
    rng = np.random.default_rng(0)
    b = rng.standard_normal(Yc.shape[1])
    c = rng.standard_normal(Zc.shape[1])
    a = np.zeros(Xc.shape[1])
    h = np.zeros(len(Xc))
    for _ in range(n_sweeps):
        # baseline given the channel: ridge of (Y - h b^T) on [X, Z], then rank-r on X's part
        R0 = Yc - np.outer(h, b)
        coef = np.linalg.solve(G + alpha * np.eye(len(G)), XZ.T @ R0)
        fitted = Xc @ coef[: Xc.shape[1]]
        _, _, Vt = np.linalg.svd(fitted, full_matrices=False)
        Bx = coef[: Xc.shape[1]] @ Vt[:rank].T @ Vt[:rank]
        R = Yc - Xc @ Bx - Zc @ coef[Xc.shape[1] :]
        rb = R @ b
        zc = Zc @ c
        a = np.linalg.solve(
            (Xc * zc[:, None] ** 2).T @ Xc + alpha * np.eye(len(a)), Xc.T @ (zc * rb)
        )
        xa = Xc @ a
        c = np.linalg.solve(
            (Zc * xa[:, None] ** 2).T @ Zc + alpha * np.eye(len(c)), Zc.T @ (xa * rb)
        )
        h = xa * (Zc @ c)
        b = R.T @ h / (h @ h + alpha)
    return a, b, c


# ----------------------------------------------------------------------------- tasks
def task_large_fit(args):
    from mics import MICs

    X, Y, Z, truth = independent_data(20000, 300, 100, 200, seed=args.seed)
    t = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        est = MICs(rank=2, n_channels=1, random_state=0, verbose=0).fit(X, Y, Z)
    dt = time.perf_counter() - t
    cos = abs(float(est.modulator_patterns_[:, 0] @ truth["c"]))
    return dict(
        seconds=dt, peak_mb=_peak_mb(), solver=est.solver_, sweeps=int(est.n_iter_), cos_c=cos
    )


def task_large_select(args):
    from mics import MICs

    X, Y, Z, truth = independent_data(20000, 300, 100, 200, seed=args.seed)
    t = time.perf_counter()
    est = MICs(random_state=0, verbose=0, n_jobs=args.n_jobs).fit(X, Y, Z)
    dt = time.perf_counter() - t
    cv = est.cv_results_
    return dict(
        seconds=dt,
        peak_mb=_peak_mb(),
        solver=est.solver_,
        n_jobs=args.n_jobs,
        rank=est.rank_,
        K=est.n_channels_,
        # the one-SEM rule's inputs, to see why a rank or K was chosen
        **{
            f"{key}_{stat}": np.round(cv[f"{key}_{stat}"], 5).tolist()
            for key in ("rank", "n_channels")
            for stat in ("mean_loss", "sem_loss")
        },
    )


def task_large_plain(args):
    X, Y, Z, truth = independent_data(20000, 300, 100, 200, seed=args.seed)
    t = time.perf_counter()
    a, b, c = plain_als(X, Y, Z, rank=2, n_sweeps=30)
    dt = time.perf_counter() - t
    cos = abs(float(c @ truth["c"])) / np.linalg.norm(c)
    return dict(seconds=dt, peak_mb=_peak_mb(), sweeps=30, cos_c=cos)


def task_recovery(args):
    from mics import MICs, simulate
    from mics.simulation import factor_match_score

    X, Y, Z, truth = simulate(
        n_samples=3000,
        n_source=60,
        n_target=40,
        n_modulators=args.m,
        rank=3,
        n_channels=1,
        modulator_kind="population",
        random_state=args.seed,
    )
    t = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        est = MICs(rank=3, n_channels=1, random_state=0, verbose=0).fit(X, Y, Z)
    dt = time.perf_counter() - t
    cos = {
        name: abs(
            float(
                getattr(est, f"{name}_patterns_")[:, 0] @ getattr(truth, f"{name}_patterns_")[:, 0]
            )
        )
        for name in ("source", "target", "modulator")
    }
    return dict(seconds=dt, solver=est.solver_, fms=float(factor_match_score(truth, est)), **cos)


def task_null(args):
    from mics import MICs, simulate

    X, Y, Z, _ = simulate(
        n_samples=args.T,
        n_source=args.p,
        n_target=args.q,
        n_modulators=100,
        rank=2,
        n_channels=0,
        modulator_kind="population",
        random_state=args.seed,
    )
    t = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        est = MICs(rank=2, max_channels=args.max_channels, random_state=0, verbose=0).fit(X, Y, Z)
    return dict(seconds=time.perf_counter() - t, solver=est.solver_, K=int(est.n_channels_))


TASKS = {
    "large-fit": task_large_fit,
    "large-select": task_large_select,
    "large-plain": task_large_plain,
    "recovery": task_recovery,
    "null": task_null,
}


def run(task, **kw):
    """Run one task in a fresh interpreter (the installed ``mics``); returns its result dict."""
    cmd = [sys.executable, __file__, "--task", task]
    for k, v in kw.items():
        flag = f"--{k.replace('_', '-')}"
        if v is True:
            cmd.append(flag)
        elif v is not None and v is not False:
            cmd += [flag, str(v)]
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    res = json.loads(out.strip().splitlines()[-1])
    res["load"] = round(_load(), 1)
    return res


def _write(name, lines, out):
    out.mkdir(parents=True, exist_ok=True)
    text = "\n".join(lines) + "\n"
    (out / f"{name}.txt").write_text(text)
    print(text)


# ----------------------------------------------------------------------------- parts
def part_large(args):
    name = "large" + (f"_njobs{args.n_jobs}" if args.n_jobs and args.n_jobs > 1 else "")
    lines = ["T=20000, p=300, q=100, m=200 (independent generator, one planted channel)"]
    plain = run("large-plain", seed=args.seed)
    fit = run("large-fit", seed=args.seed)
    lines.append(f"plain NumPy ALS, 30 sweeps: {plain}")
    lines.append(f"MICs(rank=2, n_channels=1): {fit}")
    lines.append(
        f"fixed-rank fit / 30 plain sweeps: {fit['seconds'] / plain['seconds']:.2f}x time"
    )
    if not args.skip_select:
        sel = run("large-select", seed=args.seed, n_jobs=args.n_jobs)
        lines.append(f"MICs() default selection: {sel}")
    _write(name, lines, args.out)


def part_recovery(args):
    lines = ["T=3000, p=60, q=40, r=3, K=1 fixed; modulator_kind='population'",
             "m,solver,seconds,cos_source,cos_target,cos_modulator,factor_match"]  # fmt: skip
    for m in (3, 30, 100, 300):
        res = run("recovery", m=m, seed=args.seed)
        lines.append(
            f"{m},{res['solver']},{res['seconds']:.1f},{res['source']:.4f},"
            f"{res['target']:.4f},{res['modulator']:.4f},{res['fms']:.4f}"
        )
    _write("recovery", lines, args.out)
    (args.out / "recovery.csv").write_text("\n".join(lines[1:]) + "\n")


def part_null(args):
    from mics.simulation import detection_rates

    name = "null"
    lines = [
        f"null data (K=0), m=100, T={args.T}, p={args.p}, q={args.q}, r=2 fixed, "
        f"K selected in 0..{args.max_channels}",
        "seed,solver,K_hat,seconds",
    ]
    ks = []
    for i in range(args.n_null):
        res = run(
            "null", seed=1000 + i, T=args.T, p=args.p, q=args.q, max_channels=args.max_channels
        )
        ks.append(res["K"])
        lines.append(f"{1000 + i},{res['solver']},{res['K']},{res['seconds']:.1f}")
        print(lines[-1], flush=True)
    rates = detection_rates([], ks)
    lo, hi = rates.false_positive_rate_ci
    lines.append(
        f"K_hat = 0 in {ks.count(0)}/{len(ks)}; false-positive rate "
        f"{rates.false_positive_rate:.3f} (95% CI {lo:.3f}-{hi:.3f})"
    )
    _write(name, lines, args.out)


def _large(out):
    """The results of part ``large``: ``{"plain": ..., "fit": ..., "select": ...}``."""
    found = {}
    keys = {"plain NumPy": "plain", "MICs(rank=2": "fit", "MICs() default": "select"}
    for line in (out / "large.txt").read_text().splitlines():
        for prefix, key in keys.items():
            if line.startswith(prefix):
                found[key] = ast.literal_eval(line.split(": ", 1)[1])
    return found


def _one_sem_text(sel):
    """Why the rank stage chose its rank, from the held-out loss curve and its SEM."""
    loss, sem = np.asarray(sel["rank_mean_loss"]), np.asarray(sel["rank_sem_loss"])
    best, rank = int(np.argmin(loss)), int(sel["rank"])
    if rank >= best:
        return f"the rank curve has its minimum at {best}, the rank chosen."
    return (
        f"the rank curve has its minimum at {best}, but the {loss[rank] - loss[best]:.5f} "
        f"gain from rank {rank} to {best} is less than one SEM ({sem[best]:.5f}): the one-SEM "
        "rule keeps the smaller rank. The planted second dimension is weak (B = 0.3 U V^T); "
        "this is the selection rule working as specified, not a fitting error."
    )


def readme(out=OUT):
    """``README.md`` from the parts' tables and run records (those that exist)."""
    about = (
        "A third population as the modulator (issue 17): a fixed-rank fit and the default "
        "selection with a 200-neuron modulator at T = 20000, p = 300, q = 100 (data from an "
        "independent generator: latent-driven populations, one planted channel) against 30 "
        "sweeps of a plain NumPy ALS over the data, each fit in a fresh process so that its "
        "peak memory is its own (part `large`); recovery of a channel against the modulator's "
        "size (part `recovery`); the rate of K = 0 on data without a channel at m = 100 (part "
        "`null`). The selection's time against m and the fit's peak memory are also asv "
        "benchmarks (`benchmarks/population.py`)."
    )
    lines = tools.readme_head(
        "A third population as the modulator",
        "studies/validation/population.py",
        out,
        about=about,
        missing="Each timing in the tables carries the load average when it was measured.",
    )
    rows, notes = [], []
    if (out / "large.txt").exists():
        big = _large(out)
        plain, fit = big["plain"], big["fit"]
        rows.append(
            "| fixed-rank fit `MICs(rank=2, n_channels=1)`, T=20000, p=300, q=100, m=200 "
            f'(`solver="auto"` -> {fit["solver"]} path) | {fit["seconds"]:.1f} s in '
            f"{fit['sweeps']} sweeps, peak {fit['peak_mb'] / 1000:.2f} GB; 30 sweeps of a plain "
            f"NumPy data-space ALS in the same run {plain['seconds']:.1f} s "
            f"({fit['seconds'] / plain['seconds']:.2f}x; load {fit['load']}); planted modulator "
            f"pattern found with cosine {fit['cos_c']:.3f} (plain ALS {plain['cos_c']:.3f}) "
            "| `large.txt` |"
        )
        if "select" in big:
            sel = big["select"]
            rows.append(
                f"| default selection `MICs()` on the same data | {sel['seconds']:.0f} s with "
                f"`n_jobs={sel['n_jobs'] or 1}` (load {sel['load']}), peak "
                f"{sel['peak_mb'] / 1000:.2f} GB; rank {sel['rank']} (planted 2), K = {sel['K']} "
                "| `large.txt` |"
            )
            curve = ", ".join(f"{v:.5f}" for v in sel["n_channels_mean_loss"])
            notes += [
                f"**Why rank {sel['rank']}** (`large.txt`, the rank stage's mean and SEM of the "
                f"held-out loss): {_one_sem_text(sel)} The channel curve is {curve} for "
                f"K = 0..{len(sel['n_channels_mean_loss']) - 1}.",
                "",
            ]
    if (out / "recovery.csv").exists():
        import pandas as pd

        rec = pd.read_csv(out / "recovery.csv")
        ms = " / ".join(str(m) for m in rec.m)
        rows.append(
            "| recovery at fixed r = 3, K = 1, T=3000, p=60, q=40 | modulator-pattern cosine "
            + " / ".join(f"{v:.4g}" for v in rec.cos_modulator)
            + " and factor match "
            + " / ".join(f"{v:.4g}" for v in rec.factor_match)
            + f" at m = {ms} | `recovery.txt`, `recovery.csv` |"
        )
    if (out / "null.txt").exists():
        text = (out / "null.txt").read_text().splitlines()
        seconds = [float(line.split(",")[3]) for line in text[2:-1]]
        rows.append(
            f"| {text[0]} | {text[-1]}; {min(seconds):.1f}-{max(seconds):.1f} s a selection "
            "| `null.txt` |"
        )
    lines += ["| figure | value | file |", "|---|---|---|", *rows, "", *notes]
    (out / "README.md").write_text("\n".join(lines))


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("part", nargs="?", choices=["large", "recovery", "null"])
    ap.add_argument("--task", choices=sorted(TASKS))
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--m", type=int)
    ap.add_argument("--T", type=int, default=3000)
    ap.add_argument("--p", type=int, default=60)
    ap.add_argument("--q", type=int, default=40)
    ap.add_argument("--max-channels", type=int, default=4)
    ap.add_argument("--n-null", type=int, default=20)
    ap.add_argument("--n-jobs", type=int, help="folds side by side (part large's selection)")
    ap.add_argument("--skip-select", action="store_true")
    ap.add_argument("--out", type=Path, default=OUT)
    ap.add_argument("--report-only", action="store_true", help="rebuild README.md only")
    args = ap.parse_args()
    if args.task:
        print(json.dumps(TASKS[args.task](args)))
        return
    if args.report_only:
        readme(args.out)
        return
    if args.part is None:
        ap.error("name a part: large, recovery or null")
    seeds = {"large": f"{args.seed} (data)", "recovery": f"{args.seed} (data), 0 (fits)"}
    run = tools.RunRecord(
        __file__, seeds=seeds.get(args.part, "1000 + i (null data sets), 0 (fits)"), part=args.part
    )
    {"large": part_large, "recovery": part_recovery, "null": part_null}[args.part](args)
    run.finish(args.out)
    readme(args.out)


if __name__ == "__main__":
    main()
