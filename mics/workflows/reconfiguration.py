"""Source- against target-side reconfiguration: the asymmetry test, and target stability.

The finding ``mics`` was built to test is that behavioural state *changes
which source patterns communicate while the target patterns stay stable*.
In the closed-form decomposition (:mod:`mics.model.decomposition`) that is
a large ``private_source`` share of the modulation tensor's energy against a
small ``private_target`` one.

Read naively, the fitted shares are biased: a fitted pattern's estimation
noise falls mostly outside the baseline subspaces, more on the side with
more neurons outside them, so noise alone makes the larger population look
reconfigured. :func:`asymmetry` therefore tests *chance-corrected* energies:
the energy of each part of the modulation tensor ``||Pi_part W||^2`` grows
by the noise energy it receives (``tr(Pi_part Sigma_W)``, additive), and a
bootstrap refit receives the same amount again, so ``2 E_hat - mean(E*)``
removes it (the bootstrap bias correction, applied to the energies, where
the noise adds linearly, rather than to the fractions, which saturate). The
test of ``E_private_source = E_private_target`` is a t-test of the corrected
difference against the bootstrap's standard deviation.

Asymmetry is only defined where there is modulation: without a detected gate
the fitted channels are noise and their geometry means nothing.
:func:`test_reconfiguration` runs the modulation test first and the
asymmetry and stability tests only when it rejects (a gatekeeping sequence
that keeps the family-wise error at ``alpha``).
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np
import xarray as xr
from scipy import stats
from sklearn.base import clone

from mics.data.validation import check_fraction
from mics.model.decomposition import PARTS, decompose
from mics.workflows.inference import ModulationTest, bootstrap_channels, test_modulation

__all__ = [
    "asymmetry",
    "asymmetry_from_energies",
    "undefined_asymmetry",
    "chance_fractions",
    "Reconfiguration",
    "test_reconfiguration",
]

#: Default equivalence margin of "the target patterns stay stable": the
#: private-target share of the modulation energy below 10%.
DEFAULT_MARGIN = 0.1

_PS, _PT = PARTS.index("private_source"), PARTS.index("private_target")


def chance_fractions(n_source, n_target, rank):
    """The four fractions of a pattern pair drawn at random (isotropic noise).

    A random unit source pattern has ``rank / p`` of its energy inside a
    rank-``rank`` subspace on average, a target pattern ``rank / q``; a
    channel fitted to noise lands near these shares. They are the level the
    naive fractions drift towards as the signal weakens, and the reason a
    naive difference leans to the larger population.

    Returns
    -------
    ndarray of shape (4,)
        In :data:`mics.model.decomposition.PARTS` order.
    """
    s_in, t_in = rank / n_source, rank / n_target
    return np.array([s_in * t_in, (1 - s_in) * t_in, s_in * (1 - t_in), (1 - s_in) * (1 - t_in)])


def undefined_asymmetry(reason, *, modulation_p=np.nan, attrs=None):
    """The result where asymmetry is undefined (no modulation detected, no channel).

    Every estimate and p-value is NaN and ``attrs["status"]`` says why; the
    summary reads "undefined", never a p-value.
    """
    nan4 = np.full(len(PARTS), np.nan)
    ds = xr.Dataset(
        {
            "fraction": ("part", nan4),
            "fraction_observed": ("part", nan4),
            "fraction_interval": (("part", "bound"), np.full((len(PARTS), 2), np.nan)),
            "difference": ((), np.nan),
            "difference_observed": ((), np.nan),
            "difference_interval": ("bound", np.full(2, np.nan)),
            "statistic": ((), np.nan),
            "p_value": ((), np.nan),
            "target_upper": ((), np.nan),
            "stable_p_value": ((), np.nan),
        },
        coords={"part": list(PARTS), "bound": ["low", "high"]},
    )
    ds.attrs.update(
        {
            "title": "MIC asymmetry: private source - private target",
            "status": f"undefined: {reason}",
            "modulation_p_value": float(modulation_p),
            "n_boot": 0,
            **dict(attrs or {}),
        }
    )
    return ds


def asymmetry_from_energies(
    observed,
    draws,
    *,
    confidence=0.95,
    margin=DEFAULT_MARGIN,
    chance=None,
    attrs=None,
):
    """Chance-corrected asymmetry and target-stability tests from bootstrap energies.

    Parameters
    ----------
    observed : array-like of shape (4,)
        Energies ``||Pi_part W||^2`` of the fitted modulation tensor, in
        :data:`~mics.model.decomposition.PARTS` order (``energy_*`` of
        :func:`mics.model.decompose`).
    draws : array-like of shape (n_boot, 4)
        The same energies in bootstrap refits (``energy_*_draws`` of
        :func:`mics.bootstrap_channels`); rows with a non-finite value are
        dropped. At least 10 usable draws.
    confidence : float in (0, 1)
        Level of the intervals; the tests are at ``alpha = 1 - confidence``.
    margin : float in (0, 1)
        Equivalence margin ``delta`` of target stability: the target patterns
        count as stable when the private-target share is shown to lie below it.
    chance : array-like of shape (4,), optional
        Fractions of a noise-fitted channel (:func:`chance_fractions`), kept
        for the figure.
    attrs : mapping, optional
        Extra attributes for the result.

    Returns
    -------
    result : xarray.Dataset
        ``fraction`` (part,): chance-corrected fractions
        ``E_tilde / sum(E_tilde)`` with ``E_tilde = 2 E - mean(E*)``;
        ``fraction_observed`` (part,): the fitted (naive) ones;
        ``fraction_interval`` (part, bound); ``difference``: corrected
        private source - private target, with ``difference_interval``;
        ``difference_observed``; ``statistic`` (t) and two-sided ``p_value``
        of H0: ``E_private_source = E_private_target``; ``target_upper``:
        one-sided ``confidence`` upper bound of the corrected private-target
        fraction, and ``stable_p_value`` of H0: private target >= ``margin``
        (reject: the target patterns are stable); ``bias``: mean of the
        draws' naive difference minus the fitted one; ``chance`` (part,);
        the draws as ``energy_draws`` (boot, part), ``fraction_draws`` and
        ``difference_draws``.

    Notes
    -----
    With ``E = E_true + N`` (``N`` the noise energy the part receives, which
    adds) and bootstrap refits receiving the same noise energy again,
    ``E_tilde = 2 E - mean(E*)`` is free of it to first order; the draws'
    spread estimates the estimate's. The difference's test is
    ``t = (E_tilde_ps - E_tilde_pt) / sd(E*_ps - E*_pt)`` on ``n_boot - 1``
    degrees of freedom, and intervals are ``estimate +- t_quantile * sd``
    of the corresponding draws. The corrected fractions can fall slightly
    outside [0, 1] when a part is empty; they are reported as estimated.
    """
    observed, draws = _checked_energies(observed, draws)
    check_fraction(confidence, "confidence")
    check_fraction(margin, "margin")
    n_boot = draws.shape[0]
    df = n_boot - 1
    est = _corrected_estimates(observed, draws)
    chance = np.full(len(PARTS), np.nan) if chance is None else np.asarray(chance, float)
    ds = xr.Dataset(
        _tested_variables(est, draws, chance, confidence=confidence, margin=margin, df=df),
        coords={"part": list(PARTS), "bound": ["low", "high"]},
    )
    ds.attrs.update(
        {
            "title": "MIC asymmetry: private source - private target",
            "status": "tested",
            "confidence": float(confidence),
            "n_boot": int(n_boot),
            "margin": float(margin),
            "interval": "chance-corrected bootstrap (t)",
            "test": "two-sided t on the bias-corrected energies (2 E - mean E*), "
            f"{df} degrees of freedom",
            **dict(attrs or {}),
        }
    )
    return ds


def _tested_variables(est, draws, chance, *, confidence, margin, df):
    """The data variables of :func:`asymmetry_from_energies`: estimates, t intervals and tests.

    ``est`` is :func:`_corrected_estimates` of ``draws``; the tests and
    intervals use the t distribution on ``df`` degrees of freedom.
    """
    alpha = 1 - confidence
    two_sided = stats.t.ppf(1 - alpha / 2, df)
    one_sided = stats.t.ppf(1 - alpha, df)
    fraction, frac_sd, difference = est["fraction"], est["fraction_sd"], est["difference"]
    target, target_sd = fraction[_PT], frac_sd[_PT]
    stable_t = (target - margin) / target_sd if target_sd > 0 else np.nan
    t_stat = est["t"]
    half = two_sided * est["difference_sd"]
    return {
        "fraction": ("part", fraction, {"long_name": "chance-corrected fraction of ||W||^2"}),
        "fraction_observed": ("part", est["observed_fraction"], {"long_name": "fitted"}),
        "fraction_interval": (
            ("part", "bound"),
            np.column_stack([fraction - two_sided * frac_sd, fraction + two_sided * frac_sd]),
        ),
        "difference": (
            (),
            float(difference),
            {"long_name": "chance-corrected private_source - private_target"},
        ),
        "difference_observed": ((), float(est["observed_difference"])),
        "difference_interval": ("bound", np.array([difference - half, difference + half])),
        "statistic": (
            (),
            float(t_stat),
            {"long_name": "t of the corrected energy difference"},
        ),
        "p_value": (
            (),
            float(2 * stats.t.sf(abs(t_stat), df)) if np.isfinite(t_stat) else np.nan,
            {"long_name": "two-sided p, H0: E_ps = E_pt"},
        ),
        "target_upper": ((), float(target + one_sided * target_sd)),
        "stable_p_value": (
            (),
            float(stats.t.cdf(stable_t, df)) if np.isfinite(stable_t) else np.nan,
            {"long_name": f"p of H0: private target >= {margin:g} (small: stable targets)"},
        ),
        "bias": ((), float(np.nanmean(est["difference_draws"]) - est["observed_difference"])),
        "chance": ("part", chance, {"long_name": "fractions of a noise-fitted channel"}),
        "energy_draws": (("boot", "part"), draws),
        "fraction_draws": (("boot", "part"), est["fraction_draws"]),
        "difference_draws": ("boot", est["difference_draws"]),
    }


def _checked_energies(observed, draws):
    """The observed energies (4,) and the finite bootstrap rows (at least 10) of (n_boot, 4)."""
    observed = np.asarray(observed, dtype=float).reshape(-1)
    draws = np.asarray(draws, dtype=float)
    if observed.shape != (len(PARTS),) or draws.ndim != 2 or draws.shape[1] != len(PARTS):
        raise ValueError(
            f"observed must have shape ({len(PARTS)},) and draws (n_boot, {len(PARTS)}); "
            f"got {observed.shape} and {draws.shape}."
        )
    draws = draws[np.all(np.isfinite(draws), axis=1)]
    if draws.shape[0] < 10:
        raise ValueError(
            f"only {draws.shape[0]} bootstrap draws have finite energies: at least 10 are "
            "needed for the asymmetry test's standard error (raise n_boot)."
        )
    return observed, draws


def _corrected_estimates(observed, draws):
    """Bias-corrected energies ``2 E - mean(E*)``, their fractions, the difference, and spreads."""
    corrected = 2 * observed - draws.mean(axis=0)
    total = corrected.sum()
    draw_total = draws.sum(axis=1)
    frac_draws = draws / np.where(draw_total > 0, draw_total, np.nan)[:, None]
    numerator = corrected[_PS] - corrected[_PT]
    num_sd = np.std(draws[:, _PS] - draws[:, _PT], ddof=1)
    obs_total = observed.sum()
    observed_frac = observed / obs_total if obs_total > 0 else np.full(len(PARTS), np.nan)
    diff_draws = frac_draws[:, _PS] - frac_draws[:, _PT]
    return dict(
        fraction=corrected / total if total > 0 else np.full(len(PARTS), np.nan),
        fraction_sd=np.nanstd(frac_draws, axis=0, ddof=1),
        fraction_draws=frac_draws,
        difference=numerator / total if total > 0 else np.nan,
        difference_sd=np.nanstd(diff_draws, ddof=1),
        difference_draws=diff_draws,
        t=numerator / num_sd if num_sd > 0 else np.nan,
        observed_fraction=observed_frac,
        observed_difference=observed_frac[_PS] - observed_frac[_PT],
    )


def asymmetry(
    model,
    X=None,
    Y=None,
    Z=None,
    *,
    test=None,
    alpha=0.05,
    margin=DEFAULT_MARGIN,
    groups=None,
    n_boot=100,
    block_length=None,
    confidence=None,
    metric="euclidean",
    bootstrap=None,
    n_jobs=None,
    verbose=0,
    random_state=None,
    interval=None,
):
    """Chance-corrected test of private-source against private-target modulation.

    The statistic is the difference of the private-source and private-target
    energies of the fitted modulation tensor, each corrected for the noise
    energy it receives by a whole-trial (or time-block) bootstrap of the
    fixed-size model (:func:`asymmetry_from_energies`). Alongside, an
    equivalence test of "the target patterns stay stable": the corrected
    private-target share below ``margin``.

    Parameters
    ----------
    model : fitted MICs
        With a baseline of rank >= 1 (the sides are defined relative to its
        subspaces). Without channels the result is undefined.
    X : array-like of shape (n_samples, n_source)
    Y : array-like of shape (n_samples, n_target)
    Z : array-like of shape (n_samples, n_modulators) or (n_samples,)
        The data the model was fitted on (not needed with ``bootstrap``).
    test : ModulationTest, optional
        The modulation test of the same data. Where it did not reject at
        ``alpha``, or selected no channel, the result is undefined ("no
        modulation detected") and no refit is made. Without it the asymmetry is computed but marked
        "modulation not tested": asymmetry is only meaningful where gating
        is detected, so prefer :func:`test_reconfiguration`.
    alpha : float
        Level of the modulation test's gate and of the tests here.
    margin : float
        Equivalence margin of target stability (default 0.1: the target
        patterns count as stable when less than 10% of the modulation
        energy is shown to reach private target dimensions).
    groups : array-like of shape (n_samples,), optional
        Trial ids: resamples draw whole trials (default: a ``trial``
        coordinate of labelled inputs).
    n_boot : int
        Bootstrap refits (at least 10; the p-value's degrees of freedom are
        ``n_boot - 1``).
    block_length : int, optional
        Samples per block without trial ids (default ``sqrt(n_samples)``).
    confidence : float, optional
        Level of the intervals; default ``1 - alpha``.
    metric : {"euclidean", "covariance"}
        Geometry of the source side (:func:`mics.model.decompose`). The
        default measures patterns in neuron space with one scale per
        population and the modulators per standard deviation, the geometry
        the patterns are fitted in; ``"covariance"`` measures source
        directions by the variance they carry (use it with strongly
        correlated source neurons). The correction holds in either.
    bootstrap : xarray.Dataset, optional
        A :func:`mics.bootstrap_channels` result for this model (its
        ``energy_*_draws``), reused instead of refitting (euclidean metric).
    n_jobs, verbose, random_state
        As in :func:`mics.bootstrap_channels`.
    interval : None
        Accepted for compatibility; the interval is always the
        chance-corrected one (a FutureWarning says so when set).

    Returns
    -------
    result : xarray.Dataset
        See :func:`asymmetry_from_energies`; ``attrs["status"]`` is
        ``"tested"``, ``"tested (modulation not tested)"`` or
        ``"undefined: ..."``. ``result.mics.summary()`` reads it and
        :func:`mics.plotting.plot_asymmetry` draws it.

    Examples
    --------
    >>> import mics
    >>> X, Y, Z, truth = mics.simulate(n_samples=600, n_source=20, n_target=20,
    ...                                rank=2, n_channels=1, geometry="private_source",
    ...                                random_state=0)
    >>> model = mics.MICs(rank=2, n_channels=1, random_state=0).fit(X, Y, Z)
    >>> result = mics.asymmetry(model, X, Y, Z, n_boot=30, random_state=0)
    >>> float(result.difference) > 0, float(result.p_value) < 0.05
    (True, True)
    """
    check_fraction(alpha, "alpha")
    confidence = 1 - alpha if confidence is None else confidence
    check_fraction(confidence, "confidence")
    _warn_unused_interval(interval)
    n_channels = int(getattr(model, "n_channels_", 0))
    modulation_p = np.nan if test is None else float(test.p_value)
    if reason := _undefined_reason(n_channels, test, alpha):
        return undefined_asymmetry(reason, modulation_p=modulation_p)
    _check_baseline_rank(model)
    if bootstrap is None:
        if X is None or Y is None or Z is None:
            raise ValueError("pass the data X, Y, Z the model was fitted on (or bootstrap=).")
        bootstrap = bootstrap_channels(
            model,
            X,
            Y,
            Z,
            n_boot=n_boot,
            block_length=block_length,
            groups=groups,
            confidence=confidence,
            n_jobs=n_jobs,
            verbose=verbose,
            random_state=random_state,
            metric=metric,
        )
    energies = _model_energies(
        model, bootstrap, metric, n_channels=n_channels, modulation_p=modulation_p
    )
    result = asymmetry_from_energies(
        energies.observed,
        energies.draws,
        confidence=confidence,
        margin=margin,
        chance=energies.chance,
        attrs=energies.attrs,
    )
    if test is None:
        result.attrs["status"] = "tested (modulation not tested)"
    return result


def _warn_unused_interval(interval):
    """Warn (at the caller of :func:`asymmetry`) that a set ``interval=`` is ignored."""
    if interval is not None:
        warnings.warn(
            "interval= is no longer used: the asymmetry interval is the chance-corrected "
            "bootstrap interval (see mics.asymmetry).",
            FutureWarning,
            stacklevel=3,
        )


def _check_baseline_rank(model):
    """Refuse a rank-0 baseline: without its subspaces the sides are undefined."""
    if int(getattr(model, "rank_", 1)) == 0:
        # With no communication subspace every channel is "new" by definition.
        raise ValueError(
            "the baseline has rank 0 (no communication subspace), so every channel counts "
            "as a 'new' interaction and source- against target-side reconfiguration is "
            "undefined. Fit with rank >= 1 (or let MICs select the rank) to compare the sides."
        )


class _ModelEnergies(NamedTuple):
    """A model's observed energies (4,), its bootstrap's (n_boot, 4), chance fractions, attrs."""

    observed: np.ndarray
    draws: np.ndarray
    chance: np.ndarray
    attrs: dict


def _model_energies(model, bootstrap, metric, *, n_channels, modulation_p):
    """The fitted and bootstrap energies per part, checked to come from the same metric.

    ``attrs`` (for the result) adds the bootstrap's resampling scheme to the arguments.
    """
    missing = [f"energy_{part}_draws" for part in PARTS if f"energy_{part}_draws" not in bootstrap]
    if missing:
        raise ValueError(
            f"bootstrap lacks {missing}: pass the Dataset of mics.bootstrap_channels."
        )
    if bootstrap.attrs.get("metric", "euclidean") != metric:
        raise ValueError(
            f"the bootstrap's metric is {bootstrap.attrs.get('metric')!r}, not {metric!r}."
        )
    dec = decompose(model, metric=metric)
    observed = np.array([float(dec[f"energy_{part}"]) for part in PARTS])
    draws = np.column_stack([bootstrap[f"energy_{part}_draws"].values for part in PARTS])
    p, q = np.asarray(model.source_subspace_).shape[0], np.asarray(model.target_subspace_).shape[0]
    attrs = {
        key: bootstrap.attrs[key]
        for key in ("resampling", "block_length")
        if key in bootstrap.attrs
    }
    attrs.update(
        n_channels=n_channels,
        metric=metric,
        modulation_p_value=modulation_p,
    )
    return _ModelEnergies(observed, draws, chance_fractions(p, q, int(model.rank_)), attrs)


def _undefined_reason(n_channels, test, alpha):
    """Why the asymmetry is undefined (no detected modulation, no channel), or ``""``."""
    if test is not None:
        if not isinstance(test, ModulationTest):
            raise TypeError("test must be the ModulationTest of mics.test_modulation.")
        if test.p_value > alpha:
            return f"no modulation detected (p = {test.p_value:.3g} > {alpha:g})"
        if test.n_channels == 0:
            return (
                f"modulation detected (p = {test.p_value:.3g}) but no channel selected "
                "(K = 0): no fitted channel has sides to compare"
            )
    if n_channels == 0:
        return (
            "the model has no channels (n_channels_ = 0): there is no modulation whose "
            "source and target sides could be compared"
        )
    return ""


@dataclass
class Reconfiguration:
    """Result of :func:`test_reconfiguration`: modulation, then asymmetry and target stability.

    Attributes
    ----------
    test : ModulationTest
    model : MICs or None
        The fixed-size model (the test's rank and channel count) fitted to
        the data when modulation was detected with at least one channel.
    asymmetry : xarray.Dataset
        :func:`asymmetry` of that model, or the undefined result.
    alpha : float
    """

    test: ModulationTest
    model: object
    asymmetry: xr.Dataset
    alpha: float = 0.05

    @property
    def adjusted_p_values(self):
        """Family-wise adjusted p-values: modulation, then Holm over asymmetry and stability.

        The modulation test gates the other two (they are tested only when it
        rejects); Holm over the two keeps the family-wise error at ``alpha``.
        Adjusted: ``modulation = p_m``, the others ``max(p_m, holm(p_a, p_s))``.
        """
        p_mod = float(self.test.p_value)
        p_asym = float(self.asymmetry["p_value"])
        p_stable = float(self.asymmetry["stable_p_value"])
        pair = np.array([p_asym, p_stable])
        holm = np.full(2, np.nan)
        if np.all(np.isfinite(pair)):
            order = np.argsort(pair)
            holm[order] = np.maximum.accumulate(np.minimum(1, pair[order] * [2, 1]))
        return {
            "modulation": p_mod,
            "asymmetry": max(p_mod, holm[0]) if np.isfinite(holm[0]) else np.nan,
            "target_stable": max(p_mod, holm[1]) if np.isfinite(holm[1]) else np.nan,
        }

    def summary(self):
        """The modulation verdict, then the asymmetry and stability sentences."""
        from mics.model.summaries import summarize_asymmetry

        adj = self.adjusted_p_values
        text = self.test.summary(alpha=self.alpha)
        text += " " + summarize_asymmetry(self.asymmetry)
        if np.isfinite(adj["asymmetry"]):
            text += (
                f" Family-wise adjusted (modulation first, then Holm): asymmetry "
                f"p = {adj['asymmetry']:.3g}, target stability p = {adj['target_stable']:.3g}."
            )
        return text


def test_reconfiguration(
    estimator,
    X,
    Y,
    Z,
    *,
    groups=None,
    conditions=None,
    n_permutations=99,
    n_boot=100,
    alpha=0.05,
    margin=DEFAULT_MARGIN,
    metric="euclidean",
    n_jobs=None,
    verbose=1,
    random_state=None,
    **test_kwargs,
):
    """Test modulation, then (only where it is detected) asymmetry and target stability.

    1. :func:`mics.test_modulation` with the estimator.
    2. Where it rejects at ``alpha`` with at least one selected channel, the
       estimator is fitted with the test's rank and channel count, and
       :func:`asymmetry` tests private source against private target and
       the target's stability (private target below ``margin``).
       Otherwise the asymmetry is undefined.

    The modulation test gates the other two and Holm adjusts between them
    (:attr:`Reconfiguration.adjusted_p_values`), so the family-wise error of
    the three claims stays at ``alpha``.

    Parameters
    ----------
    estimator : MICs
    X, Y, Z : array-like
        As in :func:`mics.test_modulation`.
    groups, conditions, n_permutations, n_jobs, verbose, random_state
        Passed to :func:`mics.test_modulation` (and ``groups``, ``n_jobs``
        to the bootstrap).
    n_boot : int
        Bootstrap refits of the asymmetry test.
    alpha, margin, metric
        As in :func:`asymmetry`.
    **test_kwargs
        Further arguments of :func:`mics.test_modulation`.

    Returns
    -------
    Reconfiguration
    """
    from sklearn.utils import check_random_state

    rng = check_random_state(random_state)
    test = test_modulation(
        estimator,
        X,
        Y,
        Z,
        groups=groups,
        conditions=conditions,
        n_permutations=n_permutations,
        n_jobs=n_jobs,
        verbose=verbose,
        random_state=rng.randint(np.iinfo(np.int32).max),
        **test_kwargs,
    )
    if test.p_value > alpha or test.n_channels == 0:
        # undefined: asymmetry() says why, from the test alone
        return Reconfiguration(test, None, asymmetry(None, test=test, alpha=alpha), float(alpha))
    model = clone(estimator).set_params(rank=test.rank, n_channels=test.n_channels, verbose=0)
    model.fit(X, Y, Z, groups=groups)
    result = asymmetry(
        model,
        X,
        Y,
        Z,
        test=test,
        alpha=alpha,
        margin=margin,
        groups=groups,
        n_boot=n_boot,
        metric=metric,
        n_jobs=n_jobs,
        verbose=verbose,
        random_state=rng.randint(np.iinfo(np.int32).max),
    )
    return Reconfiguration(test, model, result, float(alpha))


test_reconfiguration.__test__ = False
