"""Study figures the documentation quotes, each read from the results file that holds it.

A page of the Sphinx site quotes a figure as a MyST substitution,
``{{ name }}``: ``docs/conf.py`` sets ``myst_substitutions`` from
:func:`numbers`, so a rerun of the study (``studies/run_all.py``) updates the
page at the next build. Text that is also read outside Sphinx (``README.md``,
the tutorials, which are notebooks too) writes the figure out; ``QUOTES``
lists those passages with the names of their figures, and
``tests/test_quoted_numbers.py`` fails when one no longer says what its file
holds (and when a page names a figure that is not here).

Every value is a string, formatted as the text shows it. This module reads
files only (no ``mics``), so the docs build and the test can import it alone.
"""

from __future__ import annotations

import csv
import re
from pathlib import Path
from statistics import median

RESULTS = Path(__file__).resolve().parents[1] / "results"


# ------------------------------------------------------------------------------- readers
def _rows(path):
    with open(RESULTS / path, newline="") as f:
        return list(csv.DictReader(f))


def _text(path):
    return (RESULTS / path).read_text()


def _find(path, pattern, group=1):
    """The first match of ``pattern`` in a results text file (a clear error if none)."""
    found = re.search(pattern, _text(path), flags=re.S)
    if found is None:
        raise ValueError(f"results/{path}: no match for {pattern!r}")
    return found.group(group)


def _markdown_table(path, first_header):
    """The rows of the markdown table of ``path`` whose first header is ``first_header``."""
    lines = _text(path).splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(f"| {first_header} |"))
    rows = []
    for line in lines[start:]:
        if not line.startswith("|"):
            break
        rows.append([cell.strip() for cell in line.strip().strip("|").split("|")])
    return [dict(zip(rows[0], row, strict=True)) for row in rows[2:]]


def _share(k, n):
    return f"{k}/{n}"


def _span(values, fmt="{:.2g}"):
    """``"a-b"`` of the values, or one value when they are equal."""
    lo, hi = fmt.format(min(values)), fmt.format(max(values))
    return lo if lo == hi else f"{lo}-{hi}"


def _percent(x, digits=2):
    return f"{100 * x:.{digits}g}%"


# ------------------------------------------------------------------------------- studies
def trials():
    """``studies/validation/trials.py``: trial structure, condition means, the trial null."""
    rows = {(r["part"], r["data"]): r for r in _rows("trials/trials_summary.csv")}

    def k(part, data):
        r = rows[(part, data)]
        return _share(round(float(r["rate"]) * int(r["n"])), r["n"])

    null = rows[("c_null", "subtracted")]
    text = "trials/trials_summary.txt"
    power = {
        snr: float(_find(text, rf"SNR {snr}\n.*?median z vs null \+([\d.]+)"))
        for snr in ("0.03", "0.1")
    }
    score_max = float(_find(text, r"raw .*?max \+([\d.]+)"))
    subtracted_high = float(rows[("a_communication", "subtracted")]["ci_high"])
    return {
        "trials_raw_rank": k("a_communication", "raw"),
        "trials_raw_score_max": f"{score_max:.2f}",
        "trials_subtracted_rank": k("a_communication", "subtracted"),
        "trials_subtracted_rank_ci": f"{subtracted_high:.3f}",
        "trials_circular": k("b_raw_circular", "raw"),
        "trials_null": k("c_null", "subtracted"),
        "trials_null_ci": f"{float(null['ci_low']):.3f}-{float(null['ci_high']):.3f}",
        "trials_null_ks": f"{float(null['ks']):.2f}",
        "trials_power_weak": k("d_power_snr0.03", "subtracted"),
        "trials_power_strong": k("d_power_snr0.1", "subtracted"),
        "trials_power_z_weak": f"{power['0.03']:.1f}",
        "trials_power_z_strong": f"{power['0.1']:.1f}",
    }


