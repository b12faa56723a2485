"""Accuracy and wall time (and peak memory) of one fixed-rank MIC fit against two peers.

Methods, all on the same simulated data (known ``W``; r = 3, K = 2):

- ``mics``: ``mics.MICs(rank=3, n_channels=2)`` -- the whole fit: one pass
  over the data for the moments, baseline, ALS on the moments (HOSVD start
  plus 3 random restarts), joint refinement.
- ``numpy-als``: the same model fitted by plain NumPy in data space (written
  below): ridge-free RRR baseline with Z as additive covariate, then ALS over
  (a, c, b) on the baseline residual, each block an ``np.linalg.lstsq`` whose
  design is rebuilt from the data every sweep, then joint refinement of
  baseline and channels. Same penalty, starts, restart strategy (every start
  runs ``PROBE_SWEEPS`` sweeps, the best is continued), ``max_iter`` and
  relative-loss tolerance as mics.
- ``tensorly``: ``tensorly.regression.CPRegressor(weight_rank=2)`` on the
  interaction problem only -- inputs ``phi_t = x_t o z_t`` (centred), outputs
  the residual of the same baseline (with tensor outputs CPRegressor fits the
  (p, m, q) weight tensor directly). Timed: ``CPRegressor.fit`` only, ONE
  random start (its API has no restarts), so its ratio *understates* the
  gap. Its per-sweep design is a dense (T q) x (p K) matrix, so at the large
  size it is skipped (memory and time estimates are printed).

Timing: median wall time over ``--repeats`` runs after a warm-up fit of every
method on a small problem (numba compilation and first-call overheads are
excluded). The machine may be shared: the load average is printed.

The tables are printed and written to ``results/fit_peers/`` (``--out``):
``fit_peers.txt`` (the timing tables) and ``memory.txt`` (``--memory``),
each part's run record to ``run.json``, and ``README.md`` rebuilt from them
(``--report-only``: the README alone).
The fit's own time and memory from one commit to the next are benchmarks of
the asv suite (``benchmarks/fit.py``, ``benchmarks/population.py``).

Usage::

    python studies/performance/fit_peers.py                  # both sizes
    python studies/performance/fit_peers.py --sizes small    # just T=2000
    python studies/performance/fit_peers.py --memory         # peak memory at T=200000
    python studies/performance/fit_peers.py --report-only    # README.md only

Targets (2 cores): large size < 1 s, >= 10x faster than numpy-als,
>= 300x faster than tensorly; peak memory < 1.5x the inputs.
"""

from __future__ import annotations

import argparse
import importlib.util
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

OUT = ROOT / "results" / "fit_peers"
LINES = []  # what say() printed, written to --out
# tensorly is a peer, not a dependency of mics (``pip install tensorly`` to time it)
HAVE_TENSORLY = importlib.util.find_spec("tensorly") is not None


def say(*parts):
    """Print a line and keep it for the results file."""
    line = " ".join(str(p) for p in parts)
    print(line, flush=True)
    LINES.append(line)


SIZES = {
    "small": dict(T=2000, p=100, q=80, m=3),
    "large": dict(T=20000, p=300, q=100, m=3),
}
RANK, K = 3, 2
N_INIT = 3  # random restarts on top of the deterministic (HOSVD) start
PROBE_SWEEPS = 10
MAX_ITER = 200
TOL = 1e-7
TENSORLY_BUDGET_S = 180.0  # skip tensorly when its estimate exceeds this


