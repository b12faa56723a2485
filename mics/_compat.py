"""Old module paths of the flat layout (v0.1), kept importable with a deprecation warning.

``mics`` was one flat folder until the layered layout (``docs/architecture.md``).
Code that imports an old path, ``from mics.moments import compute_moments``
say, keeps working: a finder on ``sys.meta_path`` hands out the module's new
home under its old name and warns once. The table is the whole of it; remove
an entry one release after its warning.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.util
import sys
import warnings

# old dotted path -> new dotted path
MOVED = {
    "mics._kernels": "mics.core.kernels",
    "mics._linalg": "mics.core.linalg",
    "mics.moments": "mics.core.stats",
    "mics.linear_moments": "mics.core.stats",
    "mics.weighted_grams": "mics.core.grams",
    "mics.modulation": "mics.core.als",
    "mics.reduced_rank": "mics.core.rrr",
    "mics.scoring": "mics.core.heldout",
    "mics.units": "mics.core.scales",
    "mics._labels": "mics.data.labels",
    "mics._validation": "mics.data.validation",
    "mics.trials": "mics.data.folds",
    "mics.chunked": "mics.data.chunked",
    "mics.parallel": "mics._compat_parallel",
    "mics.selection": "mics.model.selection",
    "mics.solver_cost": "mics.model.solver",
    "mics.decomposition": "mics.model.decomposition",
    "mics.mic_estimator": "mics.estimators.mic",
    "mics.persistence": "mics.estimators.persistence",
    "mics.inference": "mics.workflows.inference",
    "mics.lags": "mics.workflows.lags",
    "mics.recovery": "mics.simulation.recovery",
    "mics.trial_simulation": "mics.simulation.trials",
    "mics.trial_preprocessing": "mics.preprocessing.trials",
}


class _Alias(importlib.abc.Loader):
    def __init__(self, target):
        self.target = target

    def create_module(self, spec):
        warnings.warn(
            f"{spec.name} moved to {self.target}; import it from there "
            "(the old path will be removed in a later release).",
            DeprecationWarning,
            stacklevel=2,
        )
        return importlib.import_module(self.target)

    def exec_module(self, module):
        pass


class _MovedFinder(importlib.abc.MetaPathFinder):
    def find_spec(self, fullname, path=None, target=None):
        new = MOVED.get(fullname)
        if new is None:
            return None
        return importlib.util.spec_from_loader(fullname, _Alias(new))


def install():
    if not any(isinstance(f, _MovedFinder) for f in sys.meta_path):
        sys.meta_path.append(_MovedFinder())
