"""Which computation path fits a problem: estimated cost and memory of each.

The two paths fit the same model (``docs/model.md``):

* the *moment* path makes one pass over the data for the interaction
  moments (``d = (p + 1)(m + 1)``: ``T d^2`` work and ``d^2`` memory), after
  which every sweep costs ``O(p^2 m^2 K)``, independent of ``T``;
* the *data* path keeps only the centred data and the linear moments
  (``O(T (p + m + q) + (p + m + q)^2)`` memory) and pays
  ``O(T (p^2 + m^2) K^2)`` per sweep.

The moment path pays when ``m^2`` is small against ``T``: a behavioural
modulator (a few variables) with long recordings. A third population as
modulator (``m`` in the hundreds) makes its moments both huge and slow to
form, and the data path wins. The estimates below are flop and byte counts
of the dominant terms; they need only be right within a small factor.

The two paths' flops are not equally fast. The data path's are BLAS
products of tall data blocks; the moment path's per-sweep contractions
stream the whole ``(p m)^2`` scatter from memory for every block solve and
run several times slower a flop. ``studies/performance/solver_choice.py`` times both
paths on a grid of modulator sizes and checks that ``"auto"`` picks the
faster one (``results/solver_choice/``).
"""

from __future__ import annotations

import numbers
import os
import warnings

from mics.core.stats import moment_nbytes

__all__ = ["path_costs", "choose_solver", "choose_solver_for", "estimated_seconds", "warn_if_slow"]

# Typical sweeps of one fit (restarts' probes, modulation and joint stages),
# unless the estimator's max_iter caps them lower.
_SWEEPS_PER_FIT = 100
# Data-path (BLAS) flops that one flop of the moment path's per-sweep scatter
# contractions costs in time: the contractions read the (p m)^2 moments once
# per flop or two (memory-bound), while the data path's products reuse each
# value many times (BLAS-bound). Counting their flops alike, "auto" chose the
# moments at the studies' sizes where they are the slower path;
# studies/performance/solver_choice.py times both paths on a grid of m and
# checks the choice (results/solver_choice/).
_MOMENT_SWEEP_COST = 8.0


def path_costs(
    n_samples,
    p,
    q,
    m,
    *,
    n_channels=1,
    n_fits=1,
    n_folds=0,
    n_candidates=1,
    max_iter=None,
):
    """Estimated cost (in data-path flops) and peak bytes of the moment and data paths.

    Parameters
    ----------
    n_samples, p, q, m : int
        Samples ``T``, source, target and modulator sizes.
    n_channels : int
        Channels ``K`` of a typical fit.
    n_fits : int
        ALS fits to run (1 for a fixed-rank fit; folds x candidates for selection).
    n_folds : int
        Held-out blocks scored (0 without selection).
    n_candidates : int
        Candidate models scored per held-out block.
    max_iter : int, optional
        The estimator's sweep cap; fewer sweeps a fit make the moment pass
        harder to pay back.

    Returns
    -------
    dict
        ``{"moments": (cost, bytes), "data": (cost, bytes)}``; costs in flops
        of the data path's BLAS products (moment-path sweeps weighted by
        their measured slowness, ``_MOMENT_SWEEP_COST``).
    """
    T, K = n_samples, max(int(n_channels), 1)
    sweeps = _SWEEPS_PER_FIT if max_iter is None else min(_SWEEPS_PER_FIT, int(max_iter))
    d = (p + 1) * (m + 1)
    # moments: the pass (one syrk triangle of the joined Khatri-Rao Gram,
    # about T d^2 flops), per-sweep contractions of the (pm)^2 scatter, and
    # held-out scores as quadratic forms in the fold's d x d Gram.
    pass_flops = T * d * d * (m + 2) / (m + 1)
    sweep_moments = _MOMENT_SWEEP_COST * (3.0 * p * p * m * m * K + 6.0 * p * m * q * K)
    heldout_moments = 2.0 * d * d * (1 + min(p, q) + m + K)
    flops_moments = (
        pass_flops + n_fits * sweeps * sweep_moments + n_folds * n_candidates * heldout_moments
    )
    # the raw moments and, at the peak, two more copies of their size (the
    # standardised raw moments and the centred scatter, which the operator
    # shares since the centring writes its layout)
    bytes_moments = 2 * moment_nbytes(p, m, q) + 8 * (p * m) ** 2
    # data: weighted Grams (diagonal blocks by dsyrk) and the right-hand
    # sides each sweep, plus the interaction start Phi^T R (2 T p m q) per fit.
    sweep_data = T * (p * p + m * m) * K * K + 8.0 * T * (p + m + q) * K + 2.0 * T * q * (p + m)
    flops_data = n_fits * (sweeps * sweep_data + 2.0 * T * p * m * q)
    # centred copies of the data, residuals, K scaled copies, linear moments
    bytes_data = 8 * (T * (p + m + 2 * q + K * max(p, m)) + 2 * (p + m + q) ** 2 + p * m * q)
    return {"moments": (flops_moments, bytes_moments), "data": (flops_data, bytes_data)}


