"""Is modulation there, and how sure are we? Permutation tests and bootstraps.

Calcium signals are autocorrelated, so neither test may shuffle samples:
the circular null shifts the whole modulator time series relative to
source and target (keeping every autocorrelation intact but breaking their
alignment), and the bootstrap resamples contiguous blocks of time. For
trial-structured recordings (``groups``) the trial null permutes the
modulator's trials among trials of the same condition (each trial's time
course kept), and the bootstrap draws whole trials.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass, field
from functools import partial
from typing import NamedTuple

import numpy as np
from scipy import stats
from scipy.optimize import linear_sum_assignment
from sklearn.base import clone
from sklearn.utils import check_random_state
from tqdm import tqdm

from mics.core.linalg import single_blas_thread
from mics.data.folds import (
    trial_bootstrap_indices,
    trial_permutation_indices,
    trial_subsample_indices,
)
from mics.data.problem import make_problem
from mics.data.quality import user_stacklevel
from mics.data.validation import check_count, check_fraction
from mics.model.decomposition import decompose
from mics.model.fit import fit_problem
from mics.model.selection import warn_fold_outliers

__all__ = [
    "ModulationTest",
    "align_channels",
    "fitted_penalties",
    "test_modulation",
    "bootstrap_channels",
    "fold_t_halfwidth",
    "fold_t_intervals",
    "format_p_value",
    "heldout_effect",
    "result_sentence",
]


@dataclass
class ModulationTest:
    """Result of :func:`test_modulation`.

    Attributes
    ----------
    statistic : float
        Largest cross-validated NSE improvement of a model with channels
        over the baseline-plus-additive-modulator model, among the channel
        counts ``K >= 1`` the estimator scored (``K = 1 .. max_channels``
        with ``channel_search="grid"``; up to the first count that stops
        improving with the default sequential search); negative when every
        channel model predicts worse.
    selected_improvement : float
        Improvement of the model the one-SEM rule selected (0 when it
        selected no channel).
    null_distribution : ndarray of shape (n_permutations,)
    p_value : float
        ``(1 + #{null >= statistic}) / (1 + n_permutations)``.
    n_channels : int
        Channels selected on the real data.
    shifts : ndarray of shape (n_permutations,)
        Circular shifts (samples) of the circular null; empty for the trial null.
    null : str
        Which null was used: ``"circular"`` or ``"trial"``.
    permutations : ndarray of shape (n_permutations, n_trials) or None
        For the trial null, the trial each null trial's modulator came from.
    n_capped : int
        Fold fits, over the observed and every null selection, that stopped at
        the estimator's ``max_iter`` before converging. Their held-out losses
        would move with the cap, so a statistic is well defined only when this
        is 0; raise ``max_iter`` otherwise.
    effect_size : float
        The effect size: the fraction of the target's held-out variance that
        ``effect_channels`` channels explain beyond the channel-free model
        (baseline of the selected rank plus the additive modulator effect),
        ``NSE_additive - NSE_channels`` averaged over the estimator's folds,
        on the recorded target (not the residual the test shifts). It is
        the effect of ``max(n_channels, 1)`` channels: when the selection
        keeps no channel the selected model explains 0 by construction, and
        the one-channel value (usually near or below 0) with its interval
        says how much gating the data leave room for.
    effect_interval : ndarray of shape (2,)
        Interval of ``effect_size``: by default a corrected t interval over
        the estimate's folds (:func:`fold_t_intervals`); with ``n_boot`` a
        bootstrap interval (whole trials when trial ids are known,
        contiguous blocks otherwise); NaN with ``n_boot=0`` or with fewer
        than two usable folds or draws.
    effect_channels : int
        Channels behind ``effect_size``: ``max(n_channels, 1)``.
    channel_gains : ndarray of shape (effect_channels,)
        Per-channel gain: the held-out variance fraction each added channel
        explains (channel ``k`` against ``k - 1`` channels); they sum to
        ``effect_size``.
    channel_gain_intervals : ndarray of shape (effect_channels, 2)
        Their intervals.
    effect_draws : ndarray of shape (n_draws, effect_channels)
        Cumulative gains behind the interval (column ``k - 1``: ``k``
        channels against none): one row per fold of the estimate by
        default, per bootstrap draw with ``n_boot`` (NaN rows are draws
        whose folds could not be formed).
    confidence : float
        Level of the intervals.
    effect_resampling : str
        ``"trial"``, ``"block"``, ``"folds"`` (no refit) or ``""`` (no interval).
    rank : int
        Baseline rank selected on the real data (fixed in the null fits).
    condition_on : tuple of str
        What the null keeps of the modulator (``"source"``, ``"drift"``):
        only the rest of it is permuted or shifted.
    modulator_r2_drift : float
        Cross-validated share of the modulator's variance that a smooth
        function of the session position predicts (NaN when not conditioned
        on): how much of the modulator drifts over the session.
    modulator_r2_source : float
        Cross-validated share of the rest that the source predicts (NaN when
        not conditioned on). Near 1, the modulator is nearly a function of
        the source, and gating by it cannot be told from a nonlinear source
        -> target map: the test then has little power, by design.
    baseline_gain : float
        Held-out share of the target's variance that the baseline
        communication (rank ``rank``) explains beyond the additive model, on
        the same folds as the effect size; NaN when not measured.
    source_map_r2 : float
        How nonlinear the source -> target map is: the share of the target's
        variance (beyond the additive modulator effect and the drifting linear
        map of the leading communicated components) that their pairwise
        products explain, adjusted for their degrees of freedom in trials;
        NaN with ``source_map="linear"``.
    modulator_effective_units : float
        How many trials (blocks of about ``sqrt(n_samples)`` samples without
        trial ids) carry the modulator's variance: ``(sum e)^2 / sum e^2``
        over the units' sums ``e`` of the standardised modulator's squares,
        ``modulator_units`` when every unit carries the same, ``k`` when
        ``k`` units carry it all alike. A bursty running speed has few.
    modulator_units : int
        Trials (or blocks) of the recording.
    modulator_unit : str
        ``"trial"`` or ``"block"``.
    """

    statistic: float
    selected_improvement: float
    null_distribution: np.ndarray
    p_value: float
    n_channels: int
    shifts: np.ndarray
    null: str = "circular"
    permutations: np.ndarray | None = None
    n_capped: int = 0
    effect_size: float = np.nan
    effect_interval: np.ndarray = field(default_factory=lambda: np.full(2, np.nan))
    effect_channels: int = 1
    channel_gains: np.ndarray = field(default_factory=lambda: np.zeros(0))
    channel_gain_intervals: np.ndarray = field(default_factory=lambda: np.zeros((0, 2)))
    effect_draws: np.ndarray = field(default_factory=lambda: np.zeros((0, 1)))
    confidence: float = 0.95
    effect_resampling: str = ""
    rank: int = 0
    condition_on: tuple = ()
    modulator_r2_drift: float = np.nan
    modulator_r2_source: float = np.nan
    baseline_gain: float = np.nan
    source_map_r2: float = np.nan
    modulator_effective_units: float = np.nan
    modulator_units: int = 0
    modulator_unit: str = ""

    @property
    def relative_effect(self):
        """The effect as a fraction of the communicated variance (``effect_size / baseline_gain``).

        NaN when the baseline communicates nothing measurable (rank 0, or a
        non-positive held-out gain).
        """
        gain = self.baseline_gain
        return self.effect_size / gain if np.isfinite(gain) and gain > 0 else np.nan

    def verdict(self, alpha=0.05):
        """The graded verdict at ``alpha``, agreeing with the effect size.

        Returns
        -------
        {"gating", "pairing", "none"}
            ``"gating"``: p <= alpha and the effect is measurable, its
            interval above 0 (without an interval, an estimate above 0).
            ``"pairing"``: p <= alpha, but the effect estimate is <= 0 or its
            interval covers 0: the modulator's pairing with the source and
            target matters, yet no gating channel predicts held-out activity.
            ``"none"``: p > alpha (not detected).
        """
        if self.p_value > alpha:
            return "none"
        lo = self.effect_interval[0]
        if self.effect_size > 0 and (not np.isfinite(lo) or lo > 0):
            return "gating"
        return "pairing"

    def __repr__(self):
        lo, hi = self.effect_interval
        return (
            f"ModulationTest(statistic={self.statistic:.4g}, p_value={self.p_value:.4g}, "
            f"n_channels={self.n_channels}, n_permutations={self.null_distribution.size}, "
            f"null={self.null!r}, effect_size={self.effect_size:.3g} [{lo:.3g}, {hi:.3g}]"
            + (f", n_capped={self.n_capped})" if self.n_capped else ")")
        )

    def summary(self, power=None, alpha=0.05):
        """One sentence: detected or not, the effect size with its interval, and the MDE.

        Parameters
        ----------
        power : PowerAnalysis or float, optional
            A :func:`mics.power_analysis` of the same recording (its minimum
            detectable effect is quoted), or that effect as a fraction.
        alpha : float
            Level at which "detected" is said.

        Returns
        -------
        str
        """
        return result_sentence(self, power=power, alpha=alpha)


def format_p_value(p_value, n_permutations):
    """A Monte Carlo p-value and its floor, both to 3 significant digits.

    With ``n`` permutations the p-value ``(1 + #{null >= observed}) / (1 + n)``
    cannot go below ``1 / (n + 1)``; every p-value the command line and the
    report print goes through this function, so the two numbers always share
    one rounding.

    Parameters
    ----------
    p_value : float
    n_permutations : int
        Permutations the null was drawn from (``>= 1``).

    Returns
    -------
    text : str
        For example ``"p = 0.167 (smallest possible 0.167 with 5 permutations)"``.

    Examples
    --------
    >>> format_p_value(0.05, 19)
    'p = 0.05 (smallest possible 0.05 with 19 permutations)'
    """
    n = int(n_permutations)
    if n < 1:
        raise ValueError(f"n_permutations must be at least 1, got {n_permutations!r}.")
    floor = 1 / (n + 1)
    noun = "permutation" if n == 1 else "permutations"
    return f"p = {float(p_value):.3g} (smallest possible {floor:.3g} with {n} {noun})"


def gain_params(estimator, **changes):
    """The parameters of the fits behind a statistic: channels selected, quietly, in one job."""
    return {
        **estimator.get_params(deep=False),
        "n_channels": None,
        "verbose": 0,
        "n_jobs": 1,
        **changes,
    }


def _improvement(params, problem):
    """Best CV improvement of a channel model over K=0 (baseline with additive Z).

    The improvement of the *selected* model is zero whenever the one-SEM
    rule picks K=0, so its null distribution is a spike at zero and the
    p-value would only restate the selection. The best improvement over
    ``K >= 1`` is continuous, and the same procedure applied to shifted data
    gives its null. Only the selection runs (no fit on all samples).

    Returns
    -------
    gain : float
    outcome : mics.model.FitOutcome
        The selection (its rank, channel count and CV table).
    """
    outcome = fit_problem(params, problem, cv_only=True)
    return best_gain(outcome.cv_results), outcome


def _reduced(variant, nonlinear, extra):
    """A null variant, its target residualised on its own modulator's reduced design too.

    The recorded target was residualised on the recorded modulator's
    piecewise-linear additive basis (and the source terms), which leaves it
    orthogonal to them in sample; a null variant's target is made orthogonal
    to its own modulator's design the same way, so that the two are treated
    alike (left as they were, the recorded data alone would carry that
    orthogonality, and the test over-rejected).
    """
    if nonlinear or extra:
        return variant.residualized(nonlinear=nonlinear, extra=extra)
    return variant


def _null_statistic(params, problem):
    gain, outcome = _improvement(params, problem)
    return gain, _n_capped(outcome)


def _n_capped(outcome):
    return int(np.sum(outcome.cv_results.get("n_channels_n_capped", 0)))


def best_gain(cv_results):
    """CV loss of K = 0 minus the best CV loss over the scored K >= 1 (the test statistic).

    Parameters
    ----------
    cv_results : dict
        A selection's CV table (``MICs.cv_results_``).
    """
    loss = cv_results["n_channels_mean_loss"]
    return float(loss[0] - np.min(loss[1:]))


# pytest would collect a module-level function named test_*; say it is not a test.
def test_modulation(
    estimator,
    X,
    Y,
    Z,
    *,
    n_permutations=100,
    min_shift=None,
    groups=None,
    conditions=None,
    null=None,
    n_jobs=None,
    verbose=1,
    random_state=None,
    stop_after=None,
    n_boot=None,
    confidence=0.95,
    interval=None,
    condition_on=("source", "drift"),
    drift_df=5,
    additive="nonlinear",
    source_map="quadratic",
):
    """Permutation test for modulation (circular or trial null), with an effect size.

    The circular null shifts the modulator in time relative to source and
    target, which keeps every autocorrelation and breaks any gating. The
    trial null (trial-structured recordings) gives each trial the modulator
    time course of another trial of the same condition, which keeps the
    within-trial autocorrelation and any stimulus-locked modulator response
    and breaks the trial-to-trial pairing. Either way the additive effect
    of the modulator on the target is first regressed out (with the true
    alignment) so that the null differs from the data in the gating only.
    Cross-validation folds hold out whole trials when trial ids are known.

    Parameters
    ----------
    estimator : MICs
        Its ``rank`` is fixed to the rank selected on the real data for the
        null fits (the shift does not touch the source-target relation).
        Its ``channel_search`` decides which channel counts the statistic
        looks at: with "sequential" (the default) K = 2 only if K = 1
        improved on K = 0, with "grid" every K up to ``max_channels``. Both
        tests are exact; "grid" costs more on null data and keeps the power
        against gating that needs two channels to beat none
        (``results/park2024_channel_search/``).
    X : array-like of shape (n_samples, n_source)
    Y : array-like of shape (n_samples, n_target)
    Z : array-like of shape (n_samples, n_modulators) or (n_samples,)
    n_permutations : int
    min_shift : int, optional
        Smallest circular shift in samples; choose it longer than the
        autocorrelation of the signals. Defaults to a tenth of the samples.
        Circular null only.
    groups : array-like of shape (n_samples,), optional
        Trial id of every sample; taken from a ``trial`` coordinate of a
        labelled input when not given.
    conditions : array-like of shape (n_samples,) or str, optional
        Condition of every sample (constant within a trial, e.g. grating
        direction), or the name of such a coordinate of a labelled input:
        the trial null permutes trials within conditions. None permutes
        among all trials (only valid when nothing stimulus-locked is left,
        e.g. after :func:`mics.preprocessing.subtract_condition_means`).
    null : {"circular", "trial"}, optional
        Default: ``"trial"`` when trial ids are known, else ``"circular"``.
    n_jobs : int, optional
        Parallel null fits (joblib; use a Dask backend to spread them out).
    verbose : int
    random_state : int or RandomState
    stop_after : int, optional
        Sequential Monte-Carlo test (Besag & Clifford 1991): the shifts are
        evaluated in their drawn order until ``stop_after`` null statistics
        reach the observed one, with the exact p-value ``stop_after / L``
        (``L`` shifts evaluated): a clearly null result costs about
        ``stop_after / p`` fits instead of ``n_permutations``. With fewer
        exceedances the test runs to the end with the usual p-value, so small
        p-values are those of the full test. Default ``None``: all shifts
        run. ``shifts`` and ``null_distribution`` hold the evaluated ones.
    n_boot : int, optional
        Refits of a bootstrap interval of the effect size (asks for it; 0:
        the estimate alone), drawn after the null, which does not depend on it.
    interval : {"folds", "bootstrap"}, optional
        The effect size's interval (:func:`heldout_effect`). ``"folds"`` (the
        default unless ``n_boot`` is given): no refit. ``"bootstrap"``:
        ``n_boot`` refits (default ``min(n_permutations, 100)``), about twice
        the test's cost. Their coverage: ``results/effect_coverage/``.
    confidence : float
        Level of the effect-size intervals.
    condition_on : tuple of {"source", "drift"} or None
        What the null keeps of the modulator (a conditional permutation
        test, Berrett et al. 2020): the part of ``Z`` that a smooth function
        of the session position (``"drift"``) and a ridge regression on the
        source (``"source"``) predict stays in place; only the residual is
        permuted or shifted. Without it, a modulator that drifts with the
        session together with the coupling, or that the source predicts
        while the target reads the source nonlinearly, is called gating
        (``results/null_families/``). None gives the exchangeable null
        (the whole modulator permuted). The price is power against gating
        by the predictable part: that part is in the null too.
    drift_df : int
        Functions of the drift basis (:func:`mics.core.conditioning.drift_basis`):
        B-splines of the trial's (or sample's) position in the session.
    additive : {"nonlinear", "linear"}
        The reduced model whose residual target the test permutes against:
        the modulator's additive effect regressed out as piecewise-linear in
        each modulator (hinges at its quintiles; default), or linear. A
        nonlinear additive effect left in the residual looks like gating
        whenever the modulator also drives the source.
    source_map : {"quadratic", "linear"}
        ``"quadratic"`` (default) also regresses out of the target the
        pairwise products of the source's three leading communicated
        components and (with ``"drift"`` in ``condition_on``) their products
        with the drift basis: a quadratic source -> target map and a coupling
        that drifts over the session are then part of the reduced model, not
        of the gating the statistic can find.

    Returns
    -------
    ModulationTest
        With the statistic and p-value of the test, and the effect size
        (``effect_size``, ``effect_interval``, ``channel_gains``): the
        fraction of the recorded target's held-out variance that
        ``max(n_channels, 1)`` channels explain beyond the additive model.
    """
    inputs = _test_inputs(
        X, Y, Z, groups=groups, conditions=conditions, null=null, n_permutations=n_permutations,
        min_shift=min_shift, stop_after=stop_after, n_boot=n_boot, confidence=confidence,
        interval=interval, random_state=random_state,
    )  # fmt: skip
    core = _observed_and_null(
        estimator, inputs, n_jobs=n_jobs, verbose=verbose, additive=additive,
        source_map=source_map, condition_on=condition_on, drift_df=drift_df,
    )  # fmt: skip
    n_capped = _n_capped(core.outcome) + core.capped
    if n_capped:
        warnings.warn(
            f"{n_capped} fold fits of the test stopped at max_iter={core.fixed['max_iter']} "
            "before converging, so the statistics depend on where the cap falls; raise max_iter.",
            UserWarning,
            stacklevel=2,
        )
    # The effect size is measured on the recorded target, whose held-out
    # variance a reader knows, not on the residual the null shifts; its seed
    # is drawn after the null's, which therefore does not depend on n_boot.
    effect = _effect_of_selection(
        estimator, inputs.recorded, core.outcome, n_boot=inputs.n_boot, confidence=confidence,
        interval=inputs.interval, n_jobs=n_jobs, verbose=verbose,
        seed=inputs.rng.randint(np.iinfo(np.int32).max),
    )  # fmt: skip
    return _modulation_result(core, inputs, n_capped=n_capped, confidence=confidence, **effect)


test_modulation.__test__ = False


class _TestInputs(NamedTuple):
    """The checked settings of :func:`test_modulation` and the recording as a problem."""

    rng: np.random.RandomState
    n_permutations: int
    stop_after: int | None
    conditions: object
    n_boot: int
    interval: str
    recorded: object
    null: str
    min_shift: int | None


def _test_inputs(X, Y, Z, *, groups, conditions, null, n_permutations, min_shift, stop_after,
                 n_boot, confidence, interval, random_state):  # fmt: skip
    """Check :func:`test_modulation`'s settings (in the order its errors are raised)."""
    rng = check_random_state(random_state)
    n_permutations = check_count(n_permutations, "n_permutations", 1)
    if stop_after is not None:
        stop_after = check_count(stop_after, "stop_after", 1)
    if isinstance(conditions, str):
        conditions = named_coordinate(conditions, X, Y, Z)
    if Z is None:
        raise ValueError("test_modulation needs a modulator Z.")
    interval, n_boot = effect_interval_method(interval, n_boot, min(n_permutations, 100))
    check_fraction(confidence, "confidence")
    recorded = make_problem(X, Y, Z, groups=groups).unlabelled()
    null = check_null(null, recorded.groups)
    if null == "circular":
        min_shift = check_min_shift(min_shift, recorded.n_samples)
    return _TestInputs(
        rng, n_permutations, stop_after, conditions, n_boot, interval, recorded, null, min_shift
    )


