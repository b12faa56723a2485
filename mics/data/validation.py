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
    "check_not_constant",
    "check_same_length",
    "check_rank",
    "check_modulator",
    "check_count",
    "check_fraction",
    "check_folds",
    "check_sparsity",
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


def _shape_words(allow_1d):
    return "(n_samples, n_neurons) or (n_samples,)" if allow_1d else "(n_samples, n_neurons)"


def _as_array(A, name):
    """``A`` itself when it has a shape (arrays, frames, sparse), else ``np.asarray(A)``."""
    if getattr(A, "shape", None) is not None:
        return A
    if A is None:
        raise ValueError(f"{name} is None; pass an array of shape (n_samples, n_neurons).")
    try:
        return np.asarray(A)
    except (TypeError, ValueError) as err:  # ragged lists
        raise ValueError(f"{name} could not be read as an array: {err}") from err


def _check_form(A, name, allow_1d):
    """Refuse dimensions and dtypes that are not activity, naming the argument."""
    shape = tuple(A.shape)
    if len(shape) == 0:
        raise ValueError(
            f"{name} must be an array of shape {_shape_words(allow_1d)}, got a scalar. "
            "Reshape your data."
        )
    if len(shape) == 1 and not allow_1d:
        raise ValueError(
            f"{name} must be 2-D, of shape (n_samples, n_neurons); got a 1-D array of "
            f"shape {shape}. Reshape your data: {name.split()[-1]}.reshape(-1, 1) if it "
            "is one neuron."
        )
    if len(shape) > 2:
        raise ValueError(
            f"{name} must be {'1-D or ' if allow_1d else ''}2-D, of shape "
            f"{_shape_words(allow_1d)}; got {len(shape)} dimensions, shape {shape}. "
            "Reshape your data (time first), e.g. stack trials along time."
        )
    kind = getattr(getattr(A, "dtype", None), "kind", None)
    if kind in ("U", "S"):
        raise ValueError(
            f"{name} holds strings (dtype {A.dtype}); it must hold numbers (activity)."
        )
    if kind == "c":
        raise ValueError(
            f"{name} holds complex numbers (Complex data not supported); pass real "
            "activity, e.g. its magnitude."
        )


def check_population(A, name, *, allow_1d=False, ensure_min_samples=2):
    """Validate one population's activity matrix.

    Every refusal names the argument: NaN or infinite values, a 1-D source,
    more than two dimensions, strings, objects or complex numbers, too few
    samples, no neurons.

    Parameters
    ----------
    A : array-like of shape (n_samples, n_neurons), or (n_samples,) if `allow_1d`
        Activity; a 1-D array is read as a single neuron.
    name : str
        Used in error messages ("source X", "target y", "modulator Z").
    allow_1d : bool
        Accept a 1-D array as one neuron (targets and modulators); sources
        must be 2-D, as scikit-learn requires of ``X``.
    ensure_min_samples : int
        Fewest samples accepted (2 to fit, 1 to predict).

    Returns
    -------
    A : ndarray of shape (n_samples, n_neurons), float64
    was_1d : bool
        Whether the input was one-dimensional (predictions are returned in
        the same form).
    """
    A = _as_array(A, name)
    _check_form(A, name, allow_1d)
    was_1d = allow_1d and len(A.shape) == 1
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
        if "sample(s)" in msg:
            n = A.shape[0]
            need = f"{ensure_min_samples} sample" + ("s are" if ensure_min_samples > 1 else " is")
            raise ValueError(
                f"{name} has {n} sample(s) (time points); at least {need} needed."
            ) from err
        if "feature(s)" in msg:  # scikit-learn's own checks match this wording
            raise ValueError(
                f"{name} has no neurons: 0 feature(s) (shape={tuple(A.shape)}) while a "
                "minimum of 1 is required."
            ) from err
        if "could not convert" in msg:
            raise ValueError(f"{name} must hold numbers (activity): {msg}") from err
        raise ValueError(f"{name}: {msg}") from err
    except TypeError as err:  # objects that are not numbers, sparse matrices
        raise TypeError(f"{name}: {err}") from err
    return out, was_1d