def choose_solver(n_samples, p, q, m, *, memory_limit, **kwargs):
    """``"moments"`` when its memory fits ``memory_limit`` and it costs less; else ``"data"``.

    Keyword arguments are passed to :func:`path_costs`.
    """
    costs = path_costs(n_samples, p, q, m, **kwargs)
    flops_m, bytes_m = costs["moments"]
    flops_d, _ = costs["data"]
    return "moments" if bytes_m <= memory_limit and flops_m <= flops_d else "data"


def choose_solver_for(params, n, p, m, q):
    """The solver :class:`mics.MICs` with ``params`` uses on ``n`` samples in memory.

    ``solver="auto"`` weighs the cost and memory of both paths over the fits
    the estimator will run (the selection's fold fits and the final fit).
    """
    if params["solver"] != "auto":
        return params["solver"]
    return choose_solver(n, p, q, m, memory_limit=params["memory_limit"], **_workload(params))


def _workload(params):
    """The fits and held-out scores an estimator with ``params`` runs (:func:`path_costs`)."""
    rank, n_channels, cv = params["rank"], params["n_channels"], params["cv"]
    selecting = rank is None or n_channels is None
    n_folds = (cv if isinstance(cv, numbers.Integral) else 10) if selecting else 0
    n_fits = 1 + (n_folds * params["max_channels"] if n_channels is None else n_folds)
    n_candidates = (params["max_rank"] + 1 if rank is None else 0) + (
        params["max_channels"] + 1 if n_channels is None else 1
    )
    return {
        "n_channels": n_channels or 1,
        "n_fits": n_fits,
        "n_folds": n_folds,
        "n_candidates": n_candidates,
        "max_iter": params["max_iter"],
    }


# Data-path (BLAS) flops a second that the warning below assumes. It is set
# above a 2-core machine's BLAS rate because path_costs counts every sweep up
# to its cap, while fits converge sooner: the estimate is then of the order
# of the measured fits at many neurons (benchmarks/README.md, "Many neurons").
_FLOPS_PER_SECOND = 8e10
# Estimated seconds above which a fit warns.
_SLOW_SECONDS = 120.0


def estimated_seconds(params, n, sizes, solver):
    """Rough wall time of a fit with ``params`` on ``n`` samples of the given ``(p, q, m)``.

    From :func:`path_costs` at an assumed ``_FLOPS_PER_SECOND``: good to a
    small factor, enough to tell a minute from an hour.
    """
    p, q, m = sizes
    work = _workload(params)
    costs = path_costs(n, p, q, m, **work)
    # The factor solves, the same on both paths (so path_costs leaves them
    # out): per sweep K Cholesky factorisations of d x d (channel by
    # channel) or one of K d x K d, for the source and the modulator.
    K = work["n_channels"]
    sweeps = min(_SWEEPS_PER_FIT, int(work["max_iter"]))
    solves = sum(K * d**3 / 3 if K * d > 256 else (K * d) ** 3 / 3 for d in (p, m))
    return (costs[solver][0] + work["n_fits"] * sweeps * solves) / _FLOPS_PER_SECOND


def warn_if_slow(params, n, sizes, fitted_sizes, solver):
    """Warn when the chosen path is estimated to take long, naming what would help.

    Parameters
    ----------
    params : dict
        The estimator's parameters.
    n : int
        Samples.
    sizes : tuple of int
        ``(p, q, m)`` of the data.
    fitted_sizes : tuple of int
        ``(p, q, m)`` of the coordinates fitted (smaller where a population
        has more neurons than samples, or principal components were asked).
    solver : str
    """
    seconds = estimated_seconds(params, n, fitted_sizes, solver)
    if seconds <= _SLOW_SECONDS:
        return
    helps = []
    names = ("source_components", "target_components", "modulator_components")
    for name, d in zip(names, fitted_sizes, strict=True):
        if d > 200 and params.get(name) is None:
            helps.append(f"{name}=k (k principal components, approximate)")
    if params["rank"] is None or params["n_channels"] is None:
        helps.append("fixed rank and n_channels (no selection), or a smaller cv or max_channels")
        # the fold fits run on one BLAS thread each, one fold after the other
        # unless n_jobs says otherwise, so a machine's other cores sit idle
        if params.get("n_jobs") in (None, 1) and (os.cpu_count() or 1) > 1:
            helps.append("n_jobs=-1 (the folds side by side, each job holding one fold's moments)")
    p, q, m = sizes
    warnings.warn(
        f"this fit (T={n}, p={p}, q={q}, m={m}, solver={solver!r}) is estimated to take "
        f"about {seconds / 60:.0f} min. What helps: " + "; ".join(helps) + ".",
        UserWarning,
        stacklevel=4,
    )
