"""The `mics` command: the demo runs end to end, writes a complete report and explains itself."""

import contextlib
import csv
import io
import re
from pathlib import Path

import numpy as np
import pytest
from numpy.testing import assert_allclose

import mics
from mics import cli
from mics.cli import main
from mics.report import format_p_value
from tests._layout import overlapping_texts

FIGURES = [
    "cv_curves.png",
    "null_distribution.png",
    "channels.png",
    "channel_gain.png",
    "geometry.png",
    "decomposition.png",
    "bootstrap_intervals.png",
    "state_communication.png",
    "loss_history.png",
]

#: Every option of `mics demo` with its default, as the help must state it.
DEMO_DEFAULTS = {
    "--samples": "2000",
    "--source": "60",
    "--target": "40",
    "--seed": "0",
    "--select": "True",
    "--permutations": "19",
    "--boot": "10",
    "--output": "mics_report",
}

DEMO_ARGS = ["--samples", "800", "--source", "25", "--target", "20"]


def _simulated(n_samples=800, n_source=25, n_target=20):
    """The demo's simulated recording for these sizes and seed 0."""
    return mics.simulate(
        n_samples=n_samples,
        n_source=n_source,
        n_target=n_target,
        n_modulators=2,
        rank=3,
        n_channels=2,
        geometry=["private_source", "reshape"],
        random_state=0,
    )


@pytest.fixture(scope="module")
def demo_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("demo") / "report"
    argv = ["demo", *DEMO_ARGS, "--permutations", "3", "--boot", "3", "--output", str(out)]
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        run = cli._demo(cli._parser().parse_args(argv))
    return run, out, printed.getvalue()


@pytest.fixture(scope="module")
def report(demo_run):
    return demo_run[1]


def test_demo_recovers_the_channels(report):
    text = (report / "summary.txt").read_text()
    assert "baseline rank r = 3,  channels K = 2" in text
    score = float(re.search(r"factor match score vs truth = ([0-9.]+)", text).group(1))
    # measured 0.990 at these settings (seed 0); a wrong channel scores well below
    assert score > 0.97
    assert "private source" in text.lower()


def test_demo_p_value_is_the_monte_carlo_p_of_what_it_writes(report):
    # the statistics behind the test, at full precision, from the report folder
    with open(report / cli.MODULATION_TEST_CSV) as f:
        rows = list(csv.DictReader(line for line in f if not line.startswith("#")))
    observed = [float(r["statistic"]) for r in rows if r["kind"] == "observed"]
    null = np.array([float(r["statistic"]) for r in rows if r["kind"] == "null"])
    assert len(observed) == 1 and null.size == 3
    expected = (1 + np.sum(null >= observed[0])) / (1 + null.size)
    text = (report / "summary.txt").read_text()
    line = re.search(r"statistic = (-?[0-9.]+), (p = .*)", text)
    assert float(line.group(1)) == pytest.approx(observed[0], abs=5e-5)
    assert line.group(2) == format_p_value(expected, 3)
    # two strong planted channels: every shifted null scores below the real data
    assert expected == 0.25


def test_demo_report_has_every_figure_on_its_index_page(report):
    index = (report / "index.html").read_text()
    srcs = re.findall(r'<img src="([^"]+)"', index)
    assert srcs == FIGURES
    for name in FIGURES:
        assert (report / name).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    # the printed summary is on the page, escaped
    assert "baseline rank r = 3,  channels K = 2" in index
    assert "||W||^2" in index and "<pre>" in index


def test_demo_report_figures_have_no_text_running_into_other_text(demo_run):
    run = demo_run[0]
    assert [f.filename for f in run.figures] == FIGURES
    overlaps = {f.filename: overlapping_texts(f.figure) for f in run.figures}
    assert {name: pairs for name, pairs in overlaps.items() if pairs} == {}


def test_demo_saves_a_model_that_reopens(demo_run):
    run, report, _ = demo_run
    model = mics.load(report / "model.nc")
    assert (model.rank_, model.n_channels_) == (3, 2)
    assert list(model.modulator_patterns_["modulator"].values) == ["running speed", "pupil"]
    X, _, Z, _ = _simulated()
    pred = np.asarray(model.predict(X, Z))
    assert pred.shape == (800, 20)
    assert_allclose(pred, np.asarray(run.model.predict(X, Z)), rtol=1e-12, atol=0)


def test_demo_prints_the_paths_it_wrote(demo_run):
    run, report, printed = demo_run
    folder = Path(re.search(r"^report folder: (.+)$", printed, re.M).group(1))
    page = Path(re.search(r"^report page: +(.+)$", printed, re.M).group(1))
    model = Path(re.search(r"^model file: +(.+)$", printed, re.M).group(1))
    assert folder == report.resolve() and folder.is_dir()
    assert page == folder / "index.html" and page.is_file()
    assert model == folder / "model.nc" and model.is_file()
    assert (run.folder, run.index, run.model_file) == (folder, page, model)
    assert f"fitted model saved to {model} (reopen with mics.load)" in printed


