import os
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def shared_data_dir():
    """Where the real recordings live: $MICS_DATA_DIR or ../shared/data."""
    env = os.environ.get("MICS_DATA_DIR")
    return Path(env) if env else ROOT.parent / "shared" / "data"


@pytest.fixture(scope="session")
def data_dir():
    path = shared_data_dir()
    if not path.is_dir():
        pytest.skip(f"real recordings not found at {path} (set MICS_DATA_DIR)")
    return path
