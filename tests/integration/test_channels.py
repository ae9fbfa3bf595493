"""No channel between two students' workers: not through the host's devpts while both are alive,
not through the page cache from one run to a later one.

tests/data/hostile/channels.py is both sides: a giver leaves a message, a taker looks for it. The
two workers below are alive at the same time (what two slots, or a slot and the successor it
starts early, give), and each level of this machine is tried; a level that cannot close a channel
says so by skipping, rather than passing silently.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from grader.sandbox import Limits, Sandbox
from grader.sandbox.jail.paths import BASIC_DEVICES
from grader.submission.load import load_submission

HOSTILE = Path(__file__).parent.parent / "data" / "hostile"
LIMITS = Limits(import_timeout_s=60, call_timeout_s=60, submission_timeout_s=120, memory_bytes=1 << 30,
                max_pids=64)
pytestmark = [pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the jail is Linux's"), pytest.mark.slow]  # full tier: sandboxes at three levels
MESSAGE = "def masked_attention(q, k, v, mask): ...  # the whole answer"


@pytest.fixture(scope="module", params=["zygote", "supervised", "process"])
def sb(request):
    kwargs = {"zygote": {}, "supervised": {"use_zygote": False},
              "process": {"use_zygote": False, "isolation": "process"}}[request.param]
    with Sandbox(LIMITS, **kwargs) as box:
        yield box


def channels(sb):
    return sb.open(load_submission(HOSTILE / "channels.py"))


def needs(sb, *features):
    missing = [f for f in features if f not in sb.features]
    if missing:
        pytest.skip(f"{sb.isolation}: no {', '.join(missing)} at this level")


def test_two_live_workers_share_no_terminal(sb):
    if not {"namespaces", "landlock"} & sb.features:
        pytest.skip(f"{sb.isolation}: the host's /dev is the worker's at this level")
    with channels(sb) as giver, channels(sb) as taker:
        gave = giver.call("devpts_give", MESSAGE)
        took = taker.call("devpts_take")
    # No /dev/ptmx in a private /dev; under Landlock alone it is there but may not be opened.
    assert gave in ("ENOENT", "EACCES")
    assert MESSAGE not in str(took)
    assert took in ("listdir: ENOENT", "listdir: EACCES", "no terminals")


def test_a_worker_dev_holds_only_the_basic_nodes(sb):
    needs(sb, "namespaces")
    with channels(sb) as w:
        got = w.call("dev_entries")
    if "landlock" not in sb.features:  # Landlock lets the worker open its nodes, not list /dev
        assert got["listed"] == sorted(["fd", "stdin", "stdout", "stderr", "shm"]
                                       + [d.removeprefix("/dev/") for d in BASIC_DEVICES])
    opened = got["opened"]
    assert {k: opened[k] for k in ("null", "zero", "full", "random", "urandom")} == dict.fromkeys(
        ("null", "zero", "full", "random", "urandom"), "ok")
    assert opened["ptmx"] == opened["fuse"] == opened["kmsg"] == opened["tty"] == "ENOENT"  # not there at all
    assert opened["urandom_bytes"] == 16 and opened["null_write"] == 1


def test_landlock_opens_only_the_basic_nodes(sb):
    needs(sb, "landlock")
    with channels(sb) as w:
        got = w.call("dev_entries")
    assert got["listed"] == "EACCES"  # /dev itself is not readable: only the nodes by name
    assert got["opened"]["urandom_bytes"] == 16 and got["opened"]["null_write"] == 1


def test_the_page_cache_can_be_neither_read_nor_emptied(sb):
    """What a worker would use to leave one bit per page of a shared file for a later run's worker
    (evict it: 0; read it: 1) and to read the bits back: every one answers EPERM, at every level
    with the filter; reads without RWF_NOWAIT and the allocators' madvise still work."""
    needs(sb, "seccomp")
    with channels(sb) as w:
        got = w.call("page_cache_oracles")
    denied = ("mincore", "cachestat", "fadvise", "readahead", "preadv2_nowait", "pwritev2_nowait",
              "madvise_pageout", "madvise_cold", "io_setup")
    assert {k: got[k] for k in denied} == dict.fromkeys(denied, "EPERM")
    assert got["pread"] == got["preadv2_hipri"] == got["madvise_dontneed"] == "ok"
