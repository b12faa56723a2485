"""The README sections the real-data studies share (Park et al. 2024 and Semedo et al. 2019).

Both studies report the same things about their tests: effect sizes with
their intervals beside the minimum detectable effects, one sentence per
test, the source- against target-side asymmetry, split-by-state RRR beside
the mics test, and the negative controls. Each study says what its tests
are (``labels``: the columns that name a test, e.g. session and modulator
set, or the modulator's form) and supplies its own words where the two
differ; the sections are built here once, from the tables the study wrote
(``tests.csv``, ``power.csv``, ``asymmetry.csv``, ``split_by_state.csv``).
"""

from __future__ import annotations

import numpy as np
from scipy import stats

try:  # run as a script (studies/ on sys.path) or imported as studies.report
    import study_tools as tools
except ImportError:  # pragma: no cover
    from studies import study_tools as tools

ALPHA = 0.05


def test_label(row, labels) -> str:
    """A test's name in bold, from its ``labels`` columns (``"**a, b**"``)."""
    return "**" + ", ".join(str(getattr(row, c)) for c in labels) + "**"


def effect_table(real, power, labels, holm=("p_holm", "p (Holm)")):
    """Effect size with its interval and the minimum detectable effect, one row per real test.

    Parameters
    ----------
    real : pandas.DataFrame
        The real tests of ``tests.csv``.
    power : pandas.DataFrame
        ``power.csv`` (rows of :func:`study_tools.power_rows`), possibly empty.
    labels : list of str
        The columns that name a test; the power rows of a test are those
        with the same values in these columns.
    holm : (str, str)
        The column of Holm-adjusted p-values and its header.

    Returns
    -------
    list of str
        The markdown table's lines.
    """
    column, header = holm
    names = " | ".join(labels)
    lines = [
        f"| {names} | K | p | {header} | effect [95% CI] | MDE (80% power) |",
        "|" + "---|" * (len(labels) + 5),
    ]
    for r in real.itertuples():
        mde = "-"
        if len(power):
            mine = np.ones(len(power), dtype=bool)
            for c in labels:
                if c in power:
                    mine &= (power[c] == getattr(r, c)).to_numpy()
            if mine.any():
                mde = tools.mde_words(power[mine])
        lines.append(
            "| "
            + " | ".join(str(getattr(r, c)) for c in labels)
            + f" | {r.n_channels} | {r.p_value:.3g} | {getattr(r, column):.3g} | "
            f"{tools.percent(r.effect_size)} [{tools.percent(r.effect_low)}, "
            f"{tools.percent(r.effect_high)}] | {mde} |"
        )
    return lines


def sentences(real, labels) -> list[str]:
    """One sentence per test (``ModulationTest.summary``, the ``sentence`` column)."""
    lines = ["", "### One sentence per test (`ModulationTest.summary`)", ""]
    return lines + [f"- {test_label(r, labels)}: {r.sentence}" for r in real.itertuples()]


def effect_section(real, power, labels, *, intro, power_text=None, holm=("p_holm", "p (Holm)")):
    """The section "Effect sizes and minimum detectable effects".

    Parameters
    ----------
    real, power, labels, holm
        As for :func:`effect_table`.
    intro : str
        What the effect size is, in the study's words.
    power_text : str, optional
        How the MDE was obtained (``study_tools.power_method_text`` and the
        study's additions); only where ``power`` has rows.
    """
    lines = ["", "## Effect sizes and minimum detectable effects", "", intro, ""]
    if len(power) and power_text:
        lines += [power_text, ""]
    return lines + effect_table(real, power, labels, holm)


def effect_range(real) -> list[str]:
    """How many effect intervals lie above 0, and the range of the effect sizes."""
    return [
        "",
        f"Effect intervals above 0 in {int(np.sum(real.effect_low > 0))}/{len(real)} tests; "
        f"effect sizes range from {tools.percent(real.effect_size.min())} to "
        f"{tools.percent(real.effect_size.max())}.",
    ]


#: What the asymmetry test is, with the calibration it rests on (both studies' words).
ASYMMETRY_METHOD = (
    "`mics.asymmetry(model, test=...)`: the chance-corrected test of private-source "
    "against private-target modulation energy (bootstrap bias correction of the energies, "
    "whole trials resampled, the decomposition's draws; `results/asymmetry_calibration/`"
)


