"""Per-worker cgroups, v1 or v2: made before the worker starts, swept and removed after it ends.

Each worker gets its own cgroups named ``grader-<grader pid>-<seq>``, below the grader's own
cgroup (``/proc/self/cgroup``), or below ``grader-<pid>-batch<n>`` (`make_batch`), which bounds them
together by a `Budget`; nothing else of the machine's cgroups is touched, but for the one move a
v2 delegation may need (below). Removal kills whatever is still inside first.
- **v1** (one hierarchy per controller): a memory cgroup (``memory.limit_in_bytes``, and the same
  for memory+swap where the kernel accounts swap), a pids cgroup (``pids.max``) and, where the
  kernel has the controller, a cpu cgroup (``cpu.cfs_quota_us``).
- **v2** (one unified hierarchy, the only one on current distributions and CI runners): one cgroup
  with ``memory.max``, ``memory.swap.max = 0`` (swap off: past the cap the OOM killer acts, which
  ``memory.events`` reports), ``pids.max`` and ``cpu.max``. The worker cgroups are children of the
  grader's own cgroup, which must have the memory and pids controllers (cpu where present) in
  its ``cgroup.subtree_control``. The kernel lets a cgroup with processes in it hand controllers
  to its children only at the root ("no internal processes"), so where the grader's cgroup (a
  container's, a systemd scope's) holds processes, they are first moved into a leaf child,
  ``grader-main``, which is left in place for the next run.

`find` chooses: v1 where its memory and pids hierarchies can be written, else v2 where the grader
may create and configure children, else None (the sandbox polls memory use instead). The kernel's
files are reached through a `Files` object so that the unit tests can stand a fake cgroupfs in.
"""

from __future__ import annotations

import contextlib
import errno
import itertools
import os
import signal
import time
from dataclasses import dataclass, field

from grader.sandbox.limits import Budget, Limits

ROOT = "/sys/fs/cgroup"
LEAF = "grader-main"
"""The v2 leaf the processes of the grader's own cgroup are moved into, when they must be."""
_BATCHES = itertools.count(1)
PROOF_PERIOD_US = 2_000
"""The cpu period the self-test's proof uses (1 ms of CPU per 2 ms: a spin is throttled at once)."""


class Files:
    """The kernel's cgroup files, as the operating system gives them."""

    def read(self, path: str) -> str:
        with open(path) as f:
            return f.read()

    def write(self, path: str, text: str) -> None:
        with open(path, "w") as f:
            f.write(text)

    def mkdir(self, path: str) -> None:
        os.mkdir(path)

    def rmdir(self, path: str) -> None:
        os.rmdir(path)

    def exists(self, path: str) -> bool:
        return os.path.exists(path)

    def listdir(self, path: str) -> list[str]:
        return os.listdir(path)


OS = Files()


@dataclass(frozen=True)
class Hierarchy:
    """Where a sandbox's worker cgroups go."""

    version: int
    """1 or 2."""
    memory: str
    pids: str
    cpu: str | None
    """None: no cpu controller, so no cpu quota. (v2: all three are the same folder.)"""
    fs: Files = field(default=OS, compare=False, repr=False)

    @property
    def bases(self) -> list[str]:
        """The distinct parent folders, each holding one cgroup per worker."""
        return list(dict.fromkeys(p for p in (self.memory, self.pids, self.cpu) if p))


def own_paths(fs: Files = OS, proc_self: str = "/proc/self/cgroup") -> dict[str, str]:
    """Controller (v1) or "" (v2) -> this process's cgroup path, from /proc/self/cgroup."""
    try:
        lines = fs.read(proc_self).splitlines()
    except OSError:
        return {}
    found: dict[str, str] = {}
    for line in lines:
        parts = line.split(":", 2)
        if len(parts) == 3:
            for name in parts[1].split(",") if parts[1] else [""]:
                found[name] = parts[2]
    return found


def find(fs: Files = OS, root: str = ROOT, proc_self: str = "/proc/self/cgroup") -> Hierarchy | None:
    """The hierarchy this grader can use: v1 memory+pids, else a v2 delegated subtree, else None."""
    own = own_paths(fs, proc_self)
    mem, pids = _v1_base(fs, root, own, "memory"), _v1_base(fs, root, own, "pids")
    if mem and pids:
        return Hierarchy(1, mem, pids, _v1_base(fs, root, own, "cpu"), fs)
    if "" in own and fs.exists(os.path.join(root, "cgroup.controllers")):
        return delegate_v2(fs, root, own[""])
    return None


