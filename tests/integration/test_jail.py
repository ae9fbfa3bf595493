"""The jail against every known way out of it, on every level
this machine offers: the strongest (zygote, direct workers), the supervised fallback (a fresh
``python -m grader.sandbox.child.supervisor``) and the "process" level.

tests/data/hostile/jailbreak.py tries each way out and returns what it got; every test below
states what must hold at the level in use, so the gaps of a weaker level stay visible (skipped
with the reason) rather than silently passing.
"""

from __future__ import annotations

import ctypes
import glob
import os
import socket
import sys
import tempfile
import time
from pathlib import Path

import pytest

from grader.submission.load import load_submission
from grader.sandbox import CrashKind, EnvironmentBroken, Limits, Sandbox, WireError, WorkerCrashed

HOSTILE = Path(__file__).parent.parent / "data" / "hostile"
LIMITS = Limits(import_timeout_s=10, call_timeout_s=10, submission_timeout_s=60, memory_bytes=1 << 30,
                max_pids=64)
LINUX = sys.platform.startswith("linux")
pytestmark = [pytest.mark.slow, pytest.mark.skipif(not LINUX, reason="the jail is Linux's")]  # full tier: every jail mechanism at three levels, against hostile code

_libc = ctypes.CDLL(None, use_errno=True)
KEY_SPEC_SESSION_KEYRING = -3
SECRET = f"grader-test-secret-{os.getpid()}"


def _add_session_key(description: str, payload: bytes) -> int:
    from grader.sandbox.jail import seccomp

    return _libc.syscall(seccomp.syscall_number("add_key"), b"user", description.encode(), payload,
                         len(payload), KEY_SPEC_SESSION_KEYRING)


@pytest.fixture(scope="module", params=["zygote", "supervised", "process"])
def sb(request):
    """A key in this process's session keyring first (what a login's tokens would be), then the
    sandbox: its zygote and workers start with that keyring."""
    from grader.sandbox.jail import seccomp

    key = _add_session_key(SECRET, b"kerberos-ticket") if seccomp.library() else -1
    kwargs = {"zygote": {}, "supervised": {"use_zygote": False},
              "process": {"use_zygote": False, "isolation": "process"}}[request.param]
    try:
        with Sandbox(LIMITS, **kwargs) as box:
            yield box
    finally:
        if key >= 0:
            _libc.syscall(seccomp.syscall_number("keyctl"), 3, key)  # KEYCTL_REVOKE


def jailbreak(sb):
    return sb.open(load_submission(HOSTILE / "jailbreak.py"))


def needs(sb, *features):
    missing = [f for f in features if f not in sb.features]
    if missing:
        pytest.skip(f"{sb.isolation}: no {', '.join(missing)} at this level")


# 1. keyrings ------------------------------------------------------------------------------------

def test_keyrings_are_out_of_reach(sb):
    needs(sb, "seccomp")
    with jailbreak(sb) as w:
        assert w.call("keyring_read_session", SECRET) == "EPERM"
        assert w.call("keyring_store", "def masked_attention(...): ...  # the answer") == "EPERM"
    with jailbreak(sb) as w:  # a later worker (another student's) finds nothing
        assert w.call("keyring_load") == "EPERM"


# 2. the grader's own files ----------------------------------------------------------------------

def test_reference_and_grader_files_cannot_be_read_or_imported(sb):
    needs(sb, "landlock")
    with jailbreak(sb) as w:
        assert w.call("import_reference") == "no: ModuleNotFoundError"


def test_sys_shows_the_cpu_topology_and_no_cgroup_counters(sb):
    needs(sb, "namespaces")
    with jailbreak(sb) as w:
        assert w.call("neighbours_counters") == []
        assert w.call("cpu_topology") == ["cpu0"]


# 3, 4. sockets, namespaces, kernel interfaces ---------------------------------------------------

def test_no_socket_of_any_family(sb, tmp_path):
    needs(sb, "seccomp")
    path = tempfile.mktemp(prefix="grader-host-", suffix=".sock", dir="/tmp")
    srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    srv.bind(path)
    os.chmod(path, 0o777)  # a world-writable socket of a root service
    srv.listen()
    srv.settimeout(0.5)
    try:
        with jailbreak(sb) as w:
            assert w.call("unix_connect", path) == "socket: EPERM"
            assert w.call("raw_sockets") == {"packet": "EPERM", "netlink": "EPERM", "inet": "EPERM",
                                             "unix": "EPERM"}
        with pytest.raises(socket.timeout):
            srv.accept()
    finally:
        srv.close()
        os.unlink(path)


def test_no_namespaces_ptrace_bpf_io_uring_or_userfaultfd(sb):
    needs(sb, "seccomp")
    with jailbreak(sb) as w:
        got = w.call("kernel_surface")
    assert got == {"unshare_user_net": "EPERM", "userfaultfd": "EPERM", "io_uring": "EPERM",
                   "bpf": "EPERM", "ptrace": "EPERM", "fork": "ok"}


# 5. CPU -----------------------------------------------------------------------------------------

