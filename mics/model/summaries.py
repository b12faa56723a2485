"""The decomposition, its bootstrap and the asymmetry test, in words and tables.

Text only: the numbers come from :mod:`mics.model.decomposition` (and
:mod:`mics.workflows.reconfiguration` for the asymmetry test); the
``ds.mics`` accessor (:mod:`mics.model.accessor`) shows these tables.
"""

from __future__ import annotations

import numpy as np

from mics.model.decomposition import PARTS

__all__ = [
    "format_decomposition",
    "format_bootstrap",
    "format_asymmetry",
    "summarize",
    "summarize_asymmetry",
    "result_kind",
]


_READING = {
    "reshape": "the modulator reshapes communication within the baseline source and "
    "target subspaces",
    "private_source": "the modulator recruits source dimensions outside the baseline "
    "communication subspace (it changes which source patterns communicate) while the "
    "target patterns stay within the baseline target subspace",
    "private_target": "the modulator routes baseline source patterns to target dimensions "
    "outside the baseline target subspace",
    "new": "the modulator opens an interaction between source and target dimensions that "
    "both lie outside the baseline communication subspace",
}


def result_kind(ds):
    """``"decomposition"``, ``"bootstrap"``, ``"asymmetry"`` or None: which ``mics`` result."""
    if {"difference", "p_value", "fraction"} <= set(ds.data_vars) and "part" in ds.dims:
        return "asymmetry"
    if "total_reshape" not in ds.data_vars:
        return None
    return "bootstrap" if "bound" in ds.dims else "decomposition"


def format_decomposition(ds):
    """Text table of a decomposition: one row per channel plus the whole tensor.

    Parameters
    ----------
    ds : xarray.Dataset
        Output of :func:`decompose_channels` / :func:`decompose`.

    Returns
    -------
    table : str
        Weights to 3 significant digits, fractions to 3 decimals; each
        row's four fractions sum to 1 (up to that rounding).
    """
    n_channels = ds.sizes.get("channel", 0)
    lines = [
        f"MIC decomposition ({ds.attrs.get('metric', 'euclidean')} metric, "
        f"rank {ds.attrs.get('rank', '?')}, {n_channels} channel(s))",
        "".join(f"{h:>{_WIDTH}}" for h in ["channel", "weight", *_SHORT.values()]),
    ]
    for k in range(n_channels):
        row = [f"{ds['channel'].values[k]!s:>{_WIDTH}}"]
        row.append(f"{float(ds['channel_weight'][k]):>{_WIDTH}.3g}")
        row += [f"{float(ds[part][k]):>{_WIDTH}.3f}" for part in PARTS]
        lines.append("".join(row))
    totals = "".join(f"{float(ds[f'total_{part}']):>{_WIDTH}.3f}" for part in PARTS)
    lines.append(f"{'total':>{_WIDTH}}{'':>{_WIDTH}}{totals}")
    lines.append(
        f"(rows: fractions of each channel's energy; total: of the modulation tensor's, "
        f"||W||^2 = {float(ds['energy_total']):.4g})"
    )
    return "\n".join(lines)


def format_bootstrap(boot):
    """Text table of bootstrap intervals: weights and fractions per channel, and the totals.

    Parameters
    ----------
    boot : xarray.Dataset
        The result of :func:`mics.bootstrap_channels` (variables with a
        ``bound`` dimension ``low``/``high``).

    Returns
    -------
    table : str
        ``low-high`` per cell: weights to 3 significant digits, fractions
        to 3 decimals.
    """
    n_channels = boot.sizes.get("channel", 0)
    resampling = boot.attrs.get("resampling", "block")
    how = "whole trials" if resampling == "trial" else "blocks"
    block = boot.attrs.get("block_length", -1)
    if resampling != "trial" and block is not None and block > 0:
        how += f" of {block} samples"
    lines = [
        f"MIC bootstrap: {_bootstrap_level(boot)} intervals over {boot.attrs.get('n_boot', '?')} "
        f"resamples of {how}, {n_channels} channel(s)",
        "".join(f"{h:>{_WIDE}}" for h in ["channel", "weight", *_SHORT.values()]),
    ]
    for k in range(n_channels):
        cells = [f"{boot['channel'].values[k]!s:>{_WIDE}}" if "channel" in boot.coords
                 else f"{k:>{_WIDE}}"]  # fmt: skip
        cells.append(_interval_cell(boot, "channel_weights", k, ".3g", _WIDE))
        cells += [_interval_cell(boot, part, k, width=_WIDE) for part in PARTS]
        lines.append("".join(cells))
    totals = "".join(_interval_cell(boot, f"total_{part}", width=_WIDE) for part in PARTS)
    lines.append(f"{'total':>{_WIDE}}{'':>{_WIDE}}{totals}")
    return "\n".join(lines)


