"""Wall time of the hierarchical selection in ``MICs.fit`` against a naive peer.

Data: ``mics.simulate`` with r = 3, K = 2, m = 3 at T = 20000, p = 300,
q = 100 (``--small``: T = 2000, p = 80, q = 60).

Methods:

- ``mics``: ``MICs(random_state=seed, channel_search="grid", verbose=0).fit(X, Y, Z)``
  with the other defaults -- rank in 0..10, channels in 0..4 (all scored:
  the naive peer scores the whole grid; the default sequential search
  scores fewer, see ``compare_channel_search.py``), 10 contiguous folds,
  HOSVD start plus 3 random restarts. Fold statistics are the total moments minus
  the held-out block's (one pass over the data) and held-out losses are
  quadratic forms in the block's moments. Timed with ``n_jobs=None`` and
  ``n_jobs=2`` (threads over folds).
- ``naive``: the same selection written the obvious way. For every fold the
  training moments are recomputed from the raw training rows
  (``compute_moments(X[train], ...)``) and every candidate is scored by
  predicting the raw held-out rows in data space. Same splitter (contiguous
  ``KFold``), same penalties (``MICs._penalties``), same fold fits
  (``selection._channel_path``: HOSVD and K - 1 starts, the same seeds and
  capped ``max_iter``), same one-SEM rule. The final fit on all the data (moments of all samples +
  ``fit_mic_model`` at the selected rank and K) is timed separately so both a
  selection-only and a whole-fit ratio can be given.

Checks: both give the same (rank, K) and fold losses that agree to 1e-6
relative (the maximum discrepancy is printed).

Timing: one run of each after a warm-up fit on a tiny problem (numba
compilation excluded); ``--repeats`` gives the median of several. The
machine may be shared: the load average is printed with the timings.
BLAS threading is left as the library sets it (the ALS sweeps run with one
BLAS thread inside ``fit_mic_model``; moment accumulation uses all cores),
identically for both methods.

Usage::

    python benchmarks/bench_selection.py            # T=20000, p=300, q=100
    python benchmarks/bench_selection.py --small    # T=2000, p=80, q=60

Target (2 cores): default fit < 15 s at the large size.
"""

from __future__ import annotations

import argparse
import os
import time
import warnings

import numpy as np
from sklearn.model_selection import KFold
from sklearn.utils import check_random_state

import mics
from mics.modulation import MomentOperator, fit_baseline_path, fit_mic_model
from mics.moments import compute_moments
from mics.scoring import normalized_squared_error
from mics.selection import (
    _CV_MAX_ITER,
    _channel_path,
    _data_heldout_loss,
    select_mic_model,
    summarize_cv,
)
from mics.units import InputScales

SIZES = {
    "large": dict(T=20000, p=300, q=100, m=3),
    "small": dict(T=2000, p=80, q=60, m=3),
}
RANK, K = 3, 2


def load():
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


# ----------------------------------------------------------------------------- naive peer
def _predict(X, Z, cm, B, D, fit):
    """Data-space prediction of the model fitted on moments ``cm`` (training-centred)."""
    xc, zc = X - cm.x_mean, Z - cm.z_mean
    pred = cm.y_mean + xc @ B + zc @ D
    if fit is not None and fit.weights.size:
        # the interaction feature is centred with its training mean phi_mean
        h = (xc @ fit.source_patterns) * (zc @ fit.modulator_patterns) * fit.weights
        hbar = np.einsum(
            "k,ik,ia,ak->k", fit.weights, fit.source_patterns, cm.phi_mean, fit.modulator_patterns
        )
        pred = pred + (h - hbar) @ fit.target_patterns.T
    return pred