def _v1_base(fs: Files, root: str, own: dict[str, str], controller: str) -> str | None:
    """Our own v1 cgroup folder for `controller`, if it exists and we may create children there."""
    if controller not in own:
        return None
    path = f"{root}/{controller}{own[controller]}".rstrip("/")
    return path if _can_make_children(fs, path) else None


def _can_make_children(fs: Files, path: str) -> bool:
    probe = os.path.join(path, f"grader-probe-{os.getpid()}")
    try:
        fs.mkdir(probe)
        fs.rmdir(probe)
        return True
    except OSError:
        return False


def delegate_v2(fs: Files, root: str, own: str) -> Hierarchy | None:
    """Our own v2 cgroup with memory, pids (and cpu, where delegated) enabled for its children;
    None where that cannot be done (no root, no delegation, controllers not given to us)."""
    base = f"{root}{own}".rstrip("/") or root
    if not fs.exists(os.path.join(base, "cgroup.procs")) or str(os.getpid()) not in _procs(fs, base):
        # A container that sees its own cgroup at the mount point (no cgroup namespace of its own).
        base = root
    try:
        available = fs.read(os.path.join(base, "cgroup.controllers")).split()
    except OSError:
        return None
    if not {"memory", "pids"} <= set(available):
        return None
    wanted: list[str] = [c for c in ("memory", "pids", "cpu") if c in available]
    if not _enable(fs, base, wanted):
        return None
    if not _can_make_children(fs, base):
        return None
    return Hierarchy(2, base, base, base if "cpu" in wanted else None, fs)


def _enable(fs: Files, base: str, controllers: list[str]) -> bool:
    """Controllers on in `base`/cgroup.subtree_control, moving its processes into `LEAF` first
    where the kernel refuses because of them (EBUSY: "no internal processes")."""
    control = os.path.join(base, "cgroup.subtree_control")
    try:
        if set(controllers) <= set(fs.read(control).split()):
            return True
    except OSError:
        return False
    text = " ".join(f"+{c}" for c in controllers)
    try:
        fs.write(control, text)
        return True
    except OSError as e:
        if e.errno != errno.EBUSY:
            return False
    leaf = os.path.join(base, LEAF)
    try:
        if not fs.exists(leaf):
            fs.mkdir(leaf)
        for pid in _procs(fs, base):
            try:
                fs.write(os.path.join(leaf, "cgroup.procs"), pid)
            except OSError as e:
                if e.errno != errno.ESRCH:  # a process that ended meanwhile
                    raise
        fs.write(control, text)
    except OSError:
        return False
    return True


def _procs(fs: Files, path: str) -> list[str]:
    try:
        return fs.read(os.path.join(path, "cgroup.procs")).split()
    except OSError:
        return []


def make_batch(h: Hierarchy, budget: Budget) -> Hierarchy:
    """A cgroup ``grader-<pid>-batch<n>`` over every worker of a sandbox, `budget` written (memory,
    swap off, a cpu quota): the hierarchy for the workers' cgroups. Removed with `remove_batch`."""
    name = f"grader-{os.getpid()}-batch{next(_BATCHES)}"
    made: list[str] = []
    try:
        for base in h.bases:
            h.fs.mkdir(os.path.join(base, name))
            made.append(os.path.join(base, name))
        mem, pids, cpu = (os.path.join(b, name) if b else None for b in (h.memory, h.pids, h.cpu))
        _limit(h, mem, pids, cpu, memory_bytes=budget.memory_bytes, cpus=budget.cpus)
        if h.version == 2:
            on = ["memory", "pids"] + (["cpu"] if h.cpu else [])
            h.fs.write(os.path.join(str(mem), "cgroup.subtree_control"), " ".join(f"+{c}" for c in on))
    except BaseException:
        remove_unused(made, h.fs)
        raise
    return Hierarchy(h.version, str(mem), str(pids), cpu, h.fs)


