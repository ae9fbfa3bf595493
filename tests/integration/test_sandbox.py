"""The sandbox at the strongest level this machine allows: the API, then hostile submissions.

Each hostile submission lives in tests/data/hostile/ and is bounded (a few seconds, < 4 GiB, < 200
processes). What is asserted about file and network access depends on `Sandbox.features`, so the
same tests state the truth on any Linux box.
"""

import os
import socket
import time
from pathlib import Path

import nbformat
import pytest
import torch

from grader.submission.load import load_submission
from procs import by_comm, process_table, processes_mentioning
from grader.sandbox import (CrashKind, Handle, Limits, Opaque, Sandbox, StudentError, WorkerCrashed,
                            WorkerTimeout)

pytestmark = pytest.mark.slow  # full tier: hostile submissions running into each limit

HOSTILE = Path(__file__).parent.parent / "data" / "hostile"
LIMITS = Limits(import_timeout_s=5, call_timeout_s=5, submission_timeout_s=60, memory_bytes=512 << 20,
                max_pids=32)
ALLCLOSE, ASSERT_CLOSE, TENSOR_EQ = torch.allclose, torch.testing.assert_close, torch.Tensor.__eq__

GOOD = '''
import torch

print("loading good")

def double(x, *, plus=0):
    return x * 2 + plus

def pair(x):
    return x.sin(), x.cos()

def seeded():
    return torch.rand(3)

def grad_mode():
    return torch.is_grad_enabled()

def fail(n):
    helper = lambda: 1 / n
    return helper()

class Model(torch.nn.Module):
    def __init__(self, d):
        super().__init__()
        self.lin = torch.nn.Linear(d, d)
        self.register_buffer("steps", torch.zeros((), dtype=torch.int64))
    def forward(self, x):
        self.steps += 1
        return self.lin(x)
    def chain(self):
        return self
'''




@pytest.fixture(scope="module")
def sb():
    with Sandbox(LIMITS) as box:
        yield box


def hostile(sb, name):
    return sb.open(load_submission(HOSTILE / f"{name}.py"))


@pytest.fixture
def good(sb, tmp_path):
    p = tmp_path / "good.py"
    p.write_text(GOOD)
    with sb.open(load_submission(p)) as w:
        yield w


# --- level ------------------------------------------------------------------------------------

def test_isolation_string_matches_features(sb):
    parts = set(sb.isolation.split("+"))
    assert parts - {"process"} == set(sb.features)
    assert ("process" in parts) == ("namespaces" not in sb.features)
    assert "rlimits" in parts and ("cgroup" in parts) != ("rss" in parts)
    if sb.uses_zygote:
        assert processes_mentioning("grader.sandbox.child.zygote")


def test_linux_root_with_writable_cgroups_gets_the_full_jail(sb):
    if not (os.geteuid() == 0 and os.access("/sys/fs/cgroup/pids", os.W_OK)):
        pytest.skip("needs root and writable cgroup v1")
    assert {"namespaces", "uid", "cgroup", "rlimits"} <= sb.features


# --- the API on a well-behaved submission -----------------------------------------------------

def test_load_report_and_output(good):
    assert good.load.ok and good.load.cell_errors == []
    assert set(good.load.defined) == {"double", "pair", "seeded", "grad_mode", "fail", "Model"}
    assert good.output() == ("loading good\n", "")


def test_call_with_kwargs_and_seed(good):
    out = good.call("double", torch.arange(3.0), plus=1)
    assert type(out) is torch.Tensor and torch.equal(out, torch.tensor([1.0, 3.0, 5.0]))
    torch.manual_seed(0)
    assert torch.equal(good.call("seeded"), torch.rand(3))
    assert torch.equal(good.call("seeded"), good.call("seeded"))
    assert good.call("grad_mode") is False


def test_meta_and_dtypes_cross(good):
    m = good.call("double", torch.empty(4, 5, device="meta", dtype=torch.float16))
    assert m.is_meta and m.shape == (4, 5) and m.dtype == torch.float16
    b = good.call("double", torch.ones(2, dtype=torch.bfloat16))
    assert b.dtype == torch.bfloat16 and b.tolist() == [2.0, 2.0]


def test_describe(good):
    info = good.describe("double")
    assert (info.kind, info.signature, info.params) == ("function", "(x, *, plus=0)", ("x", "plus"))
    assert good.describe("Model").kind == "class" and good.describe("Model").params == ("d",)
    missing = good.describe("attention")
    assert missing.kind == "missing" and "double" in missing.available


def test_missing_name(good):
    with pytest.raises(StudentError, match="the submission defines no 'attention'; found: double"):
        good.call("attention")


