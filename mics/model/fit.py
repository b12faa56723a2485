"""Fitting one configuration: parameter checks, the fit of a problem, the fit from moments.

The estimators (:class:`mics.MICs`) are thin classes over these functions;
the workflows (:mod:`mics.workflows`) call them too, so a test, a bootstrap
or a fit from pooled moments uses exactly the estimator's model.
"""

from __future__ import annotations

import numbers
import warnings
from dataclasses import dataclass, replace
from types import SimpleNamespace

import numpy as np
from sklearn.utils import check_random_state

from mics.core.als import (
    DataOperator,
    MICFit,
    MomentOperator,
    check_joint,
    fit_mic_model,
    penalties,
)
from mics.core.linalg import single_blas_thread
from mics.core.scales import InputScales, restore_fit
from mics.core.sparse import sparse_settings
from mics.core.stats import (
    CenteredMoments,
    RawLinearMoments,
    RawMoments,
    check_interaction,
    compute_moments,
    moment_nbytes,
)
from mics.data.validation import (
    check_alpha,
    check_count,
    check_folds,
    check_rank,
    check_sparsity,
)
from mics.model.penalty_path import chooses_penalties, select_with_penalties
from mics.model.reduction import (
    Reduction,
    check_components,
    plan_reduction,
    planned_sizes,
    reduce_inputs,
)
from mics.model.settings import FitSettings
from mics.model.solver import choose_solver_for, warn_if_slow
from mics.model.sparsity_path import chooses_sparsity

__all__ = ["FitOutcome", "check_params", "fit_from_moments", "fit_problem"]


def check_params(params, p, q, m):
    """Refuse settings of :class:`mics.MICs` that cannot fit ``p`` sources, ``q`` targets, ``m``
    modulators.

    Parameters
    ----------
    params : dict
        The estimator's parameters (``get_params()``). Without the selection
        settings (``max_rank``, ``cv``, ``solver``, ...) only the fit's own
        are checked (as for :func:`fit_from_moments`).
    p, q, m : int
    """
    selecting = "cv" in params
    params = SimpleNamespace(**params)
    if params.rank is not None:
        check_rank(params.rank, p, q)
    if params.n_channels is not None:
        K = params.n_channels
        if not isinstance(K, numbers.Integral) or isinstance(K, bool) or K < 0:
            raise ValueError(f"n_channels must be a non-negative integer, got {K!r}.")
        limit = min(p * q, p * m, q * m)
        if limit < K:
            raise ValueError(
                f"n_channels={K} cannot be identified: a (source x target x modulator) "
                f"= ({p} x {q} x {m}) tensor has CP rank at most "
                f"min(p*q, p*m, q*m) = {limit}."
            )
        if m == 1 and K > 1:
            warnings.warn(
                f"With a single modulator, {K} channels share one gate: they span a "
                "subspace but individual channels are defined only up to rotation.",
                UserWarning,
                stacklevel=4,
            )
    check_count(params.n_init, "n_init", 0)
    check_count(params.max_iter, "max_iter", 1)
    tol = params.tol
    if not isinstance(tol, numbers.Real) or isinstance(tol, bool) or not 0 <= tol < np.inf:
        raise ValueError(f"tol must be a non-negative finite number, got {tol!r}.")
    check_joint(getattr(params, "joint", "auto"))  # before any pass over the data
    # "cv" or candidates (a grid only where folds choose it: mics.model.sparsity_path)
    check_sparsity(
        getattr(params, "sparsity", 0.0), getattr(params, "sparse_on", "all"), choose=selecting
    )
    if not selecting:
        return
    check_count(params.max_rank, "max_rank", 0)
    check_count(params.max_channels, "max_channels", 0)
    check_count(params.gap, "gap", 0)
    check_folds(params.cv)
    limit = params.memory_limit
    if not isinstance(limit, numbers.Real) or isinstance(limit, bool) or not limit > 0:
        raise ValueError(f"memory_limit must be a positive number of bytes, got {limit!r}.")
    if params.channel_search not in ("sequential", "grid"):
        raise ValueError(
            f"channel_search must be 'sequential' or 'grid', got {params.channel_search!r}."
        )
    if params.solver not in ("auto", "moments", "data"):
        raise ValueError(f"solver must be 'auto', 'moments' or 'data', got {params.solver!r}.")


