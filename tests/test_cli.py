"""The `mics demo` main job runs end to end and writes a complete report."""

import re

import numpy as np
import pytest

import mics
from mics.cli import main

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


@pytest.fixture(scope="module")
def report(tmp_path_factory):
    out = tmp_path_factory.mktemp("demo") / "report"
    args = ["demo", "--samples", "800", "--source", "25", "--target", "20"]
    args += ["--permutations", "3", "--boot", "3", "--output", str(out)]
    assert main(args) == 0
    return out


def test_demo_recovers_the_channels(report):
    text = (report / "summary.txt").read_text()
    assert "baseline rank r = 3,  channels K = 2" in text
    score = float(re.search(r"factor match score vs truth = ([0-9.]+)", text).group(1))
    assert score > 0.9
    assert "private source" in text.lower()
    # 3 permutations: the p-value is (1 + #null >= observed) / 4, and the floor is said
    p = float(re.search(r"p = ([0-9.]+) \(smallest possible 0.25\)", text).group(1))
    assert p in (0.25, 0.5, 0.75, 1.0)


def test_demo_report_has_every_figure_on_its_index_page(report):
    index = (report / "index.html").read_text()
    srcs = re.findall(r'<img src="([^"]+)"', index)
    assert srcs == FIGURES
    for name in FIGURES:
        assert (report / name).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    # the printed summary is on the page, escaped
    assert "baseline rank r = 3,  channels K = 2" in index
    assert "||W||^2" in index and "<pre>" in index


def test_demo_saves_a_model_that_reopens(report):
    model = mics.load(report / "model.nc")
    assert (model.rank_, model.n_channels_) == (3, 2)
    assert list(model.modulator_patterns_["modulator"].values) == ["running speed", "pupil"]
    X, _, Z, _ = mics.simulate(
        n_samples=800,
        n_source=25,
        n_target=20,
        n_modulators=2,
        rank=3,
        n_channels=2,
        geometry=["private_source", "reshape"],
        random_state=0,
    )
    pred = model.predict(X, Z)
    assert pred.shape == (800, 20) and np.all(np.isfinite(pred))