def test_student_exception_traceback_is_cut_to_their_cells(good):
    with pytest.raises(StudentError) as info:
        good.call("fail", 0)
    e = info.value
    assert (e.exc_type, str(e.message)) == ("ZeroDivisionError", "division by zero")
    assert 'File "<submission: good.py>", line 20, in fail' in e.traceback
    assert "helper = lambda: 1 / n" in e.traceback
    assert "grader" not in e.traceback.replace("<submission", "")


def test_handles_methods_and_state_dict(good, sb):
    h = good.call("Model", 3)
    assert type(h) is Handle and h.type_name == "submission.Model"
    assert good.call_method(h, "chain") == h
    sd = good.state_dict(h)
    assert sorted(sd) == ["lin.bias", "lin.weight", "steps"]
    assert all(type(v) is torch.Tensor for v in sd.values())
    good.load_state_dict(h, {"lin.weight": torch.eye(3), "lin.bias": torch.zeros(3), "steps": torch.tensor(5)})
    x = torch.tensor([[1.0, 2.0, 3.0]])
    assert torch.equal(good.call_method(h, "forward", x), x)
    assert good.state_dict(h)["steps"].item() == 6
    with pytest.raises(StudentError, match="Missing key"):
        good.load_state_dict(h, {})
    with sb.open(load_submission(HOSTILE / "odd_results.py")) as other:
        with pytest.raises(Exception, match="does not belong to this worker"):
            other.call_method(h, "forward", x)


def test_vjp_function_and_method(good):
    x = torch.tensor([0.0, 1.0])
    value, grads = good.vjp("pair", [x], {}, wrt=[0], cotangent=torch.ones(2), output_index=1)
    assert torch.allclose(value[1], x.cos()) and torch.allclose(grads[0], -x.sin())
    h = good.call("Model", 2)
    good.load_state_dict(h, {"lin.weight": torch.tensor([[1.0, 2.0], [3.0, 4.0]]), "lin.bias": torch.zeros(2),
                             "steps": torch.tensor(0)})
    out, (gx,) = good.vjp((h, "forward"), [torch.ones(1, 2)], {}, wrt=[0], cotangent=torch.ones(1, 2))
    assert torch.equal(out, torch.tensor([[3.0, 7.0]])) and torch.equal(gx, torch.tensor([[4.0, 6.0]]))
    assert good.call("grad_mode") is False


def test_notebook_cell_that_raises_does_not_stop_later_cells(sb, tmp_path):
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_markdown_cell("# Attention"),
                nbformat.v4.new_code_cell("%matplotlib inline\nimport torch\n!pip install nothing"),
                nbformat.v4.new_code_cell("x = 1\nraise ValueError('demo broke')"),
                nbformat.v4.new_code_cell("def f(t):\n    return t + x")]
    p = tmp_path / "doe_jane_12345_attention.ipynb"
    nbformat.write(nb, str(p))
    with sb.open(load_submission(p)) as w:
        assert w.load.ok
        (err,) = w.load.cell_errors
        assert (err.cell, err.error) == (2, "ValueError: demo broke")  # the second code cell
        assert 'File "<submission: code cell 2>", line 2' in err.traceback
        assert torch.equal(w.call("f", torch.zeros(1)), torch.ones(1))


def test_folder_submission_imports_its_helpers(sb, tmp_path):
    d = tmp_path / "carol"
    d.mkdir()
    (d / "submission.py").write_text("from helper import k\ndef g():\n    return k()\n")
    (d / "helper.py").write_text("def k():\n    return 7\n")
    with sb.open(load_submission(d)) as w:
        assert w.call("g") == 7


def test_syntax_error_only_unit_fails_the_load(sb, tmp_path):
    p = tmp_path / "bad.py"
    p.write_text("def f(:\n    pass\n")
    with sb.open(load_submission(p)) as w:
        assert not w.load.ok and "SyntaxError" in str(w.load.message)
        assert 'File "<submission: bad.py>", line 1' in w.load.cell_errors[0].traceback


# --- hostile submissions ----------------------------------------------------------------------

def test_infinite_loop_at_import_times_out(sb):
    # The import limit (5 s) is the one that fired, not the whole submission's (60 s).
    with hostile(sb, "spin_at_import") as w:
        assert not w.load.ok and isinstance(w.load.failure, WorkerTimeout)
        assert w.load.failure.phase == "loading the submission" and "longer than 5 s" in str(w.load.message)
        with pytest.raises(WorkerTimeout):
            w.call("never_defined_in_time")