def _modulation_result(core, inputs, *, n_capped, confidence, **effect):
    """The :class:`ModulationTest` of an observed statistic, its null and its effect size."""
    outcome, null_dist, variants = core.outcome, core.null_distribution, core.variants
    res = outcome.cv_results
    loss = res["n_channels_mean_loss"]
    perms = None if variants.permutations is None else variants.permutations[: null_dist.size]
    p_value = _monte_carlo_p_value(
        null_dist, core.observed, inputs.n_permutations, inputs.stop_after
    )
    return ModulationTest(
        core.observed,
        float(loss[0] - loss[res["n_channels_best_index"]]),
        null_dist,
        float(p_value),
        outcome.n_channels,
        variants.shifts[: null_dist.size],
        inputs.null,
        perms,
        n_capped,
        confidence=float(confidence),
        rank=int(outcome.rank),
        condition_on=core.reduced.condition_on,
        modulator_r2_drift=core.reduced.r2("drift"),
        modulator_r2_source=core.reduced.r2("source"),
        source_map_r2=core.reduced.source_map_r2,
        **modulator_units(inputs.recorded),
        **effect,
    )


@dataclass(frozen=True)
class ReducedProblem:
    """The recording as the test's null sees it, and how each null variant is made alike.

    Attributes
    ----------
    problem : mics.data.Problem
        The target residualised on the reduced model; with ``condition_on``,
        the modulator split into what the nuisance variables predict and the rest.
    reduce : callable
        Applied to every null variant: its target residualised on its own
        modulator's reduced design, as the recording's was.
    conditional : mics.core.conditioning.ConditionalFit or None
    condition_on : tuple of str
    source_map_r2 : float
        How nonlinear the source -> target map is: the share of the target's
        variance left by the additive modulator effect and the (drifting)
        linear map that the quadratic terms explain, adjusted for their
        degrees of freedom counted in trials; NaN without them.
    """

    problem: object
    reduce: object
    conditional: object
    condition_on: tuple
    source_map_r2: float = np.nan

    def r2(self, part):
        """The share of the modulator ``part`` (``"drift"``, ``"source"``) kept; NaN: not kept."""
        if self.conditional is None or part not in self.condition_on:
            return np.nan
        return self.conditional.r2_drift if part == "drift" else self.conditional.r2_source


