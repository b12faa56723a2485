"""Power on the user's own recording: plant channels of known strength, rerun the same test.

A test that finds nothing says little unless one knows what it could have
found. :func:`power_analysis` answers that for the recording at hand: it
adds a multiplicative interaction channel of chosen strength and geometry
to the recorded target, keeping the recorded source, modulator, noise and
trial structure, runs :func:`mics.test_modulation` with the settings of the
real analysis, and counts detections. The channels are planted into null
copies of the recording (its modulator's trials permuted, or the modulator
shifted circularly, as the test's null draws it, with the modulator's
additive effect regressed out as the test does), so gating the recording
already holds does not count as power: without that, a recording with
gating would report a minimum detectable effect that is too small.
Strength is in the units of the test's effect size: the fraction of the
(new) target's variance that the planted channel carries, i.e. what a
perfectly estimated channel would explain held out.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
from scipy import linalg, stats
from sklearn.utils import check_random_state
from tqdm import tqdm

from mics.core.linalg import orthonormal_svd
from mics.data.folds import trial_permutation_indices
from mics.data.problem import make_problem
from mics.data.quality import quality_scope
from mics.data.validation import check_count, check_fraction
from mics.model.fit import fit_problem
from mics.workflows.inference import (
    check_additive,
    check_condition_on,
    check_min_shift,
    check_null,
    gain_params,
    mde_text,
    named_coordinate,
    test_modulation,
)

__all__ = ["GEOMETRIES", "PowerAnalysis", "power_analysis", "plant_channel", "clopper_pearson"]

#: Where a planted channel's source (a) and target (b) patterns lie relative
#: to the recording's baseline subspaces (as in :func:`mics.simulate`).
GEOMETRIES = {
    "reshape": ("in", "in"),
    "private_source": ("out", "in"),
    "private_target": ("in", "out"),
    "new": ("out", "out"),
    "random": ("free", "free"),
}


def clopper_pearson(successes, trials, confidence=0.95):
    """Exact (Clopper-Pearson) binomial interval of a rate.

    Parameters
    ----------
    successes : int or ndarray of int
    trials : int
    confidence : float

    Returns
    -------
    low, high : float or ndarray, shaped like ``successes``
    """
    k = np.asarray(successes, dtype=float)
    tail = (1 - confidence) / 2
    with np.errstate(invalid="ignore"):
        low = np.where(k > 0, stats.beta.ppf(tail, k, trials - k + 1), 0.0)
        high = np.where(k < trials, stats.beta.ppf(1 - tail, k + 1, trials - k), 1.0)
    return low, high


@dataclass
class PowerAnalysis:
    """Result of :func:`power_analysis`.

    Attributes
    ----------
    strengths : ndarray of shape (n_strengths,)
        Planted strengths, as fractions of target variance (ascending).
    geometries : list of str
        Planted geometries (``n_geometries``).
    n_sims : int
        Planted data sets per strength and geometry.
    p_values : ndarray of shape (n_geometries, n_strengths, n_sims)
        The test's p-value on each planted data set.
    detections : ndarray of shape (n_geometries, n_strengths)
        How many of them had ``p <= alpha``.
    rates : ndarray of shape (n_geometries, n_strengths)
        Detection rates.
    rate_intervals : ndarray of shape (n_geometries, n_strengths, 2)
        Clopper-Pearson intervals of the rates at ``confidence``.
    minimum_detectable_effect : ndarray of shape (n_geometries,)
        Strength at which the rate reaches ``target_power`` (linear
        interpolation of the rates made non-decreasing in strength); NaN when
        no strength tried reaches it, the smallest strength when all do.
    alpha, target_power, confidence : float
    rank : int
        Baseline rank of the recording (defines the geometries).
    settings : dict
        The test's settings (``n_permutations``, ``null``, ...).
    """

    strengths: np.ndarray
    geometries: list
    n_sims: int
    p_values: np.ndarray
    detections: np.ndarray
    rates: np.ndarray
    rate_intervals: np.ndarray
    minimum_detectable_effect: np.ndarray
    alpha: float = 0.05
    target_power: float = 0.8
    confidence: float = 0.95
    rank: int = 0
    settings: dict = field(default_factory=dict)

    def __repr__(self):
        mde = ", ".join(
            f"{g}={v:.3g}"
            for g, v in zip(self.geometries, self.minimum_detectable_effect, strict=True)
        )
        return (
            f"PowerAnalysis(strengths={np.array2string(self.strengths, precision=3)}, "
            f"n_sims={self.n_sims}, alpha={self.alpha}, minimum_detectable_effect=({mde}))"
        )

    def summary(self):
        """One sentence per geometry: the rates and the minimum detectable effect."""
        lines = []
        for i, g in enumerate(self.geometries):
            rates = ", ".join(
                f"{100 * s:.3g}%: {d}/{self.n_sims}"
                for s, d in zip(self.strengths, self.detections[i], strict=True)
            )
            lines.append(f"{g}: detected at alpha = {self.alpha} in {rates}")
        mde = mde_text(self).removeprefix("; the minimum detectable effect here is ")
        return "; ".join(lines) + f". The minimum detectable effect on this recording is {mde}."


def _placed(rng, basis, place):
    """A unit vector inside span(basis), in its complement, or anywhere."""
    n = basis.shape[0]
    space = {"in": basis, "out": linalg.null_space(basis.T) if basis.size else np.eye(n)}.get(
        place, np.eye(n)
    )
    v = space @ rng.standard_normal(space.shape[1])
    return v / np.linalg.norm(v)


def plant_channel(X, Y, Z, strength, source_pattern, target_pattern, modulator_pattern):
    """The target with one channel added that carries ``strength`` of its variance.

    Adds ``scale * (z . c)(x . a) b`` (``x``, ``z`` centred, each modulator
    column in standard units) with ``scale`` solved so that the term's
    variance is ``strength`` of the new target's variance, pooled over
    neurons (its covariance with the recorded target included).

    Parameters
    ----------
    X : ndarray of shape (n_samples, n_source)
    Y : ndarray of shape (n_samples, n_target)
    Z : ndarray of shape (n_samples, n_modulators)
    strength : float
        In ``[0, 1)``.
    source_pattern : ndarray of shape (n_source,)
    target_pattern : ndarray of shape (n_target,)
    modulator_pattern : ndarray of shape (n_modulators,)

    Returns
    -------
    Y_new : ndarray of shape (n_samples, n_target)
    """
    strength = float(strength)
    if not 0 <= strength < 1:
        raise ValueError(f"strength must be a fraction in [0, 1), got {strength!r}.")
    if strength == 0:
        return Y.copy()
    x = X - X.mean(axis=0)
    sd = Z.std(axis=0)
    z = (Z - Z.mean(axis=0)) / np.where(sd > 0, sd, 1.0)
    G = np.outer((z @ modulator_pattern) * (x @ source_pattern), target_pattern)
    G -= G.mean(axis=0)
    Yc = Y - Y.mean(axis=0)
    g, y, c = np.sum(G * G), np.sum(Yc * Yc), np.sum(Yc * G)
    if g == 0:
        raise ValueError(
            "the planted channel is zero on these data (constant source or modulator)."
        )
    # s^2 g = f (y + 2 s c + s^2 g): the positive root.
    a, b, f = g * (1 - strength), 2 * strength * c, strength * y
    scale = (b + np.sqrt(b * b + 4 * a * f)) / (2 * a)
    return Y + scale * G


def power_analysis(
    estimator,
    X,
    Y,
    Z,
    *,
    groups=None,
    conditions=None,
    strengths=(0.0, 0.01, 0.02, 0.05, 0.1),
    geometry="random",
    n_sims=50,
    n_permutations=99,
    min_shift=None,
    null=None,
    stop_after=None,
    alpha=0.05,
    target_power=0.8,
    confidence=0.95,
    n_jobs=None,
    verbose=1,
    random_state=None,
    condition_on=("source", "drift"),
    drift_df=5,
    additive="nonlinear",
):
    """Detection rates of :func:`mics.test_modulation` for channels planted in this recording.

    For each geometry and strength, ``n_sims`` times: draw a null copy of
    the recording as the test's null does (the target's additive dependence
    on the modulator regressed out, then the modulator's trials permuted
    within conditions, or the modulator shifted circularly by at least
    ``min_shift``; with ``condition_on``, as in the test, only the part of
    the modulator that the session drift and the source do not predict is
    permuted, so a copy's modulator still depends on the source as the
    recorded one does and the copies are as hard as the recording), draw
    random patterns of that geometry relative to the
    recording's baseline subspaces (a source pattern ``a``, a target pattern
    ``b``, a modulator pattern ``c``), add the channel ``(z . c)(x . a) b``
    to the copy's target with :func:`plant_channel` (the source, modulator,
    noise and trials are the recording's own), run the same test, and count
    ``p <= alpha``. Any gating the recording holds is broken in the copies,
    so the rate at strength 0 is the test's level (``alpha`` up to the
    Monte-Carlo error), also on a recording with gating, and the minimum
    detectable effect is that of a recording without it.

    Parameters
    ----------
    estimator : MICs
        As passed to :func:`mics.test_modulation`.
    X : array-like of shape (n_samples, n_source)
    Y : array-like of shape (n_samples, n_target)
    Z : array-like of shape (n_samples, n_modulators) or (n_samples,)
    groups, conditions, n_permutations, min_shift, null, stop_after, n_jobs
    condition_on, drift_df, additive
        The test's settings (see :func:`mics.test_modulation`); use those of
        the real analysis. ``stop_after`` (the sequential test) keeps the
        small p-values of the full test and saves most null fits of the
        data sets that are not detected.
    strengths : sequence of float
        Planted strengths, fractions of the target variance in ``[0, 1)``:
        the units of :attr:`ModulationTest.effect_size`.
    geometry : str or sequence of str
        ``"reshape"``, ``"private_source"``, ``"private_target"``, ``"new"``
        or ``"random"`` (patterns unconstrained), relative to the baseline
        subspaces of the estimator's fit without channels.
    n_sims : int
        Planted data sets per strength and geometry.
    alpha : float
        Level of the test.
    target_power : float
        Power at which the minimum detectable effect is read.
    confidence : float
        Level of the rates' Clopper-Pearson intervals.
    verbose : int
        A progress bar over the simulations (the tests themselves are quiet).
    random_state : int or RandomState

    Returns
    -------
    PowerAnalysis
        Plot it with :func:`mics.plotting.plot_power`.
    """
    # The planted data sets are variants of one recording: check its quality
    # (and warn) once, not once per planted copy.
    with quality_scope():
        return _power_analysis(
            estimator, X, Y, Z, groups=groups, conditions=conditions, strengths=strengths,
            geometry=geometry, n_sims=n_sims, n_permutations=n_permutations,
            min_shift=min_shift, null=null, stop_after=stop_after, alpha=alpha,
            target_power=target_power, confidence=confidence, n_jobs=n_jobs, verbose=verbose,
            random_state=random_state, condition_on=condition_on, drift_df=drift_df,
            additive=additive,
        )  # fmt: skip


def _power_analysis(
    estimator, X, Y, Z, *, groups, conditions, strengths, geometry, n_sims, n_permutations,
    min_shift, null, stop_after, alpha, target_power, confidence, n_jobs, verbose,
    random_state, condition_on, drift_df, additive,
):  # fmt: skip
    """The body of :func:`power_analysis` (inside its quality scope)."""
    rng = check_random_state(random_state)
    n_sims = check_count(n_sims, "n_sims", 1)
    check_fraction(alpha, "alpha")
    check_fraction(target_power, "target_power")
    check_fraction(confidence, "confidence")
    geometries = [geometry] if isinstance(geometry, str) else list(geometry)
    for g in geometries:
        if g not in GEOMETRIES:
            raise ValueError(f"unknown geometry {g!r}; choose from {list(GEOMETRIES)}.")
    strengths = _checked_strengths(strengths)
    if Z is None:
        raise ValueError("power_analysis needs a modulator Z.")
    if isinstance(conditions, str):
        conditions = named_coordinate(conditions, X, Y, Z)
    problem = make_problem(X, Y, Z, groups=groups).unlabelled()
    if not problem.in_memory:
        raise ValueError("power_analysis plants channels in memory: load the data first.")
    X, Z = (np.asarray(a, dtype=float) for a in (problem.X, problem.Z))
    codes = problem.groups
    n = X.shape[0]
    kind = check_null(null, codes)
    if kind == "circular":
        shift_min = check_min_shift(min_shift, n)  # the test's own default and bounds
    # The copies the channels are planted into: the test's residual target
    # (its additive dependence on Z removed, as the test removes it before
    # permuting), with the modulator then permuted or shifted per simulation.
    residualized = problem.residualized(nonlinear=check_additive(additive) == "nonlinear")
    residual = np.asarray(residualized.Y, dtype=float)
    condition_on = check_condition_on(condition_on)
    if condition_on:
        # The copies' modulators: the recording's predictable part kept, the
        # rest permuted or shifted, as the test's own null draws them.
        params = gain_params(estimator)
        residualized, _ = residualized.conditioned(
            residualized.splits(params["cv"], params["gap"]),
            source="source" in condition_on,
            drift_df=check_count(drift_df, "drift_df", 1) if "drift" in condition_on else 1,
        )
    # The geometries are defined by the recording's own baseline subspaces.
    base = fit_problem(gain_params(estimator, n_channels=0), problem)
    rank = int(base.rank)
    U, _, V = orthonormal_svd(np.asarray(base.fit.coef), rank)
    _check_geometries(geometries, rank, X.shape[1], np.shape(Y)[1])
    settings = dict(
        n_permutations=n_permutations,
        min_shift=min_shift,
        null=null,
        stop_after=stop_after,
        conditions=conditions,
        condition_on=condition_on,
        drift_df=drift_df,
        additive=additive,
    )
    shape = (len(geometries), strengths.size, n_sims)
    seeds = rng.randint(np.iinfo(np.int32).max, size=shape)
    copies = _NullCopies(residualized, residual, kind, shift_min if kind == "circular" else 0,
                         conditions)  # fmt: skip
    p_values = _planted_p_values(
        estimator, copies, (U, V), geometries, strengths, seeds, settings, n_jobs, verbose
    )
    detections = np.sum(p_values <= alpha, axis=2)
    low, high = clopper_pearson(detections, n_sims, confidence)
    rates = detections / n_sims
    mde = np.array([_crossing(strengths, r, target_power) for r in rates])
    return PowerAnalysis(
        strengths,
        geometries,
        n_sims,
        p_values,
        detections,
        rates,
        np.stack([low, high], axis=-1),
        mde,
        alpha=float(alpha),
        target_power=float(target_power),
        confidence=float(confidence),
        rank=rank,
        settings={k: v for k, v in settings.items() if k != "conditions"},
    )


@dataclass(frozen=True)
class _NullCopies:
    """How a power analysis draws its null copies of the recording (as the test's null)."""

    problem: object  # residualised (and conditioned) recording
    residual: np.ndarray  # its target, into which channels are planted
    kind: str  # "circular" or "trial"
    shift_min: int
    conditions: object

    def draw(self, rng):
        """One copy's modulator (the recording's predictable part kept)."""
        n = self.problem.n_samples
        if self.kind == "circular":
            copy = self.problem.rolled(rng.randint(self.shift_min, n - self.shift_min + 1))
        else:
            index = trial_permutation_indices(self.problem.groups, rng, self.conditions)
            copy = self.problem.permuted(index)
        return np.asarray(copy.Z, dtype=float)


def _planted_p_values(estimator, copies, subspaces, geometries, strengths, seeds, settings,
                      n_jobs, verbose):  # fmt: skip
    """The test's p-value on every planted copy: (geometries, strengths, simulations)."""
    U, V = subspaces
    X = np.asarray(copies.problem.X, dtype=float)
    m = copies.problem.Z.shape[1]
    p_values = np.empty(seeds.shape)
    bar = tqdm(total=int(seeds.size), desc="power simulations", disable=not verbose)
    for i, g in enumerate(geometries):
        a_place, b_place = GEOMETRIES[g]
        for j, s in enumerate(strengths):
            for k in range(seeds.shape[2]):
                draw = np.random.RandomState(seeds[i, j, k])
                z = copies.draw(draw)
                a = _placed(draw, U, a_place)
                b = _placed(draw, V, b_place)
                c = _placed(draw, np.zeros((m, 0)), "free")
                res = test_modulation(
                    estimator,
                    X,
                    plant_channel(X, copies.residual, z, s, a, b, c),
                    z,
                    groups=copies.problem.groups,
                    n_boot=0,
                    n_jobs=n_jobs,
                    verbose=0,
                    random_state=draw,
                    **settings,
                )
                p_values[i, j, k] = res.p_value
                bar.update()
    bar.close()
    return p_values


def _checked_strengths(strengths):
    """Planted strengths, sorted: finite fractions in [0, 1)."""
    strengths = np.sort(np.asarray(strengths, dtype=float).ravel())
    if strengths.size == 0 or np.any(~np.isfinite(strengths)):
        raise ValueError("strengths must be a non-empty sequence of finite fractions.")
    if strengths[0] < 0 or strengths[-1] >= 1:
        raise ValueError(f"strengths must lie in [0, 1), got {strengths.tolist()}.")
    return strengths


def _check_geometries(geometries, rank, p, q):
    """Refuse geometries the recording's baseline subspaces cannot hold."""
    for g in geometries:
        a_place, b_place = GEOMETRIES[g]
        for place, size, name in ((a_place, p, "source"), (b_place, q, "target")):
            if place == "in" and rank == 0:
                raise ValueError(
                    f"geometry {g!r} puts the {name} pattern in the baseline subspace, but the "
                    "recording's baseline has rank 0; use 'new' or 'random'."
                )
            if place == "out" and rank >= size:
                raise ValueError(
                    f"geometry {g!r} puts the {name} pattern outside the baseline subspace, "
                    f"which fills all {size} {name} dimensions; use 'reshape' or 'random'."
                )


def _crossing(strengths, rates, level):
    """First strength where the non-decreasing envelope of ``rates`` reaches ``level``.

    Linear interpolation between the tried strengths; NaN when none reaches it.
    Making the rates non-decreasing first keeps a dip from simulation noise
    above the level from moving the answer.
    """
    envelope = np.maximum.accumulate(np.asarray(rates, dtype=float))
    above = np.flatnonzero(envelope >= level)
    if above.size == 0:
        return np.nan
    i = above[0]
    if i == 0:
        return float(strengths[0])
    s0, s1, r0, r1 = strengths[i - 1], strengths[i], envelope[i - 1], envelope[i]
    return float(s0 + (level - r0) * (s1 - s0) / (r1 - r0))
