"""The fallback path (no zygote): a fresh `python -m grader.sandbox.child.supervisor` per submission.

With isolation="process" it is what macOS gets: rlimits, RSS polling, a process-group and
subreaper kill, and no file or network isolation (asserted, so the gap stays visible).
"""

import os
import time
from pathlib import Path

import pytest
import torch

from grader.submission.load import load_submission
from procs import by_comm

from grader.sandbox import CrashKind, Limits, Sandbox, StudentError, WorkerCrashed, WorkerTimeout

pytestmark = pytest.mark.slow  # full tier: a sandbox without the zygote, hostile code

HOSTILE = Path(__file__).parent.parent / "data" / "hostile"
LIMITS = Limits(import_timeout_s=5, call_timeout_s=3, submission_timeout_s=60, memory_bytes=512 << 20,
                max_pids=32)


@pytest.fixture(scope="module")
def sb():
    with Sandbox(LIMITS, use_zygote=False, isolation="process") as box:
        yield box



def test_level_is_named_honestly(sb):
    from grader.sandbox.jail import enter

    assert not sb.uses_zygote
    # The system-call filter applies wherever Linux has it, even at this level.
    seccomp = "seccomp+" if enter.sys.platform.startswith("linux") and enter.seccomp.library() else ""
    assert sb.isolation == f"process+{seccomp}rss+rlimits"


def test_calls_and_output(sb, tmp_path):
    p = tmp_path / "s.py"
    p.write_text("print('hi')\ndef f(x):\n    return x + 1\n")
    with sb.open(load_submission(p)) as w:
        assert torch.equal(w.call("f", torch.zeros(2)), torch.ones(2))
        assert w.output() == ("hi\n", "")


def test_timeout_and_setsid_survivor_killed(sb):
    token = f"grfb{os.getpid() % 100000}"
    with sb.open(load_submission(HOSTILE / "background_survivor.py")) as w:
        assert w.call("spawn", token) is True
        assert len(by_comm(token)) == 1
    deadline = time.monotonic() + 2
    while by_comm(token) and time.monotonic() < deadline:
        time.sleep(0.02)
    assert by_comm(token) == []
    with sb.open(load_submission(HOSTILE / "hangs.py")) as w:
        with pytest.raises(WorkerTimeout):
            w.call("sleep_forever")


@pytest.mark.parametrize("memory", ["pss", "rss"])
def test_rss_polling_kills_a_growing_worker(sb, memory, monkeypatch):
    # rss: how the tree's memory is counted off Linux (macOS), tried here too.
    from grader.sandbox.host import process

    monkeypatch.setattr(process, "PSS", memory == "pss" and process.PSS)
    with sb.open(load_submission(HOSTILE / "memory_hog.py")) as w:
        with pytest.raises(WorkerCrashed) as info:
            w.call("hog_slowly")
        assert info.value.kind is CrashKind.MEMORY


def test_no_file_isolation_at_this_level(sb, tmp_path):
    target = tmp_path / "written.txt"
    with sb.open(load_submission(HOSTILE / "escapes.py")) as w:
        if os.geteuid() == 0:
            assert w.call("write", str(target)) is True  # the documented gap of "process" level
            assert target.read_text() == "pwned"
        else:
            with pytest.raises(StudentError):
                w.call("write", str(target))


def test_fresh_process_with_full_jail_matches_the_zygote_level():
    with Sandbox(LIMITS, use_zygote=False) as fresh, Sandbox(LIMITS) as warm:
        assert fresh.isolation == warm.isolation
        with fresh.open(load_submission(HOSTILE / "escapes.py")) as w:
            uid, cwd, home, _ = w.call("whoami")
            assert cwd == home
            if "uid" in fresh.features:
                assert uid == 65534