def channel_search():
    """``studies/validation/channel_search.py`` and ``studies/park2024_channel_search.py``."""
    text = "channel_search/channel_search_summary.txt"
    out = {
        "channel_search_n": _find(text, r"^(\d+) data sets"),
        "channel_search_same_selection": _find(text, r"same \(rank, K\) as the grid: (\d+)/"),
        "channel_search_same_statistic": _find(text, r"same test statistic.*?: (\d+)/"),
    }
    counts = _markdown_table("park2024_channel_search/comparison.md", "analysis")
    changed = _markdown_table("park2024_channel_search/comparison.md", "session")
    moved = [r for r in changed if r["statistic (grid)"] != r["statistic (sequential)"]]
    real = [r for r in changed if r["analysis"] == "real"]
    worst = max(real, key=lambda r: float(r["p (sequential)"]) - float(r["p (grid)"]))
    out.update(
        park_channel_search_tests=str(sum(int(r["tests"]) for r in counts)),
        park_channel_search_same_k=str(sum(int(r["same selected K"]) for r in counts)),
        park_channel_search_changed=str(len(moved)),
        park_channel_search_single=str(
            sum(r["modulators"] in ("pupil", "running") for r in moved)
        ),
        park_channel_search_p_grid=f"{float(worst['p (grid)']):.3g}",
        park_channel_search_p_sequential=f"{float(worst['p (sequential)']):.3g}",
    )
    return out


def penalties():
    """``studies/validation/penalties.py``: median factor match by method."""
    runs = _rows("penalties/penalties_runs.csv")

    def med(method, regime, T):
        return median(
            float(r["fms"])
            for r in runs
            if r["method"] == method and r["regime"] == regime and r["n_samples"] == str(T)
        )

    cv = med('alpha_channels="cv"', "hard", 500)
    earlier = med("alpha_channels=0.25 (earlier default)", "hard", 500)
    return {
        "penalties_cv_hard_500": f"{cv:.3f}",
        "penalties_earlier_hard_500": f"{earlier:.3f}",
    }


def scaling():
    """``studies/performance/scaling.py``: the chunked selection and test on a cluster."""
    fit, test = "scaling/fit.txt", "scaling/test.txt"
    small = "scaling/test_small.txt"
    per_shift = re.findall(r"\(([\d.]+) s per shift", _text(test))
    small_runs = re.findall(r": ([\d.]+) s \([\d.]+ s per shift\)", _text(small))
    seconds = float(_find(fit, r"default selection: ([\d.]+) s"))
    chunks = _find(fit, r"= ([\d.]+) chunks")
    frames = int(_find(fit, r"([\d,]+) frames/s;").replace(",", ""))
    return {
        "scaling_fit_seconds": f"{seconds:.0f}",
        "scaling_fit_rank": _find(fit, r"selected rank (\d+)"),
        "scaling_fit_channels": _find(fit, r"K (\d+) \(planted"),
        "scaling_fit_growth_mb": _find(fit, r"growth (\d+) MB"),
        "scaling_fit_growth_chunks": chunks,
        "scaling_fit_growth_chunks_round": f"{float(chunks):.0f}",
        "scaling_frames_per_second": f"{round(frames, -2):,}",
        "scaling_blas_fraction": _find(fit, r"-> ([\d.]+) of the limit"),
        "scaling_test_shift_1": f"{float(per_shift[0]):.1f}",
        "scaling_test_shift_2": f"{float(per_shift[1]):.2f}",
        "scaling_test_in_memory": f"{float(per_shift[2]):.1f}",
        "scaling_test_speedup": _find(test, r"speed-up 1 -> 2 workers: ([\d.]+)x"),
        "scaling_small_1": f"{float(small_runs[0]):.0f}",
        "scaling_small_2": f"{float(small_runs[1]):.0f}",
        "scaling_small_speedup": _find(small, r"speed-up 1 -> 2 workers: ([\d.]+)x"),
    }


def population():
    """``studies/validation/population.py``: a 200-neuron modulator population."""
    line = _find("population/large.txt", r"MICs\(rank=2, n_channels=1\): (\{.*?\})")
    fit = dict(re.findall(r"'(\w+)': ([\w.]+)", line))
    return {
        "population_fit_seconds": f"{float(fit['seconds']):.1f}",
        "population_fit_peak_gb": f"{float(fit['peak_mb']) / 1000:.2f}",
    }


