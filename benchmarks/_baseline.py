"""Where the benchmarks find v0.1 (or any earlier version), and how they run it.

The tag ``v0.1`` marks it, but tags do not travel with every clone (a fresh
CI checkout of ``main`` has none), so the commit it points to is kept here
too and used when the tag is missing. :func:`run_worker` runs a script
against an extracted version in a subprocess.
"""

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
V01_TAG = "v0.1"
# The v0.1 landing: "Review: drop the unused per-K path of interaction_init ...".
V01_COMMIT = "bb0100c3420e4a2fd4b17b7f6ff8aab188abc8a8"


def v01_ref(root=ROOT):
    """The git ref of v0.1: the tag when the clone has it, else the commit."""
    tag = subprocess.run(
        ["git", "-C", str(root), "rev-parse", "--verify", "--quiet", f"{V01_TAG}^{{commit}}"],
        capture_output=True,
        text=True,
    )
    return V01_TAG if tag.returncode == 0 else V01_COMMIT


def extract_ref(ref, dest, root=ROOT):
    """Write the ``mics`` package of git ``ref`` under ``dest/mics`` and return ``dest``."""
    archive = subprocess.run(
        ["git", "-C", str(root), "archive", ref, "mics"], capture_output=True, check=True
    ).stdout
    subprocess.run(["tar", "-x", "-C", str(dest)], input=archive, check=True)
    return dest


def extract_v01(dest, root=ROOT):
    """Write v0.1's ``mics`` package under ``dest`` (``dest/mics``) and return ``dest``."""
    return extract_ref(v01_ref(root), dest, root)


def run_worker(path, code, arg):
    """Run ``python -c code arg`` importing ``mics`` from ``path``; return its result.

    The worker prints one line ``RESULT <json>`` whose object holds the
    ``mics`` key (``mics.__file__``), checked to lie under ``path``: a worker
    that imported another copy (the checkout's, through the working
    directory) would time or score the wrong version.
    """
    env = dict(os.environ, PYTHONPATH=str(path))
    # ``python -c`` puts the working directory first on sys.path: run from an
    # empty one, or the checkout's mics would shadow the extracted one.
    with tempfile.TemporaryDirectory() as cwd:
        proc = subprocess.run(
            [sys.executable, "-c", code, arg],
            env=env,
            cwd=cwd,
            capture_output=True,
            text=True,
            check=True,
        )
    line = [s for s in proc.stdout.splitlines() if s.startswith("RESULT ")][-1]
    out = json.loads(line[len("RESULT ") :])
    if not Path(out["mics"]).resolve().is_relative_to(Path(path).resolve()):
        raise RuntimeError(f"imported {out['mics']}, expected mics under {path}")
    return out
