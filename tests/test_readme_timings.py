"""The README's timings are those of the committed measured run (tools/readme_timings.py)."""

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _measured():
    text = (ROOT / "results" / "readme_timings" / "timings.md").read_text()
    rows = dict(re.findall(r"^\| (.+?) \| ([\d.]+) s \|", text, flags=re.M))
    return {name: float(value) for name, value in rows.items()}


@pytest.mark.parametrize(
    "row, pattern",
    [
        ("`mics demo` (whole process)", r"It takes\s+about ([\d.]+) s on two cores"),
        ("`test_modulation`, 99 shifts, T=2000", r"circular-shift test \(about ([\d.]+) s"),
        ("`bootstrap_channels`, 100 resamples", r"block bootstrap CIs, ~([\d.]+) s"),
    ],
)
def test_readme_quotes_the_measured_run(row, pattern):
    quoted = float(re.search(pattern, (ROOT / "README.md").read_text()).group(1))
    measured = _measured()[row]
    # the README rounds to a figure a reader can use; a stale figure (the
    # demo's former "about 30 s" against 7.8 s measured) is far outside this
    assert quoted == pytest.approx(measured, rel=0.15)