def artifacts():
    """``studies/validation/artifacts.py``: planted defects and the default fit."""
    table = _markdown_table("artifacts/summary.md", "defect")
    both = next(r for r in table if r["defect"] == "all")
    rate = r"(\d+/\d+) = [\d.]+% \[([\d.]+), ([\d.]+)\]"
    kept = re.match(rate, both["criterion 1 (kept or named)"])
    cleaned = re.match(rate, both["cleaned: clean selection"])
    return {
        "artifacts_kept_or_named": kept.group(1),
        "artifacts_cleaned": cleaned.group(1),
        "artifacts_cleaned_ci": f"{cleaned.group(2)}-{float(cleaned.group(3)):g}%",
    }


def sparse_members():
    """``studies/validation/sparse_members.py``: planted members found by the sparse fit."""
    runs = [r for r in _rows("sparse_members/runs.csv") if r["method"] == "sparse"]
    cells = {}
    for r in runs:
        key = (int(r["T"]), int(r["m"]), float(r["snr"]), r["role"])
        cells.setdefault(key, []).append(r)

    def means(where, kept=False):
        out = []
        for key, rows in cells.items():
            if where(*key):
                rows = [r for r in rows if r["channel_lost"] != "True"] if kept else rows
                if rows:
                    out.append(
                        (
                            sum(float(r["precision"]) for r in rows) / len(rows),
                            sum(float(r["recall"]) for r in rows) / len(rows),
                        )
                    )
        return [p for p, _ in out], [r for _, r in out]

    def one(T, m, snr, role):
        return m == 1 and role in ("source", "target")

    def gating(T, m, snr, role):
        return m == 50 and role == "modulator" and T >= 1000 and not (T == 1000 and snr == 0.1)

    members_p, members_r = means(one)
    gate_p, gate_r = means(gating)
    kept_p, kept_r = means(
        lambda T, m, snr, role: m == 50 and T >= 1000 and role in ("source", "target"), kept=True
    )
    return {
        "sparse_members_precision": _span(members_p),
        "sparse_members_recall": _span(members_r),
        "sparse_members_kept": _span(kept_p + kept_r),
        "sparse_gating_precision": _span(gate_p, "{:.2f}"),
        "sparse_gating_recall": _span(gate_r, "{:.2f}"),
    }


def joint_step():
    """``studies/performance/joint_step.py``: the profiled joint stage at p > T."""
    text = _text("joint_step/README.md")
    cost = {r["joint"]: float(r["seconds"]) for r in _rows("joint_step/test_cost.csv")}
    return {
        "joint_fit_ratio": _find("joint_step/README.md", r"\(time ratio ([\d.]+), load"),
        "joint_selection_ratio": re.search(
            r"default selection at \w+: time ratio ([\d.]+)", text
        ).group(1),
        "joint_tol_default": _find(
            "joint_step/README.md",
            r"tol / 100, default joint stage: .*?statistics moved by up to ([\d.e+-]+)",
        ),
        "joint_tol_tight": _find(
            "joint_step/README.md",
            r"tol / 10000, profiled, tol / 100 joint stage: .*?"
            r"statistics moved by up to ([\d.e+-]+)",
        ),
        "joint_tol_profiled": _find(
            "joint_step/README.md",
            r"tol / 100, profiled joint stage: .*?statistics moved by up to ([\d.e+-]+)",
        ),
        "joint_tight_cost": f"{cost['profiled, tol / 100'] / cost['default']:.1f}",
        "joint_profiled_cost": f"{cost['profiled'] / cost['default']:.1f}",
    }


