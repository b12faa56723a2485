"""Rerun every study in dependency order, with each one's run time.

Every folder of ``results/`` is written by one study, named after it: the
folder is the script's name, or a prefix of it (``park2024`` for
``park2024_state_gating.py``). ``STUDIES`` lists them in the order they can
run: a study comes after those whose results it reads. Each entry holds the
commands of the committed run (several for a study run in parts), its
expected cost on two otherwise idle cores, and what it needs beyond the
package (the recordings, another checkout).

Usage::

    python studies/run_all.py --list                  # the studies, their cost and order
    python studies/run_all.py                          # every study (many hours)
    python studies/run_all.py --only detection trials  # some of them, in the list's order
    python studies/run_all.py --from park2024          # this one and every one after it
    python studies/run_all.py --reports                # every README rebuilt from its tables
    python studies/run_all.py --dry-run                # print the commands only

Each command runs from the repository root in its own process. The runner
prints each study's run time as it finishes and a table of all of them at
the end; a study that fails stops the run (``--keep-going`` carries on with
the studies that do not depend on it). The studies write their own run
records (``results/<study>/run.json``: command, seeds, run time, load).

A new study: add its entry here, and a ``!results/<study>/`` line to
``.gitignore`` once its folder is committed. ``tests/test_study_runner.py``
checks, without running anything, that every script of ``studies/`` is
listed, that every folder of ``results/`` has exactly one listed writer and a
README, and that each study's ``--out`` default is its own folder.
"""

from __future__ import annotations

import argparse
import os
import shlex
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


@dataclass(frozen=True)
class Study:
    """One study: the folder it writes, its script, its commands and its cost.

    Attributes
    ----------
    name : str
        The results folder (``results/<name>/``).
    script : str
        The study's file, from the repository root.
    runs : tuple of tuple of str
        The arguments of each command of the committed run (one per part).
    cost : str
        Expected run time on two otherwise idle cores.
    after : tuple of str
        Studies whose results this one reads (they run first).
    needs : str
        What it needs beyond the package, in words ("" for nothing).
    report : tuple of str or None
        The arguments that rebuild its README (and summary tables) from the
        tables already in its folder, without rerunning anything.
    """

    name: str
    script: str
    runs: tuple = ((),)
    cost: str = ""
    after: tuple = ()
    needs: str = ""
    report: tuple | None = ("--report-only",)

    def commands(self, report=False):
        """The command lines to run (the report's alone with ``report=True``)."""
        runs = [self.report] if report else self.runs
        return [[sys.executable, self.script, *args] for args in runs]


RECORDINGS = "the recordings ($MICS_DATA_DIR, ../shared/data or a download by mics.datasets)"