def reduced_problem(estimator, problem, *, additive, source_map, condition_on, drift_df):
    """The reduced model and the conditional split of :func:`test_modulation` (its defaults' why).

    The null hypothesis is "no gating", not "no modulator effect at all": the
    additive effect of Z on the target is a nuisance to keep. Shifting Z would
    also destroy it, leave more residual variance to every null fit, make
    channel models overfit more there and the observed statistic look large
    (an anti-conservative test). So the additive effect (and, with
    ``source_map="quadratic"``, a nonlinear and drifting source -> target map)
    is removed once, with the real alignment, before anything is shifted (as
    Freedman & Lane permute under the reduced model); with ``condition_on``
    only the modulator's unpredicted part is then permuted.

    Returns
    -------
    ReducedProblem
    """
    nonlinear = check_additive(additive) == "nonlinear"
    condition_on = check_condition_on(condition_on)
    drift_df = check_count(drift_df, "drift_df", 1) if "drift" in condition_on else 1
    terms = None
    if source_map == "quadratic":
        terms = problem.reduced_source_terms(drift_df=drift_df)
    elif source_map != "linear":
        raise ValueError(f"source_map must be 'quadratic' or 'linear', got {source_map!r}.")
    source_map_r2 = np.nan
    if terms:
        # how nonlinear the map is: the quadratic terms beyond the drifting linear ones
        n_quad = problem.quadratic_source_terms_count()
        linear = problem.residualized(nonlinear=nonlinear, extra=terms[n_quad:])
        full = problem.residualized(nonlinear=nonlinear, extra=terms)
        source_map_r2 = _adjusted_r2(linear, full, n_quad)
    problem = problem.residualized(nonlinear=nonlinear, extra=terms)
    conditional = None
    if condition_on:
        params = gain_params(estimator)
        problem, conditional = problem.conditioned(
            problem.splits(params["cv"], params["gap"]),
            source="source" in condition_on,
            drift_df=drift_df,
        )
    reduce = partial(_reduced, nonlinear=nonlinear, extra=terms)
    return ReducedProblem(problem, reduce, conditional, condition_on, source_map_r2)