def null_families():
    """``studies/validation/null_families.py``: the default test where nothing gates."""
    null = [
        r
        for r in _rows("null_families/summary.csv")
        if r["gate"] == "0" and r["test"] == "mics"
        and r["method"] == "default" and r["estimator"] == "cheap"
    ]  # fmt: skip
    cell = {(r["subfamily"], r["size"]): r for r in null}

    def k(sub, size):
        r = cell[(sub, size)]
        return f"{r['rejected']} of {r['n']}"

    park = [float(r["rate"]) for r in null if r["size"] == "park"]
    return {
        "null_park_max": _percent(max(park)),
        "null_semedo_bursty": k("bursty", "semedo"),
        "null_semedo_quadratic": k("nonlinear_quadratic", "semedo"),
        "null_semedo_threshold": k("nonlinear_threshold", "semedo"),
        "null_semedo_bursty_undriven": k("bursty_undriven", "semedo"),
        "null_semedo_bursty_finite": k("bursty_finite_variance", "semedo"),
        "null_park_bursty": k("bursty", "park"),
    }


def effect_coverage():
    """``studies/validation/effect_coverage.py``: how often the effect interval covers."""
    rows = _rows("effect_coverage/summary.csv")
    cell = {(r["cell"], r["cv"], r["method"], r["n_draws"]): r for r in rows}

    def covers(name, method, draws, cv="5"):
        r = cell[(name, cv, method, draws)]
        return f"{r['covers_expected']} of {r['n']}"

    def ratio(name):
        r = cell[(name, "5", "percentile", "100")]
        return f"{float(r['mean_sd_100']) / float(r['sd_estimate']):.1f}"

    def width(name):
        folds, boot = cell[(name, "5", "folds", "0")], cell[(name, "5", "percentile", "100")]
        return f"{float(folds['mean_width']) / float(boot['mean_width']):.2f}"

    out = {"cov_n": cell[("block", "10", "folds", "0")]["n"]}
    for name in ("block", "block_null", "trial", "calcium", "shared", "counts"):
        key = name.replace("block_null", "null")
        out[f"cov_{key}_boot"] = covers(name, "percentile", "100")
        out[f"cov_{key}_folds"] = covers(name, "folds", "0")
        out[f"cov_{key}_folds10"] = covers(name, "folds", "0", cv="10")
        if name in ("block", "block_null", "trial"):
            out[f"cov_{key}_width"] = width(name)
    out["cov_null_naive10"] = covers("block_null", "folds_naive", "0", cv="10")
    out["cov_calcium_naive10"] = covers("calcium", "folds_naive", "0", cv="10")
    out["cov_null_sd_ratio"] = ratio("block_null")
    rows = _rows("effect_coverage/cost.csv")
    cost = {r["interval"].split()[0]: float(r["seconds"]) for r in rows}
    out["cov_cost_default"] = f"{cost['default'] / cost['none']:.2f}"
    out["cov_cost_boot"] = f"{cost['bootstrap'] / cost['none']:.1f}"
    return out


SOURCES = (
    trials,
    channel_search,
    penalties,
    scaling,
    population,
    artifacts,
    sparse_members,
    joint_step,
    null_families,
    effect_coverage,
)


def numbers() -> dict[str, str]:
    """Every quoted figure by name, read now from the results files."""
    out = {}
    for source in SOURCES:
        found = source()
        clash = set(found) & set(out)
        if clash:
            raise ValueError(f"figures named twice: {sorted(clash)}")
        out.update(found)
    return out


#: Passages written out in text that is also read outside Sphinx: the file and
#: the passage, with ``{name}`` where a figure stands. Line breaks in the
#: file count as spaces.
QUOTES = (
    (
        "README.md",
        "the default selection on a 2,000,000-frame zarr recording (p = 300, q = 100, m = 3, "
        "3 GB) in {scaling_fit_seconds} s with the driver's memory growing by "
        "{scaling_fit_growth_chunks_round} chunks; a modulation test at T = 20000 "
        "{scaling_test_speedup}x faster on 2 workers than on 1 ({scaling_test_shift_2} s a "
        "shift; the in-memory test {scaling_test_in_memory} s)",
    ),
    (
        "docs/tutorials/park_study.md",
        "changes {park_channel_search_changed} of the study's {park_channel_search_tests} "
        "statistics",
    ),
)