def check_not_constant(A, name):
    """Refuse a population whose every neuron is constant (nothing to regress).

    ``A`` is a float array of shape (n_samples, n_neurons); two reductions,
    no copy.
    """
    if A.shape[0] and A.shape[1] and np.array_equal(A.max(axis=0), A.min(axis=0)):
        raise ValueError(f"{name} is constant (every neuron has zero variance).")


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


def check_alpha(alpha, name="alpha", choose=False):
    """A penalty: a non-negative finite number, or (``choose``) candidates for CV.

    Parameters
    ----------
    alpha : object
        What the user passed.
    name : str
        The argument's name, as the user wrote it.
    choose : bool, default=False
        Also accept ``"cv"`` (the default grid of
        :mod:`mics.model.penalty_path`) and a non-empty sequence of
        non-negative finite numbers (the candidates), as :class:`mics.MICs`
        does.

    Returns
    -------
    float, str or tuple of float
    """
    if choose and isinstance(alpha, str) and alpha == "cv":
        return alpha
    if choose and not isinstance(alpha, str) and np.ndim(alpha) == 1:
        values = tuple(alpha)
        if values and all(_is_penalty(a) for a in values):
            return tuple(float(a) for a in values)
        raise ValueError(
            f"{name} candidates must be a non-empty sequence of non-negative finite "
            f"numbers, got {alpha!r}."
        )
    if not _is_penalty(alpha):
        also = ', "cv" or a sequence of candidate values' if choose else ""
        raise ValueError(f"{name} must be a non-negative finite number{also}, got {alpha!r}.")
    return alpha


def _is_penalty(alpha):
    # a string or bool is a scalar to NumPy, but not a penalty
    if isinstance(alpha, (str, bool, np.bool_)) or not np.isscalar(alpha):
        return False
    return isinstance(alpha, numbers.Real) and bool(np.isfinite(alpha)) and alpha >= 0


_SPARSE_FACTORS = ("source", "target", "modulator")


def check_sparsity(sparsity, sparse_on, choose=False):
    """The group-lasso settings of :class:`mics.MICs`: a weight (or candidates) and factor names.

    Parameters
    ----------
    sparsity : object
        A non-negative finite number; with ``choose`` also ``"cv"`` (the
        default grid of :mod:`mics.model.sparsity_path`) or a non-empty
        sequence of non-negative finite numbers (the candidates).
    sparse_on : object
        "all", a comma-separated string or a sequence of factor names.
    choose : bool, default=False
        Also accept candidates for cross-validation (as :class:`mics.MICs`
        does, where folds choose among them).

    Returns
    -------
    float, str or tuple of float
        The weight or the candidates.
    """
    if choose and (isinstance(sparsity, str) or np.ndim(sparsity) == 1):
        try:
            sparsity = check_alpha(sparsity, "sparsity", choose=True)
        except ValueError:
            raise ValueError(
                f'sparsity must be a non-negative finite number, "cv" or a non-empty '
                f"sequence of such numbers (candidates chosen by cross-validation), got "
                f"{sparsity!r}."
            ) from None
    elif not _is_penalty(sparsity):
        also = ', "cv" or a sequence of candidate values' if choose else ""
        raise ValueError(f"sparsity must be a non-negative finite number{also}, got {sparsity!r}.")
    if isinstance(sparse_on, str):
        names = () if sparse_on == "all" else [n.strip() for n in sparse_on.split(",")]
    else:
        try:
            names = tuple(sparse_on)
        except TypeError:
            names = (sparse_on,)
    unknown = [n for n in names if n not in _SPARSE_FACTORS]
    if unknown or (not isinstance(sparse_on, str) and not names):
        raise ValueError(
            f'sparse_on must be "all" or name factors among {_SPARSE_FACTORS} (a sequence '
            f'or a comma-separated string such as "source,target"), got {sparse_on!r}.'
        )
    return sparsity
