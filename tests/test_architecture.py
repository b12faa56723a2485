"""The package's structure: layers that import one way, no private names across modules.

The layers are import-linter contracts in ``pyproject.toml``
(``docs/architecture.md``); these tests run them with the suite, so a
change that imports up the layers fails like any other bug.
"""

import ast
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "mics"


def _modules():
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        yield name, path


def test_import_linter_contracts_are_kept():
    exe = shutil.which("lint-imports") or str(Path(sys.executable).parent / "lint-imports")
    if not Path(exe).exists():
        pytest.skip("import-linter is not installed (pip install -e '.[test]')")
    out = subprocess.run(
        [exe], cwd=PACKAGE.parent, capture_output=True, text=True, timeout=300
    )
    assert out.returncode == 0, out.stdout + out.stderr
    assert "0 broken" in out.stdout


def test_no_module_imports_another_modules_private_names():
    offences = []
    for name, path in _modules():
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("mics"):
                if node.module == name:
                    continue
                offences += [
                    f"{name}: from {node.module} import {alias.name}"
                    for alias in node.names
                    if alias.name.startswith("_") and alias.name != "__version__"
                ]
    assert offences == []


def test_the_dask_decision_lives_in_the_data_layer_only():
    """Only the seam and the Dask module ask whether an input is chunked."""
    asking = set()
    for name, path in _modules():
        text = path.read_text()
        if "any_chunked(" in text or "is_chunked(" in text:
            asking.add(name)
    assert asking <= {"mics.data.chunked", "mics.data.problem", "mics.data.labels"}


def test_old_module_paths_still_import_with_a_deprecation_warning():
    import importlib

    from mics._compat import MOVED

    for old, new in MOVED.items():
        sys.modules.pop(old, None)
        with pytest.warns(DeprecationWarning, match=new.replace(".", r"\.")):
            module = importlib.import_module(old)
        assert module is importlib.import_module(new)
    from mics.moments import compute_moments  # noqa: F401  (the common old spelling)
