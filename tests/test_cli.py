"""The `mics demo` main job runs end to end and reports a good recovery."""

import re

from mics.cli import main


def test_demo_writes_report_with_recovered_channels(tmp_path, capsys):
    out = tmp_path / "report"
    assert (
        main(
            ["demo", "--samples", "800", "--source", "25", "--target", "20", "--output", str(out)]
        )
        == 0
    )
    text = (out / "summary.txt").read_text()
    assert "baseline rank r = 3,  channels K = 2" in text
    score = float(re.search(r"factor match score vs truth = ([0-9.]+)", text).group(1))
    assert score > 0.9
    assert "private source" in text.lower()
    assert (out / "channels.png").stat().st_size > 10_000
    assert (out / "decomposition.png").exists()