@pytest.mark.parametrize("fn", ["spin", "sleep_forever"])
def test_hanging_calls_time_out(sb, fn):
    with hostile(sb, "hangs") as w:
        # The call limit fired (5 s), not the submission's (60 s).
        with pytest.raises(WorkerTimeout, match=f"5 s exceeded while calling {fn}"):
            w.call(fn)
        assert not w.alive


def test_memory_hog_is_killed(sb):
    with hostile(sb, "memory_hog") as w:
        with pytest.raises(WorkerCrashed) as info:
            w.call("hog_3gib")
        assert info.value.kind is CrashKind.MEMORY and "memory limit of 0.5 GiB" in str(info.value)


def test_os_exit_at_import_is_a_crash_not_a_pass(sb):
    with hostile(sb, "exit_at_import") as w:
        assert not w.load.ok
        assert isinstance(w.load.failure, WorkerCrashed) and w.load.failure.kind is CrashKind.EXIT
        assert "exit code 0" in str(w.load.message)
        with pytest.raises(WorkerCrashed):
            w.call("answer")


def test_sys_exit_at_import_is_recorded_and_grading_goes_on(sb):
    with hostile(sb, "sys_exit_at_import") as w:
        assert w.load.ok and w.load.cell_errors[0].error == "SystemExit: 0"
        assert w.call("answer") == 42


def test_fork_loop_is_bounded_and_reaped(sb):
    with hostile(sb, "fork_loop") as w:
        made = w.call("fork_many", 100)
        if "cgroup" in sb.features:
            assert made < LIMITS.max_pids
        tree = sandbox_tree(sb)
        assert len(tree) >= made
    # The whole tree is SIGKILLed at close; the kernel may take a moment to remove the exited children.
    deadline = time.monotonic() + 5
    while (left := still_alive(tree) | set(sandbox_tree(sb))) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert left == set(), {p: processes_mentioning("").get(p) for p in left}


def sandbox_tree(sb) -> dict[int, int]:
    """pid -> start time of every live process under this sandbox's zygote (its supervisors, workers
    and whatever they forked), the zygote left out. Only this sandbox's: the other sandboxes the
    session holds open have zygotes of their own, never under this one."""
    table = process_table()
    kids: dict[int, list[int]] = {}
    for pid, (ppid, _, _) in table.items():
        kids.setdefault(ppid, []).append(pid)
    tree, todo = {}, [sb.zygote_pid]
    while todo:
        for c in kids.get(todo.pop(), []):
            tree[c] = table[c][1]
            todo.append(c)
    return tree


def still_alive(seen: dict[int, int]) -> set[int]:
    """Those of `seen` (pid -> start time) still running: same pid, same start (a reused pid is
    another process), wherever they were re-parented to."""
    table = process_table()
    return {pid for pid, start in seen.items() if pid in table and table[pid][1] == start}


def test_setsid_grandchild_does_not_survive(sb):
    token = f"grsv{os.getpid() % 100000}"
    with hostile(sb, "background_survivor") as w:
        assert w.call("spawn", token) is True
        assert len(by_comm(token)) == 1
    deadline = time.monotonic() + 2
    while by_comm(token) and time.monotonic() < deadline:
        time.sleep(0.02)
    assert by_comm(token) == []


def test_patched_comparisons_do_not_reach_the_grader(sb):
    with hostile(sb, "patches_comparisons") as w:
        x = torch.ones(3)
        out = w.call("wrong", x)
    assert type(out) is torch.Tensor
    assert (torch.allclose, torch.testing.assert_close, torch.Tensor.__eq__) == (ALLCLOSE, ASSERT_CLOSE, TENSOR_EQ)
    assert not torch.allclose(out, x) and not (out == x).any()
    with pytest.raises(AssertionError):
        torch.testing.assert_close(out, x)


def test_non_tensor_results_are_opaque(sb):
    with hostile(sb, "odd_results") as w:
        assert w.call("liar") == Opaque("submission.Liar")
        assert w.call("array") == Opaque("numpy.ndarray")
        assert w.call("thing") == Opaque("object")
        nested = w.call("nested")
        assert torch.equal(nested["pair"][0], torch.arange(3))
        assert nested["pair"][1][0] == 1.5 and nested["pair"][1][1] != nested["pair"][1][1]
        p = w.call("parameter")
        assert type(p) is torch.Tensor and not p.requires_grad


def test_printed_fake_results_are_captured_not_parsed(sb):
    with hostile(sb, "forged_output") as w:
        assert w.load.ok and w.call("value") == 0
        out, err = w.output()
    assert '"score": 100' in out and '{"ok": true, "value": 100}' in out
    assert err == '{"outcome": "passed"}\n'


