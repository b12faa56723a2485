"""Core numerics on plain arrays: sufficient statistics, the ALS fit, reduced-rank regression.

The bottom layer of ``mics``. Everything here takes and returns NumPy arrays
(or the small dataclasses defined here) and imports only NumPy, SciPy,
numba and threadpoolctl: no labels, no Dask, no estimators.

- :mod:`mics.core.stats`: the one pass over the data -> sufficient statistics;
- :mod:`mics.core.als`: the MIC fit by alternating least squares, on moments
  (:class:`MomentOperator`) or on data (:class:`DataOperator`);
- :mod:`mics.core.rrr`: the reduced-rank regression path;
- :mod:`mics.core.sparse_rrr`: sparse reduced-rank regression (neurons selected
  by a group lasso, Kobak et al. 2021);
- :mod:`mics.core.heldout`: held-out losses and the one-SEM rule;
- :mod:`mics.core.scales`: the input scales that make every fit unit-free;
- :mod:`mics.core.grams`, :mod:`mics.core.linalg`, :mod:`mics.core.kernels`:
  weighted Grams, small linear algebra and the numba kernels.
"""

from mics.core.als import (
    DataOperator,
    MICFit,
    MomentOperator,
    canonical_channels,
    cp_tensor,
    fit_baseline_path,
    fit_mic_model,
    penalties,
)
from mics.core.heldout import (
    data_heldout_loss,
    heldout_loss,
    normalized_squared_error,
    one_sem_rule,
)
from mics.core.linalg import solve_psd
from mics.core.rrr import fit_reduced_rank, reduced_rank_path, ridge_lambda_grid
from mics.core.scales import InputScales, restore_fit
from mics.core.sparse_rrr import SparseRRRFit, fit_sparse_rrr, sparse_rrr_penalty
from mics.core.stats import (
    CenteredMoments,
    RawLinearMoments,
    RawMoments,
    compute_moments,
    linear_moments,
    moment_nbytes,
)

__all__ = [
    "CenteredMoments",
    "DataOperator",
    "InputScales",
    "MICFit",
    "MomentOperator",
    "RawLinearMoments",
    "RawMoments",
    "SparseRRRFit",
    "canonical_channels",
    "compute_moments",
    "cp_tensor",
    "data_heldout_loss",
    "fit_baseline_path",
    "fit_mic_model",
    "fit_reduced_rank",
    "fit_sparse_rrr",
    "heldout_loss",
    "linear_moments",
    "moment_nbytes",
    "normalized_squared_error",
    "one_sem_rule",
    "penalties",
    "reduced_rank_path",
    "restore_fit",
    "ridge_lambda_grid",
    "solve_psd",
    "sparse_rrr_penalty",
]