#: Every study, in an order where each comes after the studies it reads.
STUDIES = (
    # -- statistical validations on simulated data
    Study(
        "decomposition_geometry",
        "studies/validation/decomposition_geometry.py",
        cost="2 min",
    ),
    Study("recovery", "studies/validation/recovery.py", cost="10 min"),
    Study("channel_search", "studies/validation/channel_search.py", cost="6 min"),
    Study("detection", "studies/validation/detection.py", cost="5 min"),
    Study("trials", "studies/validation/trials.py", cost="5 min"),
    Study("split_by_state", "studies/validation/split_by_state.py", cost="40 min"),
    Study(
        "null_families",
        "studies/validation/null_families.py",
        runs=(("--plan", "calibration"), ("--plan", "bursty"), ("--plan", "power")),
        cost="several hours (appends to runs.csv, resumes)",
        report=("--plan", "report"),
    ),
    Study(
        "asymmetry_calibration",
        "studies/validation/asymmetry_calibration.py",
        runs=(("--plan", "calibration"), ("--plan", "power")),
        cost="several hours (appends to runs.csv, resumes)",
        report=("--plan", "report"),
    ),
    Study(
        "power_prediction",
        "studies/validation/power_prediction.py",
        cost="1 h (appends to runs.csv, resumes)",
        report=None,
    ),
    Study(
        "penalties",
        "studies/validation/penalties.py",
        runs=(("--v01", "/tmp/v01"),),
        cost="20 min",
        needs="optional: v0.1 in a worktree (git worktree add /tmp/v01 bb0100c)",
    ),
    Study(
        "population",
        "studies/validation/population.py",
        runs=(("large",), ("recovery",), ("null", "--n-null", "20")),
        cost="15 min",
    ),
    Study(
        "sparse_members",
        "studies/validation/sparse_members.py",
        runs=((), ("--stability",), ("--default", "--seeds", "5")),
        cost="30 min",
    ),
    Study(
        "member_fdr",
        "studies/validation/member_fdr.py",
        runs=(("run", "--part", "null", "--seeds", "100"), ("run", "--part", "sweep")),
        cost="40 min (appends to runs/, resumes)",
        report=("report",),
    ),
    Study(
        "effect_coverage",
        "studies/validation/effect_coverage.py",
        cost="1.2 h (appends to its tables, resumes)",
    ),
    Study("sparse_null", "studies/validation/sparse_null.py", cost="10 min"),
    Study("sparse_rrr", "studies/validation/sparse_rrr.py", cost="3 min"),
    Study(
        "artifacts",
        "studies/validation/artifacts.py",
        cost="10 min",
        report=None,
    ),
    Study(
        "mutation",
        "tools/mutation.py",
        runs=(("--per-module", "20"),),
        cost="15 min",
        report=None,
    ),
    # -- performance: timings mean something only on an idle machine
    Study("convergence", "studies/performance/convergence.py", runs=(("--large",),), cost="3 min"),
    Study("solver_choice", "studies/performance/solver_choice.py", cost="15 min"),
    Study("source_solve", "studies/performance/source_solve.py", cost="15 min"),
    Study(
        "fit_peers",
        "studies/performance/fit_peers.py",
        runs=((), ("--memory",)),
        cost="10 min",
        needs="optional: tensorly (the peer is skipped without it)",
    ),
    Study(
        "scaling",
        "studies/performance/scaling.py",
        runs=(
            ("fit",),
            ("fit", "--malloc-trim"),
            ("test",),
            ("test", "--malloc-trim"),
            ("test", "--small"),
            ("test", "--small", "--malloc-trim"),
        ),
        cost="40 min (writes 3 GB of zarr data to the temporary folder)",
    ),
    Study(
        "joint_step",
        "studies/performance/joint_step.py",
        runs=(
            ("--parts", "fits", "selection", "tol", "tol-profiled", "tol-tight"),
            ("--parts", "semedo", "semedo-profiled", "semedo-tight"),
            ("--parts", "test-cost", "--repeats", "3"),
        ),
        cost="40 min",
        needs=RECORDINGS,
        report=None,
    ),
    Study(
        "sparse_rrr_speed",
        "studies/performance/sparse_rrr_speed.py",
        runs=(("--reference", "/tmp/patch-seq-rrr"),),
        cost="5 min",
        needs="optional: a checkout of berenslab/patch-seq-rrr at /tmp/patch-seq-rrr, glmnet",
        report=None,
    ),
    Study("readme_timings", "tools/readme_timings.py", cost="2 min"),
    # -- the real recordings
    Study("data_quality", "studies/data_quality.py", cost="2 min", needs=RECORDINGS, report=None),
    Study(
        "park_trials",
        "studies/validation/park_trials.py",
        runs=(("--n-perm", "19"),),
        cost="1 min",
        needs=RECORDINGS,
    ),
    Study(
        "park2024",
        "studies/park2024_state_gating.py",
        cost="10 min (resumes from results/park2024/cache)",
        after=("split_by_state", "asymmetry_calibration"),
        needs=RECORDINGS,
    ),
    Study(
        "park2024_channel_search",
        "studies/park2024_channel_search.py",
        cost="10 min",
        after=("park2024",),
        needs=RECORDINGS,
    ),
    Study(
        "semedo2019",
        "studies/semedo2019_third_population.py",
        cost="8 min (resumes from results/semedo2019/cache)",
        after=("split_by_state", "asymmetry_calibration"),
        needs=RECORDINGS,
    ),
    Study(
        "members_real",
        "studies/members_real.py",
        cost="2 min",
        after=("park2024", "semedo2019"),
        needs=RECORDINGS,
        report=None,
    ),
)

