"""Past one machine (issue 14): selection and the test on chunked data, on a Dask cluster.

Starts a ``dask.distributed.LocalCluster`` of worker *processes* on this
machine (the same calls run on a remote cluster: only the address given to
``Client`` changes) and measures:

``fit``
    The default selection ``MICs(random_state=0).fit`` on a zarr recording
    of T = 2,000,000 frames, p = 300, q = 100, m = 3 (float32, chunks of
    ``--chunk`` frames; written here once by an independent generator with a
    planted rank-3 baseline and two channels). Printed: wall time, the
    selection, the driver's peak resident memory and its growth during the
    fit in units of one chunk (as float64, the dtype the moment pass works
    in), and the frames per second of the moment pass against the machine's
    BLAS limit (one threaded ``syrk`` of the same rows in this process).
``test``
    ``test_modulation`` with ``--shifts`` circular shifts at T = 20000 (same
    p, q, m; with ``--small`` at T = 5000, p = 100, q = 60, m = 2) on clusters
    of 1 and 2 workers: the time of each, the speed-up, and that both give
    the same p-value and null statistics.

``--malloc-trim`` runs either part in distributed's default worker
environment, whose ``MALLOC_TRIM_THRESHOLD_`` slows the fits
(``mics.data.worker_config()`` drops it).

Usage::

    python studies/performance/scaling.py fit  [--frames 2000000] [--chunk 50000] [--workers 2]
    python studies/performance/scaling.py test [--shifts 39] [--small]
    python studies/performance/scaling.py --report-only    # README.md from the parts' files

Results: ``results/scaling/<part>.txt`` (``test_small.txt`` with ``--small``;
``_malloc_trim`` added with ``--malloc-trim``), each part's run record in
``run.json`` and ``README.md`` rebuilt from them after each part. The
recordings are written under ``--data`` (default: a temporary directory, kept
between runs; several GB).
"""

from __future__ import annotations

import argparse
import os
import re
import resource
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "studies"))
import study_tools as tools  # noqa: E402

OUT = ROOT / "results" / "scaling"
P, Q, M, RANK, K = 300, 100, 3, 3, 2
ARGS = argparse.Namespace(malloc_trim=False)


def _rss_mb():
    """Current resident memory of this process (Linux /proc), in MB."""
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


def _peak_mb():
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def _truth(seed=0, dims=(P, Q, M)):
    """A planted model: rank-3 baseline, two channels, additive modulator effect."""
    P, Q, M = dims
    rng = np.random.default_rng(seed)
    U = np.linalg.qr(rng.standard_normal((P, RANK)))[0]
    V = np.linalg.qr(rng.standard_normal((Q, RANK)))[0]
    B = U * np.array([1.0, 0.7, 0.5]) @ V.T
    A = np.linalg.qr(rng.standard_normal((P, K)))[0]
    Bt = np.linalg.qr(rng.standard_normal((Q, K)))[0]
    C = np.linalg.qr(rng.standard_normal((M, K)))[0]
    D = 0.2 * rng.standard_normal((M, Q))
    return B, D, A, Bt, C, np.array([0.6, 0.4])


def _block(i, rows, truth):
    """Frames of block ``i`` (its own seed: blocks can be written in any order)."""
    B, D, A, Bt, C, w = truth
    (P, Q), M = B.shape, D.shape[0]
    rng = np.random.default_rng(1000 + i)
    X = rng.standard_normal((rows, P))
    Z = rng.standard_normal((rows, M))
    Y = X @ B + Z @ D + ((X @ A) * (Z @ C) * w) @ Bt.T + 0.5 * rng.standard_normal((rows, Q))
    return X.astype(np.float32), Y.astype(np.float32), Z.astype(np.float32)


def write_recording(path, frames, chunk, dims=(P, Q, M)):
    """A zarr group with arrays ``source`` (T, p), ``target`` (T, q), ``modulator`` (T, m)."""
    import zarr

    path = Path(path)
    done = path / ".complete"
    if done.exists() and done.read_text() == f"{frames} {chunk}":
        return path
    truth = _truth(dims=dims)
    group = zarr.open_group(str(path), mode="w")
    arrays = {
        name: group.create_array(name, shape=(frames, k), chunks=(chunk, k), dtype="float32")
        for name, k in zip(("source", "target", "modulator"), dims, strict=True)
    }
    t0 = time.perf_counter()
    for i, start in enumerate(range(0, frames, chunk)):
        stop = min(start + chunk, frames)
        x, y, z = _block(i, stop - start, truth)
        arrays["source"][start:stop] = x
        arrays["target"][start:stop] = y
        arrays["modulator"][start:stop] = z
    done.write_text(f"{frames} {chunk}")
    print(f"wrote {path} ({frames} frames) in {time.perf_counter() - t0:.0f} s", flush=True)
    return path