def fit_from_moments(
    raw,
    rank,
    n_channels,
    *,
    alpha=0.05,
    alpha_channels=0.125,
    n_init=3,
    max_iter=200,
    tol=1e-7,
    random_state=None,
):
    """Fit the MIC model from moments alone (no data needed).

    Uses the same relative penalties, random seeding and stages as
    :class:`mics.MICs` with a fixed ``rank`` and ``n_channels`` and the
    moment solver, so ``fit_from_moments(compute_moments(X, Y, Z), r, K,
    random_state=s)`` gives the fit of ``MICs(r, K, random_state=s).fit(X, Y, Z)``.

    Parameters
    ----------
    raw : RawMoments or CenteredMoments
        With the interaction moments (``interaction=True``).
    rank : int
        Baseline rank ``r``.
    n_channels : int
        Number of channels ``K``.
    alpha, alpha_channels : float
        Relative ridge penalties (see :class:`mics.MICs`).
    n_init, max_iter, tol
        As in :class:`mics.MICs`.
    random_state : int, RandomState or None
        Seeds the random restarts exactly as ``MICs`` does.

    Returns
    -------
    MICFit
        Baseline ``coef`` (p, q), ``modulator_coef`` (m, q) and the channels
        in canonical form (for a full estimator, with intercept, predict and
        selection, use :meth:`mics.MICs.fit_moments`). The intercept is
        ``y_mean - x_mean @ coef - z_mean @ modulator_coef
        - target_patterns @ w_mean`` with ``w_mean_k = weights_k *
        a_k^T phi_mean c_k`` (means from ``raw.centered()``).
    """
    check_alpha(alpha)
    if alpha_channels is not None:
        check_alpha(alpha_channels, "alpha_channels")
    if isinstance(raw, (RawMoments, RawLinearMoments)):
        check_interaction(raw)  # refuses linear-only moments too
        cm = raw.centered()
    elif isinstance(raw, CenteredMoments):
        cm = raw
        if cm.M is None:
            raise ValueError("these moments hold no interaction terms (M is None).")
    else:
        raise TypeError(f"raw must be RawMoments or CenteredMoments, got {type(raw).__name__}.")
    p, q, m = cm.Sxx.shape[0], cm.Syy.shape[0], cm.Szz.shape[0]
    params = {"rank": rank, "n_channels": n_channels, "n_init": n_init}
    check_params({**params, "max_iter": max_iter, "tol": tol}, p, q, m)
    # Standard units and back, as MICs fits (see mics.core.scales).
    scales = InputScales.from_moments(cm)
    op = MomentOperator(scales.standardize_moments(cm))
    # MICs draws the fit's seed from its random_state the same way.
    seed = check_random_state(random_state).randint(np.iinfo(np.int32).max)
    fit = fit_mic_model(
        op,
        int(rank),
        int(n_channels),
        **penalties(op, alpha, alpha_channels),
        n_init=n_init,
        max_iter=max_iter,
        tol=tol,
        random_state=seed,
    )
    return restore_fit(fit, scales)


@dataclass
class FitOutcome:
    """What :func:`fit_problem` found: the selected sizes, their CV table and the fit.

    Attributes
    ----------
    rank, n_channels : int
    cv_results : dict or None
        The selection's fold losses (see :class:`mics.MICs`), when it ran.
    solver : str
        "moments" or "data".
    fit : MICFit or None
        The fit on all samples in the user's units; None when ``cv_only``.
    moments : CenteredMoments or None
        Linear moments of all samples in the user's units (means, scatters).
    scales : InputScales or None
    reduction : Reduction or None
        The coordinates the populations were fitted in, when some were
        reduced (:mod:`mics.model.reduction`); the fit is mapped back.
    """

    rank: int
    n_channels: int
    cv_results: dict | None
    solver: str
    fit: MICFit | None = None
    moments: CenteredMoments | None = None
    scales: InputScales | None = None
    reduction: Reduction | None = None


