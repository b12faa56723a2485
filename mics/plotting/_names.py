"""Names of the neurons and modulators a model was fitted on, for axis labels."""

from __future__ import annotations

import numpy as np

_ROLE_INDEX = {"source": 0, "target": 1, "modulator": 2}
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
    labels = getattr(model, "_labels", None)
    if labels is not None and labels[_ROLE_INDEX[role]] is not None:
        return [str(v) for v in labels[_ROLE_INDEX[role]].features]
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
