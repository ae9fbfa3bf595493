"""The cgroup code against a fake cgroupfs: v2 hosts (systemd scopes, containers) this machine
(cgroup v1) cannot be, laid out and behaving as the kernel's cgroup-v2 documentation describes
(Documentation/admin-guide/cgroup-v2.rst): a child's ``cgroup.controllers`` is its parent's
``cgroup.subtree_control``; a controller's files exist only where it is enabled; a non-root
cgroup with processes cannot enable controllers for its children, nor take processes once it
has ("no internal processes"); ``rmdir`` of a populated cgroup fails with EBUSY.
"""

from __future__ import annotations

import errno
import os
from pathlib import Path

import pytest

from grader.sandbox.host import selftest
from grader.sandbox.jail import cgroup_hierarchy, cgroups
from grader.sandbox.limits import Budget, GiB, Limits

CONTROLLER_FILES = {
    "memory": {"memory.max": "max", "memory.swap.max": "max", "memory.current": "0",
               "memory.events": "low 0\nhigh 0\nmax 0\noom 0\noom_kill 0\noom_group_kill 0\n"},
    "pids": {"pids.max": "max", "pids.current": "0", "pids.events": "max 0\n"},
    "cpu": {"cpu.max": "max 100000", "cpu.stat": "usage_usec 0\nnr_periods 0\nnr_throttled 0\nthrottled_usec 0\n"},
}


class FakeCgroupFS(cgroup_hierarchy.Files):
    """A cgroup2 mount in a temporary folder; `root_is_real`: False for a container's namespace
    root, which obeys the no-internal-processes rule like any other non-root cgroup."""

    def __init__(self, root: Path, *, controllers=("cpuset", "cpu", "io", "memory", "pids"), root_is_real=True):
        self.root = str(root)
        self.root_is_real = root_is_real
        root.mkdir(exist_ok=True)
        for name, text in {"cgroup.controllers": " ".join(controllers), "cgroup.subtree_control": "",
                           "cgroup.procs": "", "cgroup.events": "populated 0\nfrozen 0\n"}.items():
            (root / name).write_text(text)

    # -- what the kernel does ---------------------------------------------------------------
    def _is_root(self, path: str) -> bool:
        return os.path.normpath(path) == os.path.normpath(self.root) and self.root_is_real

    def mkdir(self, path: str) -> None:
        parent = os.path.dirname(path)
        os.mkdir(path)
        enabled = Path(parent, "cgroup.subtree_control").read_text().split()
        files = {"cgroup.controllers": " ".join(enabled), "cgroup.subtree_control": "", "cgroup.procs": "",
                 "cgroup.events": "populated 0\nfrozen 0\n"}
        for c in enabled:
            files.update(CONTROLLER_FILES.get(c, {}))
        for name, text in files.items():
            Path(path, name).write_text(text)

    def rmdir(self, path: str) -> None:
        if not os.path.isdir(path):
            raise FileNotFoundError(errno.ENOENT, "no such cgroup", path)
        if Path(path, "cgroup.procs").read_text().split() or any(p.is_dir() for p in Path(path).iterdir()):
            raise OSError(errno.EBUSY, "cgroup busy", path)
        for p in Path(path).iterdir():
            p.unlink()
        os.rmdir(path)

    def write(self, path: str, text: str) -> None:
        folder, name = os.path.split(path)
        if not os.path.exists(path):
            raise FileNotFoundError(errno.ENOENT, "no such file", path)
        if name == "cgroup.subtree_control":
            return self._subtree_control(folder, text)
        if name == "cgroup.procs":
            return self._move(folder, text.strip())
        if name.endswith((".current", ".events", ".stat", ".controllers")):
            raise PermissionError(errno.EACCES, "read-only", path)
        Path(path).write_text(text)

    def _subtree_control(self, folder: str, text: str) -> None:
        available = Path(folder, "cgroup.controllers").read_text().split()
        enabled = Path(folder, "cgroup.subtree_control").read_text().split()
        for word in text.split():
            c = word[1:]
            if c not in available:
                raise FileNotFoundError(errno.ENOENT, f"controller {c} not available", folder)
            if word[0] == "+" and not self._is_root(folder) and Path(folder, "cgroup.procs").read_text().split():
                raise OSError(errno.EBUSY, "no internal processes", folder)
            enabled = [e for e in enabled if e != c] + ([c] if word[0] == "+" else [])
        Path(folder, "cgroup.subtree_control").write_text(" ".join(enabled))

    def _move(self, folder: str, pid: str) -> None:
        if Path(folder, "cgroup.subtree_control").read_text().split() and not self._is_root(folder):
            raise OSError(errno.EBUSY, "no internal processes", folder)
        for procs in Path(self.root).rglob("cgroup.procs"):
            kept = [p for p in procs.read_text().split() if p != pid]
            procs.write_text("\n".join(kept))
        procs = Path(folder, "cgroup.procs")
        procs.write_text("\n".join(procs.read_text().split() + [pid]))

    # -- test helpers -----------------------------------------------------------------------
    def place(self, rel: str, pids: list[str], *, delegate=("memory", "pids", "cpu")) -> str:
        """Make the cgroup `rel` below the root, its parents handing it `delegate`, holding `pids`."""
        path = self.root
        for part in rel.strip("/").split("/"):
            self.write(os.path.join(path, "cgroup.subtree_control"), " ".join(f"+{c}" for c in delegate))
            path = os.path.join(path, part)
            self.mkdir(path)
        for pid in pids:
            self.write(os.path.join(path, "cgroup.procs"), pid)
        return path

    def counter(self, path: str, name: str, key: str, value: int) -> None:
        """The kernel counting an event (memory.events oom_kill, cpu.stat nr_throttled, ...)."""
        f = Path(path, name)
        lines = [f"{key} {value}" if line.split()[0] == key else line for line in f.read_text().splitlines()]
        f.write_text("\n".join(lines) + "\n")


