"""The test tiers and the GPU skip.

`python -m pytest -q` runs the default tier: every test except those marked `slow` (the sandbox's
hostile and jail tests, the browser, the wheel install, the benchmark smoke run, the Dask cluster,
every sample graded twice). `python -m pytest -q --full` runs everything (what `.ci/run` does).
Naming a file, folder or test runs all of it: `python -m pytest tests/integration/test_jail.py`.
Under pytest-xdist (`-n 2`, how `.ci/run` runs the slow tier) the check that no sandbox process
outlives the run is made here, by the controller, once every worker has ended.
See CONTRIBUTING.md.
"""

import os

import pytest
import torch
from procs import process_table

# The commands keep reference setups in the user's cache folder between runs; the tests run every
# command without it (nothing written to the home folder, nothing read from an earlier session),
# except the setup cache's own tests, which give it a folder of their own.
os.environ.setdefault("GRADER_NO_CACHE", "1")


def pytest_addoption(parser):
    parser.addoption("--full", action="store_true",
                     help="run the full tier: also the tests marked slow (what .ci/run does)")


def _default_tier(config) -> bool:
    """True when slow tests are left out: no --full, no -m of one's own, and no paths named (pytest
    then runs its testpaths)."""
    if config.getoption("--full") or config.getoption("-m"):
        return False
    return config.args_source == pytest.Config.ArgsSource.TESTPATHS


def pytest_collection_modifyitems(config, items):
    if _default_tier(config):
        slow = [item for item in items if "slow" in item.keywords]
        if slow:
            config.hook.pytest_deselected(items=slow)
            items[:] = [item for item in items if "slow" not in item.keywords]
    if not torch.cuda.is_available():
        skip_gpu = pytest.mark.skip(reason="needs a CUDA device")
        for item in items:
            if "gpu" in item.keywords:
                item.add_marker(skip_gpu)


def pytest_report_header(config):
    if _default_tier(config):
        return "default tier: tests marked slow are deselected (run the full tier with --full)"
    return None


_CONTROLLER_START = pytest.StashKey[int]()
"""The xdist controller's start time, in clock ticks since boot: sandbox processes started later are the run's."""


def _is_xdist_controller(config) -> bool:
    """The xdist controller, where the processes can be read (/proc: Linux)."""
    return (not hasattr(config, "workerinput") and bool(getattr(config.option, "numprocesses", None))
            and os.path.isdir("/proc"))


def pytest_configure(config):
    if _is_xdist_controller(config):
        config.stash[_CONTROLLER_START] = process_table()[os.getpid()][1]


def pytest_sessionfinish(session, exitstatus):
    """Under pytest-xdist, after the last worker has ended: no sandbox process started during the
    run was left behind, re-parented to init (each worker checks its own descendants itself)."""
    config = session.config
    if not _is_xdist_controller(config) or _CONTROLLER_START not in config.stash:
        return
    since = config.stash[_CONTROLLER_START]
    strays = {pid: cmd for pid, (ppid, start, cmd) in process_table().items()
              if "grader.sandbox" in cmd and ppid == 1 and start >= since}
    if strays:
        reporter = config.pluginmanager.get_plugin("terminalreporter")
        if reporter is not None:
            reporter.write_line(f"sandbox processes outlived the run: {strays}", red=True)
        session.exitstatus = pytest.ExitCode.TESTS_FAILED
