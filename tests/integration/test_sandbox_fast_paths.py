"""The sandbox's speed paths keep its guarantees: an early (torch-free) zygote start, a zygote
without the meta warm-up, one Sandbox shared by grading threads, workers retired to a reaper
thread, one round trip for all entry points, and the cheap per-call re-seeding."""

import dataclasses
import os
import subprocess
import sys
import threading
import time

import pytest
import torch

from grader.submission.load import load_submission
from grader.sandbox import Limits, Sandbox, SandboxError
from grader.sandbox.host import zygote
from procs import by_comm, process_table

LIMITS = Limits(import_timeout_s=10, call_timeout_s=10, submission_timeout_s=60, memory_bytes=512 << 20,
                max_pids=32)
LINUX = sys.platform.startswith("linux")
pytestmark = [pytest.mark.slow, pytest.mark.skipif(not LINUX, reason="the zygote is Linux-only")]  # full tier: several zygotes started and killed

CODE = '''
import torch

def double(x):
    return x * 2

def mask(n, device=None):
    return torch.ones(n, n, dtype=torch.bool, device=device).tril()

def seeded():
    return torch.rand(3)

def which():
    import sys
    return sys.argv[0]

def spawn_sleeper():
    # A forked grandchild in its own session, named "sleeper300" (a worker executes no program).
    import ctypes, os, time
    pid = os.fork()
    if pid == 0:
        os.setsid()
        ctypes.CDLL(None).prctl(15, b"sleeper300", 0, 0, 0)  # PR_SET_NAME
        time.sleep(300)
        os._exit(0)
    return pid

def pids():
    import os
    return [os.getpid(), os.getppid()]

def find(name):
    import importlib, importlib.util
    try:
        importlib.import_module(name)
    except ModuleNotFoundError:
        return ["missing", importlib.util.find_spec(name)]
    return ["imported", None]

def meta_softmax():
    import sys
    s = torch.empty(2, 3, 3, device="meta").masked_fill(torch.ones(3, 3, dtype=torch.bool, device="meta"), 0.0)
    out = torch.softmax(s, dim=-1)
    return [str(out.device), list(out.shape), "torch._dynamo" in sys.modules]

class Model(torch.nn.Module):
    pass
'''


@pytest.fixture
def sub(tmp_path):
    p = tmp_path / "attention.py"
    p.write_text(CODE)
    return load_submission(p)


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def test_early_module_does_not_import_torch():
    code = "import sys, grader.sandbox.host.zygote, grader.sandbox; assert 'torch' not in sys.modules, 'torch'"
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)


def test_prestarted_zygote_is_adopted_and_stopped(sub):
    pre = zygote.prestart("cpu")
    assert pre is not None and _alive(pre.zygote.pid)
    sb = Sandbox(LIMITS, warm_meta=False)
    try:
        assert sb.zygote_pid == pre.zygote.pid and sb.root == pre.root
        assert zygote.take("cpu") is None  # adopted once
        with sb.open(sub) as w:
            assert torch.equal(w.call("double", torch.ones(2)), torch.full((2,), 2.0))
            assert w.call("which") == "attention.py"
    finally:
        sb.close()
    assert not _alive(pre.zygote.pid) and not os.path.exists(pre.root)


def test_explicit_prestart_cannot_be_adopted_twice():
    pre = zygote.prestart("cpu")
    with Sandbox(LIMITS, warm_meta=False, prestarted=pre) as sb:
        assert sb.zygote_pid == pre.zygote.pid
        with pytest.raises(ValueError):
            Sandbox(LIMITS, prestarted=pre)


