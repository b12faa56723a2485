"""The settings one fit of :func:`mics.model.fit.fit_problem` runs with, as one frozen value.

:class:`mics.MICs` hands its parameters to ``fit_problem`` as a dict;
``fit_problem`` decides the solver and the coordinates and freezes the
lot here. The selection over folds (:mod:`mics.model.selection`) and the
penalty paths (:mod:`mics.model.penalty_path`,
:mod:`mics.model.sparsity_path`, :mod:`mics.model.warm_path`) read it and
never change it: a stage that fits at other penalties gets a copy
(:func:`dataclasses.replace`), and the choices made on the folds come back
as values (:class:`mics.model.penalty_path.Selection`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

__all__ = ["FitSettings"]


@dataclass(frozen=True)
class FitSettings:
    """The parameters of :class:`mics.MICs` plus what the fit decided from the problem.

    The first fields are the estimator's parameters, as documented there
    (``alpha``, ``alpha_channels`` and ``sparsity`` may still be "cv" or
    candidate sequences while the folds choose them).

    Attributes
    ----------
    solver_ : {"moments", "data"}
        The solver of every fit of the problem (:mod:`mics.model.solver`).
    embedding_ : Reduction or None
        The coordinates the populations are fitted in when some were reduced
        (:mod:`mics.model.reduction`): every operator of the problem is built
        with it, so its penalties and random draws are the full problem's.
    """

    rank: Any
    n_channels: Any
    alpha: Any
    alpha_channels: Any
    n_init: int
    max_iter: int
    tol: float
    joint: str
    cv: Any
    max_rank: int
    max_channels: int
    channel_search: str
    gap: int
    solver: str
    memory_limit: float
    n_jobs: Any
    verbose: Any
    random_state: Any
    sparsity: Any
    sparse_on: Any
    source_components: Any
    target_components: Any
    modulator_components: Any
    solver_: str = "moments"
    embedding_: Any = None

    @classmethod
    def from_params(cls, params, *, solver_, embedding_=None):
        """The settings of ``MICs(**params)`` fitted by ``solver_`` in ``embedding_``.

        Parameters
        ----------
        params : dict
            ``MICs().get_params(deep=False)``.
        solver_ : {"moments", "data"}
        embedding_ : Reduction, optional
        """
        return cls(**params, solver_=solver_, embedding_=embedding_)
