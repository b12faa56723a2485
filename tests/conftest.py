"""Shared test settings: where the recordings are, and the fast default run.

``python -m pytest`` runs the fast tests. The slow validations, the executed
tutorials and the documentation build carry the markers of ``OPT_IN`` and
run with ``--full`` (what ``.ci/run`` runs; README, "Test"), or when chosen
with ``-m``. A ``--full`` run of the whole suite fails when none of them
passed, so CI cannot skip them all without saying so. The fast run ends by
naming its tests that took over ``LONG_SECONDS``.
"""

import os
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

#: Markers of the tests left out of the default run, and what they are.
OPT_IN = {
    "slow": "long-running validation (simulations, real recordings)",
    "tutorials": "executes a tutorial notebook",
    "docs": "builds the documentation site",
}
_FULL_HELP = (
    "run every test, also the slow validations, the executed tutorials and the docs "
    "build (markers: " + ", ".join(OPT_IN) + "); .ci/run runs this"
)
_OPT_IN_PASSED = pytest.StashKey[list]()
_LEFT_OUT = pytest.StashKey[int]()
_LONG = pytest.StashKey[dict]()
#: Seconds (setup + call, wall clock) above which a test of the fast run is
#: named at its end: a candidate for ``@pytest.mark.slow`` or smaller data.
LONG_SECONDS = 15.0


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


def pytest_addoption(parser):
    parser.addoption("--full", action="store_true", default=False, help=_FULL_HELP)


def pytest_configure(config):
    config.stash[_OPT_IN_PASSED] = []
    config.stash[_LONG] = {}


def _opt_in(item):
    return [name for name in OPT_IN if item.get_closest_marker(name) is not None]


def pytest_collection_modifyitems(config, items):
    unmarked = [
        item.nodeid
        for item in items
        if "data_dir" in getattr(item, "fixturenames", ())
        and item.get_closest_marker("shared_data") is None
    ]
    if unmarked:
        raise pytest.UsageError(
            "tests that read the recordings (the data_dir fixture) must carry "
            "@pytest.mark.shared_data: " + ", ".join(unmarked)
        )
    if config.getoption("--full") or config.getoption("markexpr"):
        return  # everything, or what -m chose
    left_out = [item for item in items if _opt_in(item)]
    config.stash[_LEFT_OUT] = len(left_out)
    if left_out:
        config.hook.pytest_deselected(items=left_out)
        chosen = set(map(id, left_out))
        items[:] = [item for item in items if id(item) not in chosen]


def pytest_terminal_summary(terminalreporter, config):
    left_out = config.stash.get(_LEFT_OUT, 0)
    if not left_out:
        return
    long = {k: v for k, v in config.stash[_LONG].items() if v > LONG_SECONDS}
    for nodeid, seconds in sorted(long.items(), key=lambda kv: -kv[1]):
        terminalreporter.write_line(
            f"long for the fast run ({seconds:.0f} s; mark it slow or make it smaller): {nodeid}"
        )
    terminalreporter.write_line(
        f"fast run: {left_out} slow, tutorial and docs tests deselected "
        "(python -m pytest --full runs everything)"
    )


def pytest_runtest_makereport(item, call):
    if _opt_in(item):
        if call.when == "call" and call.excinfo is None:
            item.config.stash[_OPT_IN_PASSED].append(item.nodeid)
    elif call.when in ("setup", "call"):
        long = item.config.stash[_LONG]
        long[item.nodeid] = long.get(item.nodeid, 0.0) + call.duration


def pytest_sessionfinish(session, exitstatus):
    config = session.config
    whole_suite = config.args_source == pytest.Config.ArgsSource.TESTPATHS
    ran = exitstatus in (pytest.ExitCode.OK, pytest.ExitCode.NO_TESTS_COLLECTED)
    if not (config.getoption("--full") and whole_suite and ran):
        return
    if not config.stash[_OPT_IN_PASSED]:
        reporter = config.pluginmanager.get_plugin("terminalreporter")
        if reporter is not None:
            reporter.write_line(
                "--full: no slow, tutorial or docs test passed (all deselected or skipped?); "
                "the full run has not run",
                red=True,
            )
        session.exitstatus = pytest.ExitCode.TESTS_FAILED