def fit_problem(params, problem, *, cv_only=False):
    """Select (where ``rank`` or ``n_channels`` is None) and fit the MIC model to a problem.

    The functional core of :meth:`mics.MICs.fit`. Every fit is done in
    standard units (:class:`mics.core.InputScales`), so penalties, and
    hence every selection, pattern and p-value, do not depend on the units
    of X, Y or Z; the result is mapped back.

    Parameters
    ----------
    params : dict
        The estimator's parameters (``MICs().get_params()``).
    problem : mics.data.Problem
        With a modulator.
    cv_only : bool
        Stop after the selection (a null statistic of the modulation test
        needs the CV table only). The selection's random draws are all made
        before, so the selection itself is unchanged.

    Returns
    -------
    FitOutcome
    """
    n, p, q, m = problem.shape
    check_params(params, p, q, m)
    check_components(params)
    rng = check_random_state(params["random_state"])
    # Penalties (and sparsity) chosen by CV need the folds even when the sizes are fixed.
    fixed = params["rank"] is not None and params["n_channels"] is not None
    fixed = fixed and not chooses_penalties(params)
    coordinates = _coordinates(params, problem)
    splits = None if fixed else problem.splits(params["cv"], params["gap"])
    if not problem.in_memory or (
        fixed and coordinates.solver == "moments" and coordinates.plan is None
    ):
        standard = _standard_from_raw_moments(problem, splits)
    else:
        standard = _standard_from_data(params, problem, coordinates, splits, fixed)
    settings = FitSettings.from_params(
        params, solver_=coordinates.solver, embedding_=standard.reduction
    )
    if standard.folds is None:
        rank, n_channels, cv_results = int(params["rank"]), int(params["n_channels"]), None
    else:
        chosen = select_with_penalties(
            settings, standard.total, standard.folds, rng, standard.data, channels=not cv_only
        )
        rank, n_channels, cv_results = chosen.rank, chosen.n_channels, chosen.cv_results
        if cv_only:
            return FitOutcome(rank, n_channels, cv_results, settings.solver_)
        settings = replace(
            settings,
            alpha=chosen.alpha,
            alpha_channels=chosen.alpha_channels,
            sparsity=chosen.sparsity,
        )
    result, cm = _fit_all_samples(settings, standard, rank, n_channels, rng)
    _warn_empty_channels(result, settings.sparsity, n_channels)
    if standard.reduction is not None:  # patterns over neurons again
        result = standard.reduction.restore_fit(result)
        cm = standard.reduction.restore_moments(cm)
    cm = standard.scales.restore_moments(cm, interaction=False)
    with single_blas_thread():  # small SVDs, see fit_mic_model
        result = restore_fit(result, standard.scales)
    return FitOutcome(
        rank,
        n_channels,
        cv_results,
        settings.solver_,
        result,
        cm,
        standard.scales,
        standard.reduction,
    )


@dataclass(frozen=True)
class _Coordinates:
    """Where a problem is fitted: the reduction planned, the sizes it leaves, the solver.

    ``plan`` is None when every population is fitted on its neurons (or the
    data are not in memory); ``sizes`` are the ``(p, q, m)`` the fits then
    run in.
    """

    plan: dict | None
    sizes: tuple
    solver: str


def _coordinates(params, problem):
    """The coordinates and the solver of a problem's fits.

    Populations larger than the number of samples (or asked to principal
    components) are fitted in fewer coordinates (:mod:`mics.model.reduction`).
    The group lasso on neurons is not invariant to a change of basis, so a
    sparse fit keeps its neurons. Data not in memory are fitted from their
    moments.
    """
    n, p, q, m = problem.shape
    if not problem.in_memory:
        return _Coordinates(None, (p, q, m), check_moment_solver(params, p, q, m))
    plan = None
    if not (chooses_sparsity(params) or params.get("sparsity", 0.0)):
        plan = plan_reduction(params, n, p, q, m)
    p_, q_, m_ = planned_sizes(plan, params, n, p, q, m)
    solver = choose_solver_for(params, n, p_, m_, q_)
    warn_if_slow(params, n, (p, q, m), (p_, q_, m_), solver)
    return _Coordinates(plan, (p_, q_, m_), solver)


@dataclass(frozen=True)
class _StandardProblem:
    """A problem in standard units, as the selection and the final fit read it.

    Attributes
    ----------
    scales : InputScales
    total : RawMoments or RawLinearMoments
        The standardised moments of all samples.
    folds : list or None
        The folds' ``(train, test, test_moments, excluded_moments)``, None
        when nothing is chosen on folds.
    data : tuple of ndarray or None
        The standardised (and reduced) ``(X, Y, Z)``, when the data path or
        its selection needs them.
    reduction : Reduction or None
        The coordinates of ``data`` when some populations were reduced.
    """

    scales: InputScales
    total: object
    folds: list | None
    data: tuple | None = None
    reduction: Reduction | None = None


