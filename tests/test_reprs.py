"""Readable results: the tables of a decomposition and a bootstrap show their own numbers."""

import ast
import re
from pathlib import Path

import numpy as np
import pytest
import xarray as xr

import mics
from mics.model import summarize
from mics.model.decomposition import PARTS, decompose_channels
from mics.model.summaries import format_bootstrap

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def fitted():
    X, Y, Z, _ = mics.simulate(
        n_samples=300, n_source=8, n_target=6, n_modulators=2, rank=2, n_channels=2,
        random_state=0,
    )  # fmt: skip
    model = mics.MICs(2, 2, verbose=0, random_state=0).fit(X, Y, Z)
    boot = mics.bootstrap_channels(model, X, Y, Z, n_boot=6, verbose=0, random_state=0)
    return model, boot


@pytest.fixture(scope="module")
def mixed():
    """A decomposition whose four fractions are all far from 0 and 1."""
    rng = np.random.default_rng(3)
    p, q, m, r, K = 7, 6, 3, 2, 3
    U = np.linalg.qr(rng.standard_normal((p, r)))[0]
    V = np.linalg.qr(rng.standard_normal((q, r)))[0]
    A, Bm, C = (rng.standard_normal((n, K)) for n in (p, q, m))
    return decompose_channels(U, V, A, Bm, [3.0, 1.5, 0.5], C)


def _rows(text, width):
    """The table's rows as {first cell: [cells]}, cells cut at fixed widths."""
    rows = {}
    for line in text.splitlines():
        cells = [line[i : i + width].strip() for i in range(0, len(line), width)]
        if len(cells) >= 3 and (cells[0].isdigit() or cells[0] == "total"):
            rows[cells[0]] = cells[1:]
    return rows


def _check_decomposition_table(text, ds):
    rows = _rows(text, 10)
    assert set(rows) == {str(k) for k in range(ds.sizes["channel"])} | {"total"}
    for k in range(ds.sizes["channel"]):
        weight, *fractions = rows[str(k)]
        assert weight == f"{float(ds['channel_weight'][k]):.3g}"
        assert fractions == [f"{float(ds[part][k]):.3f}" for part in PARTS]
        assert sum(map(float, fractions)) == pytest.approx(1.0, abs=4 * 5e-4)
    blank, *totals = rows["total"]
    assert blank == ""
    assert totals == [f"{float(ds[f'total_{part}']):.3f}" for part in PARTS]
    assert sum(map(float, totals)) == pytest.approx(1.0, abs=4 * 5e-4)
    assert f"||W||^2 = {float(ds['energy_total']):.4g})" in text


def test_decomposition_table_shows_the_datasets_values(mixed):
    text = repr(mixed.mics)
    assert text.startswith("MIC decomposition (euclidean metric, rank 2, 3 channel(s))")
    # every part is really present, so the check below is not of zeros and ones
    assert all(0.01 < float(mixed[f"total_{part}"]) < 0.99 for part in PARTS)
    _check_decomposition_table(text, mixed)
    assert mixed.mics.kind == "decomposition"
    assert "1.906e-09" not in text and "e-" not in text.split("\n", 1)[1].rsplit("\n", 1)[0]


def test_fitted_decomposition_table(fitted):
    model, _ = fitted
    dec = model.decompose()
    assert isinstance(dec, xr.Dataset)  # still the Dataset every current use reads
    _check_decomposition_table(repr(dec.mics), dec)
    assert str(dec.mics) == dec.mics.table()
    html = dec.mics._repr_html_()
    assert html.startswith("<pre>MIC decomposition") and "priv.src" in html


def test_bootstrap_table_shows_the_intervals(fitted):
    model, boot = fitted
    assert isinstance(boot, xr.Dataset) and boot.mics.kind == "bootstrap"
    text = repr(boot.mics)
    assert text.startswith(
        "MIC bootstrap: 95% intervals over 6 resamples of blocks of 17 samples, 2 channel(s)"
    )
    rows = _rows(text, 14)
    assert set(rows) == {"0", "1", "total"}

    def interval(da, spec=".3f"):
        low, high = float(da.sel(bound="low")), float(da.sel(bound="high"))
        assert low <= high
        return f"{low:{spec}}-{high:{spec}}"

    for k in range(2):
        weight, *fractions = rows[str(k)]
        assert weight == interval(boot["channel_weights"].isel(channel=k), ".3g")
        assert fractions == [interval(boot[part].isel(channel=k)) for part in PARTS]
    blank, *totals = rows["total"]
    assert blank == "" and totals == [interval(boot[f"total_{part}"]) for part in PARTS]
    # the lows of the four total fractions cannot add to more than one, the highs to less
    lows = [float(t.split("-")[0]) for t in totals]
    highs = [float(t.split("-")[1]) for t in totals]
    assert sum(lows) <= 1 + 2e-3 and sum(highs) >= 1 - 2e-3


def test_summary_puts_the_tables_and_the_reading_together(fitted):
    model, boot = fitted
    dec = model.decompose()
    text = dec.mics.summary(boot)
    table, boot_table, paragraph = text.split("\n\n")
    assert table == dec.mics.table()
    assert boot_table == format_bootstrap(boot) == boot.mics.summary()
    assert paragraph == summarize(dec, boot)
    assert "(95% CI " in paragraph
    assert dec.mics.summary() == f"{table}\n\n{summarize(dec)}"


def test_current_uses_of_the_datasets_still_work(fitted):
    model, boot = fitted
    dec = model.decompose()
    assert dec["reshape"].values.shape == (2,)
    draws = boot["total_new_draws"]
    assert float(draws.quantile(0.5, dim="boot")) == pytest.approx(float(draws.median()))
    merged = xr.merge([dec[["total_new"]], boot[["total_reshape"]]])
    assert {"total_new", "total_reshape"} <= set(merged.data_vars)


def test_other_datasets_are_not_mistaken_for_results():
    ds = xr.Dataset({"a": ("x", [1.0, 2.0])})
    assert ds.mics.kind is None
    assert "not a mics result" in repr(ds.mics)
    with pytest.raises(TypeError, match="has no total_reshape variable"):
        ds.mics.table()


def test_no_channels_reads_as_no_modulation():
    empty = [np.zeros((n, 0)) for n in (3, 2, 2)]
    ds = decompose_channels(np.eye(3)[:, :1], np.eye(2)[:, :1], empty[0], empty[1], [], empty[2])
    text = ds.mics.summary()
    assert "0 channel(s)" in text and "No modulation channels" in text


def test_readme_first_fit_prints_what_it_computes():
    readme = (ROOT / "README.md").read_text()
    block = re.search(r"## A first fit\s+```python\n(.*?)```", readme, re.S).group(1)
    tree = ast.parse(block)

    def printed(node):
        return isinstance(node.value, ast.Call) and getattr(node.value.func, "id", "") == "print"

    bare = [ast.unparse(n) for n in tree.body if isinstance(n, ast.Expr) and not printed(n)]
    assert bare == [], "the README's first fit computes without printing: " + "; ".join(bare)
    calls = " ".join(ast.unparse(n) for n in ast.walk(tree) if isinstance(n, ast.Call))
    assert "print(dec.mics.summary())" in calls and "print(boot.mics)" in calls