def _cpu_seconds(pids: list[int]) -> float:
    total = 0
    for pid in pids:
        try:
            with open(f"/proc/{pid}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
            total += int(fields[11]) + int(fields[12])
        except OSError:
            pass
    return total / os.sysconf("SC_CLK_TCK")


def _cfs(group: str) -> tuple[int, int, int]:
    """A cgroup v1 cpu controller's quota and period (us) and how many periods it was throttled."""
    def read(name: str) -> str:
        with open(os.path.join(group, name)) as f:
            return f.read()
    stat = dict(line.split() for line in read("cpu.stat").splitlines())
    return int(read("cpu.cfs_quota_us")), int(read("cpu.cfs_period_us")), int(stat["nr_throttled"])


def test_a_cpu_hog_gets_one_cpu_and_its_neighbour_keeps_its_own(sb, tmp_path):
    needs(sb, "cgroup")
    if not glob.glob("/sys/fs/cgroup/cpu/cpu.cfs_quota_us"):
        pytest.skip("no cgroup v1 cpu controller here")
    slow = tmp_path / "slow.py"
    slow.write_text("import time\n\ndef spin(seconds):\n    t = time.process_time()\n"
                    "    while time.process_time() - t < seconds:\n        pass\n    return True\n")
    with sb.open(load_submission(HOSTILE / "cpu_hog.py")) as hog:
        assert hog.load.ok
        procs = []
        groups = glob.glob(f"/sys/fs/cgroup/cpu/grader-{os.getpid()}-*")
        for d in groups:
            with open(os.path.join(d, "cgroup.procs")) as f:
                procs += [int(x) for x in f.read().split()]
        assert len(procs) > 10  # the hog and its busy children, all in its cpu cgroup
        # The most weight the scheduler gives a group: on a machine busy with other work the hog
        # still asks for more than its quota, so the quota (not the neighbours) is what holds it.
        for d in groups:
            with open(os.path.join(d, "cpu.shares"), "w") as f:
                f.write("262144")
        before, t0 = _cpu_seconds(procs), time.monotonic()
        with sb.open(load_submission(slow)) as neighbour:
            assert neighbour.call("spin", 1.0) is True
        used = (_cpu_seconds(procs) - before) / (time.monotonic() - t0)
        # The limit that held the hog: one CPU's quota, throttled while the neighbour ran.
        quota, period, throttled = _cfs(groups[0])
    assert quota == period, (quota, period)
    assert throttled > 0
    assert used < 1.3, f"the hog used {used:.2f} CPUs (quota: 1)"


# 6. disk ----------------------------------------------------------------------------------------

def test_disk_is_a_small_tmpfs_and_filling_it_is_a_clear_crash(sb):
    needs(sb, "namespaces")
    free_before = os.statvfs(tempfile.gettempdir()).f_bavail
    with jailbreak(sb) as w:
        with pytest.raises(WorkerCrashed, match=r"wrote more than .*64 MiB") as info:
            w.call("fill_disk", 200)
        assert info.value.kind is CrashKind.DISK
    with jailbreak(sb) as w:
        with pytest.raises(WorkerCrashed, match="4096 files") as info:
            w.call("many_files", 20_000)
    # Nothing of it reached the host's disk.
    assert os.statvfs(tempfile.gettempdir()).f_bavail >= free_before - (8 << 20) // os.statvfs("/tmp").f_frsize


def test_nothing_written_outlives_a_worker(sb):
    needs(sb, "namespaces")
    with jailbreak(sb) as w:
        w.call("shared_dirs", "notes for a friend")
    with jailbreak(sb) as w:
        assert w.call("find_shared") is None
    for d in ("/tmp", "/var/tmp", "/dev/shm"):
        assert not os.path.exists(os.path.join(d, "grader-collusion.txt"))


# 7. replies -------------------------------------------------------------------------------------

def test_a_reply_over_the_cap_is_refused_before_it_is_read(sb):
    with jailbreak(sb) as w:
        w.reply_cap = 1 << 20
        with pytest.raises(WireError, match="over the limit of 1048576"):
            w.call("big_reply", 32)


# 8. the interpreter and what it imports, wherever it lives --------------------------------------

def test_a_library_folder_under_tmp_stays_importable(sb, monkeypatch):
    lib = tempfile.mkdtemp(prefix="grader-lib-", dir="/tmp")
    try:
        os.chmod(lib, 0o755)
        pkg = Path(lib) / "lazylib_for_grader_test"
        pkg.mkdir()
        (pkg / "__init__.py").write_text("VALUE = 42\n")
        os.chmod(pkg, 0o755)
        sys.path.append(lib)  # as PYTHONPATH would put it there
        monkeypatch.setenv("PYTHONPATH", lib)
        try:
            with Sandbox(LIMITS, use_zygote=sb.uses_zygote,
                         isolation="process" if sb.isolation.startswith("process") else "auto") as box:
                src = Path(lib) / "sub.py"
                src.write_text("def value():\n    import lazylib_for_grader_test\n"
                               "    return lazylib_for_grader_test.VALUE\n")
                with box.open(load_submission(src)) as w:
                    assert w.call("value") == 42
        finally:
            sys.path.remove(lib)
    finally:
        import shutil
        shutil.rmtree(lib)


def test_lazy_torch_imports_work(sb):
    with jailbreak(sb) as w:
        assert w.call("lazy_import") == "torch.fx.experimental.symbolic_shapes"


def test_a_jail_that_would_fail_correct_code_refuses_to_start(sb, monkeypatch):
    needs(sb, "uid")
    hidden = tempfile.mkdtemp(prefix="grader-private-", dir="/tmp")  # 0700: not for uid 65534
    Path(hidden, "helpers_for_grading.py").write_text("X = 1\n")  # something to import there
    sys.path.append(hidden)  # as PYTHONPATH would put it there
    monkeypatch.setenv("PYTHONPATH", hidden)
    try:
        with pytest.raises(EnvironmentBroken, match=f"the folder {hidden} on sys.path cannot be read"):
            Sandbox(LIMITS, use_zygote=sb.uses_zygote)
    finally:
        sys.path.remove(hidden)
        import shutil
        shutil.rmtree(hidden)


def test_isolation_names_seccomp_where_it_applies(sb):
    from grader.sandbox.jail import seccomp

    assert ("seccomp" in sb.isolation) == bool(seccomp.library())
