"""Sparse reduced-rank regression against its reference, at the reference's two scales (issue 47).

The reference is the code of Kobak et al. (2021, berenslab ``patch-seq-rrr``):
``sparseRRR.elastic_rrr`` on glmnet (the version of the paper) and
``sparseRRR_scikit.elastic_rrr`` on scikit-learn's ``MultiTaskElasticNet``
(the version its authors now recommend). It is not part of mics and is not
copied here: give its checkout with ``--reference``. Without it the study
times mics beside ``benchmarks.sparse.peer_sparse_rrr`` only (the
reference's algorithm written on ``MultiTaskElasticNet``; always run).

Measurements, every method in the same process, one BLAS thread for all,
alternating methods within each repeat (median wall time of ``--repeats``):

1. **Patch-seq scale** (more genes than cells: 80 x 1313 x 80, rank 2,
   ``benchmarks.sparse.patchseq_like``): one fit per weight of the elastic
   net, glmnet's ``lambda`` in ``PATCHSEQ_LAMBDAS`` with mixing 0.5, and for
   mics ``ReducedRankRegression(rank=2, alpha, sparsity)`` at the same
   objective (``benchmarks.sparse.mics_settings``). Every fit's penalised
   loss is evaluated on the same data (``objective``), with its number of
   genes.
2. **Cross-validation at the demo scale** (1213 x 1000 x 16,
   ``benchmarks.sparse.demo_like``): the reference's ``elastic_rrr_cv``
   (10 folds, rank 2, group lasso only, the weights of mics's
   ``SPARSITY_GRID`` but 0; it also refits each fold's genes without the
   lasso, its "relaxed" fit) against ``ReducedRankRegressionCV(ranks=(2,),
   cv=10, sparsity="cv")``, and the default ranks (rank chosen with the
   sparsity).
3. **The W block alone** (the subproblem ``MultiTaskElasticNet`` solves):
   the first block after the dense start at each Patch-seq weight, by mics
   (``fit_sparse_rrr(..., init=dense start, max_iter=1)``: one block) and by
   ``MultiTaskElasticNet(tol=1e-10)`` from zero, with the block objective of
   each.
4. **Rank and sparsity together** (the pitfall of issue 47): on
   ``demo_like(n=2426)``, the first half to fit, the second to test: the
   test R^2 of ``ReducedRankRegressionCV(sparsity="cv")`` with the default
   ranks, and of each fixed rank 1-4.

Writes ``results/sparse_rrr_speed/``: ``patchseq.csv``, ``demo_cv.csv``,
``block.csv``, ``joint_rank.csv``, ``speed.png`` and ``README.md``
(generated from the tables).

Usage (on an idle machine; the reference needs glmnet's Fortran runtime)::

    apt-get install libgfortran5
    pip install --no-deps glmnetforpython     # the glmnet the reference imports
    git clone https://github.com/berenslab/patch-seq-rrr /tmp/patch-seq-rrr
    OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 MKL_NUM_THREADS=1 \\
        python studies/performance/sparse_rrr_speed.py --reference /tmp/patch-seq-rrr

``--quick`` runs one repeat and skips the default-ranks CV and part 4.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.util
import io
import os
import sys
import time
import types
from functools import partial
from pathlib import Path

import numpy as np
import pandas as pd
from threadpoolctl import threadpool_limits

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

import mics  # noqa: E402
from benchmarks.sparse import (  # noqa: E402
    PATCHSEQ_LAMBDAS,
    PATCHSEQ_MIXING,
    demo_like,
    mics_settings,
    patchseq_like,
    peer_sparse_rrr,
)
from mics.estimators.rrr import SPARSITY_GRID  # noqa: E402
from studies.study_tools import markdown_table  # noqa: E402

OUT = ROOT / "results" / "sparse_rrr_speed"


# ----------------------------------------------------------------------------- the reference
def load_reference(checkout):
    """The reference's two modules from its checkout: ``{"glmnet": mod, "sklearn": mod}``.

    Its imports that mics does not need are stood in for: ``glmnet_python``
    and ``glmnet`` by the ``glmnetforpython`` package (the same Fortran
    glmnet), ``rnaseqTools`` (unused by the functions timed) by an empty
    module. A module that cannot be loaded is left out, with the reason.
    """
    checkout = Path(checkout)
    out, why = {}, {}
    import matplotlib

    matplotlib.use("Agg")
    try:
        from glmnetforpython.glmnet import glmnet

        shim = types.ModuleType("glmnet")
        shim.glmnet = glmnet
        sys.modules.setdefault("glmnet_python", types.ModuleType("glmnet_python"))
        sys.modules["glmnet"] = shim
        sys.modules.setdefault("rnaseqTools", types.ModuleType("rnaseqTools"))
        out["glmnet"] = _module(checkout / "sparseRRR.py", "reference_glmnet")
    except Exception as err:  # (any failure to load: the study goes on without it)
        why["glmnet"] = f"{type(err).__name__}: {err}"
    try:
        out["sklearn"] = _module(checkout / "sparseRRR_scikit.py", "reference_sklearn")
    except Exception as err:
        why["sklearn"] = f"{type(err).__name__}: {err}"
    return out, why


def _module(path, name):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def reference_fit(module, kind, X, Y, lam, mixing):
    """The reference's ``elastic_rrr`` at glmnet's ``lambda`` and mixing: ``B = w v^T``."""
    if kind == "glmnet":
        w, v = module.elastic_rrr(X, Y, rank=2, lambdau=lam, alpha=mixing)
    else:
        w, v = module.elastic_rrr(X, Y, rank=2, alpha=lam, l1_ratio=mixing)
    return w @ v.T


# ----------------------------------------------------------------------------- helpers
def objective(X, Y, B, lam, mixing):
    """glmnet's loss times ``2 n``: ``||Yc - Xc B||^2 + alpha ||B||^2 + lam_g sum_i ||B[i]||``.

    (``B = W V^T`` with orthonormal ``V`` has the row norms of ``W``.)
    """
    n = X.shape[0]
    Xc, Yc = X - X.mean(axis=0), Y - Y.mean(axis=0)
    resid = Yc - Xc @ B
    alpha, group = n * lam * (1 - mixing), 2 * n * lam * mixing
    return float(
        np.sum(resid**2) + alpha * np.sum(B**2) + group * np.sum(np.linalg.norm(B, axis=1))
    )


def timed(repeats, methods):
    """Median wall time of each method, the methods alternating within each repeat.

    ``methods`` maps a name to a function of no argument; returns
    ``{name: (median seconds, last result)}``.
    """
    times = {name: [] for name in methods}
    results = {}
    for _ in range(repeats):
        for name, run in methods.items():
            start = time.perf_counter()
            with contextlib.redirect_stdout(io.StringIO()):
                results[name] = run()
            times[name].append(time.perf_counter() - start)
    return {name: (float(np.median(t)), results[name]) for name, t in times.items()}


def warm_up():
    """Compile the kernels and load BLAS outside the timings."""
    X, Y = patchseq_like()
    mics.ReducedRankRegression(rank=2, alpha=1.0, sparsity=1.0).fit(X[:, :50], Y)
    mics.ReducedRankRegression(rank=2, alpha=1.0, sparsity=1.0).fit(X[:60, :40], Y[:60])


# ----------------------------------------------------------------------------- 1. Patch-seq
def patchseq_table(reference, repeats):
    X, Y = patchseq_like()
    rows = []
    for lam in PATCHSEQ_LAMBDAS:
        alpha, sparsity = mics_settings(X, Y, lam, PATCHSEQ_MIXING)
        methods = {
            "mics": partial(_mics_coef, X, Y, alpha, sparsity),
            "peer (MultiTaskElasticNet)": partial(_peer_coef, X, Y, lam),
        }
        for kind, module in reference.items():
            methods[f"reference ({kind})"] = partial(
                reference_fit, module, kind, X, Y, lam, PATCHSEQ_MIXING
            )
        for name, (seconds, B) in timed(repeats, methods).items():
            rows.append(
                dict(
                    glmnet_lambda=lam,
                    method=name,
                    seconds=seconds,
                    objective=objective(X, Y, B, lam, PATCHSEQ_MIXING),
                    n_genes=int(np.count_nonzero(np.any(B != 0, axis=1))),
                )
            )
    table = pd.DataFrame(rows)
    best = table.groupby("glmnet_lambda")["objective"].transform("min")
    table["objective_above_lowest"] = (table["objective"] - best) / best
    return table


def _mics_coef(X, Y, alpha, sparsity):
    return mics.ReducedRankRegression(rank=2, alpha=alpha, sparsity=sparsity).fit(X, Y).coef_.T


def _peer_coef(X, Y, lam):
    W, V = peer_sparse_rrr(X, Y, 2, lam, PATCHSEQ_MIXING)
    return W @ V.T


# ----------------------------------------------------------------------------- 2. demo CV
def demo_cv_table(reference, repeats, quick):
    X, Y = demo_like()
    n_train = X.shape[0] - X.shape[0] // 10
    # the candidates of mics's grid as glmnet lambdas (group lasso only): the
    # group weight 2 n lambda equals sparsity * 2 sqrt(n v_x v_y), and the
    # data are standardised (v = 1)
    lambdas = np.array([s / np.sqrt(n_train) for s in SPARSITY_GRID if s > 0])

    def cv(ranks):
        return mics.ReducedRankRegressionCV(ranks=ranks, cv=10, sparsity="cv").fit(X, Y)

    methods = {"mics, rank 2": lambda: cv((2,))}
    if not quick:
        methods["mics, default ranks (with the sparsity)"] = lambda: cv(tuple(range(11)))
    for kind, module in reference.items():
        if kind == "glmnet":
            methods["reference (glmnet), rank 2"] = lambda m=module: m.elastic_rrr_cv(
                X, Y, alphas=np.array([1.0]), lambdas=lambdas, folds=10, rank=2
            )
        else:
            methods["reference (sklearn), rank 2"] = lambda m=module: m.elastic_rrr_cv(
                X, Y, l1_ratios=np.array([1.0]), alphas=lambdas, folds=10, rank=2
            )
    rows = []
    for name, (seconds, result) in timed(repeats, methods).items():
        row = dict(method=name, seconds=seconds, n_candidates=len(lambdas) + 1)
        if name.startswith("mics"):
            row.update(rank=result.rank_, sparsity=result.sparsity_)
            row["n_genes"] = result.source_members_.size
        else:
            row["n_candidates"] = len(lambdas)
        rows.append(row)
    return pd.DataFrame(rows)


# ----------------------------------------------------------------------------- 3. the W block
def block_table(repeats):
    from sklearn.linear_model import MultiTaskElasticNet

    from mics.core import fit_sparse_rrr, sparse_rrr_penalty

    X, Y = patchseq_like()
    n, q = Y.shape
    Xc, Yc = X - X.mean(axis=0), Y - Y.mean(axis=0)
    Sxx, Sxy, tr_yy = Xc.T @ Xc, Xc.T @ Yc, float(np.sum(Yc * Yc))
    rows = []
    for lam in PATCHSEQ_LAMBDAS:
        alpha, sparsity = mics_settings(X, Y, lam, PATCHSEQ_MIXING)
        group = sparse_rrr_penalty(Sxx, tr_yy, n, q, sparsity)
        dense = fit_sparse_rrr(Sxx, Sxy, tr_yy, n, 2, alpha=alpha, max_iter=0)
        start = (dense.source_loadings, dense.target_loadings)
        V = fit_sparse_rrr(Sxx, Sxy, tr_yy, n, 2, alpha=alpha, init=start, max_iter=1)
        V = V.target_loadings
        target = Yc @ V
        # MultiTaskElasticNet's loss times 2 n is the block's
        a = group / (2 * n) + alpha / n
        net = MultiTaskElasticNet(
            alpha=a, l1_ratio=group / (2 * n) / a, fit_intercept=False, tol=1e-10, max_iter=100000
        )

        def block(W, V=V, target=target, group=group, alpha=alpha):
            resid = target - Xc @ W
            return float(
                np.sum(resid**2) + alpha * np.sum(W**2) + group * np.linalg.norm(W, axis=1).sum()
            )

        one_block = dict(alpha=alpha, sparsity=sparsity, init=start, max_iter=1)
        methods = {
            "mics (row descent kernel)": partial(
                _block_by_mics, (Sxx, Sxy, tr_yy, n, 2), one_block
            ),
            "MultiTaskElasticNet (tol 1e-10)": partial(_block_by_sklearn, net, Xc, target),
        }
        for name, (seconds, W) in timed(repeats, methods).items():
            rows.append(
                dict(
                    glmnet_lambda=lam,
                    method=name,
                    seconds=seconds,
                    block_objective=block(W),
                    n_genes=int(np.count_nonzero(np.any(W != 0, axis=1))),
                )
            )
    table = pd.DataFrame(rows)
    best = table.groupby("glmnet_lambda")["block_objective"].transform("min")
    table["objective_above_lowest"] = (table["block_objective"] - best) / best
    return table


def _block_by_mics(moments, settings):
    from mics.core import fit_sparse_rrr

    return fit_sparse_rrr(*moments, **settings).source_loadings


def _block_by_sklearn(net, Xc, target):
    return net.fit(Xc, target).coef_.T


# ----------------------------------------------------------------------------- 4. joint rank
def joint_rank_table():
    X, Y = demo_like(n=2426)
    train, test = slice(0, 1213), slice(1213, None)

    def r2(est):
        resid = Y[test] - est.predict(X[test])
        return 1 - float(np.sum(resid**2) / np.sum((Y[test] - Y[test].mean(axis=0)) ** 2))

    rows = []
    for ranks in (tuple(range(11)), (1,), (2,), (3,), (4,)):
        est = mics.ReducedRankRegressionCV(ranks=ranks, cv=10, sparsity="cv")
        est.fit(X[train], Y[train])
        res = est.cv_results_
        rows.append(
            dict(
                ranks="0-10 (default)" if len(ranks) > 1 else str(ranks[0]),
                dense_choice=int(res["rank"][res["best_index"]]),
                rank=est.rank_,
                sparsity=est.sparsity_,
                n_genes=est.source_members_.size,
                test_r2=r2(est),
            )
        )
    return pd.DataFrame(rows)


# ----------------------------------------------------------------------------- report
def figure(patchseq, demo, path):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (left, right) = plt.subplots(1, 2, figsize=(10, 3.8))
    for name, rows in patchseq.groupby("method", sort=False):
        left.plot(rows["glmnet_lambda"], rows["seconds"], "o-", label=name)
    left.set(
        xlabel="glmnet lambda (mixing 0.5)",
        ylabel="seconds per fit",
        yscale="log",
        title="Patch-seq scale (80 x 1313 x 80, rank 2)",
    )
    left.legend(fontsize=8)
    right.barh(demo["method"], demo["seconds"], color="0.5")
    right.set(xlabel="seconds", title="10-fold CV, 1213 x 1000 x 16")
    right.tick_params(axis="y", labelsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def readme(tables, reference_note, args, seconds, load):
    patchseq, demo, block, joint = tables
    lines = [
        "# Sparse reduced-rank regression: speed against the reference (issue 47)",
        "",
        f"Made by `python studies/performance/sparse_rrr_speed.py {' '.join(args)}`"
        f" in {seconds / 60:.1f} min; load average at the start {load[0]:.2f}, at the end"
        f" {load[1]:.2f} (2 cores). Timings are medians over repeats, every method in the"
        " same process, one BLAS thread for all, methods alternating within each repeat.",
        "Data: `benchmarks.sparse.patchseq_like` and `demo_like` (seed 0), standardised.",
        "",
        "Reference: " + reference_note,
        "",
    ]
    if max(load) > 1.5:
        lines += [
            "**The machine was shared (load above 1.5): take only the ratios of this run;"
            " rerun on an idle machine for final figures (command in the module"
            " docstring).**",
            "",
        ]
    lines += [
        "![times](speed.png)",
        "",
        "## 1. One fit per weight at Patch-seq scale (80 x 1313 x 80, rank 2)",
        "",
        "`objective_above_lowest`: the fit's penalised loss (glmnet's, times 2n) above the"
        " lowest any method reached at that weight, relative. Ratios are of the median times.",
        "",
        markdown_table(patchseq),
        "",
    ]
    totals = patchseq.groupby("method", sort=False)["seconds"].sum()
    lines += ["Total over the six weights:", ""]
    for name, total in totals.items():
        ratio = total / totals["mics"]
        lines.append(f"- {name}: {total:.3f} s ({ratio:.2f}x the time of mics)")
    lines += [
        "",
        "## 2. Ten-fold cross-validation at the demo scale (1213 x 1000 x 16)",
        "",
        "The reference's `elastic_rrr_cv` (rank 2, group lasso only, mics's candidates"
        " but 0) also refits each fold's selected genes without the lasso (its relaxed"
        " fit), a least-squares solve on the few genes kept; mics fits the dense"
        " candidate (0) instead. The default ranks row chooses the rank with the sparsity"
        " (ranks 0-10, stopping after two that do not help).",
        "",
        markdown_table(demo),
        "",
    ]
    rank2 = demo.set_index("method")["seconds"]
    for name, seconds in rank2.items():
        if name.startswith("reference"):
            ratio = rank2["mics, rank 2"] / seconds
            lines.append(f"- mics, rank 2: {ratio:.2f}x the time of {name}")
    lines += [
        "",
        "## 3. The W block alone: mics's kernel and scikit-learn's MultiTaskElasticNet",
        "",
        "The first block after the dense start at each weight (the same problem for both;"
        " mics's time includes forming its working-set blocks from the (p, p) scatter)."
        " Both reach the block's minimum; neither is faster at every weight, so the"
        " compiled kernel, which also works from moments (folds, chunked and Dask"
        " inputs), is kept.",
        "",
        markdown_table(block),
        "",
    ]
    if joint is not None:
        lines += [
            "## 4. Rank and sparsity chosen together (demo-like data, fresh test half)",
            "",
            "`dense_choice`: the rank the dense fits choose (0 is the empty model).",
            "",
            markdown_table(joint),
            "",
        ]
    return "\n".join(lines)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reference", help="a checkout of berenslab/patch-seq-rrr")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--out", default=str(OUT))
    args = parser.parse_args(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    repeats = 1 if args.quick else args.repeats
    reference, why = load_reference(args.reference) if args.reference else ({}, {})
    if args.reference:
        note = "the berenslab code from `--reference`: " + (
            ", ".join(f"`{k}` loaded" for k in reference) or "nothing loaded"
        )
        note += "".join(f"; `{k}` not loaded ({v})" for k, v in why.items())
    else:
        note = "not given (`--reference`): only the peer was timed beside mics."
    load0, start = os.getloadavg()[0], time.perf_counter()
    with threadpool_limits(1):
        warm_up()
        patchseq = patchseq_table(reference, repeats)
        print(patchseq.to_string())
        demo = demo_cv_table(reference, max(1, repeats // 2), args.quick)
        print(demo.to_string())
        block = block_table(repeats)
        print(block.to_string())
        joint = None if args.quick else joint_rank_table()
        if joint is not None:
            print(joint.to_string())
    seconds = time.perf_counter() - start
    patchseq.to_csv(out / "patchseq.csv", index=False)
    demo.to_csv(out / "demo_cv.csv", index=False)
    block.to_csv(out / "block.csv", index=False)
    if joint is not None:
        joint.to_csv(out / "joint_rank.csv", index=False)
    figure(patchseq, demo, out / "speed.png")
    text = readme(
        (patchseq, demo, block, joint),
        note,
        sys.argv[1:] if argv is None else argv,
        seconds,
        (load0, os.getloadavg()[0]),
    )
    (out / "README.md").write_text(text + "\n")


if __name__ == "__main__":
    main()