def format_asymmetry(ds):
    """Text table of an asymmetry result: corrected and fitted fractions, the tests.

    Parameters
    ----------
    ds : xarray.Dataset
        The result of :func:`mics.asymmetry`.

    Returns
    -------
    table : str
    """
    status = ds.attrs.get("status", "tested")
    if status.startswith("undefined"):
        return f"MIC asymmetry: {status}."
    level = f"{100 * float(ds.attrs.get('confidence', np.nan)):g}%"
    lines = [
        f"MIC asymmetry: {level} chance-corrected intervals from "
        f"{ds.attrs.get('n_boot', '?')} resamples{_how_resampled(ds)}",
        "".join(f"{h:>{_WIDE}}" for h in ["", *_SHORT.values()]),
        f"{'fitted':>{_WIDE}}"
        + "".join(
            f"{float(ds['fraction_observed'].sel(part=part)):>{_WIDE}.3f}" for part in PARTS
        ),
        f"{'corrected':>{_WIDE}}"
        + "".join(f"{float(ds['fraction'].sel(part=part)):>{_WIDE}.3f}" for part in PARTS),
        f"{'interval':>{_WIDE}}"
        + "".join(
            f"{_pair(ds['fraction_interval'].sel(part=part), '.3f'):>{_WIDE}}" for part in PARTS
        ),
        f"private source - private target = {float(ds['difference']):+.3f} "
        f"({level} CI {_pair(ds['difference_interval'], '+.3f', ' to ')}; fitted "
        f"{float(ds['difference_observed']):+.3f}), two-sided {_p_text(ds)}",
        f"private target below {float(ds.attrs.get('margin', np.nan)):g}: upper bound "
        f"{float(ds['target_upper']):.3f}, equivalence p = {float(ds['stable_p_value']):.2g}",
    ]
    if status != "tested":
        lines.append(f"({status})")
    return "\n".join(lines)


def summarize_asymmetry(ds):
    """One or two sentences on source- against target-side reconfiguration.

    Parameters
    ----------
    ds : xarray.Dataset
        The result of :func:`mics.asymmetry`.

    Returns
    -------
    text : str
    """
    status = ds.attrs.get("status", "tested")
    if status.startswith("undefined"):
        return (
            f"Source- against target-side reconfiguration is {status}; without detected "
            "gating the fitted channels' geometry is noise and is not interpreted."
        )
    confidence = float(ds.attrs.get("confidence", 0.95))
    level = f"{100 * confidence:g}%"
    alpha = 1 - confidence
    frac = {part: float(ds["fraction"].sel(part=part)) for part in PARTS}

    def cell(part):
        low, high = (float(v) for v in ds["fraction_interval"].sel(part=part).values)
        return f"{100 * frac[part]:.0f}% [{100 * low:.0f}, {100 * high:.0f}]"

    diff = float(ds["difference"])
    low, high = (float(v) for v in ds["difference_interval"].values)
    p = float(ds["p_value"])
    # Decided by the test, with the sign of the corrected difference.
    if p <= alpha and diff > 0:
        lead = "The modulator reconfigures source patterns more than target patterns"
    elif p <= alpha and diff < 0:
        lead = "The modulator reconfigures target patterns more than source patterns"
    else:
        lead = "No asymmetry between source- and target-side reconfiguration is detected"
    margin = float(ds.attrs.get("margin", np.nan))
    stable_p = float(ds["stable_p_value"])
    if stable_p <= alpha:
        stable = (
            f"The target patterns are stable: the private-target share is below {margin:g} "
            f"(upper bound {float(ds['target_upper']):.2f}, equivalence p = {stable_p:.2g})."
        )
    else:
        stable = (
            f"Target stability is not shown: the private-target share's upper bound "
            f"{float(ds['target_upper']):.2f} is not below the margin {margin:g} "
            f"(equivalence p = {stable_p:.2g})."
        )
    text = (
        f"{lead}: chance-corrected private source {cell('private_source')} against private "
        f"target {cell('private_target')} of the modulation energy, difference {diff:+.2f} "
        f"({level} CI {low:+.2f} to {high:+.2f}; {_p_text(ds)}, "
        f"{int(ds.attrs.get('n_boot', 0))} resamples{_how_resampled(ds)}; fitted "
        f"{float(ds['difference_observed']):+.2f} before the correction). Alongside: "
        f"reshape {cell('reshape')}, new {cell('new')}. {stable}"
    )
    if status != "tested":
        text += (
            " Modulation was not tested with these data: the asymmetry means something "
            "only where gating is detected (mics.test_reconfiguration)."
        )
    return text


