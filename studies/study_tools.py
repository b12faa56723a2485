"""Shared pieces of the real-data studies: multiple testing, binomial CIs, the statistic.

Kept outside the package: these are the studies' own bookkeeping, not
part of the ``mics`` API.
"""

from __future__ import annotations

import warnings
from pathlib import Path

import numpy as np
from scipy import stats
from sklearn.base import clone
from threadpoolctl import threadpool_limits

ROOT = Path(__file__).resolve().parents[1]

# The cheapest estimator that keeps the permutation test exact: the test is
# exact for *any* fixed statistic because every null fit runs the same
# procedure as the real one; cheaper settings (5 folds, at most 2 channels,
# one start, 50 alternating sweeps) only cost power. Every fit scores K = 0,
# 1 and 2 (the grid): the sequential search, the estimator's default, skips
# K = 2 where K = 1 does not improve, which changes 11 of the Park study's
# 147 test statistics and costs power where two channels beat none but one
# does not (results/park2024/channel_search.md).
CHEAP = dict(
    cv=5, max_channels=2, n_init=1, max_iter=50, tol=1e-5, channel_search="grid", verbose=0
)


def holm(p_values) -> np.ndarray:
    """Holm (1979) step-down adjusted p-values.

    Parameters
    ----------
    p_values : array-like of shape (n,)
        NaN entries are ignored (kept NaN) and do not count as tests.

    Returns
    -------
    ndarray of shape (n,)
        ``max_{j <= i} min(1, (m - j + 1) p_(j))`` at the position of each
        sorted ``p_(i)``; reject at level ``a`` where the adjusted value is
        ``<= a``.
    """
    p = np.asarray(p_values, dtype=float)
    out = np.full(p.shape, np.nan)
    ok = np.flatnonzero(~np.isnan(p))
    m = ok.size
    if m == 0:
        return out
    order = ok[np.argsort(p[ok], kind="stable")]
    adjusted = np.minimum(1.0, (m - np.arange(m)) * p[order])
    out[order] = np.maximum.accumulate(adjusted)
    return out


def binomial_ci(k: int, n: int, confidence: float = 0.95) -> tuple[float, float]:
    """Clopper-Pearson interval of a proportion ``k / n``."""
    if n == 0:
        return (np.nan, np.nan)
    ci = stats.binomtest(int(k), int(n)).proportion_ci(confidence, method="exact")
    return float(ci.low), float(ci.high)


def control_detail(n_nonsignificant: int, n: int, alpha: float = 0.05) -> str:
    """Fraction of non-significant controls, its Clopper-Pearson CI, and how likely
    that many significant ones are for an exact test (rate ``alpha``)."""
    lo, hi = binomial_ci(n_nonsignificant, n)
    k_sig = n - n_nonsignificant
    p_excess = stats.binomtest(k_sig, n, alpha, alternative="greater").pvalue if n else np.nan
    return (
        f"fraction {n_nonsignificant / max(n, 1):.3f}, 95% CP [{lo:.3f}, {hi:.3f}]; "
        f"P(>= {k_sig} significant | exact {alpha} test) = {p_excess:.3f}"
    )


def sum_test(observed, nulls) -> float:
    """Permutation p-value of the sum of per-unit statistics across independent units.

    Each unit (session) has its own observed statistic and null draws from
    independent permutations, so the ``i``-th null draws of all units added
    up are one draw of the summed statistic under the joint null.

    Parameters
    ----------
    observed : array-like of shape (n_units,)
    nulls : array-like of shape (n_units, n_permutations)

    Returns
    -------
    float
        ``(1 + #{sum of null draws >= sum of observed}) / (1 + n_permutations)``.
    """
    nulls = np.asarray(nulls, dtype=float)
    total = float(np.sum(observed))
    null_total = nulls.sum(axis=0)
    return float((1 + np.sum(null_total >= total)) / (1 + null_total.size))


def quiet_fit(estimator, X, Y, Z, groups):
    """Fit a clone with one BLAS thread, silencing the capped fits' convergence warnings."""
    with warnings.catch_warnings(), threadpool_limits(1):
        warnings.simplefilter("ignore")
        return clone(estimator).fit(X, Y, Z, groups=groups)


def markdown_table(df) -> str:
    """A pandas DataFrame as a GitHub markdown table (without the tabulate dependency)."""
    cols = list(df.columns)
    lines = ["| " + " | ".join(map(str, cols)) + " |", "|" + "---|" * len(cols)]
    for row in df.itertuples(index=False):
        cells = [f"{v:.4g}" if isinstance(v, float) else str(v) for v in row]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def improvement(estimator, X, Y, Z, groups):
    """The statistic of :func:`mics.test_modulation` on the real alignment, and its model.

    As the test does: the additive effect of ``Z`` (and an intercept) is
    regressed out of ``Y``, the estimator selects K by cross-validation, and
    the statistic is the best CV improvement of a model with channels over K = 0.

    Returns
    -------
    statistic : float
    model : fitted MICs (``rank_``, ``n_channels_`` of the selection)
    """
    Z2 = np.asarray(Z, dtype=float).reshape(len(Z), -1)
    design = np.column_stack([np.ones(len(Z2)), Z2])
    Y = np.asarray(Y, dtype=float)
    Y = Y - design @ np.linalg.lstsq(design, Y, rcond=None)[0]
    model = quiet_fit(clone(estimator).set_params(n_channels=None), X, Y, Z, groups)
    loss = model.cv_results_["n_channels_mean_loss"]
    return float(loss[0] - np.min(loss[1:])), model