def _standard_from_raw_moments(problem, splits):
    """The problem in standard units from its raw moments alone.

    The scales and the standardised moments follow from the raw moments
    exactly, with no variance pass and no standardised copies of the data
    (a pass over the rows and a copy of every array saved).
    """
    total, folds = problem.fold_moments(splits)
    scales = InputScales.from_raw_moments(total)
    standard = scales.standardize_raw_moments
    total = standard(total)
    if folds is not None:
        # a fold without a gap excludes exactly its held-out block: scale it once
        folds = [
            (tr, te, st := standard(t), st if e is t else standard(e)) for tr, te, t, e in folds
        ]
    return _StandardProblem(scales, total, folds)


def _standard_from_data(params, problem, coordinates, splits, fixed):
    """The problem in standard units from its standardised (and reduced) data."""
    scales = InputScales.from_data(problem.X, problem.Y, problem.Z)
    data = scales.standardize(problem.X, problem.Y, problem.Z)
    reduction = None
    if coordinates.plan is not None:
        # after the standardisation: the scales are the full data's. The
        # fold fits are built in the same coordinates (one basis of all rows
        # serves every fold: see mics.model.reduction).
        reduction, data = reduce_inputs(coordinates.plan, params, *data)
    moments = coordinates.solver == "moments"
    if fixed:  # the data path's linear moments (all of them when reduced on moments)
        return _StandardProblem(
            scales, compute_moments(*data, interaction=moments), None, data, reduction
        )
    standardised = replace(problem, X=data[0], Y=data[1], Z=data[2])
    # Held together, the folds' interaction moments multiply their memory by
    # cv (11 copies of 512 MB at p = 2000, m = 3): past the moment budget
    # (memory_limit) each fold's are computed when its fits need them
    # instead, the same values, one fold at a time, for about one more pass
    # over the data per stage.
    p_, q_, m_ = coordinates.sizes
    nbytes = len(splits) * moment_nbytes(p_, m_, q_)
    keep = not moments or nbytes <= params["memory_limit"]
    total, folds = standardised.fold_moments(splits, interaction=moments, keep=keep)
    return _StandardProblem(scales, total, folds, data, reduction)


def _fit_all_samples(settings, standard, rank, n_channels, rng):
    """The fit of the chosen sizes and penalties on every sample (standard units).

    Returns
    -------
    fit : MICFit
        In the fitted coordinates and standard units.
    cm : CenteredMoments
        The centred moments of every sample it was fitted to.
    """
    cm = standard.total.centered()
    embedding = standard.reduction
    if settings.solver_ == "moments":
        op = MomentOperator(cm, embedding=embedding)
    else:
        op = DataOperator(cm, *standard.data, embedding=embedding)
    fit = fit_mic_model(
        op,
        rank,
        n_channels,
        **penalties(op, settings.alpha, settings.alpha_channels, **sparse_settings(settings)),
        n_init=settings.n_init,
        max_iter=settings.max_iter,
        tol=settings.tol,
        joint=settings.joint,
        random_state=rng.randint(np.iinfo(np.int32).max),
    )
    return fit, cm


def _warn_empty_channels(fit, sparsity, n_channels):
    """Warn where a group penalty zeroed every neuron of a channel.

    A penalty too large for the signal zeroes a channel: a stationary point,
    not a finding of "no members".
    """
    if not (sparsity and n_channels):
        return
    empty = int(np.sum(np.asarray(fit.weights) == 0))
    if empty:
        warnings.warn(
            f"sparsity={sparsity:g} set every neuron of {empty} of {n_channels} "
            "channel(s) to zero: the penalty is larger than the signal there. Lower "
            "sparsity (sparsity='cv' chooses it on the folds) or "
            "fit fewer channels.",
            UserWarning,
            stacklevel=4,
        )


def check_moment_solver(params, p, q, m):
    """The solver of data that are not in memory: the moments, if they fit in ``memory_limit``."""
    solver, limit = params.get("solver", "auto"), params.get("memory_limit", np.inf)
    if solver == "data":
        raise ValueError(
            "solver='data' needs the data in memory; chunked (Dask) inputs are fitted "
            "from their moments (solver='moments' or 'auto')."
        )
    need = moment_nbytes(p, m, q)
    if solver == "auto" and need > limit:
        raise ValueError(
            f"the interaction moments of p={p}, m={m} take {need / 1e9:.1f} GB, more than "
            f"memory_limit={limit:.3g} bytes, and chunked inputs are fitted "
            "from moments only: raise memory_limit, or load the data (solver='data')."
        )
    return "moments"