ME = str(os.getpid())


def proc_self(tmp_path: Path, line: str) -> str:
    p = tmp_path / "proc-self-cgroup"
    p.write_text(line + "\n")
    return str(p)


@pytest.fixture
def fs(tmp_path):
    return FakeCgroupFS(tmp_path / "cgroup")


def test_a_systemd_scope_is_delegated_with_the_grader_moved_into_a_leaf(fs, tmp_path):
    scope = fs.place("user.slice/user-1000.slice/grader.scope", [ME, "4242"])
    h = cgroup_hierarchy.find(fs, fs.root, proc_self(tmp_path, "0::/user.slice/user-1000.slice/grader.scope"))
    assert h is not None and (h.version, h.memory, h.pids, h.cpu) == (2, scope, scope, scope)
    assert set(Path(scope, "cgroup.subtree_control").read_text().split()) == {"memory", "pids", "cpu"}
    # every process of the scope now sits in the leaf, the scope itself holds none
    assert Path(scope, "cgroup.procs").read_text().split() == []
    assert Path(scope, cgroup_hierarchy.LEAF, "cgroup.procs").read_text().split() == [ME, "4242"]


def test_a_worker_cgroup_gets_memory_with_swap_off_pids_and_one_cpu(fs, tmp_path):
    fs.place("grader.scope", [ME])
    h = cgroup_hierarchy.find(fs, fs.root, proc_self(tmp_path, "0::/grader.scope"))
    limits = Limits(memory_bytes=GiB, max_pids=32, cpu_quota=1.0)
    [path] = cgroups.make(h, 7, limits)
    assert os.path.basename(path) == f"grader-{ME}-7"
    read = lambda name: Path(path, name).read_text()  # noqa: E731
    assert (read("memory.max"), read("memory.swap.max"), read("pids.max"), read("cpu.max")) == \
        (str(GiB), "0", "32", "100000 100000")
    fs.write(os.path.join(path, "cgroup.procs"), "5555")  # the worker joins
    assert not cgroups.oom_killed([path], fs)
    fs.counter(path, "memory.events", "oom_kill", 1)
    assert cgroups.oom_killed([path], fs) and cgroups.memory_capped([path], fs)
    fs.counter(path, "cpu.stat", "nr_throttled", 3)
    fs.counter(path, "pids.events", "max", 2)
    assert (cgroups.throttled([path], fs), cgroups.refused_tasks([path], fs)) == (3, 2)


def test_worker_cgroups_are_removed_once_empty_and_stale_ones_of_dead_graders_swept(fs, tmp_path):
    fs.place("grader.scope", [ME])
    h = cgroup_hierarchy.find(fs, fs.root, proc_self(tmp_path, "0::/grader.scope"))
    [path] = cgroups.make(h, 1, Limits())
    cgroups.remove([path], spare=None, fs=fs)
    assert not os.path.exists(path)
    stale = os.path.join(h.memory, "grader-999999999-3")
    fs.mkdir(stale)
    cgroups.remove_stale(h, dead=lambda pid: pid == "999999999")
    assert not os.path.exists(stale)
    assert os.path.isdir(os.path.join(h.memory, cgroup_hierarchy.LEAF))  # the grader's own leaf stays