def _open(path):
    import dask.array as da

    return tuple(da.from_zarr(str(path), component=c) for c in ("source", "target", "modulator"))


def blas_limit_frames_per_s(rows=8192, repeats=7):
    """Frames per second of one threaded ``syrk`` of the moment pass's rows."""
    d = (P + 1) * (M + 1) + Q
    V = np.random.default_rng(0).standard_normal((rows, d))
    V.T @ V
    best = np.inf
    for _ in range(repeats):
        t0 = time.perf_counter()
        V.T @ V
        best = min(best, time.perf_counter() - t0)
    return rows / best


def _cluster(workers):
    import dask
    from distributed import Client, LocalCluster

    from mics.data import worker_config

    # distributed's default MALLOC_TRIM_THRESHOLD_ halves the speed of the fits
    # (see mics.data.worker_config); --malloc-trim keeps it, to compare
    config = {} if ARGS.malloc_trim else worker_config()
    with dask.config.set(config):
        cluster = LocalCluster(
            n_workers=workers, threads_per_worker=1, processes=True, dashboard_address=":0"
        )
    return cluster, Client(cluster)


def part_fit(args, lines):
    import mics
    from mics.data import moments_from_dask

    path = write_recording(Path(args.data) / f"rec_{args.frames}.zarr", args.frames, args.chunk)
    # before the cluster starts, so that nothing else runs beside it
    limit = blas_limit_frames_per_s()
    cluster, client = _cluster(args.workers)
    try:
        X, Y, Z = _open(path)
        chunk_mb = args.chunk * (P + Q + M) * 8 / 2**20
        lines.append(
            f"recording: T={args.frames} p={P} q={Q} m={M}, float32 zarr, chunks of "
            f"{args.chunk} frames ({chunk_mb:.0f} MB as float64); "
            f"cluster: {args.workers} worker processes x 1 thread"
        )
        t0 = time.perf_counter()
        moments_from_dask(X, Y, Z, shifts="first_block")
        t_pass = time.perf_counter() - t0
        lines.append(
            f"moment pass: {t_pass:.1f} s, {args.frames / t_pass:,.0f} frames/s; "
            f"BLAS limit of this machine (threaded syrk, all cores): {limit:,.0f} frames/s "
            f"-> {args.frames / t_pass / limit:.2f} of the limit"
        )
        rss0 = _rss_mb()
        t0 = time.perf_counter()
        model = mics.MICs(random_state=0, verbose=0).fit(X, Y, Z)
        t_fit = time.perf_counter() - t0
        peak = _peak_mb()
        lines.append(
            f"default selection: {t_fit:.1f} s, selected rank {model.rank_} "
            f"(planted {RANK}), K {model.n_channels_} (planted {K})"
        )
        lines.append(
            f"driver memory: resident before fit {rss0:.0f} MB, peak {peak:.0f} MB; "
            f"growth {peak - rss0:.0f} MB = {(peak - rss0) / chunk_mb:.1f} chunks "
            f"(the data: {args.frames * (P + Q + M) * 4 / 2**30:.1f} GB)"
        )
        truth = _truth()
        A = np.asarray(model.source_patterns_)
        cos = np.abs(truth[2].T @ A).max(axis=1)
        lines.append(f"source-pattern cosines with the planted channels: {np.round(cos, 3)}")
    finally:
        client.close()
        cluster.close()