def naive_select(est, X, Y, Z):
    """Hierarchical selection recomputing every fold's moments from raw rows.

    Returns ``(rank, n_channels, results)`` with ``results`` shaped like
    ``MICs.cv_results_`` (``rank_fold_loss`` etc.).
    """
    n, p = X.shape
    q, m = Y.shape[1], Z.shape[1]
    # MICs fits standardised inputs (one scale for X and for Y, one per
    # modulator column; mics.units): the same here, or the per-column
    # modulator scaling makes the channel penalties differ from the
    # estimator's. NSE does not depend on Y's scale.
    X, Y, Z = InputScales.from_data(X, Y, Z).standardize(X, Y, Z)
    rng = check_random_state(est.random_state)
    splits = list(KFold(n_splits=est.cv, shuffle=False).split(X))
    # training moments, straight from the raw training rows, once per fold
    cms = [compute_moments(X[tr], Y[tr], Z[tr]).centered() for tr, _ in splits]

    def score(cm, test, B, D, fit):
        return normalized_squared_error(Y[test], _predict(X[test], Z[test], cm, B, D, fit))

    results = {}
    ranks = list(range(0, min(est.max_rank, p, q) + 1))
    fold_loss = []
    for (_, test), cm in zip(splits, cms, strict=True):
        op = MomentOperator(cm)
        pen = est._penalties(op)
        path = fit_baseline_path(op, ranks, pen["alpha_B"])
        fold_loss.append([score(cm, test, B, D, None) for B, D, _ in path])
    summary = summarize_cv(ranks, np.asarray(fold_loss).T, key="rank")
    rank = ranks[summary["best_index"]]
    results["rank"] = summary["rank"]
    results["rank_fold_loss"] = summary["fold_loss"]

    ks = list(range(0, min(est.max_channels, p * q, p * m, q * m) + 1))
    # the estimator draws one seed per fold for the channel stage
    seeds = rng.randint(np.iinfo(np.int32).max, size=len(splits)).tolist()
    fold_loss = []
    for (_, test), cm, seed in zip(splits, cms, seeds, strict=True):
        op = MomentOperator(cm)
        pen = est._penalties(op)
        # the same fold fits as the estimator (K - 1 and HOSVD starts)
        fits = _channel_path(est, op, rank, ks, pen, seed)
        row = [score(cm, test, f.coef, f.modulator_coef, f) for f in fits]
        fold_loss.append(row)
    summary = summarize_cv(ks, np.asarray(fold_loss).T, key="n_channels")
    n_channels = ks[summary["best_index"]]
    results["n_channels"] = summary["n_channels"]
    results["n_channels_fold_loss"] = summary["fold_loss"]
    return rank, n_channels, results


def check_prediction(est, X, Y, Z):
    """Relative gap between ``_predict``'s NSE and ``selection._data_heldout_loss`` (fold 0)."""
    train, test = next(KFold(n_splits=est.cv).split(X))
    cm = compute_moments(X[train], Y[train], Z[train]).centered()
    op = MomentOperator(cm)
    fit = fit_mic_model(op, RANK, K, **est._penalties(op), n_init=1, random_state=0)
    B, D = fit.coef, fit.modulator_coef
    ours = normalized_squared_error(Y[test], _predict(X[test], Z[test], cm, B, D, fit))
    ref = _data_heldout_loss((X, Y, Z), test, cm, B, D, fit)
    return abs(ours - ref) / abs(ref)


def naive_final_fit(est, X, Y, Z, rank, n_channels, rng):
    """The final fit after selection, as ``MICs.fit`` does it (moments of all rows)."""
    cm = compute_moments(X, Y, Z).centered()
    op = MomentOperator(cm)
    return fit_mic_model(
        op,
        rank,
        n_channels,
        **est._penalties(op),
        n_init=est.n_init,
        max_iter=est.max_iter,
        tol=est.tol,
        random_state=rng.randint(np.iinfo(np.int32).max),
    )


# ----------------------------------------------------------------------------- timing
def timed(fn, repeats):
    times, out = [], None
    for _ in range(repeats):
        t0 = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t0)
    return float(np.median(times)), out


