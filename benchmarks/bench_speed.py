"""v0.1 against the current code, in the same run: selection, test, moment pass, fixed fit.

Both versions run in subprocesses on identical data (``mics.simulate``,
true r = 3, K = 2, same seed): v0.1 is extracted from the git tag
(``git archive v0.1 mics``) into a temporary directory, the current code is
imported from the working tree. Each subprocess warms up (numba
compilation, BLAS threads) on a tiny problem before timing with
``time.perf_counter``.

Measured per size (``--sizes large small``; large: T=20000, p=300, q=100,
m=3; small: T=5000, p=100, q=60, m=2):

- ``fit``: default ``MICs(random_state=0).fit`` (rank 0..10, channels up to 4,
  10 folds), with the selected (rank, K);
- ``test/shift``: ``test_modulation(MICs(random_state=0), ..., n_jobs=1)``
  with ``--shifts`` shifts, reported per shift and extrapolated to 199
  (v0.1 takes minutes a shift at the large size, so by default it runs
  ``--old-shifts`` shifts; the projection is the observed fit plus 199 times
  the mean null fit);
- ``moments``: ``compute_moments`` against one ``V.T @ V`` (BLAS ``syrk``)
  of the joined Khatri-Rao and target rows of the same data: the same
  arithmetic, the BLAS limit;
- ``fixed fit``: ``MICs(rank=3, n_channels=2, random_state=0).fit``.

The machine may be shared: the load average is printed with every timing,
and ratios are of the two versions measured back to back.

Usage::

    python benchmarks/bench_speed.py --sizes small --shifts 19
    python benchmarks/bench_speed.py --out results/speed
    python benchmarks/bench_speed.py --previous e3b73a2   # also an earlier commit
"""

from __future__ import annotations

import argparse
import json
import tempfile
from pathlib import Path

from _baseline import extract_ref, extract_v01, run_worker

ROOT = Path(__file__).resolve().parents[1]
SIZES = {
    "large": dict(T=20000, p=300, q=100, m=3),
    "small": dict(T=5000, p=100, q=60, m=2),
}

WORKER = r"""
import json, os, sys, time, warnings
import numpy as np
warnings.simplefilter("ignore")
import mics
from mics.moments import compute_moments

cfg = json.loads(sys.argv[1])
T, p, q, m = cfg["T"], cfg["p"], cfg["q"], cfg["m"]
X, Y, Z = mics.simulate(n_samples=T, n_source=p, n_target=q, n_modulators=m,
                        random_state=cfg["seed"])[:3]
w = mics.simulate(n_samples=300, n_source=10, n_target=8, n_modulators=m, random_state=1)[:3]
mics.MICs(random_state=0, cv=3, max_rank=2, max_channels=1, verbose=0).fit(*w)
out = {"load": os.getloadavg()[0], "mics": mics.__file__}

def timed(f):
    t = time.perf_counter(); r = f(); return time.perf_counter() - t, r

if "moments" in cfg["parts"]:
    best_m, best_b = np.inf, np.inf
    for _ in range(3):
        best_m = min(best_m, timed(lambda: compute_moments(X, Y, Z))[0])
        d = (p + 1) * (m + 1)
        V = np.empty((T, d + q))
        U = V[:, :d].reshape(T, m + 1, p + 1)
        U[:, 0, 0] = 1; U[:, 0, 1:] = X - X.mean(0)
        U[:, 1:] = U[:, :1] * (Z - Z.mean(0))[:, :, None]
        V[:, d:] = Y - Y.mean(0)
        best_b = min(best_b, timed(lambda: V.T @ V)[0])
        del V, U
    out["moments"], out["syrk"] = best_m, best_b
if "fixed" in cfg["parts"]:
    out["fixed_fit"] = min(timed(lambda: mics.MICs(rank=3, n_channels=2, random_state=0,
                                                   verbose=0).fit(X, Y, Z))[0] for _ in range(2))
if "fit" in cfg["parts"]:
    t, est = timed(lambda: mics.MICs(random_state=0, verbose=0).fit(X, Y, Z))
    out["fit"], out["selected"] = t, [int(est.rank_), int(est.n_channels_)]
if cfg["shifts"]:
    n = cfg["shifts"]
    t_obs, _ = timed(lambda: mics.MICs(random_state=0, verbose=0).fit(X, Y, Z))
    t, res = timed(lambda: mics.test_modulation(mics.MICs(random_state=0, verbose=0), X, Y, Z,
                                                n_permutations=n, n_jobs=1, verbose=0,
                                                random_state=0))
    out["test"], out["test_shifts"], out["test_p"] = t, n, float(res.p_value)
    out["per_shift"] = max(t - t_obs, 0.0) / n
    out["test_199"] = t_obs + 199 * out["per_shift"]
print("RESULT " + json.dumps(out))
"""