def part_test(args, lines):
    import mics

    if args.small:
        frames, chunk, dims = 5000, 500, (100, 60, 2)
    else:
        frames, chunk, dims = 20000, 2000, (P, Q, M)
    p, q, m = dims
    name = f"rec_{frames}_{p}_{q}_{m}.zarr"
    path = write_recording(Path(args.data) / name, frames, chunk, dims)
    est = mics.MICs(random_state=0, verbose=0)
    runs = {}
    for workers in (1, 2):
        cluster, client = _cluster(workers)
        try:
            X, Y, Z = _open(path)
            t0 = time.perf_counter()
            res = mics.test_modulation(
                est, X, Y, Z, n_permutations=args.shifts, random_state=0, verbose=0
            )
            runs[workers] = (time.perf_counter() - t0, res)
        finally:
            client.close()
            cluster.close()
        t, res = runs[workers]
        lines.append(
            f"{workers} worker(s): test_modulation, {args.shifts} shifts, T={frames} p={p} "
            f"q={q} m={m}: {t:.1f} s ({t / args.shifts:.2f} s per shift), p = {res.p_value:.3f}"
        )
    if args.reference_shifts:
        # the in-memory test (n_jobs=1) on the same data, as the per-shift peer
        X, Y, Z = (np.asarray(a, dtype=np.float64) for a in _open(path))
        t0 = time.perf_counter()
        mics.test_modulation(
            est, X, Y, Z, n_permutations=args.reference_shifts, random_state=0, verbose=0
        )
        t_mem = time.perf_counter() - t0
        lines.append(
            f"in memory, n_jobs=1, {args.reference_shifts} shifts: {t_mem:.1f} s "
            f"({t_mem / args.reference_shifts:.2f} s per shift, the observed fit included)"
        )
    (t1, r1), (t2, r2) = runs[1], runs[2]
    # Bitwise since the test's additive regression runs in our own block
    # tasks (see results/scaling/README.md): Dask's products on blocks that had
    # travelled between workers, at byte offsets that are not a multiple of
    # 8, left 1e-11 differences (results/scaling/README.md).
    d_null = np.max(np.abs(r1.null_distribution - r2.null_distribution))
    d_obs = abs(r1.statistic - r2.statistic)
    same = (
        "identical"
        if d_null == 0 and d_obs == 0
        else (
            f"equal to {d_null:.1e} (observed statistic {d_obs:.1e}; null SD "
            f"{np.std(r1.null_distribution):.1e})"
        )
    )
    lines.append(
        f"speed-up 1 -> 2 workers: {t1 / t2:.2f}x; null statistics {same}; same p-value: "
        f"{r1.p_value == r2.p_value}; projected 199 shifts: {t1 / args.shifts * 199:.0f} s / "
        f"{t2 / args.shifts * 199:.0f} s"
    )


def _fit_rows(text):
    """The figures of a ``fit`` part's file, as README table cells."""
    moment = re.search(r"moment pass: ([\d.]+) s, ([\d,]+) frames/s; .*: ([\d,]+) frames/s "
                       r"-> ([\d.]+) of the limit", text)  # fmt: skip
    select = re.search(r"default selection: ([\d.]+) s, selected rank (\d+) \(planted (\d+)\), "
                       r"K (\d+) \(planted (\d+)\)", text)  # fmt: skip
    memory = re.search(r"resident before fit (\d+) MB, peak (\d+) MB; growth (\d+) MB = "
                       r"([\d.]+) chunks \(the data: ([\d.]+) GB\)", text)  # fmt: skip
    return dict(
        fit=f"{select[1]} s",
        selected=f"rank {select[2]}, K {select[4]} (planted {select[3]}, {select[5]})",
        memory=f"{memory[1]} MB / {memory[2]} MB / {memory[3]} MB = {memory[4]} chunks "
        f"(the data: {memory[5]} GB)",
        moments=f"{moment[1]} s, {moment[2]} frames/s = {moment[4]} of the BLAS limit "
        f"({moment[3]} frames/s)",
    )


def _test_row(name, text):
    """One README row of a ``test`` part's file."""
    runs = re.findall(r"(\d) worker\(s\): test_modulation, (\d+) shifts, (.*?): ([\d.]+) s "
                      r"\(([\d.]+) s per shift\), p = ([\d.]+)", text)  # fmt: skip
    memory = re.search(r"in memory, n_jobs=1, (\d+) shifts: .*?\(([\d.]+) s per shift", text)
    speed = re.search(r"speed-up 1 -> 2 workers: ([\d.]+)x; (.*?); (?:same p-value|projected)",
                      text)  # fmt: skip
    # "null statistics identical" now, "identical null statistics: True" in older files
    same = speed[2].replace("identical null statistics: True", "null statistics identical")
    (_, shifts, size, t1, s1, p1), (_, _, _, t2, s2, _) = runs
    in_memory = f"{memory[2]} s a shift ({memory[1]} shifts)" if memory else "-"
    return (
        f"| {size} (`{name}`) | {shifts} | {t1} s ({s1} s a shift) | {t2} s ({s2} s a shift) "
        f"| **{speed[1]}x** | {in_memory} | {p1}; {same} |"
    )