def rel_gap(a, b):
    a, b = np.asarray(a, float), np.asarray(b, float)
    return float(np.max(np.abs(a - b) / np.maximum(np.abs(b), 1e-300)))


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--small", action="store_true", help="T=2000, p=80, q=60")
    parser.add_argument("--repeats", type=int, default=1)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    size = SIZES["small" if args.small else "large"]
    T, p, q, m = size["T"], size["p"], size["q"], size["m"]
    warnings.simplefilter("ignore")  # capped CV fits warn about convergence

    # warm-up: numba kernels, joblib, first BLAS calls
    Xw, Yw, Zw, _ = mics.simulate(n_samples=300, n_source=8, n_target=6, random_state=1)
    mics.MICs(cv=3, max_rank=2, max_channels=1, n_init=1, verbose=0, random_state=0).fit(
        Xw, Yw, Zw
    )
    naive_select(mics.MICs(cv=3, max_rank=2, max_channels=1, n_init=1, random_state=0), Xw, Yw, Zw)

    X, Y, Z, _ = mics.simulate(
        n_samples=T,
        n_source=p,
        n_target=q,
        n_modulators=m,
        rank=RANK,
        n_channels=K,
        random_state=args.seed,
    )
    print(f"T={T} p={p} q={q} m={m}, true r={RANK} K={K}; cores={os.cpu_count()}")
    print(
        "selection: rank 0..10, K 0..4, 10 contiguous folds, n_init=3, "
        f"CV max_iter={_CV_MAX_ITER}; {args.repeats} repeat(s)"
    )
    rows = []

    def run(name, fn):
        before = load()
        t, out = timed(fn, args.repeats)
        after = load()
        rows.append((name, t))
        print(f"  {name:<32s} {t:8.2f} s   load before/after: {before} / {after}", flush=True)
        return t, out

    # the whole grid, as the naive peer scores it
    est = mics.MICs(random_state=args.seed, channel_search="grid", verbose=0)
    t_fit, model = run(
        "mics fit (n_jobs=None)", lambda: mics.MICs(**est.get_params()).fit(X, Y, Z)
    )
    t_fit2, model2 = run(
        "mics fit (n_jobs=2)",
        lambda: mics.MICs(**{**est.get_params(), "n_jobs": 2}).fit(X, Y, Z),
    )

    def mics_select():
        e = mics.MICs(**est.get_params())
        e.solver_ = e._choose_solver(T, p, m, q)
        return select_mic_model(e, X, Y, Z, check_random_state(e.random_state))

    t_sel, _ = run("mics selection only", mics_select)
    t_naive, (rank_n, k_n, res_n) = run("naive selection", lambda: naive_select(est, X, Y, Z))

    def final_rng():
        # the estimator's generator after the channel stage drew one seed per fold
        rng = check_random_state(args.seed)
        rng.randint(np.iinfo(np.int32).max, size=est.cv)
        return rng

    t_final, _ = run(
        "naive final fit", lambda: naive_final_fit(est, X, Y, Z, rank_n, k_n, final_rng())
    )

    res = model.cv_results_
    d_rank = rel_gap(res_n["rank_fold_loss"], res["rank_fold_loss"])
    d_chan = rel_gap(res_n["n_channels_fold_loss"], res["n_channels_fold_loss"])
    d_jobs = max(
        rel_gap(model2.cv_results_["rank_fold_loss"], res["rank_fold_loss"]),
        rel_gap(model2.cv_results_["n_channels_fold_loss"], res["n_channels_fold_loss"]),
    )
    print()
    print(
        f"selected (rank, K): mics ({model.rank_}, {model.n_channels_}), "
        f"mics n_jobs=2 ({model2.rank_}, {model2.n_channels_}), naive ({rank_n}, {k_n})"
    )
    print(
        f"max relative fold-loss discrepancy naive vs mics: rank stage {d_rank:.2e}, "
        f"channel stage {d_chan:.2e} (tolerance 1e-6)"
    )
    per_k = np.max(
        np.abs(res_n["n_channels_fold_loss"] - res["n_channels_fold_loss"])
        / np.abs(res["n_channels_fold_loss"]),
        axis=1,
    )
    print("  channel stage, per K: " + ", ".join(f"K={k}: {g:.1e}" for k, g in enumerate(per_k)))
    print(f"max relative fold-loss discrepancy n_jobs=2 vs n_jobs=None: {d_jobs:.2e}")
    print(
        f"naive prediction vs selection._data_heldout_loss: {check_prediction(est, X, Y, Z):.2e}"
    )
    print(f"mean NSE by K (mics):  {np.round(res['n_channels_mean_loss'], 5).tolist()}")
    same = (model.rank_, model.n_channels_) == (rank_n, k_n)
    ok = same and max(d_rank, d_chan) <= 1e-6
    print()
    print(f"ratio naive / mics, selection only:  {t_naive / t_sel:6.2f}x")
    print(f"ratio naive / mics, whole fit:       {(t_naive + t_final) / t_fit:6.2f}x")
    print(f"mics n_jobs=2 speed-up over n_jobs=None: {t_fit / t_fit2:5.2f}x")
    target = "met" if t_fit < 15 else "MISSED"
    print(
        f"default fit {t_fit:.2f} s (target < 15 s on 2 cores at the large size: {target}); "
        f"uptime load now {load()}"
    )
    print("agreement:", "OK" if ok else "MISMATCH")
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