def test_a_container_namespace_root_moves_its_processes_into_a_leaf(tmp_path):
    fs = FakeCgroupFS(tmp_path / "cgroup", root_is_real=False)
    for pid in (ME, "1"):
        fs.write(os.path.join(fs.root, "cgroup.procs"), pid)
    h = cgroup_hierarchy.find(fs, fs.root, proc_self(tmp_path, "0::/"))
    assert h is not None and h.memory == fs.root
    assert sorted(Path(fs.root, cgroup_hierarchy.LEAF, "cgroup.procs").read_text().split()) == sorted([ME, "1"])


def test_a_container_without_its_own_cgroup_namespace_uses_the_mount_it_sees(tmp_path):
    fs = FakeCgroupFS(tmp_path / "cgroup", root_is_real=False)
    fs.write(os.path.join(fs.root, "cgroup.procs"), ME)
    # /proc/self/cgroup names the host's path, which does not exist inside the container
    h = cgroup_hierarchy.find(fs, fs.root, proc_self(tmp_path, "0::/system.slice/docker-abc.scope"))
    assert h is not None and h.memory == fs.root


def test_no_delegation_means_no_cgroup_and_the_result_says_so_in_plain_words(fs, tmp_path):
    fs.place("user.slice/session-1.scope", [ME], delegate=("cpu",))  # memory and pids not handed down
    assert cgroup_hierarchy.find(fs, fs.root, proc_self(tmp_path, "0::/user.slice/session-1.scope")) is None
    note = str(selftest.limits_note(frozenset({"namespaces", "rss", "rlimits"}), None, Limits()))
    assert note.startswith("no cgroup could be written here") and "memory is polled against 2 GiB" in note
    assert "no per-worker process or CPU cap" in note


def test_without_the_cpu_controller_memory_and_pids_still_apply(fs, tmp_path):
    fs.place("grader.scope", [ME], delegate=("memory", "pids"))
    h = cgroup_hierarchy.find(fs, fs.root, proc_self(tmp_path, "0::/grader.scope"))
    assert h is not None and h.cpu is None
    [path] = cgroups.make(h, 2, Limits())
    assert not os.path.exists(os.path.join(path, "cpu.max"))
    note = str(selftest.limits_note(frozenset({"cgroup"}), h, Limits()))
    assert note.startswith("cgroup v2: 2 GiB memory (swap off), 64 processes, no CPU cap")


def test_the_proof_lowers_each_limit_to_just_above_what_the_worker_uses(fs, tmp_path):
    fs.place("grader.scope", [ME])
    h = cgroup_hierarchy.find(fs, fs.root, proc_self(tmp_path, "0::/grader.scope"))
    [path] = cgroups.make(h, 3, Limits())
    Path(path, "memory.current").write_text("50000000\n")
    Path(path, "pids.current").write_text("5\n")
    assert cgroups.tighten_for_proof(h, [path], memory_headroom=1 << 20, pids_headroom=3) == 50000000
    assert Path(path, "memory.max").read_text() == str(50000000 + (1 << 20))
    assert Path(path, "pids.max").read_text() == "8"
    assert Path(path, "cpu.max").read_text() == f"1000 {cgroups.PROOF_PERIOD_US}"


def test_v1_still_comes_first_where_its_hierarchies_can_be_written(tmp_path):
    root = tmp_path / "cgroup"
    for c in ("memory", "pids", "cpu"):
        (root / c / "grader").mkdir(parents=True)
    h = cgroup_hierarchy.find(cgroup_hierarchy.OS, str(root), proc_self(tmp_path, "4:memory:/grader\n3:pids:/grader\n2:cpu,cpuacct:/grader\n0::/"))
    assert h is not None and h.version == 1
    assert (h.memory, h.pids, h.cpu) == tuple(str(root / c / "grader") for c in ("memory", "pids", "cpu"))
    mem, pids, cpu = cgroups.make(h, 4, Limits(memory_bytes=GiB, max_pids=16))
    assert (Path(mem, "memory.limit_in_bytes").read_text(), Path(pids, "pids.max").read_text(),
            Path(cpu, "cpu.cfs_quota_us").read_text()) == (str(GiB), "16", "100000")