def readme(out):
    """``README.md`` from the parts' files (those that exist) and their run records."""
    lines = tools.readme_head(
        "Past one machine: chunked selection and tests on a Dask cluster",
        "studies/performance/scaling.py",
        out,
        about=(
            "A `dask.distributed.LocalCluster` of worker processes, one thread each, started "
            "under `mics.data.worker_config()`, on float32 zarr recordings written by the "
            "study's own generator (a planted rank-3 baseline, two channels and an additive "
            "modulator effect). Part `fit`: the default selection on a 2,000,000-frame "
            "recording, the driver's memory and the moment pass against the machine's BLAS "
            "limit. Part `test`: `test_modulation` on 1 and 2 workers, beside the in-memory "
            "test on the same machine. `*_malloc_trim.txt`: the same in distributed's default "
            "worker environment (`--malloc-trim`)."
        ),
        missing="Each file's first line gives the date and load of its run.",
    )
    fits = {
        name: _fit_rows((out / f"{name}.txt").read_text())
        for name in ("fit", "fit_malloc_trim")
        if (out / f"{name}.txt").exists()
    }
    if fits:
        names = list(fits)
        lines += [
            "## Default selection on the chunked recording (`fit`)",
            "",
            "| quantity | " + " | ".join(f"`{n}.txt`" for n in names) + " |",
            "|---|" + "---|" * len(names),
        ]
        for key, what in (
            ("fit", "`MICs(random_state=0).fit(X, Y, Z)` on the zarr-backed Dask arrays"),
            ("selected", "selected rank and K"),
            ("memory", "driver memory: resident before the fit / peak / growth during it"),
            ("moments", "moment pass alone (`moments_from_dask`)"),
        ):
            lines.append(f"| {what} | " + " | ".join(fits[n][key] for n in names) + " |")
        lines.append("")
    tests = [
        name
        for name in ("test", "test_small", "test_malloc_trim", "test_small_malloc_trim")
        if (out / f"{name}.txt").exists()
    ]
    if tests:
        lines += [
            "## `test_modulation` on 1 and 2 workers (`test`)",
            "",
            "Each shifted data set is one graph: its fold moments are computed on the "
            "workers, then the channel selection runs as a task on them. The in-memory test "
            "ran the first shifts of the same test, and its figure includes the observed fit.",
            "",
            "| size (file) | shifts | 1 worker | 2 workers | speed-up | in memory, `n_jobs=1` "
            "| p-value |",
            "|---|---|---|---|---|---|---|",
            *(_test_row(f"{n}.txt", (out / f"{n}.txt").read_text()) for n in tests),
            "",
        ]
    (out / "README.md").write_text("\n".join(lines))


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("part", nargs="?", choices=("fit", "test"))
    parser.add_argument("--frames", type=int, default=2_000_000)
    parser.add_argument("--chunk", type=int, default=50_000)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--shifts", type=int, default=39)
    parser.add_argument(
        "--reference-shifts",
        type=int,
        default=19,
        help="shifts of the in-memory test timed beside (0: skip)",
    )
    parser.add_argument(
        "--small", action="store_true", help="test part at T=5000, p=100, q=60, m=2"
    )
    parser.add_argument(
        "--malloc-trim",
        action="store_true",
        help="keep distributed's MALLOC_TRIM_THRESHOLD_ in the workers (the default setup)",
    )
    parser.add_argument("--data", default=os.path.join(tempfile.gettempdir(), "mics_scaling"))
    parser.add_argument("--out", default=str(OUT))
    parser.add_argument("--report-only", action="store_true", help="rebuild README.md only")
    args = parser.parse_args(argv)
    if args.report_only:
        readme(Path(args.out))
        return 0
    if args.part is None:
        parser.error("name a part: fit or test")
    suffix = "_small" if args.part == "test" and args.small else ""
    suffix += "_malloc_trim" if args.malloc_trim else ""
    run = tools.RunRecord(__file__, argv, seeds="0 (data and fits)", part=args.part + suffix)
    global ARGS
    ARGS = args
    load = os.getloadavg()[0]
    lines = [
        f"studies/performance/scaling.py {args.part} ({time.strftime('%Y-%m-%d %H:%M')}, "
        f"load {load:.1f}, {os.cpu_count()} cores"
        + (", workers with distributed's MALLOC_TRIM_THRESHOLD_)" if args.malloc_trim else ")")
    ]
    {"fit": part_fit, "test": part_test}[args.part](args, lines)
    text = "\n".join(lines)
    print(text)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / f"{args.part}{suffix}.txt").write_text(text + "\n")
    run.finish(out)
    readme(out)


if __name__ == "__main__":
    sys.exit(main())