def modulator_units(problem):
    """How many trials (or blocks) carry the modulator's variance, as ModulationTest fields.

    The participation ratio ``(sum e)^2 / sum e^2`` of the units' sums ``e``
    of the standardised modulator's squares (:meth:`Problem.modulator_energy`).

    Returns
    -------
    dict
        ``modulator_effective_units``, ``modulator_units``, ``modulator_unit``.
    """
    n, groups = problem.n_samples, problem.groups
    starts, lengths = _unit_bounds(n, groups, max(1, int(round(np.sqrt(n)))))
    codes = np.repeat(np.arange(starts.size), lengths)
    energy = np.bincount(codes, weights=problem.modulator_energy(), minlength=starts.size)
    spread = float(np.sum(energy**2))
    return dict(
        modulator_effective_units=float(energy.sum() ** 2 / spread) if spread > 0 else np.nan,
        modulator_units=int(starts.size),
        modulator_unit="block" if groups is None else "trial",
    )


def _adjusted_r2(before, after, k):
    """``1 - RSS_after / RSS_before`` of the targets, adjusted for ``k`` columns (in trials)."""
    rss_before, rss_after = before.target_sum_of_squares(), after.target_sum_of_squares()
    units = before.n_samples if before.groups is None else int(np.unique(before.groups).size)
    if rss_before <= 0 or units <= k + 1:
        return np.nan
    return 1.0 - (rss_after / rss_before) * (units - 1) / (units - k - 1)


@dataclass(frozen=True)
class NullVariants:
    """The null data sets of a test, lazily, and how they were drawn.

    Attributes
    ----------
    problems : iterator of mics.data.Problem
    shifts : ndarray of shape (n_permutations,)
        Circular shifts (empty for the trial null).
    permutations : ndarray of shape (n_permutations, n_trials) or None
        For the trial null, the trial each null trial's modulator came from.
    """

    problems: object
    shifts: np.ndarray
    permutations: np.ndarray | None


def null_variants(reduced, null, rng, n_permutations, *, min_shift=None, conditions=None):
    """Draw the null's shifts or trial permutations (all at once, from ``rng``); the variants."""
    problem = reduced.problem
    n, groups = problem.n_samples, problem.groups
    if null == "circular":
        shifts = rng.randint(min_shift, n - min_shift + 1, size=n_permutations)
        problems = (reduced.reduce(problem.rolled(s)) for s in shifts)
        return NullVariants(problems, shifts, None)
    idxs = [trial_permutation_indices(groups, rng, conditions) for _ in range(n_permutations)]
    starts = np.flatnonzero(np.r_[True, groups[1:] != groups[:-1]])
    perms = np.array([groups[i[starts]] for i in idxs]).reshape(n_permutations, -1)
    problems = (reduced.reduce(problem.permuted(i)) for i in idxs)
    return NullVariants(problems, np.zeros(0, dtype=int), perms)


class _ObservedAndNull(NamedTuple):
    """The observed statistic with its selection and reduced model, and the null's."""

    observed: float
    outcome: object
    reduced: ReducedProblem
    null_distribution: np.ndarray
    capped: int
    variants: NullVariants
    fixed: dict


def _observed_and_null(estimator, inputs, *, n_jobs, verbose, additive, source_map,
                       condition_on, drift_df):  # fmt: skip
    """The observed statistic and its selection, then the null's (the test's core)."""
    # The reduced model, the null variants' residualisations and refits run
    # here while worker processes fit the null data sets: one BLAS thread, as
    # the fits use (small products gain nothing from threads, and threads
    # competing with the workers slowed them tenfold).
    with single_blas_thread():
        reduced = reduced_problem(
            estimator,
            inputs.recorded,
            additive=additive,
            source_map=source_map,
            condition_on=condition_on,
            drift_df=drift_df,
        )
        observed, outcome = _improvement(gain_params(estimator), reduced.problem)
        # once, about the user's own selection (not once per null fit)
        warn_fold_outliers(outcome.cv_results)
        fixed = gain_params(estimator, rank=outcome.rank)
        variants = null_variants(
            reduced, inputs.null, inputs.rng, inputs.n_permutations, min_shift=inputs.min_shift,
            conditions=inputs.conditions,
        )  # fmt: skip
        null_dist, capped = _null_distribution(
            fixed, reduced.problem, variants.problems, observed, inputs.n_permutations,
            inputs.stop_after, n_jobs, verbose,
        )  # fmt: skip
    return _ObservedAndNull(observed, outcome, reduced, null_dist, capped, variants, fixed)


def _null_distribution(fixed, problem, variants, observed, n_permutations, stop_after, n_jobs,
                       verbose):  # fmt: skip
    """The null statistics (stopping early with ``stop_after``) and their capped fold fits."""
    results = problem.map(
        partial(_null_statistic, fixed),
        variants,
        splits=problem.splits(fixed["cv"], fixed["gap"]),
        n_jobs=n_jobs,
        ordered=stop_after is not None,
    )
    return _collect_null(results, observed, n_permutations, stop_after, verbose)


def _effect_of_selection(estimator, recorded, outcome, *, n_boot, confidence, interval, n_jobs,
                         verbose, seed):  # fmt: skip
    """The effect size of the selected model on the recorded target, as ModulationTest fields."""
    k_eff = max(outcome.n_channels, 1)
    base_gain = baseline_gain(estimator, recorded, outcome.rank)
    if interval == "folds":
        params = _effect_params(estimator, outcome.rank, k_eff)
        gains, draws, intervals, gain_intervals = _fold_effect(params, recorded, confidence)
        resampling = "folds"
    else:
        gains, draws, intervals, resampling = heldout_effect(
            estimator, recorded, outcome.rank, k_eff, n_boot=n_boot, confidence=confidence,
            interval=interval, n_jobs=n_jobs, verbose=verbose, random_state=seed,
        )  # fmt: skip
        gain_intervals = _step_intervals(draws, gains, intervals, confidence)
    return dict(
        effect_size=float(gains[-1]),
        effect_interval=intervals[-1].copy(),
        effect_channels=k_eff,
        channel_gains=_per_channel(gains),
        channel_gain_intervals=gain_intervals,
        effect_draws=draws,
        effect_resampling=resampling,
        baseline_gain=base_gain,
    )


def _step_intervals(draws, gains, intervals, confidence):
    """Per-channel intervals (channel ``k`` against ``k - 1``) from bootstrap draws of the sums."""
    if not np.isfinite(intervals).all():
        return np.full((gains.size, 2), np.nan)
    return _recentred(_per_channel(draws), _per_channel(gains), confidence)


def _per_channel(cumulative):
    """Each channel's own gain (``k`` against ``k - 1``) from cumulative gains (last axis)."""
    return np.diff(cumulative, axis=-1, prepend=0.0)


def _recentred(draws, centre, confidence):
    """Percentile intervals of the finite rows of ``draws``, their median placed at ``centre``."""
    ok = np.isfinite(draws).all(axis=1)
    tail = (1 - confidence) / 2
    q = np.quantile(draws[ok], [tail, 1 - tail], axis=0)  # (2, n_channels)
    return (centre + q - np.median(draws[ok], axis=0)).T


# ----------------------------------------------------------------------------- effect size
def _effect_params(estimator, rank, n_channels):
    """Fits behind the effect size: the given rank, every K = 0 .. n_channels scored."""
    return gain_params(
        estimator,
        rank=int(rank),
        max_channels=int(n_channels),
        channel_search="grid",
    )


def baseline_gain(estimator, problem, rank):
    """Held-out share of target variance the rank-``rank`` baseline adds to the additive model.

    The baseline-only selection path (ranks ``0 .. rank``, no channel) on the
    estimator's folds: the rank-0 model (the modulator's additive effect
    alone) minus the rank-``rank`` one. The denominator of
    :attr:`ModulationTest.relative_effect`.

    Returns
    -------
    float
        NaN when ``rank`` is 0.
    """
    if rank == 0:
        return np.nan
    params = gain_params(estimator, rank=None, max_rank=int(rank), n_channels=0)
    outcome = fit_problem(params, problem, cv_only=True)
    loss = outcome.cv_results["rank_mean_loss"]
    return float(loss[0] - loss[int(rank)])


