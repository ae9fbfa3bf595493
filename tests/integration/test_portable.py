"""The portable worker (a spawned interpreter over pipes, what Windows and macOS use): its limits
are real, it needs none of Linux's mechanisms, and the commands choose it."""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
import torch
from click.testing import CliRunner

from grader.cli.app import main
from grader.sandbox import CrashKind, Limits, WorkerCrashed, WorkerTimeout
from grader.sandbox.host.portable import PortableSandbox

pytestmark = pytest.mark.slow  # each worker is a fresh interpreter importing torch

ROOT = Path(__file__).resolve().parents[2]


@dataclasses.dataclass(frozen=True)
class Unit:
    source: str
    label: str = "attempt.py"
    cell: None = None


@dataclasses.dataclass(frozen=True)
class Sub:
    source: str
    path: str = "attempt.py"
    kind: str = "py"
    files: dict = dataclasses.field(default_factory=dict)
    error: None = None

    @property
    def units(self):
        return (Unit(self.source),)


@pytest.fixture(scope="module")
def sandbox():
    with PortableSandbox(Limits(call_timeout_s=3.0, memory_bytes=768 << 20), warm_meta=False) as sb:
        yield sb


def alive(pid: int) -> bool:
    import psutil

    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def test_the_level_is_portable_and_its_self_test_proved_the_memory_poll(sandbox):
    assert sandbox.isolation == "portable"
    assert "polled against 0.75 GiB" in sandbox.limits_note


def test_calls_output_and_stdin_work_as_on_every_level(sandbox):
    src = textwrap.dedent("""
        import sys
        print("loaded"); print("careful", file=sys.stderr)
        def double(x):
            return x * 2
        def stdin():
            return sys.stdin.read()
    """)
    with sandbox.open(Sub(src)) as w:
        assert w.load.ok, w.load.message
        assert torch.equal(w.call("double", torch.arange(3)), torch.tensor([0, 2, 4]))
        assert w.call("stdin") == ""  # the request pipe is not the student's stdin
        assert w.output() == ("loaded\n", "careful\n")


def test_a_time_limit_kills_the_worker_and_every_process_it_started(sandbox):
    src = textwrap.dedent("""
        import subprocess, sys
        def spin():
            child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
            print(child.pid, flush=True)
            while True:
                pass
    """)
    w = sandbox.open(Sub(src))
    with pytest.raises(WorkerTimeout, match="3 s"):
        w.call("spin")
    child = int(w.output()[0].split()[0])
    pid = w.pid
    w.close()
    deadline = time.monotonic() + 10
    while (alive(child) or alive(pid)) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not alive(pid) and not alive(child)


def test_the_memory_limit_stops_an_allocation_past_it(sandbox):
    src = "def hog():\n    return len(bytearray(1536 << 20))\n"
    with sandbox.open(Sub(src)) as w:
        with pytest.raises(WorkerCrashed, match="memory limit of 0.75 GiB") as e:
            w.call("hog")
        assert e.value.kind is CrashKind.MEMORY


def test_the_portable_worker_needs_none_of_linuxs_mechanisms(tmp_path):
    """With the Linux-only modules unimportable (as on Windows: resource, fcntl and the grader's
    jail, zygote, supervisor and socket-based sandbox), the portable sandbox starts, passes its
    self-test and grades."""
    script = tmp_path / "no_linux.py"
    script.write_text(textwrap.dedent("""
        import sys
        import psutil  # on Linux psutil itself uses resource; the grader's code must not
        for name in ("resource", "fcntl", "grader.sandbox.jail", "grader.sandbox.host.zygote",
                     "grader.sandbox.child.zygote", "grader.sandbox.child.supervisor",
                     "grader.sandbox.host.sandbox", "grader.sandbox.host.process", "grader.sandbox.host.isolation"):
            sys.modules[name] = None
        import dataclasses
        from grader.sandbox.host.portable import PortableSandbox
        @dataclasses.dataclass
        class Sub:
            path = "a.py"; kind = "py"; files = {}; error = None
            units = (type("U", (), {"label": "a.py", "cell": None, "source": "def f():\\n    return 41 + 1\\n"})(),)
        with PortableSandbox(warm_meta=False) as sb:
            with sb.open(Sub()) as w:
                print(sb.isolation, w.call("f"))
    """))
    out = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=600, cwd=ROOT)
    assert out.returncode == 0, out.stderr[-3000:]
    assert out.stdout.split() == ["portable", "42"]


@pytest.mark.parametrize("how", ["option", "environment"])
def test_grader_check_runs_on_the_portable_worker(tmp_path, how):
    sample = ROOT / "submissions" / "masked-attention" / "correct" / "einsum.py"
    args = ["check", str(sample), "-a", "masked-attention", "-o", str(tmp_path), "-v"]
    env = {"GRADER_ISOLATION": "portable"} if how == "environment" else {}
    result = CliRunner().invoke(main, args + (["--isolation", "portable"] if how == "option" else []), env=env)
    assert result.exit_code == 0, result.output
    assert "Sandbox isolation: portable" in result.output


def test_grader_ci_records_portable_in_the_environment(tmp_path):
    sample = ROOT / "submissions" / "masked-attention" / "buggy" / "causal_off_by_one.py"
    junit = tmp_path / "junit.xml"
    result = CliRunner().invoke(main, ["ci", str(sample), "-a", str(ROOT / "assignments" / "masked-attention"),
                                       "--junit", str(junit), "--isolation", "portable"], env={"GITHUB_STEP_SUMMARY": ""})
    assert result.exit_code == 1, result.output
    assert "causal_mask_square" in result.output  # the off-by-one's failing case, annotated
    assert "the portable level uses no cgroup" in result.output


def test_grader_grade_records_portable_in_every_result(tmp_path):
    out = tmp_path / "out"
    samples = ROOT / "submissions" / "masked-attention"
    result = CliRunner().invoke(main, ["grade", str(samples / "correct" / "einsum.py"),
                                       str(samples / "buggy" / "zero_fill.py"), "-a", "masked-attention",
                                       "-o", str(out), "-j", "1", "--isolation", "portable", "--no-similarity"])
    assert result.exit_code == 0, result.output
    results = [json.loads(p.read_text()) for p in sorted((out / "results").glob("*.json"))]
    assert len(results) == 2
    assert {r["environment"]["isolation"] for r in results} == {"portable"}
    assert "portable level uses no cgroup" in results[0]["environment"]["limits"]