def remove_batch(h: Hierarchy) -> None:
    """Remove the batch cgroups `make_batch` made (what is still inside them first)."""
    for base in h.bases:
        _remove_tree(h.fs, base)


def _remove_tree(fs: Files, path: str) -> None:
    """Remove a cgroup and the cgroups below it, children first, killing what is left inside."""
    try:
        names = fs.listdir(path)
    except OSError:
        return
    for name in names:
        if name.startswith("grader-") and fs.exists(os.path.join(path, name, "cgroup.procs")):
            _remove_tree(fs, os.path.join(path, name))
    remove([path], spare=None, fs=fs)


def make(h: Hierarchy, seq: int, limits: Limits) -> list[str]:
    """Create the worker's cgroups, limits written; returns their folders."""
    name = f"grader-{os.getpid()}-{seq}"
    made = [os.path.join(b, name) for b in h.bases]
    done: list[str] = []
    try:
        for path in made:
            h.fs.mkdir(path)
            done.append(path)
        mem, pids, cpu = (os.path.join(b, name) if b else None for b in (h.memory, h.pids, h.cpu))
        _limit(h, mem, pids, cpu, memory_bytes=limits.memory_bytes, cpus=limits.cpu_quota,
               max_pids=limits.max_pids)
    except BaseException:
        remove_unused(done, h.fs)
        raise
    return made


def _limit(h: Hierarchy, mem: str | None, pids: str | None, cpu: str | None, *, memory_bytes: int,
           cpus: float, max_pids: int | None = None) -> None:
    """Write a memory cap (swap off, or memory+swap the same on v1), a cpu quota (where there is a
    cpu controller) and, given, a pids cap into the cgroups (v2: all three are one folder)."""
    fs, quota = h.fs, max(1000, int(100_000 * cpus))
    mem, pids = str(mem), str(pids)
    if h.version == 2:
        fs.write(os.path.join(mem, "memory.max"), str(memory_bytes))
        _write_if_there(fs, os.path.join(mem, "memory.swap.max"), "0")
        if max_pids is not None:
            fs.write(os.path.join(pids, "pids.max"), str(max_pids))
        if cpu:
            fs.write(os.path.join(cpu, "cpu.max"), f"{quota} 100000")
        return
    if cpu:
        fs.write(os.path.join(cpu, "cpu.cfs_period_us"), "100000")
        fs.write(os.path.join(cpu, "cpu.cfs_quota_us"), str(quota))
    fs.write(os.path.join(mem, "memory.limit_in_bytes"), str(memory_bytes))
    _write_if_there(fs, os.path.join(mem, "memory.memsw.limit_in_bytes"), str(memory_bytes))
    if max_pids is not None:
        fs.write(os.path.join(pids, "pids.max"), str(max_pids))


def _write_if_there(fs: Files, path: str, text: str) -> None:
    """Write a file the kernel may not have (swap accounting off, or no swap controller)."""
    with contextlib.suppress(OSError):
        fs.write(path, text)


def sweep(paths: list[str], *, spare: int | None, rounds: int = 100, fs: Files = OS) -> None:
    """SIGKILL every process in the cgroups but `spare` (the supervisor), until none is left or
    `rounds` passes are done."""
    for path in paths:
        for i in range(rounds):
            pids = [int(p) for p in _procs(fs, path) if int(p) != spare]
            if not pids:
                break
            for p in pids:
                try:
                    os.kill(p, signal.SIGKILL)
                except (ProcessLookupError, PermissionError):
                    pass
            if i + 1 < rounds:
                time.sleep(0.005)


def remove(paths: list[str], *, spare: int | None, fs: Files = OS) -> None:
    """Remove the cgroups, sweeping what is still in them first."""
    for path in paths:
        for _ in range(200):
            try:
                fs.rmdir(path)
                break
            except FileNotFoundError:
                break
            except OSError:
                sweep(paths, spare=spare, fs=fs)
                time.sleep(0.01)


def remove_unused(paths: list[str], fs: Files = OS) -> None:
    """Remove cgroups no process ever joined (a worker that did not start)."""
    for path in paths:
        with contextlib.suppress(OSError):
            fs.rmdir(path)


