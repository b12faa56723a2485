"""The READMEs the studies generate: the shared sections, run records, and READMEs in sync.

``studies/report.py`` writes the sections the Park and Semedo studies
share; ``studies/study_tools.py`` the run records every study keeps. The
slow test rebuilds each README from its committed tables
(``studies/run_all.py --reports``, into a copy) and checks that nothing
changes: a README that no longer matches its tables fails.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys

import numpy as np
import pandas as pd
import pytest

from tests.conftest import ROOT

sys.path.insert(0, str(ROOT / "studies"))
import report  # noqa: E402
import study_tools  # noqa: E402


def _real_tests():
    return pd.DataFrame(
        dict(
            session=["s1", "s2"],
            modulators=["pupil", "pupil"],
            n_channels=[0, 1],
            p_value=[0.5, 0.012],
            p_holm_set=[0.5, 0.024],
            effect_size=[0.0001, 0.0123],
            effect_low=[-0.0002, 0.0051],
            effect_high=[0.0003, 0.02],
            sentence=["No modulation.", "Gating detected."],
        )
    )


def _power():
    # a power analysis of s2 only: 1/2 then 2/2 detections, MDE at the second strength
    return pd.DataFrame(
        dict(
            session=["s2", "s2"],
            modulators=["pupil", "pupil"],
            strength=[0.001, 0.004],
            detections=[1, 2],
            n_sims=[2, 2],
            ci_low=[0.01, 0.16],
            ci_high=[0.99, 1.0],
            mde=[0.004, 0.004],
        )
    )


def test_effect_table_matches_power_rows_to_their_test():
    lines = report.effect_table(
        _real_tests(), _power(), ["session", "modulators"], ("p_holm_set", "p (Holm, set)")
    )
    assert lines[0] == (
        "| session | modulators | K | p | p (Holm, set) | effect [95% CI] | MDE (80% power) |"
    )
    assert lines[1].count("---") == 7
    # s1 has no power analysis; s2's MDE and detections come from its own rows
    assert lines[2] == "| s1 | pupil | 0 | 0.5 | 0.5 | 0.01% [-0.02%, 0.03%] | - |"
    assert lines[3].startswith("| s2 | pupil | 1 | 0.012 | 0.024 | 1.23% [0.51%, 2.00%] | 0.4% ")
    assert "0.1%: 1/2 [0.01, 0.99], 0.4%: 2/2 [0.16, 1.00]" in lines[3]


def test_effect_section_and_sentences_name_each_test():
    real = _real_tests()
    lines = report.effect_section(
        real.rename(columns={"p_holm_set": "p_holm"}),
        _power().iloc[0:0],
        ["modulators"],
        intro="What it is.",
        power_text="How.",
    )
    # without power rows the method text is left out, and every MDE is "-"
    assert "How." not in lines and "What it is." in lines
    assert all(line.endswith("| - |") for line in lines[-2:])
    said = report.sentences(real, ["session", "modulators"])
    assert said[-2:] == ["- **s1, pupil**: No modulation.", "- **s2, pupil**: Gating detected."]
    span = report.effect_range(real)[-1]
    assert span == "Effect intervals above 0 in 1/2 tests; effect sizes range from 0.01% to 1.23%."


def test_asymmetry_section_reports_only_the_defined_tests():
    asym = pd.DataFrame(
        dict(
            modulator=["a", "b"],
            p_value=[0.01, 0.3],
            p_holm=[0.02, 0.3],
            reported=[True, False],
            sentence=["Source-side.", "Undefined."],
        )
    )
    lines = report.asymmetry_section(
        asym, ["modulator"], intro="Intro.", undefined="None.", holm="p_holm"
    )
    assert lines[-1] == "- **a** (p = 0.01, Holm 0.02): Source-side."
    assert "Undefined." not in "\n".join(lines)
    none = report.asymmetry_section(
        asym.assign(reported=False), ["modulator"], intro="Intro.", undefined="None."
    )
    assert none[-1] == "None."
    empty = report.asymmetry_section(asym.iloc[0:0], ["modulator"], intro="I.", undefined="N.")
    assert empty[-1].startswith("No decomposition was bootstrapped")


def test_split_section_and_counts():
    methods = list(study_tools.SPLIT_METHODS)
    states = pd.DataFrame(
        dict(
            session=["s1", "s2", "s1"],
            state=["pupil", "pupil", "running"],
            n_high=[64, 63, 64],
            n_perm=[99, 99, 99],
            mics_p=[0.01, 0.5, 0.2],
            **{f"{m}_p": [0.04, 0.06, 0.01] for m in methods},
        )
    )
    lines = report.split_section(
        states, [("session", "session"), ("state", "state")], title="T", state="pupil",
        note=" Note.", n_trials=128,
    )  # fmt: skip
    assert lines[1] == "## T" and lines[3].endswith("Note.")
    assert lines[5] == "| session | state | high trials | mics p | " + " | ".join(methods) + " |"
    assert lines[6].count("---") == 4 + len(methods)
    assert lines[7].startswith("| s1 | pupil | 64/128 | 0.01 | 0.04 |")
    counts = report.split_counts(states, "state")
    # pupil: mics 1 of 2 significant, each split method 1 (0.04; 0.06 is not)
    assert counts[-2] == "- pupil: " + ", ".join(f"{m} 1" for m in ["mics", *methods]) + " (of 2)."
    assert counts[-1] == "- running: mics 0, " + ", ".join(f"{m} 1" for m in methods) + " (of 1)."
    assert (
        report.split_section(states.iloc[0:0], [], title="T", state="s", note="", n_trials=1)[-1]
        == "Not run."
    )


def test_control_line_quotes_the_summary_row():
    summary = pd.DataFrame(
        dict(quantity=["control_nonsignificant"], value=[120], n=[126], detail=["fraction 0.952"])
    ).set_index("quantity")
    line = report.control_line("(other sessions)", summary, "control_nonsignificant", extra=" X.")
    assert line == (
        "- Negative controls (other sessions): non-significant in 120/126 (fraction 0.952); "
        "target >= 95%. X."
    )


def test_run_record_keeps_each_part_and_says_how_it_was_made(tmp_path):
    first = study_tools.RunRecord(ROOT / "studies" / "x.py", ["--a", "1"], seeds="0-9", part="p1")
    first.finish(tmp_path)
    second = study_tools.RunRecord(ROOT / "studies" / "x.py", [], part="p2")
    runs = second.finish(tmp_path, cached=3)
    assert list(runs) == ["p1", "p2"] and runs["p2"]["cached"] == 3
    saved = json.loads((tmp_path / "run.json").read_text())
    assert saved["p1"]["command"] == "python studies/x.py --a 1"
    assert saved["p1"]["seeds"] == "0-9" and saved["p1"]["seconds"] >= 0
    lines = study_tools.run_lines(tmp_path)
    assert lines[0] == "How it was made, one command per part:"
    assert lines[2].startswith("- p1: `python studies/x.py --a 1`; seeds 0-9; run time ")
    # without a record the README says so, and what is known
    assert study_tools.run_lines(tmp_path / "none", missing="Known.")[0].endswith("Known.")


def test_run_args_are_the_recorded_runs():
    import argparse

    parser = argparse.ArgumentParser()
    parser.add_argument("--n-perm", type=int, default=499)
    args, run = study_tools.run_args(parser, ROOT / "nowhere", ["--n-perm", "9"])
    assert args.n_perm == 9 and run is None


def test_readme_run_time_is_read_back_from_a_header(tmp_path):
    (tmp_path / "README.md").write_text(
        "Generated by `python x.py` (...; run time 9.5 min with\nn_jobs=2, 3 of 147 tests "
        "read from the cache of an earlier run; the run that computed every test took 12.0 "
        "min). Every number"
    )
    got = study_tools.run_time_from_readme(tmp_path / "README.md")
    assert got == dict(
        seconds=570.0,
        n_jobs=2,
        cached=3,
        time_note="; the run that computed every test took 12.0 min",
    )
    assert study_tools.run_time_from_readme(tmp_path / "missing.md") is None


def test_markdown_table_reader():
    text = "x\n\n| a | b c |\n|---|---|\n| 1 | two |\n| 3 | 4 |\n\nafter | no"
    table = study_tools.read_markdown_table(text, "a")
    assert list(table.columns) == ["a", "b c"]
    np.testing.assert_array_equal(table.to_numpy(), [["1", "two"], ["3", "4"]])


def _run_all():
    import importlib.util

    spec = importlib.util.spec_from_file_location("mics_run_all", ROOT / "studies" / "run_all.py")
    module = sys.modules.setdefault("mics_run_all", importlib.util.module_from_spec(spec))
    spec.loader.exec_module(module)
    return module


#: Folders whose tables predate the code that writes their README; each is
#: rerun, with a run record, and then leaves this set (the test checks it).
STALE: dict[str, str] = {}


@pytest.mark.slow
@pytest.mark.parametrize(
    "study", [s for s in _run_all().STUDIES if s.report], ids=lambda s: s.name
)
def test_readme_is_what_its_tables_give(study, tmp_path):
    folder = ROOT / "results" / study.name
    if not (folder / "README.md").exists():
        pytest.skip(f"results/{study.name}/ is not here")
    if study.name in STALE:
        assert not (folder / "run.json").exists(), f"{study.name} was rerun: drop it from STALE"
        pytest.skip(STALE[study.name])
    copy = tmp_path / study.name
    shutil.copytree(folder, copy, ignore=shutil.ignore_patterns("cache"))
    cmd = [sys.executable, study.script, *study.report, "--out", str(copy)]
    subprocess.run(cmd, cwd=ROOT, check=True, capture_output=True)
    assert (copy / "README.md").read_text() == (folder / "README.md").read_text()