# ----------------------------------------------------------------------------- data
def simulate(T, p, q, m, seed=0, noise=1.0, chunk=20000):
    """X (correlated), Z (Gaussian), Y from the MIC model; filled chunk by chunk.

    Returns X, Y, Z and the true tensor ``W`` (p, q, m). Chunked generation
    keeps the peak memory at the size of the arrays themselves (``--memory``).
    """
    rng = np.random.default_rng(seed)
    n_latent = 10
    L = rng.standard_normal((n_latent, p)) / np.sqrt(n_latent)
    U = np.linalg.qr(rng.standard_normal((p, RANK)))[0]
    V = np.linalg.qr(rng.standard_normal((q, RANK)))[0]
    B = U @ np.diag([3.0, 2.0, 1.5]) @ V.T
    D = 0.5 * rng.standard_normal((m, q))
    A = np.linalg.qr(rng.standard_normal((p, K)))[0]
    Bm = np.linalg.qr(rng.standard_normal((q, K)))[0]
    C = np.linalg.qr(rng.standard_normal((m, K)))[0]
    lam = np.array([2.0, 1.5])
    X, Y, Z = np.empty((T, p)), np.empty((T, q)), np.empty((T, m))
    for s in range(0, T, chunk):
        e = min(s + chunk, T)
        Xs, Zs = X[s:e], Z[s:e]
        rng.standard_normal(out=Xs)
        Xs += rng.standard_normal((e - s, n_latent)) @ L  # shared fluctuations
        rng.standard_normal(out=Zs)
        Ys = Y[s:e]
        rng.standard_normal(out=Ys)
        Ys *= noise
        Ys += Xs @ B + Zs @ D + ((Xs @ A) * (Zs @ C) * lam) @ Bm.T
    X += 0.5  # offsets: every method must centre
    W = np.einsum("k,ik,jk,ak->ija", lam, A, Bm, C)
    return X, Y, Z, W


def rel_error(W, W_hat):
    return float(np.linalg.norm(W - W_hat) / np.linalg.norm(W))


# ----------------------------------------------------------------------------- mics
def mics_model(seed=0):
    """``MICs(rank=3, n_channels=2)`` with its default penalties."""
    from mics import MICs

    model = MICs(rank=RANK, n_channels=K, n_init=N_INIT, verbose=0)
    return model.set_params(random_state=seed, max_iter=MAX_ITER, tol=TOL)


def fit_mics(X, Y, Z, seed=0):
    return mics_model(seed).fit(X, Y, Z).modulation_tensor()


def mics_penalties(X, Y, Z):
    """The absolute penalties ``(alpha_B, alpha_W)`` of mics' default fit on these data.

    The rule of ``docs/model.md`` ("Penalties are relative to the data"):
    the baseline's is ``alpha`` times the mean per-sample source variance
    times ``p + q``, each channel factor's ``alpha_channels`` (or ``alpha``)
    times the mean per-sample interaction variance times ``p + q + m``,
    read from the data operator of the same data (``mics.core``), so that
    every method minimises the same loss.
    """
    from mics.core import DataOperator, compute_moments

    est = mics_model()
    cm = compute_moments(X, Y, Z, interaction=False).centered()
    op = DataOperator(cm, X, Y, Z)
    alpha_W = est.alpha if est.alpha_channels is None else est.alpha_channels
    x_var = np.trace(op.Sxx) / (op.p * op.n)
    alpha_B = est.alpha * x_var * (op.p + op.q)
    return float(alpha_B), float(alpha_W * op.interaction_scale / op.n * (op.p + op.q + op.m))