def remove_stale(h: Hierarchy, dead) -> None:
    """Worker and batch cgroups left by a grader that was killed (`dead(pid text)` says whose)."""
    for base in h.bases:
        try:
            names = h.fs.listdir(base)
        except OSError:
            continue
        for name in names:
            if name.startswith("grader-") and name != LEAF and dead(name.split("-")[1]):
                _remove_tree(h.fs, os.path.join(base, name))


def _counters(fs: Files, path: str, name: str) -> dict[str, int]:
    """A flat-keyed cgroup file ("key value" lines: memory.events, cpu.stat) as a dict."""
    out = {}
    try:
        for line in fs.read(os.path.join(path, name)).splitlines():
            key, _, value = line.partition(" ")
            if value.strip().isdigit():
                out[key] = int(value)
    except OSError:
        pass
    return out


def oom_killed(paths: list[str], fs: Files = OS) -> bool:
    """The memory cgroup's OOM killer killed something in it (v2 memory.events, v1 memory.oom_control)."""
    return any(_counters(fs, p, "memory.events").get("oom_kill", 0) > 0
               or _counters(fs, p, "memory.oom_control").get("oom_kill", 0) > 0 for p in paths)


def memory_capped(paths: list[str], fs: Files = OS) -> bool:
    """The memory cap stopped an allocation (v2 memory.events "max" or "oom_kill", v1
    memory.failcnt): counted the moment the kernel refuses the charge, before the OOM killer ends
    the process."""
    for p in paths:
        if _counters(fs, p, "memory.events").get("max", 0) > 0 or (_first_int(fs, [p], ("memory.failcnt",)) or 0) > 0:
            return True
    return oom_killed(paths, fs)


def refused_tasks(paths: list[str], fs: Files = OS) -> int:
    """How often pids.max refused a new process or thread (pids.events "max", v1 and v2 alike)."""
    return sum(_counters(fs, p, "pids.events").get("max", 0) for p in paths)


def throttled(paths: list[str], fs: Files = OS) -> int:
    """How often the cpu quota stopped the cgroup (cpu.stat nr_throttled, v1 and v2 alike)."""
    return sum(_counters(fs, p, "cpu.stat").get("nr_throttled", 0) for p in paths)


def _first_int(fs: Files, paths: list[str], names: tuple[str, ...]) -> int | None:
    for p in paths:
        for name in names:
            try:
                return int(fs.read(os.path.join(p, name)).split()[0])
            except (OSError, ValueError, IndexError):
                continue
    return None


def tighten_for_proof(h: Hierarchy, paths: list[str], *, memory_headroom: int, pids_headroom: int) -> None:
    """Lower one worker's limits to just above what it uses now, so that the self-test can prove
    each fires without allocating gigabytes or starting dozens of threads: memory to its use plus
    `memory_headroom` bytes, pids to its count plus `pids_headroom`, cpu to half of one CPU."""
    fs = h.fs
    pids_now = _first_int(fs, paths, ("pids.current",)) or 0
    mem_now = _first_int(fs, paths, ("memory.current", "memory.usage_in_bytes")) or 0
    for p in paths:
        if h.version == 2:
            fs.write(os.path.join(p, "pids.max"), str(pids_now + pids_headroom))
            fs.write(os.path.join(p, "memory.max"), str(mem_now + memory_headroom))
            if h.cpu:
                fs.write(os.path.join(p, "cpu.max"), f"1000 {PROOF_PERIOD_US}")
            continue
        if fs.exists(os.path.join(p, "pids.max")):
            fs.write(os.path.join(p, "pids.max"), str(pids_now + pids_headroom))
        if fs.exists(os.path.join(p, "memory.limit_in_bytes")):
            # memory+swap may not go below memory alone: memory first, then memory+swap.
            fs.write(os.path.join(p, "memory.limit_in_bytes"), str(mem_now + memory_headroom))
            _write_if_there(fs, os.path.join(p, "memory.memsw.limit_in_bytes"), str(mem_now + memory_headroom))
        if fs.exists(os.path.join(p, "cpu.cfs_quota_us")):
            # The quota first: the kernel refuses a child more CPU than a batch cgroup above it.
            fs.write(os.path.join(p, "cpu.cfs_quota_us"), "1000")
            fs.write(os.path.join(p, "cpu.cfs_period_us"), str(PROOF_PERIOD_US))