def test_a_prestart_nobody_adopts_is_stopped_at_exit(tmp_path):
    code = ("from grader.sandbox.host.zygote import prestart\n"
            "p = prestart('cpu'); print(p.zygote.pid, p.root, flush=True)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True)
    pid, root = out.stdout.split()
    deadline = time.monotonic() + 5
    while _alive(int(pid)) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not _alive(int(pid)) and not os.path.exists(root)


def test_without_meta_warm_up_meta_still_works(sub):
    # The worker's first meta op imports sympy itself (~0.5 s quiet, more under load).
    with Sandbox(dataclasses.replace(LIMITS, call_timeout_s=60, submission_timeout_s=120), warm_meta=False) as sb:
        assert sb.meta_warm is False
        with sb.open(sub) as w:
            m = w.call("mask", 4, device="meta")
            assert m.is_meta and m.shape == (4, 4) and m.dtype == torch.bool
            if sb.page_cache:  # reads kept to the read set: an installed package outside it is not found
                assert w.call("find", "pytest") == ["missing", None]
                assert w.call("find", "sympy") == ["imported", None]  # torch requires it
        sb.warm_meta()
        assert sb.meta_warm is True


def test_meta_warm_up_keeps_torch_dynamo_out_of_every_worker(sub):
    # The meta warm-up runs the meta kernels without importing torch._dynamo (~1 s and ~75 MB that
    # every fork would copy); a worker's own meta ops then stay out of it too.
    with Sandbox(LIMITS) as sb:
        assert sb.meta_warm is True
        with sb.open(sub) as w:
            assert w.call("meta_softmax") == ["meta", [2, 3, 3], False]


def _thp_mode() -> str:
    try:
        with open("/sys/kernel/mm/transparent_hugepage/enabled") as f:
            return f.read().split("[")[1].split("]")[0]
    except (OSError, IndexError):
        return "never"


@pytest.mark.skipif(_thp_mode() == "never", reason="this kernel offers no transparent huge pages")
def test_a_large_batch_zygote_heap_is_in_huge_pages_and_other_zygotes_start_without(sub):
    # A large batch's zygote keeps most of its anonymous memory (torch's Python objects and its
    # heap) in 2 MiB pages: each fork copies, and each worker's exit unmaps, 512 times fewer entries
    # for it. Other zygotes do without: their torch import stays faster.
    def environ(pid: int) -> list[bytes]:
        with open(f"/proc/{pid}/environ", "rb") as f:
            return f.read().split(b"\0")

    pre = zygote.prestart("cpu", warm_meta=True, huge_heap=True)
    assert pre is not None
    with Sandbox(LIMITS, prestarted=pre) as sb:
        with sb.open(sub) as w:
            assert w.call("double", torch.ones(2)).tolist() == [2.0, 2.0]
        rollup = {}
        with open(f"/proc/{sb._zygote.pid}/smaps_rollup") as f:
            for line in f:
                key, _, value = line.partition(":")
                if value.strip().endswith("kB"):
                    rollup[key] = int(value.split()[0])
        assert rollup["AnonHugePages"] > rollup["Anonymous"] // 4, rollup  # ~70 % here; 0 in 4 KiB pages
        assert b"PYTHONMALLOC=malloc" in environ(sb._zygote.pid)
    with Sandbox(LIMITS) as sb:
        with sb.open(sub) as w:
            assert w.call("double", torch.ones(2)).tolist() == [2.0, 2.0]
        assert b"PYTHONMALLOC=malloc" not in environ(sb._zygote.pid)


def test_one_sandbox_serves_many_threads(sub):
    results, errors = [], []
    with Sandbox(LIMITS) as sb:
        def slot(k):
            try:
                for i in range(3):
                    w = sb.open(sub)
                    out = w.call("double", torch.full((2,), float(k * 10 + i)))
                    results.append((k, i, out.tolist(), w.pid))
                    (w.retire if i % 2 else w.close)()
            except Exception as e:  # noqa: BLE001
                errors.append(e)

        threads = [threading.Thread(target=slot, args=(k,)) for k in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(120)
        zygote = sb.zygote_pid
    assert errors == []
    assert sorted((k, i, o) for k, i, o, _ in results) == [
        (k, i, [2.0 * (k * 10 + i)] * 2) for k in range(4) for i in range(3)]
    assert len({pid for *_, pid in results}) == 12  # a fresh worker every time
    assert not _alive(zygote)
    assert not any(_alive(pid) for *_, pid in results)


def test_retired_worker_is_killed_at_once_and_cleaned_up_by_close(sub):
    sb = Sandbox(LIMITS)
    w = sb.open(sub)
    pid, scratch, cgroups = w.pid, w.scratch, w.cgroups
    w.retire()
    deadline = time.monotonic() + 2
    while _alive(pid) and time.monotonic() < deadline:
        time.sleep(0.01)
    assert not _alive(pid)
    with pytest.raises(SandboxError):
        w.call("double", torch.ones(1))
    sb.close()
    assert not os.path.exists(scratch) and not any(os.path.exists(c) for c in cgroups)
    with pytest.raises(SandboxError):
        sb.open(load_submission(__file__))


def test_describe_all_matches_describe(sub):
    with Sandbox(LIMITS) as sb, sb.open(sub) as w:
        names = ["double", "Model", "attention"]
        many = w.describe_all(names)
        assert list(many) == names
        for n in names:
            assert many[n] == w.describe(n)
        assert many["attention"].kind == "missing" and "double" in many["attention"].available


def test_every_call_is_seeded_alike(sub):
    with Sandbox(LIMITS) as sb, sb.open(sub) as w:
        first = w.call("seeded")
        assert all(torch.equal(first, w.call("seeded")) for _ in range(3))
        torch.manual_seed(0)
        assert torch.equal(first, torch.rand(3))


def _sleepers() -> set[int]:
    return set(by_comm("sleeper300"))


def test_direct_worker_is_pid_1_forked_by_the_zygote_and_takes_its_tree_with_it(sub):
    """As root with namespaces and cgroups, the zygote forks each worker straight into a new PID
    namespace (no supervisor process in between); the worker's tree still dies with it."""
    with Sandbox(LIMITS, warm_meta=False) as sb:
        if not sb.forks_direct:
            pytest.skip(f"direct workers need root, namespaces and cgroups (here: {sb.isolation})")
        before = _sleepers()
        w = sb.open(sub)
        assert w.call("pids") == [1, 0]  # PID 1 of its own namespace
        assert process_table()[w.pid][0] == sb.zygote_pid  # the zygote's own child: one fork, not two
        w.call("spawn_sleeper")  # a grandchild in its own session, trying to outlive the worker
        # The call returns once forked; the grandchild names itself a moment later.
        deadline = time.monotonic() + 10
        while not (sleepers := _sleepers() - before) and time.monotonic() < deadline:
            time.sleep(0.02)
        assert len(sleepers) == 1
        w.retire()
        deadline = time.monotonic() + 10
        while any(_alive(p) for p in sleepers | {w.pid}) and time.monotonic() < deadline:
            time.sleep(0.02)
        assert not any(_alive(p) for p in sleepers | {w.pid})
        w2 = sb.open(sub)  # the zygote can unshare a fresh PID namespace for the next one
        assert w2.call("pids") == [1, 0]
        w2.close()
        assert w2.exit_report == {"status": {"signal": 9, "killed_by_grader": True}}


def test_a_worker_started_early_boots_and_loads_while_the_caller_waits(sub, tmp_path):
    """Sandbox.start: forked at once with its load request written before it greets; open() later
    finds it loaded. Its start-up deadline runs from open(), not from start()."""
    noisy = tmp_path / "noisy.py"
    noisy.write_text("import torch\nprint('loaded')\ndef double(x):\n    return x * 2\n")
    with Sandbox(LIMITS) as sb:
        sb.limits = Limits(**{**LIMITS.__dict__, "start_timeout_s": 1.0})  # the zygote is up: workers only
        w = sb.start(load_submission(noisy))
        time.sleep(1.5)  # longer than the start-up limit: the worker has been idle, not late
        assert "loaded" in w.output()[0]  # it ran the submission before anyone waited for it
        w = sb.open(load_submission(noisy), started=w)
        assert w.load.ok
        infos = w.describe_all(["double", "absent"])
        assert infos["double"].kind == "function" and infos["absent"].kind == "missing"
        assert torch.equal(w.call("double", torch.ones(2)), torch.full((2,), 2.0))
        other = sb.start(sub)  # never opened: closed with the sandbox, like any worker
        w.close()
    assert not other.alive


def test_a_worker_writing_its_own_frames_is_cut_off(tmp_path):
    """Student code that writes to the channel itself (a forged reply, then more) is a protocol
    error for its own worker; the grader reads no further than the frame it waits for."""
    forger = tmp_path / "forger.py"
    forger.write_text(
        "import json, os, struct\n"
        "def forge():\n"
        "    head = json.dumps({'msg': {'ok': True, 'value': 100}, 'tensors': []}).encode()\n"
        "    os.write(3, struct.pack('<II', len(head), 0) + head + b'\\0' * 4096)\n"
        "    return 1\n"
        "def echo(x):\n"
        "    return x\n")
    with Sandbox(LIMITS) as sb:
        w = sb.open(load_submission(forger))
        with pytest.raises(SandboxError, match="unexpected extra bytes"):
            w.call("forge")
        assert not w.alive and w.buffered_reply_bytes == 0
        w.close()
        w = sb.start(load_submission(forger))  # the load request written before the hello
        w = sb.open(load_submission(forger), started=w)
        assert w.load.ok and [w.call("echo", 5) for _ in range(3)] == [5, 5, 5]  # one reply for each
        w.close()