# ----------------------------------------------------------------------------- numpy ALS
class NumpyALS:
    """The MIC model by alternating ``np.linalg.lstsq`` solves in data space.

    Penalties: the absolute ``alpha_B`` (baseline least-squares step) and
    ``alpha_W`` (each CP factor) of mics' default fit on the same data
    (:func:`mics_penalties`), added as ``sqrt(alpha) I`` rows to each
    least-squares design.
    """

    def __init__(self, X, Y, Z, penalties, rank=RANK, n_channels=K):
        self.X = X - X.mean(0)
        self.Z = Z - Z.mean(0)
        self.Y = Y - Y.mean(0)
        self.r, self.K = rank, n_channels
        self.alpha_B, self.alpha_W = penalties
        # the modulator-residualised source (D is profiled out of the baseline)
        self.Zpinv = np.linalg.pinv(self.Z)
        self.Xt = self.X - self.Z @ (self.Zpinv @ self.X)

    # -- baseline: ridge RRR of (Y - modulation) on X with Z additive
    def baseline(self, target):
        Xt = self.Xt
        p = Xt.shape[1]
        Tt = target - self.Z @ (self.Zpinv @ target)
        design = np.vstack([Xt, np.sqrt(self.alpha_B) * np.eye(p)])
        rhs = np.vstack([Tt, np.zeros((p, Tt.shape[1]))])
        B_ols = np.linalg.lstsq(design, rhs, rcond=None)[0]
        fitted = design @ B_ols
        _, _, Vt = np.linalg.svd(fitted, full_matrices=False)
        Vr = Vt[: self.r].T
        B = B_ols @ Vr @ Vr.T
        D = self.Zpinv @ (target - self.X @ B)
        return B, D

    # -- one ALS block: factor F (d, K) multiplying features ``feat`` (T, d)
    def _solve_mode(self, feat, gate, R, Bm):
        """min_F ||R - ((feat F) * gate) Bm^T||^2 + alpha_W ||F||^2 by lstsq.

        ``||R - H Bm^T||^2 = ||R (I - P_Bm)||^2 + ||(R~ - H) L||^2`` with
        ``R~ = R Bm (Bm^T Bm)^-1`` and ``L L^T = Bm^T Bm``: a (T K) x (d K)
        design built from the data.
        """
        T, d = feat.shape
        Kc = Bm.shape[1]
        G = Bm.T @ Bm
        L = np.linalg.cholesky(G)
        Rt = np.linalg.solve(G, (R @ Bm).T).T @ L  # (T, K)
        # design[(t, l), (k, i)] = feat[t, i] gate[t, k] L[k, l]
        F = feat[:, None, :] * gate[:, :, None]  # (T, K, d)
        design = np.einsum("tki,kl->tlki", F, L).reshape(T * Kc, Kc * d)
        design = np.vstack([design, np.sqrt(self.alpha_W) * np.eye(Kc * d)])
        rhs = np.concatenate([Rt.reshape(-1), np.zeros(Kc * d)])
        theta = np.linalg.lstsq(design, rhs, rcond=None)[0]
        return theta.reshape(Kc, d).T

    def sweep(self, R, Bm, C):
        A = self._solve_mode(self.X, self.Z @ C, R, Bm)
        C = self._solve_mode(self.Z, self.X @ A, R, Bm)
        H = (self.X @ A) * (self.Z @ C)
        H -= H.mean(0)
        design = np.vstack([H, np.sqrt(self.alpha_W) * np.eye(self.K)])
        rhs = np.vstack([R, np.zeros((self.K, R.shape[1]))])
        Bm = np.linalg.lstsq(design, rhs, rcond=None)[0].T
        # rebalance the factor norms (the product is unchanged, the penalty drops)
        na, nb, nc = (np.linalg.norm(F, axis=0) for F in (A, Bm, C))
        g = np.cbrt(na * nb * nc)
        A, Bm, C = A * g / na, Bm * g / nb, C * g / nc
        loss = float(np.sum((R - H @ Bm.T) ** 2)) + self.alpha_W * (
            np.sum(A**2) + np.sum(Bm**2) + np.sum(C**2)
        )
        return A, Bm, C, loss

    def als(self, R, Bm, C, n_sweeps, tol):
        history = []
        A = None
        for _ in range(n_sweeps):
            A, Bm, C, loss = self.sweep(R, Bm, C)
            history.append(loss)
            if len(history) > 1 and history[-2] - loss <= tol * abs(history[-2]):
                break
        return A, Bm, C, history

    def init_hosvd(self, R):
        """Leading singular vectors of the target and modulator unfoldings of Phi^T R."""
        S = np.stack([self.X.T @ (self.Z[:, a : a + 1] * R) for a in range(self.Z.shape[1])], 1)
        p, m, q = S.shape
        Ub = np.linalg.svd(S.transpose(2, 0, 1).reshape(q, -1), full_matrices=False)[0]
        Uc = np.linalg.svd(S.transpose(1, 0, 2).reshape(m, -1), full_matrices=False)[0]
        return Ub[:, : self.K], Uc[:, : self.K]

    def fit(self, seed=0, n_init=N_INIT, max_iter=MAX_ITER, tol=TOL):
        rng = np.random.default_rng(seed)
        B, D = self.baseline(self.Y)
        R = self.Y - self.X @ B - self.Z @ D
        q, m = self.Y.shape[1], self.Z.shape[1]
        starts = [self.init_hosvd(R)]
        for _ in range(n_init):
            Bm0, C0 = rng.standard_normal((q, self.K)), rng.standard_normal((m, self.K))
            starts.append((Bm0 / np.linalg.norm(Bm0, axis=0), C0 / np.linalg.norm(C0, axis=0)))
        probes = [self.als(R, Bm0, C0, PROBE_SWEEPS, tol) for Bm0, C0 in starts]
        A, Bm, C, history = min(probes, key=lambda s: s[3][-1])
        if len(history) == PROBE_SWEEPS:  # not converged yet: continue the best start
            A, Bm, C, more = self.als(R, Bm, C, max_iter - PROBE_SWEEPS, tol)
            history = history + more
        # joint refinement: baseline | channels, then one ALS sweep | baseline
        for _ in range(max_iter):
            prev = history[-1]
            H = (self.X @ A) * (self.Z @ C)
            H -= H.mean(0)
            B, D = self.baseline(self.Y - H @ Bm.T)
            R = self.Y - self.X @ B - self.Z @ D
            A, Bm, C, loss = self.sweep(R, Bm, C)
            history.append(loss)
            if prev - loss <= tol * abs(prev):
                break
        return np.einsum("ik,jk,ak->ija", A, Bm, C)