def asymmetry_section(asym, labels, *, intro, undefined, holm=None):
    """The section on the source- against target-side asymmetry of the defined tests.

    Parameters
    ----------
    asym : pandas.DataFrame
        ``asymmetry.csv``: one row per real test, ``reported`` where it is
        defined (the test rejected at 0.05 with a channel selected).
    labels : list of str
        The columns that name a test.
    intro : str
        What the test is, in the study's words (it starts with
        ``ASYMMETRY_METHOD``).
    undefined : str
        What to say when no test is defined.
    holm : str, optional
        A column of Holm-adjusted p-values to quote beside each p-value.
    """
    lines = ["", "## Source- against target-side reconfiguration (asymmetry)", ""]
    if not len(asym):
        return lines + ["No decomposition was bootstrapped (`--n-boot 0`): no asymmetry."]
    rep = asym[asym.reported]
    lines += [intro, ""]
    if not len(rep):
        return lines + [undefined]
    return lines + [
        f"- {test_label(r, labels)} (p = {r.p_value:.3g}"
        + (f", Holm {getattr(r, holm):.3g}" if holm else "")
        + f"): {r.sentence}"
        for r in rep.itertuples()
    ]


def split_table(states, labels, n_trials):
    """Split-by-state RRR's p-values beside the mics test's, one row per test.

    Parameters
    ----------
    states : pandas.DataFrame
        ``split_by_state.csv`` (rows of ``study_tools.split_by_state_tests``
        with the test's ``labels`` and ``mics_p``).
    labels : list of (str, str)
        The columns that name a test and their headers.
    n_trials : int
        Trials per recording (the high state's count is out of these).
    """
    methods = list(tools.SPLIT_METHODS)
    lines = [
        "| "
        + " | ".join(h for _, h in labels)
        + " | high trials | mics p | "
        + " | ".join(methods)
        + " |",
        "|" + "---|" * (len(labels) + 2 + len(methods)),
    ]
    for r in states.itertuples():
        cells = " | ".join(f"{getattr(r, f'{m}_p'):.3g}" for m in methods)
        names = " | ".join(str(getattr(r, c)) for c, _ in labels)
        lines.append(f"| {names} | {r.n_high}/{n_trials} | {r.mics_p:.3g} | {cells} |")
    return lines


def split_section(states, labels, *, title, state, note, n_trials, empty="Not run."):
    """The section on split-by-state RRR run on the study's own recordings.

    Parameters
    ----------
    states, labels, n_trials
        As for :func:`split_table`.
    title : str
        The section's heading.
    state : str
        The state the trials are split by, in words.
    note : str
        The study's sentences after the method.
    empty : str
        What to say when it was not run.
    """
    lines = ["", f"## {title}", ""]
    if not len(states):
        return lines + [empty]
    text = tools.split_method_text(int(states.n_perm.iloc[0]), state) + note
    return lines + [text, ""] + split_table(states, labels, n_trials)


def split_counts(states, by) -> list[str]:
    """How many tests of each ``by`` group each method finds significant (uncorrected)."""
    lines = ["", "Significant at 0.05 (uncorrected), out of the sessions:", ""]
    for value, g in states.groupby(by, sort=False):
        counts = ", ".join(
            f"{m} {int(np.sum(g[f'{m}_p'] <= ALPHA))}" for m in ["mics", *tools.SPLIT_METHODS]
        )
        lines.append(f"- {value}: {counts} (of {len(g)}).")
    return lines


def control_line(what, summary, quantity, *, extra="") -> str:
    """The negative controls' line: how many are non-significant, with the interval.

    Parameters
    ----------
    what : str
        Which controls, in words.
    summary : pandas.DataFrame
        ``summary.csv`` indexed by ``quantity``.
    quantity : str
        The row of the count (``value`` of ``n`` non-significant, ``detail``
        from ``study_tools.control_detail``).
    extra : str
        Text after the target (e.g. counts per modulator set).
    """
    row = summary.loc[quantity]
    n, k_sig = int(row["n"]), int(row["n"]) - int(row["value"])
    excess = stats.binomtest(k_sig, n, ALPHA, alternative="greater").pvalue if n else 1.0
    warning = (
        " **More controls reject than an exact test would (one-sided binomial p = "
        f"{excess:.3f}): the test may be anti-conservative on these data, so read its "
        "rejections here with caution.**"
        if excess < ALPHA
        else ""
    )
    return (
        f"- Negative controls {what}: non-significant in {int(row['value'])}/{n} "
        f"({row['detail']}); target >= 95%.{warning}{extra}"
    )