def _cumulative_gains(params, problem, per_fold=False):
    """Held-out NSE of K = 0 minus that of K = 1 .. max_channels (fraction of target variance).

    Returns
    -------
    gains : ndarray of shape (max_channels,)
        NaN when the problem's folds cannot be formed (a bootstrap draw with
        too few distinct trials or blocks for the estimator's folds).
    folds : ndarray of shape (n_folds_used, max_channels)
        With ``per_fold``: the same per fold, outlier folds left out as in
        the mean (so the folds' mean is ``gains``).
    n_splits : int
        With ``per_fold``: the folds of the cross-validation, outliers included.
    """
    try:
        outcome = fit_problem(params, problem, cv_only=True)
    except ValueError:
        if per_fold:
            raise
        return np.full(params["max_channels"], np.nan)
    res = outcome.cv_results
    loss = res["n_channels_mean_loss"]
    if not per_fold:
        return loss[0] - loss[1:]
    fold_loss = res["n_channels_fold_loss"]
    n_splits = fold_loss.shape[1]
    if "n_channels_fold_outlier" in res:
        fold_loss = fold_loss[:, ~res["n_channels_fold_outlier"]]
    return loss[0] - loss[1:], (fold_loss[0] - fold_loss[1:]).T, n_splits


def _fold_effect(params, problem, confidence):
    """The fold interval's effect: cumulative gains, per-fold gains and both kinds of interval.

    Returns
    -------
    gains : ndarray of shape (n_channels,)
    folds : ndarray of shape (n_folds_used, n_channels)
    intervals : ndarray of shape (n_channels, 2)
        Of the cumulative gains.
    step_intervals : ndarray of shape (n_channels, 2)
        Of each channel's own gain (channel ``k`` against ``k - 1``).
    """
    gains, folds, n_splits = _cumulative_gains(params, problem, per_fold=True)
    return (
        gains,
        folds,
        fold_t_intervals(folds, gains, confidence, n_splits),
        fold_t_intervals(_per_channel(folds), _per_channel(gains), confidence, n_splits),
    )


def fold_t_intervals(values, centre, confidence, n_splits):
    """Corrected t intervals over per-fold values (Nadeau & Bengio 2003), per column.

    ``centre +- t(J - 1) * sd * sqrt(1 / J + 1 / (n_splits - 1))`` for the
    ``J`` rows of ``values`` (the folds used). The folds' training sets
    overlap, so their values are correlated and ``sd / sqrt(J)``
    understates the spread of their mean; the term ``n_test / n_train =
    1 / (n_splits - 1)`` is Nadeau and Bengio's correction for that (their
    "corrected resampled t", *Machine Learning* 52, 2003). Without it the
    interval under-covered in ``results/effect_coverage/``.

    Parameters
    ----------
    values : ndarray of shape (n_folds_used, n_columns)
    centre : ndarray of shape (n_columns,)
    confidence : float
    n_splits : int
        Folds of the cross-validation (outlier folds included).

    Returns
    -------
    ndarray of shape (n_columns, 2)
        NaN with fewer than two rows.
    """
    n = values.shape[0]
    if n < 2 or n_splits < 2:
        return np.full((values.shape[1], 2), np.nan)
    half = fold_t_halfwidth(values.std(axis=0, ddof=1), n, n_splits, confidence)
    return np.column_stack([centre - half, centre + half])


def fold_t_halfwidth(sd, n_used, n_splits, confidence):
    """Half-width of :func:`fold_t_intervals` from the folds' SD (arrays broadcast).

    Parameters
    ----------
    sd : float or ndarray
        Standard deviation (``ddof=1``) of the per-fold values.
    n_used : int or ndarray
        Folds behind ``sd`` (at least 2).
    n_splits : int or ndarray
        Folds of the cross-validation.
    confidence : float
    """
    n_used = np.asarray(n_used, dtype=float)
    scale = np.sqrt(1.0 / n_used + 1.0 / (np.asarray(n_splits, dtype=float) - 1.0))
    return stats.t.ppf(0.5 + confidence / 2, n_used - 1) * sd * scale


def _unit_bounds(n, groups, block_length):
    """Starts and lengths of the resampling units: trials, or a grid of contiguous blocks."""
    if groups is not None:
        starts = np.flatnonzero(np.r_[True, groups[1:] != groups[:-1]])
    else:
        starts = np.arange(0, n, block_length)
    lengths = np.diff(np.r_[starts, n])
    return starts, lengths


def _unit_draw(starts, lengths, rng):
    """One bootstrap draw of whole units, kept in time order, each copy labelled by its unit.

    A unit drawn twice keeps one label, so the cross-validation folds inside
    the draw keep both copies on the same side: a copy held out while its
    twin trains would score memory, not prediction.

    Returns
    -------
    idx : ndarray of int
        Rows of the draw.
    codes : ndarray of int, same length
        Its trial ids (contiguous runs).
    """
    picks = np.sort(rng.randint(0, starts.size, size=starts.size))
    idx = np.concatenate([np.arange(starts[i], starts[i] + lengths[i]) for i in picks])
    return idx, np.repeat(picks, lengths[picks])


def heldout_effect(
    estimator,
    problem,
    rank,
    n_channels,
    *,
    n_boot=None,
    confidence=0.95,
    block_length=None,
    n_jobs=None,
    verbose=0,
    random_state=None,
    interval=None,
):
    """Held-out variance fraction explained by ``n_channels`` channels, with its interval.

    The estimator's cross-validation scores the channel-free model (baseline
    of rank ``rank`` plus the additive modulator effect) and the models with
    ``1 .. n_channels`` channels on the same folds; the effect is the
    difference of their mean held-out NSE, i.e. the fraction of the target's
    held-out variance the channels add. Each bootstrap draw resamples whole
    trials (contiguous blocks without trial ids), keeps them in time order,
    and repeats the cross-validation on the draw with the same rank and
    channel count (:meth:`Problem.resampled`, :meth:`Problem.map`).

    By default (``interval="folds"``) nothing is refitted: the interval is
    a t interval over the per-fold gains of the estimate's own folds
    (outlier folds left out, as in its mean), corrected for the overlap of
    their training sets (:func:`fold_t_intervals`), which chunked problems
    can have too. With ``interval="bootstrap"`` (or ``n_boot`` given) the
    interval is the draws' spread around their median placed at the
    estimate (``estimate + quantile - median``): a draw holds about 63% of
    the distinct trials, so its training folds are smaller and its gains
    biased low; their spread, not their centre, is what the draws measure.
    The two intervals' coverage is in ``results/effect_coverage/``.

    Parameters
    ----------
    estimator : MICs
        Supplies the folds, penalties and fit settings.
    problem : mics.data.Problem
        The recorded data (not residualised), with a modulator.
    rank : int
        Baseline rank of every model compared.
    n_channels : int
        Largest channel count scored (``>= 1``).
    n_boot : int, optional
        Bootstrap draws (giving it asks for the bootstrap; default 100 with
        ``interval="bootstrap"``); 0 gives the estimate only. Chunked (Dask)
        problems get no bootstrap.
    confidence : float
    block_length : int, optional
        Samples per block without trial ids; default ``sqrt(n_samples)``,
        lowered so that there are at least three blocks per fold.
    n_jobs, verbose, random_state
        As in :func:`test_modulation`.
    interval : {"folds", "bootstrap"}, optional
        Default ``"folds"``, or ``"bootstrap"`` when ``n_boot`` is given.

    Returns
    -------
    gains : ndarray of shape (n_channels,)
        Cumulative held-out gains of ``1 .. n_channels`` channels.
    draws : ndarray of shape (n_boot, n_channels)
        With ``"folds"``, one row per fold used.
    intervals : ndarray of shape (n_channels, 2)
        Intervals of the cumulative gains (NaN when fewer than half the
        draws could be cross-validated).
    resampling : str
        ``"trial"``, ``"block"``, ``"folds"`` or ``""``.
    """
    n_channels = check_count(n_channels, "n_channels", 1)
    interval, n_boot = effect_interval_method(interval, n_boot, 100)
    check_fraction(confidence, "confidence")
    params = _effect_params(estimator, rank, n_channels)
    if interval == "folds":
        gains, folds, intervals, _ = _fold_effect(params, problem, confidence)
        return gains, folds, intervals, "folds"
    gains = _cumulative_gains(params, problem)
    if n_boot == 0 or not problem.in_memory:
        return gains, np.zeros((0, n_channels)), np.full((n_channels, 2), np.nan), ""
    rng = check_random_state(random_state)
    groups = problem.groups
    draws = _effect_draws(
        params, problem, n_boot=n_boot, block_length=block_length, n_jobs=n_jobs,
        verbose=verbose, rng=rng,
    )  # fmt: skip
    intervals = _recentred_intervals(gains, draws, confidence, units=groups is not None)
    return gains, draws, intervals, "block" if groups is None else "trial"


