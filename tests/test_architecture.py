"""The package's structure: layers that import one way, no private names across modules.

The layers are import-linter contracts in ``pyproject.toml``
(``docs/architecture.md``); these tests run them with the suite, so a
change that imports up the layers fails like any other bug.
"""

import ast
import re
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
    out = subprocess.run([exe], cwd=PACKAGE.parent, capture_output=True, text=True, timeout=300)
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


ARCHITECTURE = PACKAGE.parent / "docs" / "architecture.md"
LAYERS = ("periphery", "workflows", "estimators", "model", "data", "core")


def _diagram_names(text):
    """``{layer: {"x.py", ...}}``: the file names written inside each box of the layer diagram."""
    block = re.search(r"```text\n(.*?)```", text, re.S).group(1)
    names, layer = {}, None
    for line in block.splitlines():
        label = line.split(maxsplit=1)[0] if line.strip() else ""
        if label in LAYERS:
            layer = label
        if layer is not None:
            names.setdefault(layer, set()).update(re.findall(r"\b(\w+\.py)\b", line))
    return names


def _named(text, diagram, name, path):
    """Whether the page names the module: dotted, as a path, or inside its layer's box."""
    rel = path.relative_to(PACKAGE)
    if rel.name == "__init__.py":
        folder = rel.parent.as_posix()
        return name == "mics" or re.search(rf"`{re.escape(name)}`|\b{folder}/", text) is not None
    spellings = [re.escape(name), re.escape(rel.as_posix())]
    if re.search(rf"(?<![\w.]){'|'.join(spellings)}(?![\w])", text):
        return True
    layer = rel.parts[0] if len(rel.parts) > 1 else None
    return layer in diagram and rel.name in diagram[layer]


def test_every_module_is_named_in_the_architecture_page():
    """A new module gets its line in ``docs/architecture.md`` (dotted, as a path, in its box)."""
    text = ARCHITECTURE.read_text()
    diagram = _diagram_names(text)
    missing = [name for name, path in _modules() if not _named(text, diagram, name, path)]
    assert missing == [], f"modules not named in docs/architecture.md: {missing}"


def test_import_mics_imports_neither_matplotlib_nor_dask():
    """``import mics`` stays light; plotting and datasets load on first use.

    It still registers the ``.mics`` accessor of ``xarray.Dataset``, which is
    why the estimators are imported at once (``docs/architecture.md``).
    """
    code = (
        "import sys, mics\n"
        "heavy = [m for m in ('matplotlib', 'dask', 'distributed', 'pooch') if m in sys.modules]\n"
        "assert heavy == [], heavy\n"
        "import xarray\n"
        "assert hasattr(xarray.Dataset, 'mics')  # a saved decomposition reads as a table\n"
        "mics.plotting.plot_channels, mics.datasets.semedo2019\n"
        "assert {'mics.plotting', 'mics.datasets'} <= set(sys.modules)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=PACKAGE.parent, capture_output=True, text=True
    )
    assert out.returncode == 0, out.stderr
