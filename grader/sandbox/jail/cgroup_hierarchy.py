"""Where a grader's worker cgroups can go: v1 or a delegated v2 subtree, found and prepared.

- **v1** (one hierarchy per controller): the grader's own memory and pids cgroups (cpu where the
  kernel has it), where it may create children.
- **v2** (one unified hierarchy, the only one on current distributions and CI runners): the
  grader's own cgroup, which must have the memory and pids controllers (cpu where present) in its
  ``cgroup.subtree_control``. The kernel lets a cgroup with processes in it hand controllers to
  its children only at the root ("no internal processes"), so where the grader's cgroup (a
  container's, a systemd scope's) holds processes, they are first moved into a leaf child,
  ``grader-main``, which is left in place for the next run: the one change to the machine's
  cgroups outside the grader's own.

`find` chooses: v1 where its memory and pids hierarchies can be written, else v2 where the grader
may create and configure children, else None (the sandbox polls memory use instead). The kernel's
files are reached through a `Files` object so that the unit tests can stand a fake cgroupfs in.
`grader.sandbox.jail.cgroups` makes and removes the cgroups below the `Hierarchy` found here.
"""

from __future__ import annotations

import errno
import os
from dataclasses import dataclass, field

ROOT = "/sys/fs/cgroup"
LEAF = "grader-main"
"""The v2 leaf the processes of the grader's own cgroup are moved into, when they must be."""


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
    if not fs.exists(os.path.join(base, "cgroup.procs")) or str(os.getpid()) not in procs(fs, base):
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
        for pid in procs(fs, base):
            try:
                fs.write(os.path.join(leaf, "cgroup.procs"), pid)
            except OSError as e:
                if e.errno != errno.ESRCH:  # a process that ended meanwhile
                    raise
        fs.write(control, text)
    except OSError:
        return False
    return True


def procs(fs: Files, path: str) -> list[str]:
    """The pids in a cgroup (none where it cannot be read)."""
    try:
        return fs.read(os.path.join(path, "cgroup.procs")).split()
    except OSError:
        return []