def test_light_demo_through_main_prints_paths_that_exist(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)  # a relative --output is printed resolved
    argv = ["demo", "--samples", "300", "--source", "12", "--target", "10"]
    assert main([*argv, "--permutations", "0", "--boot", "0", "--no-select"]) == 0
    printed = capsys.readouterr().out
    paths = {
        key: Path(re.search(rf"^{key}: +(.+)$", printed, re.M).group(1))
        for key in ("report folder", "report page", "model file")
    }
    assert paths["report folder"] == tmp_path / "mics_report"
    assert paths["report page"] == tmp_path / "mics_report" / "index.html"
    assert paths["model file"] == tmp_path / "mics_report" / "model.nc"
    assert all(p.is_absolute() and p.exists() for p in paths.values())
    assert "modulation test" not in printed  # --permutations 0 skips it
    assert not (tmp_path / "mics_report" / cli.MODULATION_TEST_CSV).exists()


def test_version(capsys):
    with pytest.raises(SystemExit) as exit_:
        main(["--version"])
    assert exit_.value.code == 0
    assert capsys.readouterr().out == f"mics {mics.__version__}\n"


def _help_entries(text):
    """The option entries of an argparse help text, each joined onto one line."""
    entries = []
    for line in text.splitlines():
        if line.startswith("  -"):
            entries.append(line.strip())
        elif entries and entries[-1] is not None and line.startswith("   "):
            entries[-1] += " " + line.strip()
        elif not line.strip():
            continue
        else:
            entries.append(None)  # a heading or prose: ends the previous entry
    return [" ".join(e.split()) for e in entries if e]


def test_demo_help_states_every_default(capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "80")
    with pytest.raises(SystemExit) as exit_:
        main(["demo", "--help"])
    assert exit_.value.code == 0
    entries = _help_entries(capsys.readouterr().out)
    options = {e.split()[0].rstrip(","): e for e in entries}
    assert set(options) == {"-h", *DEMO_DEFAULTS}
    for option, default in DEMO_DEFAULTS.items():
        entry = options[option]
        assert re.findall(r"\(default: ([^)]*)\)", entry) == [default], entry
        # a help string of its own, not just the default
        assert len(entry.split("(default:")[0].split()) > 3, entry
    # the parser's defaults are the ones the help states
    args = cli._parser().parse_args(["demo"])
    assert {o: str(getattr(args, o[2:])) for o in DEMO_DEFAULTS} == DEMO_DEFAULTS


def test_top_level_help_lists_the_demo_and_version(capsys):
    with pytest.raises(SystemExit) as exit_:
        main(["--help"])
    assert exit_.value.code == 0
    out = capsys.readouterr().out
    assert out.startswith("usage: mics ")
    assert "--version" in out and "demo" in out


def test_wrong_flag_shows_the_subcommand_usage(capsys):
    with pytest.raises(SystemExit) as exit_:
        main(["demo", "--bogus"])
    assert exit_.value.code == 2
    err = capsys.readouterr().err
    assert err.startswith("usage: mics demo ")
    assert err.rstrip().endswith("mics demo: error: unrecognized arguments: --bogus")


def test_wrong_top_level_flag_shows_the_top_level_usage(capsys):
    with pytest.raises(SystemExit) as exit_:
        main(["--bogus", "demo"])
    assert exit_.value.code == 2
    err = capsys.readouterr().err
    assert err.startswith("usage: mics [-h]")
    assert "unrecognized arguments: --bogus" in err


@pytest.mark.parametrize(
    ("p", "n", "text"),
    [
        (1 / 6, 5, "p = 0.167 (smallest possible 0.167 with 5 permutations)"),
        (0.05, 19, "p = 0.05 (smallest possible 0.05 with 19 permutations)"),
        (3 / 7, 6, "p = 0.429 (smallest possible 0.143 with 6 permutations)"),
        (1.0, 3, "p = 1 (smallest possible 0.25 with 3 permutations)"),
        (0.5, 1, "p = 0.5 (smallest possible 0.5 with 1 permutation)"),
        (1 / 1000, 999, "p = 0.001 (smallest possible 0.001 with 999 permutations)"),
        (2 / 10001, 10000, "p = 0.0002 (smallest possible 0.0001 with 10000 permutations)"),
    ],
)
def test_format_p_value(p, n, text):
    assert format_p_value(p, n) == text


def test_format_p_value_rejects_no_permutations():
    with pytest.raises(ValueError, match="n_permutations"):
        format_p_value(1.0, 0)
