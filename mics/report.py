"""A report folder: the printed summary, one PNG per figure and an HTML index page."""

from __future__ import annotations

import html
from dataclasses import dataclass
from pathlib import Path

from mics.workflows.inference import format_p_value, result_sentence

__all__ = ["ReportFigure", "format_p_value", "result_summary", "write_report"]


def result_summary(model=None, test=None, power=None, alpha=0.05):
    """The sentence a report opens with: the fit, the test's verdict, the effect and the MDE.

    Parameters
    ----------
    model : fitted MICs, optional
        Its selected rank and channels and their held-out gains
        (:meth:`mics.MICs.summary`).
    test : ModulationTest, optional
        Its verdict and the effect size with its interval.
    power : PowerAnalysis or float, optional
        The minimum detectable effect on the same recording.
    alpha : float
        Level at which "detected" is said.

    Returns
    -------
    str
        One sentence per result given, joined by spaces.
    """
    if model is not None:
        return model.summary(test=test, power=power, alpha=alpha)
    if test is not None:
        return result_sentence(test, power=power, alpha=alpha)
    if power is not None:
        return power.summary()
    raise ValueError("result_summary needs a model, a test or a power analysis.")


@dataclass
class ReportFigure:
    """One figure of a report.

    Attributes
    ----------
    filename : str
        PNG file name inside the report folder (e.g. ``"channels.png"``).
    title : str
        Heading on the index page.
    caption : str
        What a reader should see in it (one or two sentences).
    figure : matplotlib.figure.Figure
    """

    filename: str
    title: str
    caption: str
    figure: object


def write_report(folder, summary, figures, title="mics report", dpi=100):
    """Write ``summary.txt``, the figures and ``index.html`` into ``folder``.

    Parameters
    ----------
    folder : str or path-like
        Created if missing; existing files of the same names are replaced.
    summary : str
        The printed summary, shown verbatim at the top of the index page.
    figures : sequence of ReportFigure
        In the order they appear on the page.
    title : str
        Page title.
    dpi : int
        Resolution of the PNGs.

    Returns
    -------
    index : pathlib.Path
        Path of ``index.html``.
    """
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "summary.txt").write_text(summary)
    sections = []
    for item in figures:
        item.figure.savefig(folder / item.filename, dpi=dpi, bbox_inches="tight")
        sections.append(
            f'<section id="{html.escape(Path(item.filename).stem)}">\n'
            f"<h2>{html.escape(item.title)}</h2>\n"
            f"<p>{html.escape(item.caption)}</p>\n"
            f'<img src="{html.escape(item.filename)}" alt="{html.escape(item.title)}">\n'
            "</section>"
        )
    contents = "\n".join(
        f'<li><a href="#{html.escape(Path(f.filename).stem)}">{html.escape(f.title)}</a></li>'
        for f in figures
    )
    page = f"""<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>{html.escape(title)}</title>
<style>
body {{ font-family: sans-serif; max-width: 1100px; margin: 2em auto; padding: 0 1em; }}
pre {{ background: #f6f6f6; padding: 1em; overflow-x: auto; }}
img {{ max-width: 100%; border: 1px solid #ddd; }}
section {{ margin-bottom: 2.5em; }}
</style>
</head>
<body>
<h1>{html.escape(title)}</h1>
<h2>Summary</h2>
<pre>{html.escape(summary)}</pre>
<ul>
{contents}
</ul>
{chr(10).join(sections)}
</body>
</html>
"""
    index = folder / "index.html"
    index.write_text(page, encoding="utf-8")
    return index