def run(path, cfg):
    return run_worker(path, WORKER, json.dumps(cfg))


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", nargs="+", default=["large", "small"], choices=list(SIZES))
    parser.add_argument("--shifts", type=int, default=19, help="shifts timed, new code")
    parser.add_argument("--old-shifts", type=int, default=3, help="shifts timed, v0.1")
    parser.add_argument(
        "--previous-shifts", type=int, default=None, help="shifts timed, --previous (--shifts)"
    )
    parser.add_argument("--parts", nargs="+", default=["moments", "fixed", "fit", "test"])
    parser.add_argument(
        "--previous",
        default=None,
        help="git ref of an earlier version to time as well (e.g. the previous main)",
    )
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args(argv)

    rows = []
    with tempfile.TemporaryDirectory() as tmp, tempfile.TemporaryDirectory() as tmp_prev:
        extract_v01(tmp)
        versions = [("v0.1", tmp, args.old_shifts)]
        if args.previous:
            extract_ref(args.previous, tmp_prev)
            shifts = args.shifts if args.previous_shifts is None else args.previous_shifts
            versions.append(("previous", tmp_prev, shifts))
        versions.append(("new", ROOT, args.shifts))
        for size in args.sizes:
            res = {}
            for version, path, shifts in versions:
                cfg = dict(
                    SIZES[size],
                    seed=0,
                    parts=args.parts,
                    shifts=shifts if "test" in args.parts else 0,
                )
                res[version] = run(path, cfg)
                print(size, version, json.dumps(res[version]), flush=True)
            rows.append((size, res))

    prev = bool(args.previous)
    if prev:
        lines = [
            f"| size | quantity | v0.1 | previous ({args.previous}) | new | v0.1/new "
            "| previous/new |",
            "|---|---|---|---|---|---|---|",
        ]
    else:
        lines = ["| size | quantity | v0.1 | new | ratio |", "|---|---|---|---|---|"]
    for size, res in rows:
        old, new = res["v0.1"], res["new"]
        mid = res.get("previous", {})
        for key, label in (
            ("fit", "default fit (s)"),
            ("per_shift", "test, per shift (s)"),
            ("test_199", "test, 199 shifts (s, projected)"),
            ("fixed_fit", "fixed-rank fit (s)"),
            ("moments", "moment pass (s)"),
        ):
            if key in old and key in new:
                cells = [f"{old[key]:.2f}"] + ([f"{mid[key]:.2f}"] if prev else [])
                cells += [f"{new[key]:.2f}", f"{old[key] / new[key]:.1f}x"]
                cells += [f"{mid[key] / new[key]:.1f}x"] if prev else []
                lines.append(f"| {size} | {label} | " + " | ".join(cells) + " |")
        empty = " |" * (2 if prev else 1)  # no ratio for these rows
        if "test" in new:
            # the whole test as run (versions may run different numbers of shifts)
            run_as = lambda r: f"{r['test']:.1f} s, {r['test_shifts']} shifts, p={r['test_p']:.3g}"  # noqa: E731
            cells = [run_as(old)] + ([run_as(mid)] if prev else []) + [run_as(new)]
            lines.append(f"| {size} | test as run | " + " | ".join(cells) + " |" + empty)
        if "moments" in new:
            ratio = new["moments"] / new["syrk"]
            text = f"{new['moments']:.2f} / {new['syrk']:.2f} = {ratio:.2f}"
            pad = " |" * (4 if prev else 2)
            lines.append(f"| {size} | moment pass / one syrk, new | {text} |" + pad)
        for key, label in (("selected", "selected (rank, K)"), ("load", "load average")):
            if key in new:
                fmt = (lambda v: str(tuple(v))) if key == "selected" else (lambda v: f"{v:.1f}")
                cells = [fmt(old[key])] + ([fmt(mid[key])] if prev else []) + [fmt(new[key])]
                lines.append(f"| {size} | {label} | " + " | ".join(cells) + " |" + empty)
    table = "\n".join(lines)
    print(table)
    if args.out:
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / "speed_table.md").write_text(table + "\n")
        (args.out / "speed_raw.json").write_text(json.dumps(rows, indent=1) + "\n")


if __name__ == "__main__":
    main()