def test_file_access_outside_scratch(sb, tmp_path):
    target = tmp_path / "escaped.txt"
    secret = Path(__file__).resolve()
    with hostile(sb, "escapes") as w:
        assert w.call("write", "inside.txt") is True
        uid, cwd, home, env = w.call("whoami")
        assert cwd == home and env == ["HOME", "LANG", "MKL_NUM_THREADS", "OMP_NUM_THREADS", "PATH", "TMPDIR"]
        if "uid" in sb.features:
            assert uid == 65534
        if sb.features & {"uid", "landlock", "namespaces"}:
            # denied (uid, Landlock) or invisible (the worker's /tmp is its own under namespaces)
            with pytest.raises(StudentError, match="PermissionError|FileNotFoundError"):
                w.call("write", str(target))
            assert not target.exists()
        if sb.features & {"landlock"}:
            # Denied by Landlock, or invisible when the checkout lives under /tmp (the worker's /tmp
            # is a private tmpfs): either way the grader's own files cannot be read.
            with pytest.raises(StudentError, match="PermissionError|FileNotFoundError"):
                w.call("read", str(secret))
            with pytest.raises(StudentError, match="PermissionError"):
                w.call("write", "/tmp/grader-escape-test.txt")


def test_network_is_unreachable(sb):
    if not sb.features & {"namespaces", "landlock"}:
        pytest.skip("no network isolation at this level")
    with socket.socket() as srv:
        srv.bind(("127.0.0.1", 0))
        srv.listen()
        srv.settimeout(0.3)
        with hostile(sb, "escapes") as w:
            with pytest.raises(StudentError, match="Error"):
                w.call("connect", srv.getsockname()[1])
        with pytest.raises(socket.timeout):
            srv.accept()


def test_segfault_is_a_crash(sb):
    with hostile(sb, "crashes") as w:
        with pytest.raises(WorkerCrashed, match="SIGSEGV") as info:
            w.call("segfault")
        assert info.value.kind is CrashKind.SIGNAL


def test_output_flood_is_killed_and_bounded(sb):
    with hostile(sb, "crashes") as w:
        with pytest.raises(WorkerCrashed) as info:
            w.call("flood")
        assert info.value.kind is CrashKind.OUTPUT
        assert len(w.output()[0]) == LIMITS.max_output_bytes


def test_one_bad_submission_does_not_affect_the_next(sb, tmp_path):
    with hostile(sb, "crashes") as w:
        with pytest.raises(WorkerCrashed):
            w.call("segfault")
    p = tmp_path / "fine.py"
    p.write_text("def f():\n    return 'fine'\n")
    with sb.open(load_submission(p)) as w:
        assert w.call("f") == "fine"


def test_load_error_submission_still_opens(sb, tmp_path):
    p = tmp_path / "empty.py"
    p.write_text("")
    sub = load_submission(p)
    assert str(sub.error) == "empty.py is empty"
    with sb.open(sub) as w:
        assert not w.load.ok and str(w.load.message) == "empty.py is empty"


HOST_SCRIPT = '''
import os, signal, sys
from grader.submission.load import load_submission
from grader.sandbox import Sandbox
sb = Sandbox()
w = sb.open(load_submission(sys.argv[1]))
assert w.call("spawn", sys.argv[2]) is True
if sys.argv[3] == "sigkill":
    os.kill(os.getpid(), signal.SIGKILL)
raise RuntimeError("the grader crashed without closing its sandbox")
'''


@pytest.mark.parametrize("how", ["exception", "sigkill"])
def test_nothing_survives_a_crashing_grader(tmp_path, how):
    import subprocess
    import sys

    token = f"grhc{how[:3]}{os.getpid() % 10000}"
    script = tmp_path / "host.py"
    script.write_text(HOST_SCRIPT)
    proc = subprocess.run([sys.executable, str(script), str(HOSTILE / "background_survivor.py"), token, how],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode != 0
    assert how == "sigkill" or "the grader crashed" in proc.stderr
    deadline = time.monotonic() + 3
    while by_comm(token) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert by_comm(token) == []
    if how == "sigkill":  # the next Sandbox removes what the killed grader left behind
        import glob
        import tempfile

        assert glob.glob(os.path.join(tempfile.gettempdir(), "grader-sbx-*"))
        Sandbox(LIMITS, use_zygote=False).close()
        left = [p for p in glob.glob(os.path.join(tempfile.gettempdir(), "grader-sbx-*"))
                if not os.path.exists(f"/proc/{p.rsplit('grader-sbx-', 1)[1].split('-')[0]}")]
        assert left == []
