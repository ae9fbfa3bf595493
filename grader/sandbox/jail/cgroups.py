"""Per-worker cgroups, v1 or v2: made before the worker starts, swept and removed after it ends.

Each worker gets its own cgroups named ``grader-<grader pid>-<seq>``, below the grader's own
cgroup (the `Hierarchy` `grader.sandbox.jail.cgroup_hierarchy.find` gives), or below
``grader-<pid>-batch<n>`` (`make_batch`), which bounds them together by a `Budget`. Removal kills
whatever is still inside first.
- **v1**: a memory cgroup (``memory.limit_in_bytes``, and the same for memory+swap where the
  kernel accounts swap), a pids cgroup (``pids.max``) and, where the kernel has the controller, a
  cpu cgroup (``cpu.cfs_quota_us``).
- **v2**: one cgroup with ``memory.max``, ``memory.swap.max = 0`` (swap off: past the cap the OOM
  killer acts, which ``memory.events`` reports), ``pids.max`` and ``cpu.max``.

What the kernel counted in them (`oom_killed`, `memory_capped`, `refused_tasks`, `throttled`) says
which limit stopped a worker; `tighten_for_proof` lowers one worker's limits for the self-test.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import signal
import time

from grader.sandbox.jail.cgroup_hierarchy import LEAF, OS, Files, Hierarchy, procs
from grader.sandbox.limits import Budget, Limits

_BATCHES = itertools.count(1)
PROOF_PERIOD_US = 2_000
"""The cpu period the self-test's proof uses (1 ms of CPU per 2 ms: a spin is throttled at once)."""


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
            pids = [int(p) for p in procs(fs, path) if int(p) != spare]
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


def tighten_for_proof(h: Hierarchy, paths: list[str], *, memory_headroom: int, pids_headroom: int) -> int:
    """Lower one worker's limits to just above what it uses now, so that the self-test can prove
    each fires without allocating gigabytes or starting dozens of threads: memory to its use plus
    `memory_headroom` bytes, pids to its count plus `pids_headroom`, cpu to half of one CPU.
    Returns the memory in use it saw, in bytes."""
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
    return mem_now