def _recentred_intervals(gains, draws, confidence, units):
    """The draws' percentile intervals placed at ``gains`` (NaN, with a warning, when too few).

    ``units``: whether the draws resampled trials (else blocks), for the warning.
    """
    ok = np.isfinite(draws).all(axis=1)
    n_boot = len(draws)
    if ok.sum() >= max(2, n_boot / 2):
        return _recentred(draws, gains, confidence)
    warnings.warn(
        f"only {int(ok.sum())} of {n_boot} bootstrap draws had enough distinct "
        f"{'trials' if units else 'blocks'} for the estimator's folds: "
        "no effect-size interval. Use fewer folds (cv=) or more trials.",
        UserWarning,
        stacklevel=user_stacklevel(),
    )
    return np.full((gains.size, 2), np.nan)


def _effect_draws(params, problem, *, n_boot, block_length, n_jobs, verbose, rng):
    """The bootstrap's cumulative gains, one row per draw of whole trials (or blocks).

    Without trial ids the blocks default to ``sqrt(n_samples)`` samples,
    fewer when needed for three blocks per fold of the estimator.
    """
    n, groups = problem.n_samples, problem.groups
    if groups is None:
        n_folds = len(problem.splits(params["cv"], params["gap"]))
        if block_length is None:
            block_length = min(int(round(np.sqrt(n))), max(1, n // (3 * n_folds)))
        block_length = check_count(block_length, "block_length", 1, n)
    starts, lengths = _unit_bounds(n, groups, block_length)
    variants = (problem.resampled(*_unit_draw(starts, lengths, rng)) for _ in range(n_boot))
    return np.asarray(
        list(
            problem.map(
                partial(_cumulative_gains, params),
                variants,
                n_jobs=n_jobs,
                desc="effect bootstrap",
                verbose=verbose,
                total=n_boot,
            )
        )
    ).reshape(n_boot, params["max_channels"])


def _percent(x):
    return f"{100 * x:.2g}%" if abs(x) >= 0.01 else f"{100 * x:.2f}%"


def _effect_text(test):
    """``"2.1% [0.8%, 3.5%]"``: the effect and its interval, in percent of held-out variance."""
    lo, hi = test.effect_interval
    if np.isfinite(lo) and np.isfinite(hi):
        how = f"{test.confidence:.0%} {test.effect_resampling} bootstrap"
        if test.effect_resampling == "folds":
            how = f"{test.confidence:.0%} corrected t interval over the folds"
        return f"{_percent(test.effect_size)} [{_percent(lo)}, {_percent(hi)}; {how}]"
    return f"{_percent(test.effect_size)} (no interval)"


def mde_text(power):
    """The minimum detectable effect of a power analysis (or a number), as words."""
    if power is None:
        return ""
    mde = np.atleast_1d(getattr(power, "minimum_detectable_effect", power)).astype(float)
    names = list(getattr(power, "geometries", [""] * mde.size))
    level = getattr(power, "target_power", 0.8)
    top = getattr(power, "strengths", np.array([np.nan]))
    parts = []
    for value, name in zip(mde, names, strict=True):
        text = _percent(value) if np.isfinite(value) else f"above {_percent(np.max(top))}"
        parts.append(f"{text} ({name})" if name else text)
    return f"; the minimum detectable effect here is {', '.join(parts)} at {level:.0%} power"


def _relative_text(test):
    rel = test.relative_effect
    if not np.isfinite(rel):
        return ""
    return f" ({_percent(rel)} of the variance the baseline communicates)"


#: Below this share of its trials (or blocks) carrying the modulator's
#: variance, with the source predicting at least ``PREDICTED_BY_SOURCE`` of
#: it, the verdict names the confound the test is not calibrated against: in
#: the null families a bursty modulator that drives the source made the test
#: over-reject with many source neurons and few samples per trial
#: (results/null_families/, plan "bursty"; the user guide, "Where it is not
#: yet calibrated"). Every other family kept well above this share.
FEW_UNITS = 0.15
PREDICTED_BY_SOURCE = 0.5


def concentration_text(test):
    """The caveat for a modulator carried by a few trials that the source predicts ("" if none)."""
    units = test.modulator_units
    if not units or not test.modulator_effective_units < FEW_UNITS * units:
        return ""
    text = (
        f"The modulator's variance sits in about {test.modulator_effective_units:.0f} of the "
        f"{units} {test.modulator_unit}s"
    )
    if not test.modulator_r2_source >= PREDICTED_BY_SOURCE:
        return text + "."
    return (
        text + " and the source predicts it: with such a modulator (a few extreme bursts "
        "that drive the source) the test over-rejected in simulations with many source "
        "neurons and few samples per trial, so read a rejection against negative controls "
        "(user guide, 'Where it is not yet calibrated')."
    )


def diagnostics_text(test):
    """What the conditional null kept of the modulator, as one clause (empty without it)."""
    parts = []
    if np.isfinite(test.modulator_r2_drift):
        parts.append(f"the session drift predicts {test.modulator_r2_drift:.2f}")
    if np.isfinite(test.modulator_r2_source):
        parts.append(f"the source {test.modulator_r2_source:.2f} of the rest")
    if not parts:
        return ""
    text = (
        "The null kept the modulator's predictable part (cross-validated R2: "
        + " and ".join(parts)
        + ") and permuted the rest"
    )
    if np.isfinite(test.source_map_r2):
        text += (
            f"; a quadratic source -> target map explains "
            f"{_percent(max(test.source_map_r2, 0.0))} of the target's variance beyond the "
            "linear one (in the reduced model)"
        )
    if np.isfinite(test.modulator_r2_source) and test.modulator_r2_source > 0.8:
        text += (
            "; the source predicts most of the modulator, so gating by it cannot be told "
            "from a nonlinear source -> target map and the test has little power"
        )
    return text + "."


def result_sentence(test, power=None, alpha=0.05):
    """The graded verdict in words: gating, pairing only, or not detected.

    Three grades (:meth:`ModulationTest.verdict`), so that no sentence says
    gating is present where the effect size says otherwise:

    - gating detected and measurable: p <= alpha and the effect's interval
      above 0;
    - the modulator's pairing matters but no gating channel predicts held-out
      activity: p <= alpha with an effect <= 0 or an interval covering 0.
      The permutation test then rejects the exchangeability of the
      modulator's trials (or shifts), which a gate would cause but which
      is not itself a measured gate;
    - not detected, with the minimum detectable effect when ``power`` is given.

    Parameters
    ----------
    test : ModulationTest
    power : PowerAnalysis or float, optional
        Its minimum detectable effect is quoted.
    alpha : float

    Returns
    -------
    str
    """
    n = test.null_distribution.size
    null = "circular shifts" if test.null == "circular" else "trial permutations"
    if test.condition_on:
        null = f"{null} of the modulator's unpredicted part"
    p = f"p = {test.p_value:.3g} with {n} {null}, smallest possible {1 / (n + 1):.3g}"
    k = test.n_channels
    share = "of the held-out target variance beyond the additive model"
    one = "one channel would explain" if k == 0 else ("it explains" if k == 1 else "they explain")
    effect = f"{one} {_effect_text(test)} {share}{_relative_text(test)}"
    mde = mde_text(power)
    grade = test.verdict(alpha)
    if grade == "gating":
        kept = f"{k} channel(s) selected" if k else "no channel selected by the one-SEM rule"
        text = f"Gating detected ({p}); {kept}, and {effect}{mde}."
    elif grade == "pairing":
        text = (
            f"The modulator's pairing with the source and target matters ({p}), but no "
            f"gating channel predicts held-out activity: {effect}, an estimate at or below 0 "
            f"or an interval covering 0. This rejects the null's exchangeability; it does not "
            f"measure a gate{mde}."
        )
    elif k > 0 or (test.effect_size > 0 and not test.effect_interval[0] <= 0):
        kept = f", although the selection kept {k} channel(s)" if k else ""
        text = (
            f"No modulation detected ({p}){kept}: {effect}, which the null data sets "
            f"match as often, so the gain is not specific to the modulator's pairing{mde}."
        )
    else:
        text = (
            f"No modulation detected ({p}): channels do not improve held-out prediction at "
            f"this sample size (selected K = 0; {effect}){mde}."
        )
    notes = (diagnostics_text(test), concentration_text(test))
    return " ".join(part for part in (text, *notes) if part)


def _collect_null(results, observed, n_permutations, stop_after, verbose):
    """Null statistics in the shifts' order, stopping after ``stop_after`` exceedances.

    Results are consumed in submission order, so where the sequential test
    stops does not depend on ``n_jobs``. Each result is a statistic, or a
    ``(statistic, n_capped)`` pair.

    Returns
    -------
    null : ndarray of shape (L,)
    n_capped : int
        Capped fold fits over the null selections consumed.
    """
    null = []
    exceed = capped = 0
    bar = tqdm(results, total=n_permutations, desc="permutations", disable=not verbose)
    for r in bar:
        value, n_capped = r if isinstance(r, tuple) else (r, 0)
        null.append(value)
        capped += n_capped
        exceed += value >= observed
        if stop_after is not None and exceed >= stop_after:
            break
    bar.close()
    return np.asarray(null, dtype=float), capped


def _monte_carlo_p_value(null, observed, n_permutations, stop_after):
    """``(1 + #{null >= observed}) / (1 + n)``, or Besag-Clifford's ``h / L`` when stopped early.

    Parameters
    ----------
    null : ndarray of shape (L,)
        Null statistics evaluated (``L <= n_permutations``).
    observed : float
    n_permutations : int
    stop_after : int or None
        ``h`` of the sequential test.

    Returns
    -------
    p_value : float
    """
    exceed = int(np.sum(null >= observed))
    if stop_after is not None and exceed >= stop_after:
        return stop_after / null.size
    return (1 + exceed) / (1 + n_permutations)


def check_min_shift(min_shift, n):
    """The smallest circular shift of ``n`` samples: as given, or a tenth of the samples."""
    if min_shift is None:
        min_shift = max(1, n // 10)
    if n < 2:
        raise ValueError(f"a circular-shift test needs at least 2 samples, got {n}.")
    return check_count(min_shift, "min_shift", 1, n // 2)


def check_additive(additive):
    """How the test's reduced model removes the modulator's additive effect."""
    if additive not in ("linear", "nonlinear"):
        raise ValueError(f"additive must be 'linear' or 'nonlinear', got {additive!r}.")
    return additive


def check_condition_on(condition_on):
    """The nuisance variables a conditional null keeps: a tuple of "source" and "drift"."""
    if condition_on is None:
        return ()
    if isinstance(condition_on, str):
        condition_on = (condition_on,)
    names = tuple(condition_on)
    unknown = [c for c in names if c not in ("source", "drift")]
    if unknown:
        raise ValueError(f"condition_on takes 'source' and/or 'drift' (or None), got {unknown!r}.")
    return tuple(c for c in ("source", "drift") if c in names)


def check_interval(interval):
    """The effect size's interval: ``"bootstrap"`` (refits) or ``"folds"`` (none)."""
    if interval not in ("bootstrap", "folds"):
        raise ValueError(f"interval must be 'folds' or 'bootstrap', got {interval!r}.")
    return interval


def effect_interval_method(interval, n_boot, default_boot):
    """``(interval, n_boot)`` of an effect size from what the user gave.

    No ``interval``: the fold interval (no refit), unless ``n_boot`` is
    given, which asks for the bootstrap (0: the estimate alone). A bootstrap
    without ``n_boot`` draws ``default_boot``. ``n_boot > 0`` with
    ``interval="folds"`` contradicts itself and raises.
    """
    if interval is None:
        if n_boot is None:
            return "folds", 0
        return "bootstrap", check_count(n_boot, "n_boot", 0)
    if check_interval(interval) == "folds":
        if n_boot is not None and check_count(n_boot, "n_boot", 0) > 0:
            raise ValueError(
                f"n_boot={n_boot} asks for bootstrap refits, but interval='folds' refits "
                "nothing; pass interval='bootstrap' or leave n_boot out."
            )
        return "folds", 0
    return "bootstrap", default_boot if n_boot is None else check_count(n_boot, "n_boot", 0)


def check_null(null, groups):
    """The null of a modulation test: "trial" when trial ids are known, else "circular"."""
    if null is None:
        return "circular" if groups is None else "trial"
    if null not in ("circular", "trial"):
        raise ValueError(f"null must be 'circular' or 'trial', got {null!r}.")
    if null == "trial" and groups is None:
        raise ValueError(
            "null='trial' needs trial ids: pass groups= or labelled inputs with a 'trial' "
            "coordinate."
        )
    return null


def named_coordinate(name, *arrays):
    """A named coordinate along time of the first labelled input that has it."""
    from mics.data.folds import trial_coordinate

    values = trial_coordinate(*arrays, coord=name)
    if values is None:
        raise ValueError(
            f"conditions={name!r} names no coordinate along 'time' of the labelled inputs."
        )
    return values


def _block_indices(n, block_length, rng):
    starts = rng.randint(0, n - block_length + 1, size=int(np.ceil(n / block_length)))
    return np.concatenate([np.arange(s, s + block_length) for s in starts])[:n]


def _half_block_indices(n, block_length, rng):
    """Half of the contiguous blocks (the last one shorter), without replacement, in order."""
    blocks = np.array_split(np.arange(n), int(np.ceil(n / block_length)))
    if len(blocks) < 2:
        raise ValueError("half-sample resampling needs two blocks or more: shorten block_length.")
    picks = np.sort(rng.choice(len(blocks), size=len(blocks) // 2, replace=False))
    return np.concatenate([blocks[i] for i in picks])


def _align(reference, model):
    """Permutation matching a bootstrap fit's channels to the reference."""
    # np.asarray: a reference fitted on labelled inputs has DataArray patterns.
    sim = (
        (np.asarray(reference.source_patterns_).T @ model.source_patterns_)
        * (np.asarray(reference.target_patterns_).T @ model.target_patterns_)
        * (np.asarray(reference.modulator_patterns_).T @ model.modulator_patterns_)
    )
    rows, cols = linear_sum_assignment(-np.abs(sim))
    order = np.empty(reference.n_channels_, dtype=int)
    order[rows] = cols
    return order


def align_channels(reference, model):
    """Order and signs that match a refit's channels to those of a reference fit.

    Channels are matched by the Hungarian algorithm on the product of the
    absolute cosines of their source, target and modulator patterns, as in
    :func:`bootstrap_channels`.

    Parameters
    ----------
    reference, model : fitted MICs
        With the same number of channels.

    Returns
    -------
    order : ndarray of int, shape (n_channels,)
        ``model``'s channel matched to each channel of ``reference``.
    source_sign, target_sign : ndarray of shape (n_channels,)
        Signs (+1 or -1) that turn ``model``'s reordered source and target
        patterns towards the reference's; the modulator pattern takes their
        product, so the channel's tensor is unchanged. +1 where either
        pattern is empty.
    """
    order = _align(reference, model)
    a = np.asarray(model.source_patterns_)[:, order]
    b = np.asarray(model.target_patterns_)[:, order]
    sa = np.sign(np.sum(a * np.asarray(reference.source_patterns_), axis=0))
    sb = np.sign(np.sum(b * np.asarray(reference.target_patterns_), axis=0))
    sa[sa == 0], sb[sb == 0] = 1.0, 1.0
    return order, sa, sb


def fitted_penalties(model):
    """The penalties a model chose on its folds, as fixed settings for refits.

    Parameters
    ----------
    model : fitted MICs

    Returns
    -------
    dict
        ``alpha``, ``alpha_channels`` and ``sparsity`` where the model chose
        them by cross-validation ("cv" or a list of candidates): their
        chosen values. A scalar setting is left out (a clone keeps it).
    """
    return _chosen(model)


def _boot_fit(fixed, problem, seed):
    """One bootstrap fit: a clone of the fixed-size model on a resampled problem."""
    return clone(fixed).set_params(random_state=seed).fit_problem(problem)


def _chosen(model):
    """The penalties the model chose by cross-validation, as fixed settings.

    The bootstrap is conditional on the selected model: like the rank and the
    number of channels, a penalty chosen on the folds ("cv" or a list of
    candidates) is fixed at its chosen value, so each resample refits one
    model instead of rerunning the path (a scalar setting stays as it is).
    """
    out = {}
    for name in ("alpha", "alpha_channels", "sparsity"):
        setting = getattr(model, name, None)
        chosen = getattr(model, name + "_", None)
        if chosen is not None and (isinstance(setting, str) or np.ndim(setting) > 0):
            out[name] = float(chosen)
    return out


def bootstrap_channels(
    model,
    X,
    Y,
    Z,
    *,
    n_boot=100,
    block_length=None,
    groups=None,
    confidence=0.95,
    n_jobs=None,
    verbose=1,
    random_state=None,
    scheme="bootstrap",
    metric="euclidean",
):
    """Block-bootstrap confidence intervals for the channels of a fitted model.

    Each resample concatenates contiguous blocks (whole trials when trial
    ids are known) drawn with replacement,
    refits with the model's ranks fixed, and aligns its channels to the
    full-data fit (Hungarian matching on the product of |cosines|); the
    patterns' signs are matched too.

    Parameters
    ----------
    model : fitted MICs
    X, Y, Z : array-like
        The data the model was fitted on.
    n_boot : int
    block_length : int, optional
        Samples per block; default ``sqrt(n_samples)``, rounded. Ignored
        when trials are resampled.
    groups : array-like of shape (n_samples,), optional
        Trial id of every sample: each resample then draws ``n_trials`` whole
        trials with replacement. Taken from a ``trial`` coordinate of a
        labelled input when not given.
    confidence : float
    n_jobs, verbose, random_state
        As in :func:`test_modulation`.
    scheme : {"bootstrap", "half"}, default="bootstrap"
        ``"bootstrap"``: as many blocks (trials) as the data, drawn with
        replacement. ``"half"``: half of them, without replacement, in time
        order: the subsamples of stability selection
        (:func:`mics.stability_selection`), not for intervals (a half
        sample's spread is that of half the data).
    metric : {"euclidean", "covariance"}
        Geometry of the decomposition of each refit (:func:`mics.model.decompose`).

    Returns
    -------
    xarray.Dataset
        ``channel_weights``, ``source_patterns``, ``target_patterns``,
        ``modulator_patterns``, the per-channel decomposition fractions
        (``reshape``, ...) and the whole-tensor ones (``total_reshape``, ...)
        with their energies (``energy_reshape``, ...: squared norms of the
        parts of the modulation tensor, modulators per standard deviation),
        each with a ``bound`` dimension (``low``, ``high``); the raw draws as
        ``*_draws`` with a ``boot`` dimension. Attribute ``resampling`` is
        ``"trial"`` or ``"block"``. Pass it as ``intervals`` to
        :func:`mics.model.summarize`.
    """
    rng = check_random_state(random_state)
    n_boot = check_count(n_boot, "n_boot", 1)
    check_fraction(confidence, "confidence")
    if Z is None:
        raise ValueError("bootstrap_channels needs the modulator Z the model was fitted with.")
    problem = make_problem(X, Y, Z, groups=groups).unlabelled()
    n, groups = problem.n_samples, problem.groups
    _check_fitted_columns(model, problem)
    block_length = _bootstrap_block_length(block_length, n, groups)
    fixed = clone(model).set_params(
        rank=model.rank_, n_channels=model.n_channels_, verbose=0, n_jobs=1, **_chosen(model)
    )
    seeds = rng.randint(np.iinfo(np.int32).max, size=n_boot)
    if scheme not in ("bootstrap", "half"):
        raise ValueError(f"scheme must be 'bootstrap' or 'half', got {scheme!r}.")
    half = scheme == "half"
    draws_idx = _resample_indices(problem, n_boot, block_length, half, rng)
    variants = ((problem.resampled(i, g), s) for (i, g), s in zip(draws_idx, seeds, strict=True))
    fits = problem.map(
        partial(_boot_fit, fixed),
        variants,
        n_jobs=n_jobs,
        desc="bootstrap",
        verbose=verbose,
        total=n_boot,
    )
    ds = _aligned_draws(model, fits, metric)
    return _intervals_and_draws(
        ds,
        confidence=confidence,
        n_boot=n_boot,
        block_length=-1 if block_length is None else block_length,
        resampling=("block" if groups is None else "trial") + ("-half" if half else ""),
        metric=metric,
    )


def _bootstrap_block_length(block_length, n, groups):
    """Samples per resampled block: as given or ``sqrt(n)``; None when whole trials are drawn."""
    if groups is not None:
        return None
    if block_length is None:
        block_length = max(1, int(round(np.sqrt(n))))
    return check_count(block_length, "block_length", 1, n)


def _resample_indices(problem, n_boot, block_length, half, rng):
    """Rows (and, for trials, their trial ids) of every resample, drawn in turn from ``rng``."""
    n, groups = problem.n_samples, problem.groups
    if groups is None:
        draw = _half_block_indices if half else _block_indices
        return [(draw(n, block_length, rng), None) for _ in range(n_boot)]
    draw = trial_subsample_indices if half else trial_bootstrap_indices
    return [draw(groups, rng) for _ in range(n_boot)]


def _intervals_and_draws(ds, *, confidence, **attrs):
    """The bootstrap's result: the draws' quantile intervals, the draws, and ``attrs``."""
    import xarray as xr

    lo, hi = (1 - confidence) / 2, 1 - (1 - confidence) / 2
    # Intervals carry the decomposition's own variable names with a `bound`
    # dimension, so `mics.model.summarize(model.decompose(), out)`
    # reports them; the draws stay available with a `_draws` suffix.
    bounds = ds.quantile([lo, hi], dim="boot").rename(quantile="bound")
    out = bounds.assign_coords(bound=["low", "high"])
    out = xr.merge([out, ds.rename({k: f"{k}_draws" for k in ds.data_vars})])
    out.attrs.update(confidence=confidence, **attrs)
    return out


def _check_fitted_columns(model, problem):
    """Refuse data with other columns than the model was fitted on."""
    fitted = (
        np.asarray(model.source_mean_).size,
        np.atleast_1d(model.intercept_).size,
        np.asarray(model.modulator_mean_).size,
    )
    roles = ("source X", "target Y", "modulator Z")
    for name, got, want in zip(roles, problem.shape[1:], fitted, strict=True):
        if got != want:
            raise ValueError(
                f"{name} has {got} columns but the model was fitted with {want}: pass the "
                "data the model was fitted on."
            )


def _aligned_draws(model, fits, metric):
    """The refits' channels aligned to the model's (order and signs), with their decompositions.

    Returns
    -------
    xarray.Dataset
        Every variable with a leading ``boot`` dimension.
    """
    import xarray as xr

    draws = {k: [] for k in ("w", "a", "b", "c", "frac", "total", "energy")}
    parts = ("reshape", "private_source", "private_target", "new")
    for f in fits:
        order = _align(model, f)
        a = f.source_patterns_[:, order]
        b = f.target_patterns_[:, order]
        c = f.modulator_patterns_[:, order]
        # sign 0 (an empty channel of either fit) keeps the refit's own sign:
        # a zero factor would erase the refit's pattern
        sa = np.sign(np.sum(a * np.asarray(model.source_patterns_), axis=0))
        sb = np.sign(np.sum(b * np.asarray(model.target_patterns_), axis=0))
        sa[sa == 0], sb[sb == 0] = 1.0, 1.0
        draws["w"].append(f.channel_weights_[order])
        draws["a"].append(a * sa)
        draws["b"].append(b * sb)
        draws["c"].append(c * sa * sb)
        dec = decompose(f, metric=metric)
        draws["frac"].append([dec[p].values[order] for p in parts])
        draws["total"].append([float(dec[f"total_{p}"]) for p in parts])
        draws["energy"].append([float(dec[f"energy_{p}"]) for p in parts])
    ds = xr.Dataset(
        {
            "channel_weights": (("boot", "channel"), np.asarray(draws["w"])),
            "source_patterns": (("boot", "source", "channel"), np.asarray(draws["a"])),
            "target_patterns": (("boot", "target", "channel"), np.asarray(draws["b"])),
            "modulator_patterns": (("boot", "modulator", "channel"), np.asarray(draws["c"])),
        }
    )
    frac = np.asarray(draws["frac"])  # (boot, part, channel)
    total = np.asarray(draws["total"])  # (boot, part)
    energy = np.asarray(draws["energy"])  # (boot, part)
    for i, p in enumerate(parts):
        ds[p] = (("boot", "channel"), frac[:, i])
        ds[f"total_{p}"] = ("boot", total[:, i])
        ds[f"energy_{p}"] = ("boot", energy[:, i])
    return ds
