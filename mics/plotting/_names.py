"""Names of the neurons and modulators a model was fitted on, for axis labels."""

from __future__ import annotations

import numpy as np

ROLE_INDEX = {"source": 0, "target": 1, "modulator": 2}
_ATTRIBUTE = {
    "source": "source_patterns_",
    "target": "target_patterns_",
    "modulator": "modulator_patterns_",
}
_DEFAULT_PREFIX = {"source": "", "target": "", "modulator": "z"}

#: Above this many neurons a panel is labelled by index, not by one tick per id.
MAX_NAMED_TICKS = 30


def fitted_names(model, role):
    """Labels of one input of a fitted model, or None when it was unlabelled.

    Parameters
    ----------
    model : mics.MICs
        Fitted model (possibly reopened with :func:`mics.load`).
    role : {"source", "target", "modulator"}

    Returns
    -------
    names : list of str, or None
        The neuron ids / modulator names of the DataArray the model was
        fitted on, in the fitted order.
    """
    labels = getattr(model, "input_labels", None)
    if labels is not None and labels[ROLE_INDEX[role]] is not None:
        return [str(v) for v in labels[ROLE_INDEX[role]].features]
    value = getattr(model, _ATTRIBUTE[role], None)
    if value is not None and hasattr(value, "dims") and value.dims[0] in value.coords:
        return [str(v) for v in np.asarray(value[value.dims[0]].values)]
    return None


def names_or_default(model, role, n):
    """:func:`fitted_names`, or ``z0, z1, ...`` (modulators) / ``0, 1, ...`` (neurons)."""
    names = fitted_names(model, role)
    if names is not None and len(names) == n:
        return names
    return [f"{_DEFAULT_PREFIX[role]}{i}" for i in range(n)]


def _units_of(attrs, coords, m):
    """Per-modulator units from a ``units`` attribute (one string, or one per
    modulator) or a ``units`` coordinate along the modulator dimension."""
    units = coords.get("units") if coords is not None else None
    if units is None:
        units = attrs.get("units") if attrs else None
    if units is None:
        return None
    if isinstance(units, str):
        return [units] * m
    units = [str(u) for u in np.asarray(units).reshape(-1)]
    return units if len(units) == m else None


def _looks_standardized(values):
    """Every column has mean 0 and standard deviation 1 (either ddof)."""
    values = np.asarray(values, dtype=float)
    if values.ndim != 2 or values.shape[0] < 3:
        return False
    mean, sd0, sd1 = values.mean(axis=0), values.std(axis=0), values.std(axis=0, ddof=1)
    near_one = np.minimum(np.abs(sd0 - 1), np.abs(sd1 - 1))
    return bool(np.all(np.abs(mean) < 1e-6) and np.all(near_one < 1e-6))


def modulator_units(model, Z, values):
    """The units of each modulator, for axis labels and titles.

    Parameters
    ----------
    model : mics.MICs
        Fitted model; a labelled Z it was fitted on keeps its attributes
        (``model._labels[2].attrs``, ``feature_coords``).
    Z : array-like or DataArray
        The modulator data passed to the figure, as given (its ``units``
        attribute or coordinate comes first).
    values : ndarray of shape (n_samples, m)
        The same data as a plain array, in the fitted order.

    Returns
    -------
    units : list of str
        One per modulator: the ``units`` attribute of the DataArray (of ``Z``,
        else of the modulator the model was fitted on) when present, else
        ``"z-scored"`` when every column has mean 0 and standard deviation 1,
        else ``"input units"``.
    """
    m = values.shape[1]
    if hasattr(Z, "attrs"):
        dim = next((d for d in Z.dims if d != "time"), None)
        coords = {k: c.values for k, c in Z.coords.items() if dim is not None and c.dims == (dim,)}
        found = _units_of(Z.attrs, coords, m)
        if found is not None:
            return found
    labels = getattr(model, "input_labels", None)
    info = labels[2] if labels is not None and len(labels) > 2 else None
    if info is not None:
        found = _units_of(info.attrs, info.feature_coords, m)
        if found is not None:
            return found
    return ["z-scored" if _looks_standardized(values) else "input units"] * m
