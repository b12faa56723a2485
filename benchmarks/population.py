"""A third population as the modulator (issue 17): memory, speed, selection, recovery.

Four parts, each run in a fresh subprocess so that its peak resident memory
(``ru_maxrss``) is its own:

``large``
    T = 20000, p = 300, q = 100, m = 200 (a 200-neuron modulator population).
    ``MICs(rank=2, n_channels=1)`` (``solver="auto"``) and the default
    selection ``MICs()``, each with its wall time and peak memory, and as the
    peer, measured in the same run, 30 sweeps of a plain NumPy ALS that
    passes over the data each sweep (weighted Grams by ``(F * w).T @ F``, the
    same ridge solves; no moments, no restarts). Data from an independent
    generator written here (latent-driven populations, one planted channel).
``ratio``
    T = 3000, p = 60, q = 40, true r = 3, K = 1 (``mics.simulate``,
    ``modulator_kind="population"``): the default selection at m = 3 and
    m = 100, timed in the same run, and the selections of v0.1 (the git tag,
    run from an extracted copy in a subprocess) on the same data.
``recovery``
    Fixed rank and K = 1 at T = 3000, p = 60, q = 40 for m = 3, 30, 100, 300:
    cosine of each fitted pattern with the truth and the factor match score
    (``mics.recovery.factor_match_score``).
``null``
    Data sets without modulation (K = 0) at m = 100: the rate of K_hat = 0
    under the default channel selection, with a Clopper-Pearson interval.

Usage::

    python benchmarks/population.py large [--n-jobs N] [--skip-select]
    python benchmarks/population.py ratio [--v01-m100 full|rank|skip] [--previous REF]
        [--skip-stage-2]
    python benchmarks/population.py recovery
    python benchmarks/population.py null --n-null 20

Results go to ``results/population/<part>.txt`` (and ``.csv``), or
``<part>_<suffix>.txt`` with ``--suffix``. The machine
is shared (2 cores, several users): the load average is printed with every
timing; ratios measured in the same run are the figures to compare.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
import warnings
from pathlib import Path

import numpy as np
from _baseline import extract_ref, extract_v01

ROOT = Path(__file__).resolve().parents[1]
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


def _ratio_data(m, seed):
    from mics import simulate

    return simulate(
        n_samples=3000,
        n_source=60,
        n_target=40,
        n_modulators=m,
        rank=3,
        n_channels=1,
        modulator_kind="population",
        random_state=seed,
    )


def _warm_up(mics):
    """Compile and load (numba, BLAS) on a tiny problem before timing, on each path."""
    w = mics.simulate(n_samples=300, n_source=10, n_target=8, n_modulators=3, random_state=1)[:3]
    est = mics.MICs(random_state=0, cv=3, max_rank=2, max_channels=1, verbose=0)
    # v0.1 has one path and no ``solver`` parameter
    solvers = ("moments", "data") if "solver" in est.get_params() else (None,)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for solver in solvers:
            (est if solver is None else est.set_params(solver=solver)).fit(*w)


def task_select(args):
    """Default selection of the current package (or of v0.1 on PYTHONPATH)."""
    import mics

    X, Y, Z, truth = _ratio_data(args.m, args.seed)
    kw = {} if args.rank is None else {"rank": args.rank}
    _warm_up(mics)
    if args.skip_stage_2:
        import mics.modulation

        mics.modulation._CONTINUE_MODULATION_STAGE = False
    per_k = _count_fits(mics)
    t = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        est = mics.MICs(random_state=0, verbose=0, **kw).fit(X, Y, Z)
    dt = time.perf_counter() - t
    from mics.recovery import factor_match_score

    fms = factor_match_score(truth, est) if est.n_channels_ else float("nan")
    return dict(
        seconds=dt,
        peak_mb=_peak_mb(),
        solver=getattr(est, "solver_", "?"),
        rank=int(est.rank_),
        K=int(est.n_channels_),
        fms=float(fms),
        version=str(Path(mics.__file__).parent),
        # per channel count: [fits, mean sweeps, seconds, fraction converged]
        per_k={
            K: [len(v), round(float(np.mean([f[0] for f in v])), 1),
                round(sum(f[1] for f in v), 2), round(float(np.mean([f[2] for f in v])), 2)]
            for K, v in sorted(per_k.items())
        },
    )  # fmt: skip


def _count_fits(mics):
    """Record sweeps, time and convergence of every ALS fit, by channel count.

    Where the selection's time goes: the fits of one K across folds (and
    the final fit). Versions without ``_fit_mic_model`` record nothing.
    """
    import mics.modulation as modulation

    fits = {}
    inner = getattr(modulation, "_fit_mic_model", None)
    if inner is None:
        return fits

    def timed(op, rank, K, *args, **kwargs):
        t = time.perf_counter()
        fit = inner(op, rank, K, *args, **kwargs)
        fits.setdefault(int(K), []).append((fit.n_iter, time.perf_counter() - t, fit.converged))
        return fit

    modulation._fit_mic_model = timed
    return fits


def task_recovery(args):
    from mics import MICs, simulate
    from mics.recovery import factor_match_score

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
    "select": task_select,
    "recovery": task_recovery,
    "null": task_null,
}


def run(task, pythonpath=None, **kw):
    """Run one task in a fresh interpreter; returns its result dict."""
    cmd = [sys.executable, __file__, "--task", task]
    for k, v in kw.items():
        flag = f"--{k.replace('_', '-')}"
        if v is True:
            cmd.append(flag)
        elif v is not None and v is not False:
            cmd += [flag, str(v)]
    env = dict(os.environ, PYTHONPATH=str(pythonpath or ROOT))
    out = subprocess.run(cmd, env=env, check=True, capture_output=True, text=True).stdout
    res = json.loads(out.strip().splitlines()[-1])
    res["load"] = round(_load(), 1)
    return res


def _write(name, lines):
    OUT.mkdir(parents=True, exist_ok=True)
    text = "\n".join(lines) + "\n"
    (OUT / f"{name}.txt").write_text(text)
    print(text)


# ----------------------------------------------------------------------------- parts
def part_large(args):
    name = "large" + (f"_{args.suffix}" if args.suffix else "")
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
    _write(name, lines)


def part_ratio(args):
    name = "ratio" + (f"_{args.suffix}" if args.suffix else "")
    lines = ["T=3000, p=60, q=40, true r=3, K=1, modulator_kind='population'"]
    new = {}
    for m in (3, 100):
        new[m] = run("select", m=m, seed=args.seed)
        lines.append(f"this tree, m={m}: {new[m]}")
        _write(name, lines)  # partial results survive a slow v0.1 run
    lines.append(f"time ratio m=100 / m=3: {new[100]['seconds'] / new[3]['seconds']:.1f}x")
    if args.skip_stage_2:
        # the experiment beside the default, in the same run
        alt = {}
        for m in (3, 100):
            alt[m] = run("select", m=m, seed=args.seed, skip_stage_2=True)
            lines.append(f"this tree without the fixed-baseline stage, m={m}: {alt[m]}")
            ratio = new[m]["seconds"] / alt[m]["seconds"]
            lines.append(f"  default / without: {ratio:.2f}x")
            _write(name, lines)
        ratio = alt[100]["seconds"] / alt[3]["seconds"]
        lines.append(f"  ratio m=100 / m=3 without: {ratio:.1f}x")
    if args.previous:
        # the same two selections of an earlier commit, back to back
        with tempfile.TemporaryDirectory() as tmp:
            extract_ref(args.previous, tmp)
            for m in (3, 100):
                old = run("select", pythonpath=tmp, m=m, seed=args.seed)
                lines.append(f"{args.previous}, m={m}: {old}")
                lines.append(
                    f"  {args.previous} / this tree: {old['seconds'] / new[m]['seconds']:.2f}x"
                )
                _write(name, lines)
    if args.v01_m100 == "skip":
        return
    with tempfile.TemporaryDirectory() as tmp:
        extract_v01(tmp)
        old3 = run("select", pythonpath=tmp, m=3, seed=args.seed)
        lines.append(f"v0.1, m=3: {old3}")
        _write(name, lines)
        rank = None if args.v01_m100 == "full" else new[100]["rank"]
        old100 = run("select", pythonpath=tmp, m=100, seed=args.seed, rank=rank)
        what = "default selection" if rank is None else f"rank fixed at {rank}, K selected"
        lines.append(f"v0.1, m=100 ({what}): {old100}")
    same = all(
        (new[m]["rank"] if m == 3 or rank is None else rank, new[m]["K"]) == (o["rank"], o["K"])
        for m, o in ((3, old3), (100, old100))
    )
    lines.append(f"same selections as v0.1: {same}")
    _write(name, lines)


def part_recovery(args):
    lines = ["T=3000, p=60, q=40, r=3, K=1 fixed; modulator_kind='population'",
             "m,solver,seconds,cos_source,cos_target,cos_modulator,factor_match"]  # fmt: skip
    for m in (3, 30, 100, 300):
        res = run("recovery", m=m, seed=args.seed)
        lines.append(
            f"{m},{res['solver']},{res['seconds']:.1f},{res['source']:.4f},"
            f"{res['target']:.4f},{res['modulator']:.4f},{res['fms']:.4f}"
        )
    _write("recovery", lines)
    (OUT / "recovery.csv").write_text("\n".join(lines[1:]) + "\n")


def part_null(args):
    from mics.recovery import detection_rates

    name = "null" + (f"_{args.suffix}" if args.suffix else "")
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
    _write(name, lines)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("part", nargs="?", choices=["large", "ratio", "recovery", "null"])
    ap.add_argument("--task", choices=sorted(TASKS))
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--m", type=int)
    ap.add_argument("--rank", type=int)
    ap.add_argument("--T", type=int, default=3000)
    ap.add_argument("--p", type=int, default=60)
    ap.add_argument("--q", type=int, default=40)
    ap.add_argument("--max-channels", type=int, default=4)
    ap.add_argument("--n-null", type=int, default=20)
    ap.add_argument("--v01-m100", choices=["full", "rank", "skip"], default="rank")
    ap.add_argument(
        "--skip-stage-2",
        action="store_true",
        help="also time fits without the fixed-baseline stage (part ratio; experiment)",
    )
    ap.add_argument("--n-jobs", type=int, help="folds side by side (part large's selection)")
    ap.add_argument("--previous", help="git ref timed beside this tree (part ratio)")
    ap.add_argument("--suffix", help="results/population/<part>_<suffix>.txt")
    ap.add_argument("--skip-select", action="store_true")
    args = ap.parse_args()
    if args.task:
        print(json.dumps(TASKS[args.task](args)))
        return
    {"large": part_large, "ratio": part_ratio, "recovery": part_recovery, "null": part_null}[
        args.part
    ](args)


if __name__ == "__main__":
    main()
