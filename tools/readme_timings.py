"""Measure the timings the README quotes, and write them to ``results/readme/timings.md``.

The README's "Set up and run" and "A first fit" sections give the time of
the demo, the 99-shift modulation test and the 100-resample bootstrap. They
come from this script, run on the project's 2-core machine::

    python tools/readme_timings.py            # about 2 minutes

Each figure is the median of ``--repeats`` runs (the demo as a whole
process, as a user starts it; the others inside one process after a warm-up
call, so numba's first compilation is not counted), with the machine's load
average at the start, which says whether the figures can be trusted (on 2
cores, a load above 1.5 means something else was running).
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
import warnings
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _median_time(run, repeats):
    times = []
    for _ in range(repeats):
        t = time.perf_counter()
        run()
        times.append(time.perf_counter() - t)
    return statistics.median(times), min(times), max(times)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3, help="runs per figure")
    parser.add_argument(
        "--out", type=Path, default=ROOT / "results" / "readme", help="folder of timings.md"
    )
    args = parser.parse_args(argv)
    import mics

    warnings.filterwarnings("ignore")
    load = os.getloadavg()[0]
    rows = []

    with tempfile.TemporaryDirectory() as tmp:
        cmd = [sys.executable, "-m", "mics.cli", "demo", "--output", str(Path(tmp) / "r")]
        subprocess.run(cmd, check=True, capture_output=True)  # warm-up: numba's cache

        def demo():
            subprocess.run(cmd, check=True, capture_output=True)

        rows.append(("`mics demo` (whole process)", *_median_time(demo, args.repeats)))

    X, Y, Z, _ = mics.simulate(n_samples=2000, random_state=0)
    model = mics.MICs(random_state=0, verbose=0).fit(X, Y, Z)
    mics.test_modulation(mics.MICs(random_state=0), X, Y, Z, n_permutations=2, verbose=0)

    def fit():
        mics.MICs(random_state=0, verbose=0).fit(X, Y, Z)

    def test():
        mics.test_modulation(
            mics.MICs(random_state=0), X, Y, Z, n_permutations=99, verbose=0, random_state=0
        )

    def boot():
        mics.bootstrap_channels(model, X, Y, Z, n_boot=100, verbose=0, random_state=0)

    rows.append(("`MICs().fit` (default selection), T=2000", *_median_time(fit, args.repeats)))
    rows.append(("`test_modulation`, 99 shifts, T=2000", *_median_time(test, args.repeats)))
    rows.append(("`bootstrap_channels`, 100 resamples", *_median_time(boot, args.repeats)))

    lines = [
        "# Timings quoted in the README",
        "",
        f"Written by `python tools/readme_timings.py` (mics {mics.__version__}, "
        f"{os.cpu_count()} cores, load average {load:.2f} at the start, "
        f"median of {args.repeats} runs).",
        "",
        "| task | median | min | max |",
        "|---|---|---|---|",
        *(f"| {name} | {med:.1f} s | {lo:.1f} s | {hi:.1f} s |" for name, med, lo, hi in rows),
        "",
    ]
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "timings.md").write_text("\n".join(lines))
    print("\n".join(lines))


if __name__ == "__main__":
    main()