def fit_numpy_als(X, Y, Z, penalties, seed=0):
    return NumpyALS(X, Y, Z, penalties).fit(seed=seed)


# ----------------------------------------------------------------------------- tensorly
def tensorly_problem(X, Y, Z, penalties):
    """Centred interaction inputs (T, p, m), baseline residual (T, q), reg_W."""
    als = NumpyALS(X, Y, Z, penalties)
    B, D = als.baseline(als.Y)
    R = als.Y - als.X @ B - als.Z @ D
    phi = np.einsum("ti,ta->tia", als.X, als.Z)
    phi -= phi.mean(0)
    return phi, R, als.alpha_W


def fit_tensorly(phi, R, reg, seed=0):
    from tensorly.regression import CPRegressor

    model = CPRegressor(K, tol=TOL, reg_W=reg, n_iter_max=MAX_ITER, random_state=seed, verbose=0)
    model.fit(phi, R)
    return np.asarray(model.weight_tensor_).transpose(0, 2, 1), model.n_iterations_


def tensorly_cost(T, p, q, m):
    """Bytes of its largest per-sweep temporaries and flops of one sweep (mode a)."""
    design = 8.0 * T * q * p * K  # the (T q) x (p K) design, and a transposed copy
    return 2 * design, float(T) * q * (p * K) ** 2


# ----------------------------------------------------------------------------- driver
def timed(fn, repeats):
    times, out = [], None
    for _ in range(repeats):
        t0 = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t0)
    return float(np.median(times)), out


def warm_up():
    X, Y, Z, _ = simulate(400, 12, 10, 3, seed=99)
    fit_mics(X, Y, Z)
    pen = mics_penalties(X, Y, Z)
    fit_numpy_als(X, Y, Z, pen)
    if HAVE_TENSORLY:
        phi, R, reg = tensorly_problem(X, Y, Z, pen)
        fit_tensorly(phi, R, reg)


def run_size(name, repeats, ref_repeats, tensorly_per_flop):
    cfg = SIZES[name]
    X, Y, Z, W = simulate(**cfg)
    rows = []
    t_mics, W_mics = timed(lambda: fit_mics(X, Y, Z), repeats)
    rows.append(("mics", t_mics, rel_error(W, W_mics), f"{repeats} repeats"))
    pen = mics_penalties(X, Y, Z)  # same absolute penalties for every method
    t_np, W_np = timed(lambda: fit_numpy_als(X, Y, Z, pen), ref_repeats)
    rows.append(("numpy-als", t_np, rel_error(W, W_np), f"{ref_repeats} repeats; lstsq"))
    mem, flops = tensorly_cost(**cfg)
    estimate = None if tensorly_per_flop is None else tensorly_per_flop * flops * MAX_ITER
    if not HAVE_TENSORLY:
        rows.append(("tensorly", float("nan"), float("nan"), "SKIPPED: tensorly not installed"))
    elif mem > 0.5 * _available_bytes() or (estimate is not None and estimate > TENSORLY_BUDGET_S):
        why = f"SKIPPED: needs ~{mem / 1e9:.1f} GB per sweep (design (Tq)x(pK) + copy)"
        if estimate is not None:
            why += f", est. ~{estimate / 60:.0f} min for {MAX_ITER} sweeps"
        rows.append(("tensorly", float("nan"), float("nan"), why))
    else:
        phi, R, reg = tensorly_problem(X, Y, Z, pen)
        t_tl, (W_tl, n_it) = timed(lambda: fit_tensorly(phi, R, reg), ref_repeats)
        note = f"{ref_repeats} repeats; 1 start, {n_it} sweeps, interaction only"
        rows.append(("tensorly", t_tl, rel_error(W, W_tl), note))
        tensorly_per_flop = t_tl / (n_it * flops)
    return cfg, rows, tensorly_per_flop


