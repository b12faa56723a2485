"""Measure the timings the README quotes, and write them to ``results/readme_timings/``.

The README's "Set up and run" and "A first fit" sections give the time of
the demo, the 99-shift modulation test and the 100-resample bootstrap. They
come from this script, run on the project's 2-core machine::

    python tools/readme_timings.py               # about 2 minutes
    python tools/readme_timings.py --report-only # README.md from timings.md

Each figure is the median of ``--repeats`` runs (the demo as a whole
process, as a user starts it; the others inside one process after a warm-up
call, so numba's first compilation is not counted), with the machine's load
average at the start, which says whether the figures can be trusted (on 2
cores, a load above 1.5 means something else was running). Writes
``timings.md`` (the table), ``run.json`` and ``README.md``.
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
sys.path.insert(0, str(ROOT / "studies"))
import study_tools as tools  # noqa: E402

OUT = ROOT / "results" / "readme_timings"


def _median_time(run, repeats):
    times = []
    for _ in range(repeats):
        t = time.perf_counter()
        run()
        times.append(time.perf_counter() - t)
    return statistics.median(times), min(times), max(times)


def readme(out):
    """``README.md``: the run record, then the table of ``timings.md``."""
    text = (out / "timings.md").read_text()
    lines = tools.readme_head(
        "Timings quoted in the README",
        "tools/readme_timings.py",
        out,
        about=(
            "The README's 'Set up and run' and 'A first fit' sections give the time of the "
            "demo, the 99-shift modulation test and the 100-resample bootstrap; "
            "`tests/test_readme_timings.py` checks that they quote this table. Each figure is "
            "the median of repeated runs (the demo as a whole process, the others in one "
            "process after a warm-up call, so numba's first compilation is not counted)."
        ),
        missing="`timings.md` gives the version, cores and load at the start.",
    )
    body = text.split("\n", 1)[1].strip()  # the table without its title
    (out / "README.md").write_text("\n".join([*lines, body, ""]))


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3, help="runs per figure")
    parser.add_argument("--out", type=Path, default=OUT, help="folder of timings.md")
    parser.add_argument(
        "--report-only", action="store_true", help="rebuild README.md from timings.md"
    )
    args = parser.parse_args(argv)
    if args.report_only:
        readme(args.out)
        return
    import mics

    run = tools.RunRecord(__file__, argv, seeds="0 (data, fits, shifts and resamples)")

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
    run.finish(args.out)
    readme(args.out)
    print("\n".join(lines))


if __name__ == "__main__":
    main()
