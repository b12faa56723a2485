"""Two runs of a study side by side: which tests changed their statistic or p-value.

Reads ``tests.csv`` of two result folders of the same study (the same tests
in the same order, e.g. the Park study run with ``--channel-search grid``
and ``sequential``) and prints a Markdown report: per analysis (real tests
and negative controls) how many statistics and p-values are the same, how
many tests reach p <= 0.05 in each run, and the table of the tests that
changed.

Usage::

    python studies/compare_tests.py results/park2024 /tmp/park_seq \
        --labels grid sequential --out results/park2024/channel_search.md
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np
import pandas as pd
import study_tools as tools

KEYS = ["session", "modulators", "analysis", "modulator_session"]


def compare(old: pd.DataFrame, new: pd.DataFrame, labels=("old", "new")) -> str:
    """Markdown report of two ``tests.csv`` tables of the same tests."""
    if not old[KEYS].equals(new[KEYS]):
        raise ValueError("the two runs hold different tests (or in a different order)")
    a, b = labels
    same_stat = np.isclose(old.statistic, new.statistic, rtol=1e-9, atol=1e-12)
    same_p = np.isclose(old.p_value, new.p_value, rtol=0, atol=1e-12)
    lines = [
        f"| analysis | tests | same statistic | same p-value | p <= 0.05 ({a}) | p <= 0.05 ({b}) "
        f"| same selected K |",
        "|---|---|---|---|---|---|---|",
    ]
    for analysis in old.analysis.unique():
        m = (old.analysis == analysis).to_numpy()
        lines.append(
            f"| {analysis} | {m.sum()} | {same_stat[m].sum()} | {same_p[m].sum()} "
            f"| {(old.p_value[m] <= 0.05).sum()} | {(new.p_value[m] <= 0.05).sum()} "
            f"| {(old.n_channels[m] == new.n_channels[m]).sum()} |"
        )
    changed = old.loc[~(same_stat & same_p), KEYS].copy()
    changed[f"statistic ({a})"] = old.statistic[changed.index]
    changed[f"statistic ({b})"] = new.statistic[changed.index]
    changed[f"p ({a})"] = old.p_value[changed.index]
    changed[f"p ({b})"] = new.p_value[changed.index]
    lines += ["", f"Tests whose statistic or p-value changed ({len(changed)}):", ""]
    lines.append(tools.markdown_table(changed.round(6)))
    return "\n".join(lines)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("old", type=Path)
    parser.add_argument("new", type=Path)
    parser.add_argument("--labels", nargs=2, default=["old", "new"])
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args(argv)
    old, new = (pd.read_csv(d / "tests.csv") for d in (args.old, args.new))
    text = compare(old, new, args.labels)
    print(text)
    if args.out:
        args.out.write_text(text + "\n")


if __name__ == "__main__":
    main()