def print_table(cfg, rows):
    t_mics = rows[0][1]
    head = (
        f"T={cfg['T']} p={cfg['p']} q={cfg['q']} m={cfg['m']}  (r={RANK}, K={K}, "
        f"{N_INIT}+1 starts for mics/numpy-als, max_iter={MAX_ITER}, tol={TOL:g})"
    )
    say(head)
    say(f"{'method':<11} {'median s':>10} {'x mics':>8} {'rel W err':>10}  note")
    for name, t, err, note in rows:
        ratio = t / t_mics if np.isfinite(t) else float("nan")
        t_s = f"{t:10.3f}" if np.isfinite(t) else f"{'-':>10}"
        r_s = f"{ratio:8.1f}" if np.isfinite(ratio) else f"{'-':>8}"
        e_s = f"{err:10.4f}" if np.isfinite(err) else f"{'-':>10}"
        say(f"{name:<11} {t_s} {r_s} {e_s}  {note}")
    say()


def _available_bytes():
    try:
        with open("/proc/meminfo") as fh:
            for line in fh:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 8e9


# ----------------------------------------------------------------------------- memory
def _rss_bytes():
    with open("/proc/self/status") as fh:
        for line in fh:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    return 0


def memory_child(T, p, q, m, mode):
    """Run in a fresh process: peak memory of one MICs fit, printed as JSON."""
    import tracemalloc

    X0, Y0, Z0, _ = simulate(300, 8, 6, m, seed=1)
    fit_mics(X0, Y0, Z0)  # imports, numba, BLAS buffers
    del X0, Y0, Z0
    rss_start = _rss_bytes()
    X, Y, Z, _ = simulate(T, p, q, m, chunk=2048)  # small chunks: few temporaries
    inputs = X.nbytes + Y.nbytes + Z.nbytes
    rss_data = _rss_bytes()
    peak_before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    out = dict(inputs=inputs, rss_start=rss_start, rss_data=rss_data, peak_before=peak_before)
    if mode == "tracemalloc":
        tracemalloc.start()
        t0 = time.perf_counter()
        fit_mics(X, Y, Z)
        out["seconds"] = time.perf_counter() - t0
        out["traced_peak"] = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
    else:
        t0 = time.perf_counter()
        fit_mics(X, Y, Z)
        out["seconds"] = time.perf_counter() - t0
        out["peak_after"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    print(json.dumps(out))


def run_memory(T, p, q, m):
    def child(mode):
        cmd = [sys.executable, __file__, "--_memory-child", mode, str(T), str(p), str(q), str(m)]
        res = subprocess.run(cmd, capture_output=True, text=True, check=True)
        return json.loads(res.stdout.strip().splitlines()[-1])

    rss = child("rss")
    trace = child("tracemalloc")
    gb = 1e9
    inputs = rss["inputs"]
    extra_rss = rss["peak_after"] - rss["rss_data"]
    data_plus_fit = rss["peak_after"] - rss["rss_start"]
    say(f"Peak memory of MICs(rank={RANK}, n_channels={K}).fit at T={T} p={p} q={q} m={m}")
    say(f"  inputs X+Y+Z nbytes            {inputs / gb:8.3f} GB")
    say(f"  process RSS before data        {rss['rss_start'] / gb:8.3f} GB (python, numpy, numba)")
    say(
        f"  RSS with data (peak so far)    {rss['rss_data'] / gb:8.3f} GB "
        f"(ru_maxrss {rss['peak_before'] / gb:.3f} GB)"
    )
    say(
        f"  peak RSS during fit            {rss['peak_after'] / gb:8.3f} GB "
        f"(fit took {rss['seconds']:.2f} s)"
    )
    say(
        f"  fit overhead (peak - with data){extra_rss / gb:8.3f} GB  = "
        f"{extra_rss / inputs:.3f} x inputs"
    )
    say(f"  data + fit peak / inputs       {data_plus_fit / inputs:8.3f} x   (target < 1.5)")
    say(
        f"  tracemalloc peak during fit    {trace['traced_peak'] / gb:8.3f} GB  = "
        f"{trace['traced_peak'] / inputs:.3f} x inputs (NumPy/Python allocations only)"
    )
    if rss["peak_before"] > rss["rss_data"] * 1.02:
        say(
            "  note: data generation peaked above the data size; the fit overhead is a lower bound"
        )


# ----------------------------------------------------------------------------- main
def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", nargs="+", choices=list(SIZES), default=list(SIZES))
    parser.add_argument("--repeats", type=int, default=5, help="repeats of the mics fit")
    parser.add_argument(
        "--ref-repeats", type=int, default=3, help="repeats of numpy-als and tensorly"
    )
    parser.add_argument(
        "--threads", type=int, default=None, help="BLAS threads (threadpoolctl); default: all"
    )
    parser.add_argument("--memory", action="store_true", help="peak-memory mode only")
    parser.add_argument(
        "--memory-size",
        type=int,
        nargs=4,
        default=[200000, 300, 100, 3],
        metavar=("T", "P", "Q", "M"),
    )
    parser.add_argument("--out", type=Path, default=OUT, help="folder for the tables")
    parser.add_argument("--_memory-child", nargs=5, help=argparse.SUPPRESS)
    parser.add_argument("--report-only", action="store_true", help="rebuild README.md only")
    args = parser.parse_args(argv)
    warnings.simplefilter("ignore")  # ConvergenceWarning chatter from max_iter caps

    if args._memory_child:
        mode, *dims = args._memory_child
        memory_child(*map(int, dims), mode)
        return
    if args.report_only:
        readme(args.out)
        return
    part = "memory" if args.memory else "timing"
    run = tools.RunRecord(__file__, argv, seeds="0 (data and starts)", part=part)
    if args.threads is not None:
        from threadpoolctl import threadpool_limits

        threadpool_limits(args.threads)
    say(
        f"cores: {os.cpu_count()}, BLAS threads: {_blas_threads()}, "
        f"load average at start: {_load()} (the machine may be shared)"
    )
    if args.memory:
        run_memory(*args.memory_size)
        _write(args.out / "memory.txt")
        run.finish(args.out)
        readme(args.out)
        return
    say("warm-up fit of every method on a small problem first (numba compilation excluded)")
    warm_up()
    say("median wall time over repeats; 'rel W err' = ||W - W_hat||_F / ||W||_F\n")
    per_flop = None
    for name in args.sizes:
        cfg, rows, per_flop = run_size(name, args.repeats, args.ref_repeats, per_flop)
        print_table(cfg, rows)
        say(f"load average now: {_load()}\n")
    _write(args.out / "fit_peers.txt")
    run.finish(args.out)
    readme(args.out)


def readme(out):
    """``README.md`` from ``fit_peers.txt`` and ``memory.txt`` (those that exist)."""
    lines = tools.readme_head(
        "One fixed-rank MIC fit against two peers: accuracy, time and peak memory",
        "studies/performance/fit_peers.py",
        out,
        about=(
            "`mics.MICs(rank=3, n_channels=2)` against the same model fitted by plain NumPy in "
            "data space and against tensorly's `CPRegressor` on the interaction problem (one "
            "start: its ratio understates the gap), on the same simulated data with a known "
            "W; median wall time over repeats after a warm-up fit of every method. Targets (2 "
            "cores): the large size under 1 s, at least 10x faster than the NumPy ALS and 300x "
            "faster than tensorly; peak memory under 1.5x the inputs."
        ),
        missing="Each file's first line gives the cores, BLAS threads and load.",
    )
    for name, title in (("fit_peers", "Accuracy and time"), ("memory", "Peak memory")):
        if (out / f"{name}.txt").exists():
            text = (out / f"{name}.txt").read_text().rstrip()
            lines += [f"## {title} (`{name}.txt`)", "", "```text", text, "```", ""]
    (out / "README.md").write_text("\n".join(lines))


def _write(path):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(LINES) + "\n")
    print(f"wrote {path}")


def _load():
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def _blas_threads():
    try:
        from threadpoolctl import threadpool_info

        return ", ".join(f"{i['internal_api']}={i['num_threads']}" for i in threadpool_info())
    except ImportError:
        return "unknown"


if __name__ == "__main__":
    main()
