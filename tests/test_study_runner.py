"""The study runner lists every study, and every results folder has one writer and a README.

Static checks: nothing is run. ``studies/run_all.py`` lists the studies;
each script's ``--out`` default (or its module-level ``OUT``) names the
folder it writes, read from its source with :mod:`ast`.
"""

from __future__ import annotations

import ast
import importlib.util
import re
import subprocess
import sys

import pytest

from tests.conftest import ROOT

_spec = importlib.util.spec_from_file_location("mics_run_all", ROOT / "studies" / "run_all.py")
run_all = sys.modules.setdefault("mics_run_all", importlib.util.module_from_spec(_spec))
_spec.loader.exec_module(run_all)

#: Scripts that are not studies: the runner itself.
NOT_STUDIES = {"studies/run_all.py"}


def _scripts(*folders):
    """Files of ``folders`` (recursively) that run as a script (``__main__``)."""
    found = []
    for folder in folders:
        for path in sorted((ROOT / folder).rglob("*.py")):
            if '__name__ == "__main__"' in path.read_text():
                found.append(path.relative_to(ROOT).as_posix())
    return found


def _strings(node, consts):
    """The string constants of an expression in source order, module constants expanded."""
    if isinstance(node, ast.Name):
        return _strings(consts[node.id], consts) if node.id in consts else []
    if isinstance(node, ast.Constant):
        return [node.value] if isinstance(node.value, str) else []
    return [s for child in ast.iter_child_nodes(node) for s in _strings(child, consts)]


def _results_folder(node, consts):
    """The ``results/<folder>`` a path expression builds, or None."""
    parts = [p for s in _strings(node, consts) for p in s.split("/") if p]
    if "results" in parts and parts.index("results") + 1 < len(parts):
        return parts[parts.index("results") + 1]
    return None


def declared_out(path):
    """The results folder a script writes: its ``--out`` default or its module ``OUT``."""
    tree = ast.parse((ROOT / path).read_text())
    consts = {
        t.id: node.value
        for node in tree.body
        if isinstance(node, ast.Assign)
        for t in node.targets
        if isinstance(t, ast.Name)
    }
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Call)
            and getattr(node.func, "attr", "") == "add_argument"
            and node.args
            and isinstance(node.args[0], ast.Constant)
            and node.args[0].value == "--out"
        ):
            for kw in node.keywords:
                if kw.arg == "default":
                    return _results_folder(kw.value, consts)
    return _results_folder(consts["OUT"], consts) if "OUT" in consts else None


def tracked_results_folders():
    """The folders of ``results/`` that git tracks (on disk where git is absent)."""
    try:
        files = subprocess.run(
            ["git", "ls-files", "results"], cwd=ROOT, capture_output=True, text=True, check=True
        ).stdout.split()
    except (OSError, subprocess.CalledProcessError):
        return sorted(p.name for p in (ROOT / "results").iterdir() if p.is_dir())
    return sorted({f.split("/")[1] for f in files if f.count("/") >= 2})


def test_every_study_script_is_in_the_runner():
    listed = {s.script for s in run_all.STUDIES}
    scripts = set(_scripts("studies")) - NOT_STUDIES
    assert sorted(scripts - listed) == []
    # and every listed script exists
    assert [s for s in listed if not (ROOT / s).is_file()] == []


def test_the_runner_lists_each_study_once_in_dependency_order():
    names = [s.name for s in run_all.STUDIES]
    assert len(names) == len(set(names))
    assert len({s.script for s in run_all.STUDIES}) == len(names)
    run_all.check_order()
    bad = run_all.STUDIES + (run_all.Study("x", "x.py", after=("members_real", "nothing")),)
    with pytest.raises(ValueError, match="unknown study"):
        run_all.check_order(bad)
    early = (run_all.Study("a", "a.py", after=("b",)), run_all.Study("b", "b.py"))
    run_all.BY_NAME.update(a=early[0], b=early[1])
    try:
        with pytest.raises(ValueError, match="runs before b"):
            run_all.check_order(early)
    finally:
        del run_all.BY_NAME["a"], run_all.BY_NAME["b"]


@pytest.mark.parametrize("study", run_all.STUDIES, ids=lambda s: s.name)
def test_each_study_writes_the_folder_named_after_it(study):
    stem = study.script.rsplit("/", 1)[-1].removesuffix(".py")
    assert stem == study.name or stem.startswith(study.name + "_")
    assert declared_out(study.script) == study.name


def test_every_results_folder_has_one_listed_writer_and_a_readme():
    writers = {}
    for script in _scripts("studies", "tools"):
        folder = declared_out(script)
        if folder is not None:
            writers.setdefault(folder, []).append(script)
    assert {f: w for f, w in writers.items() if len(w) > 1} == {}
    listed = {s.name for s in run_all.STUDIES}
    for folder in tracked_results_folders():
        assert folder in listed, f"results/{folder}/ has no study in studies/run_all.py"
        assert folder in writers, f"results/{folder}/: no script declares it as its --out"
        assert (ROOT / "results" / folder / "README.md").is_file(), f"results/{folder}/README.md"


def test_gitignore_allows_the_listed_studies_folders_only():
    text = (ROOT / ".gitignore").read_text()
    allowed = re.findall(r"^!results/([^/\n]+)/$", text, flags=re.M)
    assert len(allowed) == len(set(allowed))
    # a line for a folder no listed study writes is stale (the study was removed or renamed)
    assert sorted(set(allowed) - {s.name for s in run_all.STUDIES}) == []
    # and every committed folder has its line
    assert sorted(set(tracked_results_folders()) - set(allowed)) == []


def test_runner_selects_in_list_order_and_rejects_unknown_names():
    names = [s.name for s in run_all.selected(only=["members_real", "detection"])]
    assert names == ["detection", "members_real"]
    start = [s.name for s in run_all.selected(start="semedo2019")]
    assert start == ["semedo2019", "members_real"]
    with pytest.raises(SystemExit, match="unknown studies: nope"):
        run_all.selected(only=["nope"])


def test_dry_run_prints_every_command_and_runs_none(capsys):
    studies = run_all.selected(only=["population", "scaling"])
    times = run_all.run(studies, dry_run=True)
    out = capsys.readouterr().out
    assert set(times) == {"population", "scaling"}
    assert all(ok for _, ok in times.values())
    assert out.count("$ python studies/validation/population.py") == 3
    assert out.count("$ python studies/performance/scaling.py") == 6
