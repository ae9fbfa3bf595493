"""Per-worker cgroups (v1): made before the worker starts, swept and removed after it ends.

Each worker gets a memory and a pids cgroup (and a cpu one with a quota, where the kernel has
the controller) named ``grader-<grader pid>-<seq>``; nothing else of the machine's cgroups is
touched. Removal kills whatever is still inside first, so a folder that is gone held no process.
"""

from __future__ import annotations

import os
import signal
import time

from grader.sandbox.jail import write_text
from grader.sandbox.limits import Limits


def base(controller: str) -> str | None:
    """Our own cgroup v1 directory for a controller, if it exists and we may create children."""
    try:
        with open("/proc/self/cgroup") as f:
            lines = f.read().splitlines()
    except OSError:
        return None
    for line in lines:
        parts = line.split(":", 2)
        if len(parts) == 3 and controller in parts[1].split(","):
            path = f"/sys/fs/cgroup/{controller}{parts[2]}".rstrip("/")
            probe = os.path.join(path, f"grader-probe-{os.getpid()}")
            try:
                os.mkdir(probe)
                os.rmdir(probe)
                return path
            except OSError:
                return None
    return None


def make(bases: tuple[str, str, str | None], seq: int, limits: Limits) -> list[str]:
    """Create the worker's cgroups under `bases` (memory, pids, cpu or None), limits written."""
    mem_base, pids_base, cpu_base = bases
    name = f"grader-{os.getpid()}-{seq}"
    mem, pids = os.path.join(mem_base, name), os.path.join(pids_base, name)
    os.mkdir(mem)
    os.mkdir(pids)
    made = [mem, pids]
    if cpu_base:
        cpu = os.path.join(cpu_base, name)
        os.mkdir(cpu)
        made.append(cpu)
        period = 100_000
        write_text(os.path.join(cpu, "cpu.cfs_period_us"), str(period))
        write_text(os.path.join(cpu, "cpu.cfs_quota_us"), str(max(1000, int(period * limits.cpu_quota))))
    write_text(os.path.join(mem, "memory.limit_in_bytes"), str(limits.memory_bytes))
    try:
        write_text(os.path.join(mem, "memory.memsw.limit_in_bytes"), str(limits.memory_bytes))
    except OSError:
        pass
    write_text(os.path.join(pids, "pids.max"), str(limits.max_pids))
    return made


def sweep(paths: list[str], *, spare: int | None, rounds: int = 100) -> None:
    """SIGKILL every process in the cgroups but `spare` (the supervisor), until none is left or
    `rounds` passes are done."""
    for path in paths:
        for i in range(rounds):
            try:
                with open(os.path.join(path, "cgroup.procs")) as f:
                    pids = [int(x) for x in f.read().split()]
            except OSError:
                break
            pids = [p for p in pids if p != spare]
            if not pids:
                break
            for p in pids:
                try:
                    os.kill(p, signal.SIGKILL)
                except (ProcessLookupError, PermissionError):
                    pass
            if i + 1 < rounds:
                time.sleep(0.005)


def remove(paths: list[str], *, spare: int | None) -> None:
    """Remove the cgroups, sweeping what is still in them first."""
    for path in paths:
        for _ in range(200):
            try:
                os.rmdir(path)
                break
            except FileNotFoundError:
                break
            except OSError:
                sweep(paths, spare=spare)
                time.sleep(0.01)


def remove_unused(paths: list[str]) -> None:
    """Remove cgroups no process ever joined (a worker that did not start)."""
    for path in paths:
        try:
            os.rmdir(path)
        except OSError:
            pass


def oom_killed(paths: list[str]) -> bool:
    """The memory cgroup's OOM killer killed something in it."""
    for path in paths:
        try:
            with open(os.path.join(path, "memory.oom_control")) as f:
                for line in f:
                    if line.startswith("oom_kill ") and int(line.split()[1]) > 0:
                        return True
        except OSError:
            continue
    return False