BY_NAME = {s.name: s for s in STUDIES}


def check_order(studies=STUDIES):
    """Raise if a study comes before one it reads, or names an unknown study."""
    seen = set()
    for study in studies:
        for name in study.after:
            if name not in BY_NAME:
                raise ValueError(f"{study.name}: unknown study {name!r} in after")
            if name not in seen:
                raise ValueError(f"{study.name} runs before {name}, whose results it reads")
        seen.add(study.name)


def selected(only=None, start=None):
    """The studies to run, in the list's order."""
    names = list(only or []) + ([start] if start else [])
    unknown = [n for n in names if n not in BY_NAME]
    if unknown:
        raise SystemExit(f"unknown studies: {', '.join(unknown)} (see --list)")
    if only:
        return [s for s in STUDIES if s.name in only]
    if start:
        return list(STUDIES[[s.name for s in STUDIES].index(start) :])
    return list(STUDIES)


def print_list():
    width = max(len(s.name) for s in STUDIES)
    for i, s in enumerate(STUDIES, 1):
        after = f"; after {', '.join(s.after)}" if s.after else ""
        print(f"{i:2d}. {s.name:<{width}}  {s.script}  [{s.cost}{after}]")
        for cmd in s.commands():
            print(f"      {shlex.join(['python', *cmd[1:]])}")
        if s.needs:
            print(f"      needs {s.needs}")


def minutes(seconds):
    return f"{seconds:.0f} s" if seconds < 120 else f"{seconds / 60:.1f} min"


def run(studies, *, report=False, dry_run=False, keep_going=False):
    """Run each study's commands in turn; return ``{name: (seconds, ok)}``."""
    times, failed = {}, set()
    for study in studies:
        blocked = failed.intersection(study.after)
        if blocked:
            print(f"== {study.name}: skipped ({', '.join(sorted(blocked))} failed)", flush=True)
            failed.add(study.name)
            continue
        print(f"== {study.name} ({study.cost})", flush=True)
        t0, ok = time.perf_counter(), True
        for cmd in study.commands(report=report):
            print("   $ " + shlex.join(["python", *cmd[1:]]), flush=True)
            if dry_run:
                continue
            if subprocess.run(cmd, cwd=ROOT, env=os.environ.copy()).returncode != 0:
                ok = False
                break
        seconds = time.perf_counter() - t0
        times[study.name] = (seconds, ok)
        print(f"== {study.name}: {'done' if ok else 'FAILED'} in {minutes(seconds)}", flush=True)
        if not ok:
            failed.add(study.name)
            if not keep_going:
                break
    return times


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--list", action="store_true", help="list the studies and stop")
    parser.add_argument("--only", nargs="+", metavar="NAME", help="run these studies only")
    parser.add_argument("--from", dest="start", metavar="NAME", help="start at this study")
    parser.add_argument(
        "--reports", action="store_true", help="rebuild each README from its tables only"
    )
    parser.add_argument("--dry-run", action="store_true", help="print the commands only")
    parser.add_argument("--keep-going", action="store_true", help="carry on after a failure")
    args = parser.parse_args(argv)
    check_order()
    if args.list:
        print_list()
        return 0
    studies = selected(args.only, args.start)
    if args.reports:
        studies = [s for s in studies if s.report is not None]
    load = os.getloadavg()[0]
    print(f"{len(studies)} studies; load average {load:.1f} on {os.cpu_count()} cores", flush=True)
    times = run(studies, report=args.reports, dry_run=args.dry_run, keep_going=args.keep_going)
    print("\nrun times:")
    for name, (seconds, ok) in times.items():
        print(f"  {name:<24} {minutes(seconds):>10}  {'ok' if ok else 'FAILED'}")
    total = sum(s for s, _ in times.values())
    print(f"  {'all':<24} {minutes(total):>10}; load average now {os.getloadavg()[0]:.1f}")
    return 0 if all(ok for _, ok in times.values()) and len(times) == len(studies) else 1


if __name__ == "__main__":
    sys.exit(main())