def summarize(ds, intervals=None):
    """One readable paragraph: which kind of modulation dominates, with fractions.

    Parameters
    ----------
    ds : xarray.Dataset
        Output of :func:`decompose_channels` / :func:`decompose`.
    intervals : xarray.Dataset, optional
        Bootstrap intervals of the ``total_*`` variables, either with a
        two-valued ``bound`` (or ``quantile``) dimension, e.g.
        ``boot.quantile([0.025, 0.975], dim="sample")``, or as
        ``total_*_low`` / ``total_*_high`` variables.

    Returns
    -------
    text : str
    """
    n_channels = ds.sizes.get("channel", 0)
    fractions = {part: float(ds[f"total_{part}"]) for part in PARTS}
    if n_channels == 0 or not np.all(np.isfinite(list(fractions.values()))):
        return "No modulation channels (K = 0): there is no modulation to decompose."
    bounds = _interval_bounds(intervals)
    level = _interval_level(intervals)

    def percent(part):
        text = f"{100 * fractions[part]:.0f}%"
        if part in bounds:
            low, high = bounds[part]
            text += f" ({level}CI {100 * low:.0f}-{100 * high:.0f}%)"
        return text

    order = sorted(PARTS, key=fractions.get, reverse=True)
    top = order[0]
    if fractions[top] >= 0.5:
        lead = f"Modulation is mostly {_pretty(top)}"
    else:
        lead = f"No single kind of modulation dominates; the largest is {_pretty(top)}"
    others = ", ".join(f"{_pretty(part)} {percent(part)}" for part in order[1:])
    metric = ds.attrs.get("metric", "euclidean")
    text = (
        f"{lead}: {percent(top)} of the modulation tensor's energy, i.e. {_READING[top]}. "
        f"Other parts: {others} "
        f"({n_channels} channel{'s' if n_channels > 1 else ''}, {metric} metric)."
    )
    asym = (
        fractions["private_source"] - fractions["private_target"]
        if "total_asymmetry" not in ds
        else float(ds["total_asymmetry"])
    )
    side = "source" if asym > 0 else "target"
    return (
        f"{text} Source- against target-side reconfiguration (private source - private "
        f"target): {asym:+.2f} as fitted, leaning to the {side} side; fitted shares lean "
        "to the larger population by chance, so read it through mics.asymmetry's "
        "chance-corrected test."
    )


def _pair(values, spec, sep="-"):
    low, high = (float(v) for v in np.asarray(values).reshape(-1))
    return f"{low:{spec}}{sep}{high:{spec}}"


def _p_text(ds):
    return f"p = {float(ds['p_value']):.2g}"


def _how_resampled(ds):
    kind = ds.attrs.get("resampling")
    if kind == "trial":
        return " of whole trials"
    if kind == "block":
        return " of time blocks"
    return ""


_WIDTH = 10


_WIDE = 14


_SHORT = {
    "reshape": "reshape",
    "private_source": "priv.src",
    "private_target": "priv.tgt",
    "new": "new",
}


def _bootstrap_level(boot):
    if boot is None:
        return ""
    return f"{100 * float(boot.attrs.get('confidence', np.nan)):g}%"


def _interval_cell(boot, name, k=None, spec=".3f", width=_WIDTH):
    """``"low-high"`` of one variable (of channel ``k``), right-aligned in ``width``."""
    values = boot[name] if k is None else boot[name].isel(channel=k)
    low, high = float(values.sel(bound="low")), float(values.sel(bound="high"))
    return f"{f'{low:{spec}}-{high:{spec}}':>{width}}"


def _interval_bounds(intervals):
    if intervals is None:
        return {}
    bounds = {}
    bound_dim = next((d for d in ("bound", "quantile") if d in intervals.dims), None)
    for part in PARTS:
        name = f"total_{part}"
        if bound_dim is not None and name in intervals:
            values = np.asarray(intervals[name].transpose(bound_dim).values, dtype=float)
            bounds[part] = (values.min(), values.max())
        elif f"{name}_low" in intervals and f"{name}_high" in intervals:
            bounds[part] = (float(intervals[f"{name}_low"]), float(intervals[f"{name}_high"]))
    return bounds


def _interval_level(intervals):
    if intervals is not None and "confidence" in intervals.attrs:  # bootstrap_channels
        return f"{100 * float(intervals.attrs['confidence']):g}% "
    if intervals is None or "quantile" not in intervals.coords:
        return ""
    q = np.asarray(intervals["quantile"].values, dtype=float)
    return f"{100 * (q.max() - q.min()):.0f}% "


def _pretty(part):
    return part.replace("_", " ")