def test_a_level_that_proves_less_than_it_claims_stops_unless_the_weaker_one_is_accepted():
    feats = frozenset({"namespaces", "uid", "seccomp", "cgroup", "rlimits"})
    failed = selftest.Proof({"memory": True, "pids": True, "cpu": False}, {"cpu": "never throttled"})
    with pytest.raises(selftest.EnvironmentBroken, match=r"claims cpu limits that did not fire .*cpu: never "
                       r"throttled.* pass --accept-isolation namespaces\+uid\+seccomp\+rlimits"):
        selftest.proven_level(feats, failed, accept=None)
    assert selftest.proven_level(feats, failed, accept="namespaces+uid+seccomp+rlimits") == \
        "namespaces+uid+seccomp+rlimits (accepted: cpu limit not proven)"
    assert selftest.proven_level(feats, selftest.Proof({"memory": True, "pids": True, "cpu": True}), accept=None) \
        == "namespaces+uid+seccomp+cgroup+rlimits"


def test_a_batch_cgroup_holds_every_worker_under_the_batch_budget(fs, tmp_path):
    """One cgroup over all of a sandbox's workers (two slots, each with a pre-started worker: four
    at once), with the batch's memory (swap off) and CPU budget; the workers' own limits below it."""
    scope = fs.place("grader.scope", [ME])
    h = cgroup_hierarchy.find(fs, fs.root, proc_self(tmp_path, "0::/grader.scope"))
    batch = cgroups.make_batch(h, Budget(cpus=2.0, memory_bytes=4 * GiB))
    path = batch.memory
    assert os.path.dirname(path) == scope and os.path.basename(path).startswith(f"grader-{ME}-batch")
    assert (batch.version, batch.pids, batch.cpu) == (2, path, path)
    read = lambda p, name: Path(p, name).read_text()  # noqa: E731
    assert (read(path, "memory.max"), read(path, "memory.swap.max"), read(path, "cpu.max")) == \
        (str(4 * GiB), "0", "200000 100000")
    assert set(read(path, "cgroup.subtree_control").split()) == {"memory", "pids", "cpu"}
    workers = [cgroups.make(batch, i, Limits(memory_bytes=2 * GiB))[0] for i in range(4)]
    assert all(os.path.dirname(w) == path for w in workers)
    assert [read(w, "memory.max") for w in workers] == [str(2 * GiB)] * 4
    note = str(selftest.limits_note(frozenset({"cgroup"}), batch, Limits(), budget=Budget(2.0, 4 * GiB)))
    assert note.endswith("per worker, each seen to fire at start-up; all workers at once, pre-started ones "
                         "included: 2 CPUs and 4 GiB")
    cgroups.remove_batch(batch)  # its workers' cgroups first (the kernel refuses a parent's rmdir)
    assert not os.path.exists(path) and os.path.isdir(os.path.join(scope, cgroup_hierarchy.LEAF))


def test_a_killed_graders_batch_cgroup_is_swept_with_its_workers(fs, tmp_path):
    fs.place("grader.scope", [ME])
    h = cgroup_hierarchy.find(fs, fs.root, proc_self(tmp_path, "0::/grader.scope"))
    stale = os.path.join(h.memory, "grader-999999999-batch")
    fs.mkdir(stale)
    fs.write(os.path.join(stale, "cgroup.subtree_control"), "+memory +pids")
    fs.mkdir(os.path.join(stale, "grader-999999999-4"))
    cgroups.remove_stale(h, dead=lambda pid: pid == "999999999")
    assert not os.path.exists(stale)


def test_a_v1_batch_cgroup_is_one_per_controller_with_the_budget(tmp_path):
    root = tmp_path / "cgroup"
    for c in ("memory", "pids", "cpu"):
        (root / c / "grader").mkdir(parents=True)
    h = cgroup_hierarchy.find(cgroup_hierarchy.OS, str(root), proc_self(tmp_path, "4:memory:/grader\n3:pids:/grader\n2:cpu,cpuacct:/grader\n0::/"))
    batch = cgroups.make_batch(h, Budget(cpus=1.5, memory_bytes=3 * GiB))
    name = os.path.basename(batch.memory)
    assert name.startswith(f"grader-{ME}-batch")
    assert (batch.memory, batch.pids, batch.cpu) == tuple(str(root / c / "grader" / name) for c in ("memory", "pids", "cpu"))
    assert (Path(batch.memory, "memory.limit_in_bytes").read_text(), Path(batch.cpu, "cpu.cfs_quota_us").read_text(),
            Path(batch.cpu, "cpu.cfs_period_us").read_text()) == (str(3 * GiB), "150000", "100000")
    mem, _, _ = cgroups.make(batch, 1, Limits())
    assert os.path.dirname(mem) == batch.memory
