"""The test tiers and the GPU skip.

`python -m pytest -q` runs the default tier: every test except those marked `slow` (the sandbox's
hostile and jail tests, the browser, the wheel install, the benchmark smoke run, the Dask cluster,
every sample graded twice). `python -m pytest -q --full` runs everything (what `.ci/run` does).
Naming a file, folder or test runs all of it: `python -m pytest tests/integration/test_jail.py`.
See CONTRIBUTING.md.
"""

import os

import pytest
import torch

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
