"""Where the benchmarks find v0.1, the version every before/after compares against.

The tag ``v0.1`` marks it, but tags do not travel with every clone (a fresh
CI checkout of ``main`` has none), so the commit it points to is kept here
too and used when the tag is missing.
"""

import subprocess
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
