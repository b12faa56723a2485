"""Input checks shared by the estimators and functions.

Every public entry point funnels its arrays through here so that users get
the same clear message for the same mistake, wherever they make it.
"""

from __future__ import annotations

import numbers

import numpy as np
from sklearn.utils.validation import check_array

__all__ = [
    "check_alpha",
    "check_population",
    "check_same_length",
    "check_rank",
    "check_modulator",
    "check_count",
    "check_fraction",
    "check_folds",
]


def check_folds(cv, name="cv"):
    """Folds as an int (>= 2), a splitter or an iterable of splits.

    The fold count against the number of samples is checked where the folds
    are made (:func:`mics.model.selection.resolve_cv`).
    """
    if cv is None or hasattr(cv, "split") or hasattr(cv, "__iter__"):
        return cv
    return check_count(cv, name, 2)


def check_count(value, name, minimum=1, maximum=None):
    """An integer count in ``[minimum, maximum]``; the error names the argument.

    Parameters
    ----------
    value : object
        What the user passed.
    name : str
        The argument's name, as the user wrote it (``"n_boot"``).
    minimum : int
    maximum : int, optional

    Returns
    -------
    int
    """
    ok = isinstance(value, numbers.Integral) and not isinstance(value, bool)
    if ok and value >= minimum and (maximum is None or value <= maximum):
        return int(value)
    what = {0: "a non-negative integer", 1: "a positive integer"}.get(
        minimum, f"an integer >= {minimum}"
    )
    if maximum is not None:
        what = f"an integer in [{minimum}, {maximum}]"
    raise ValueError(f"{name} must be {what}, got {value!r}.")


def check_fraction(value, name):
    """A number strictly between 0 and 1 (a confidence level)."""
    if isinstance(value, numbers.Real) and not isinstance(value, bool) and 0 < value < 1:
        return float(value)
    raise ValueError(f"{name} must be a number strictly between 0 and 1, got {value!r}.")


def check_population(A, name, *, allow_1d=False, ensure_min_samples=2):
    """Validate one population's activity matrix.

    Parameters
    ----------
    A : array-like of shape (n_samples, n_neurons), or (n_samples,) if `allow_1d`
        Activity; a 1-D array is read as a single neuron.
    name : str
        Used in error messages ("source X", "target Y", "modulator Z").
    allow_1d : bool
        Accept a 1-D array as one neuron (targets and modulators); sources
        must be 2-D, as scikit-learn requires of ``X``.

    Returns
    -------
    A : ndarray of shape (n_samples, n_neurons), float64
    was_1d : bool
        Whether the input was one-dimensional (predictions are returned in
        the same form).
    """
    shape = getattr(A, "shape", None)
    if shape is None:
        A = np.asarray(A)
        shape = A.shape
    was_1d = allow_1d and len(shape) == 1
    try:
        out = check_array(
            np.reshape(A, (-1, 1)) if was_1d else A,
            dtype=np.float64,
            ensure_2d=True,
            ensure_min_samples=ensure_min_samples,
            ensure_all_finite=True,
            input_name=name,
        )
    except ValueError as err:
        msg = str(err)
        if "NaN" in msg or "infinity" in msg:
            raise ValueError(
                f"{name} contains NaN or infinite values; remove or interpolate those "
                "samples first (mics.preprocessing handles blinks and dropped frames)."
            ) from err
        raise ValueError(f"{name}: {msg}") from err
    return out, was_1d


def check_same_length(**arrays):
    """Raise a readable error when populations disagree on the number of samples."""
    lengths = {name: a.shape[0] for name, a in arrays.items() if a is not None}
    if len(set(lengths.values())) > 1:
        desc = ", ".join(f"{name} has {n}" for name, n in lengths.items())
        raise ValueError(f"All inputs must share the time axis (same number of samples): {desc}.")


def check_rank(rank, n_source, n_target, name="rank"):
    """Validate a baseline rank against min(p, q)."""
    if not isinstance(rank, numbers.Integral) or isinstance(rank, bool) or rank < 0:
        raise ValueError(f"{name} must be a non-negative integer, got {rank!r}.")
    if rank > min(n_source, n_target):
        raise ValueError(
            f"{name}={rank} exceeds min(n_source, n_target) = min({n_source}, {n_target}); "
            "a communication subspace cannot have more dimensions than either population."
        )
    return int(rank)


def check_modulator(Z, n_samples):
    """Validate the modulator and refuse constant columns (nothing to gate)."""
    Z, _ = check_population(Z, "modulator Z", allow_1d=True)
    check_same_length(**{"source X": np.empty((n_samples, 0)), "modulator Z": Z})
    std = Z.std(axis=0)
    scale = np.maximum(np.abs(Z).max(axis=0), 1.0)
    constant = np.flatnonzero(std <= 1e-12 * scale)
    if constant.size:
        raise ValueError(
            f"modulator Z column(s) {constant.tolist()} are constant: a constant modulator "
            "cannot gate anything. Drop those columns."
        )
    return Z


def check_alpha(alpha, name="alpha"):
    """A penalty: a non-negative finite number."""
    if not np.isscalar(alpha) or not np.isfinite(alpha) or alpha < 0:
        raise ValueError(f"{name} must be a non-negative finite number, got {alpha!r}.")
