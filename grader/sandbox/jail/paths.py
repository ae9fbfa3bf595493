"""Which files a worker may read, decided on the grader's side before any worker starts.

What a worker may read: the interpreter, its libraries and system files (``read_allowlist``,
``library_path``); never the grader's own files: its package, the reference, the assignments and
the checkout it runs from (``grader_paths``). ``worker_paths`` gives both lists; the worker
applies them to itself (``grader.sandbox.jail.enter``: mounts and Landlock). Of /dev, a worker gets only
the device nodes ``worker_devices`` names. Reads this process's state
(sys.path, mapped libraries); changes nothing.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable

from grader.sandbox.jail.enter import NOBODY, below

BASIC_DEVICES = ("/dev/null", "/dev/zero", "/dev/full", "/dev/random", "/dev/urandom")
"""The device nodes every worker gets: no terminal (the host's /dev/ptmx and /dev/pts are shared
by every process of a uid, a channel between two workers alive at once), no other device."""


def worker_devices(extra: tuple[str, ...] = ()) -> list[str]:
    """The device nodes a worker may open, the only entries of its /dev: the basic ones and
    `extra` (an accelerator's nodes), those that exist here. The worker bind-mounts each into a
    private /dev of its own and allows only them under Landlock."""
    wanted = dict.fromkeys((*BASIC_DEVICES, *extra))
    return [d for d in wanted if d.startswith("/dev/") and os.path.exists(d)]


def gpu_devices(device: str) -> tuple[str, ...]:
    """The NVIDIA device nodes a worker needs for `device` ("cuda...": /dev/nvidia*, nvidiactl,
    nvidia-uvm; none for "cpu", so a CPU worker cannot open the GPU at all)."""
    if not device.startswith("cuda"):
        return ()
    import glob

    return tuple(sorted(p for p in glob.glob("/dev/nvidia*") if not os.path.isdir(p)))


def hidden_ancestors(paths: list[str]) -> list[str]:
    """Top-most ancestors of `paths` that uid 65534 cannot traverse (mode lacks o+x)."""
    out: set[str] = set()
    for p in paths:
        parts = os.path.abspath(p).split("/")[1:]
        cur = ""
        for part in parts[:-1]:
            cur += "/" + part
            try:
                st = os.stat(cur)
            except OSError:
                break
            if not st.st_mode & 0o001 and st.st_uid != NOBODY:
                out.add(cur)
                break
    return sorted(out)


SYS_FOR_CPU = ("/sys/devices/system/cpu", "/sys/devices/system/node")
"""What torch (and its OpenMP) reads of /sys on the CPU: the CPU and NUMA topology. Not the rest of
/sys: among it, every cgroup's counters (a neighbour's memory and CPU use)."""
HIDDEN_SYS = ("/sys/fs/cgroup",)
"""Covered by an empty mount in every worker's mount namespace, whatever the device."""


def read_allowlist(*, with_sys_path: bool = True, device: str = "cpu") -> list[str]:
    """Where a worker may read: the interpreter, its libraries and system files, the folders of every
    shared library this process has mapped (a conda or Nix store included) and, `with_sys_path`,
    every sys.path folder (.pth additions too). The grader's own files come out in `worker_paths`.
    Of /sys, the CPU topology only, unless `device` is a GPU (its driver reads PCI and module
    entries there)."""
    import sysconfig

    sys_read = ("/sys",) if device.startswith("cuda") else SYS_FOR_CPU
    paths = {"/usr", "/lib", "/lib64", "/bin", "/etc", "/proc", *sys_read, sys.prefix, sys.base_prefix,
             sys.exec_prefix, os.path.dirname(os.path.realpath(sys.executable))}
    for key in ("stdlib", "platstdlib", "purelib", "platlib"):
        try:
            paths.add(sysconfig.get_paths()[key])
        except KeyError:
            pass
    for mod in ("torch", "numpy"):
        m = sys.modules.get(mod)
        where = getattr(m, "__file__", None) if m is not None else None
        if where:
            paths.add(os.path.dirname(os.path.dirname(os.path.realpath(where))))
    if with_sys_path:
        paths.update(library_path())
    paths.update(_mapped_library_dirs())
    return sorted(os.path.normpath(p) for p in paths if p and os.path.exists(p))


def library_path() -> list[str]:
    """The folders of this process's sys.path that installed code is imported from, the ones a
    fresh interpreter would have too: the installation (stdlib, site-packages), PYTHONPATH and
    what .pth files add. Not what was added at run time: the folder of the script that runs the
    grader, the current folder (an instructor's course folder, say), a test runner's or a Dask
    worker's own folders."""
    prefixes = {os.path.realpath(p) for p in (sys.prefix, sys.base_prefix, sys.exec_prefix,
                                               getattr(sys, "base_exec_prefix", sys.exec_prefix))}
    wanted = {os.path.realpath(p) for p in os.environ.get("PYTHONPATH", "").split(os.pathsep)
              if p and os.path.isabs(p)}
    sites = [p for p in sys.path if os.path.basename(p.rstrip("/")) in ("site-packages", "dist-packages")]
    for site_dir in sites:
        wanted.update(_pth_paths(site_dir))
    own = {os.path.realpath(os.getcwd())}
    if sys.argv and sys.argv[0] not in ("", "-c", "-m"):
        own.add(os.path.dirname(os.path.realpath(sys.argv[0])))
    out = []
    for p in sys.path:
        if not p or not os.path.isabs(p):
            continue
        real = os.path.realpath(p)
        if real in own and real not in wanted:
            continue
        if (p in sites or real in wanted
                or any(real == pre or below(real, pre) for pre in prefixes)):
            out.append(p)
    return out


def _pth_paths(site_dir: str) -> set[str]:
    """The folders the .pth files of a site dir add to sys.path."""
    out: set[str] = set()
    try:
        names = [n for n in os.listdir(site_dir) if n.endswith(".pth")]
    except OSError:
        return out
    for name in names:
        try:
            with open(os.path.join(site_dir, name), encoding="utf-8", errors="replace") as f:
                for line in f:
                    line = line.strip()
                    if line and not line.startswith(("#", "import ", "import\t")):
                        out.add(os.path.realpath(os.path.join(site_dir, line)))
        except OSError:
            continue
    return out


def _mapped_library_dirs() -> set[str]:
    out: set[str] = set()
    try:
        with open("/proc/self/maps") as f:
            for line in f:
                parts = line.split(None, 5)
                if len(parts) == 6 and parts[5].startswith("/") and ".so" in parts[5]:
                    out.add(os.path.dirname(parts[5].strip()))
    except OSError:
        pass
    return out


def grader_paths() -> tuple[list[str], str | None]:
    """What a worker must never read: (this package, the reference and the assignment folders;
    the checkout the grader runs from, if it runs from one: an editable install). Inside the
    checkout, only an interpreter living there (a .venv) stays readable."""
    import importlib.util

    import grader

    pkg = os.path.dirname(os.path.realpath(grader.__file__))
    secret = {pkg}
    try:
        spec = importlib.util.find_spec("reference")
    except (ImportError, ValueError):
        spec = None
    if spec is not None:
        secret.update(os.path.realpath(p) for p in (spec.submodule_search_locations or [spec.origin or ""]) if p)
    try:
        from grader.assignment.spec import search_path
        secret.update(str(p) for p in search_path())
    except Exception:  # noqa: BLE001 - a broken assignment folder must not open the jail
        pass
    root = os.path.dirname(pkg)
    checkout = root if any(os.path.exists(os.path.join(root, m)) for m in ("pyproject.toml", ".git", "setup.py")) else None
    return sorted(secret), checkout


def worker_paths(device: str = "cpu") -> tuple[list[str], list[str]]:
    """(what a worker may read, what is covered in its mount namespace)."""
    secret, checkout = grader_paths()
    hidden = secret + ([checkout] if checkout else [])
    readable = allow_except(read_allowlist(device=device), hidden)
    if checkout:  # an interpreter inside the checkout (a .venv) stays visible; nothing else there
        readable += [p for p in read_allowlist(with_sys_path=False, device=device) if below(p, checkout)]
        readable += [p for p in library_path() if below(p, checkout)
                     and any(below(p, r) for r in readable if below(r, checkout))]
    covered = hidden + [p for p in HIDDEN_SYS if os.path.isdir(p)]
    return allow_except(sorted(set(readable)), secret), covered


def allow_except(allowed: list[str], denied: list[str],
                 listdir: Callable[[str], list[str]] = os.listdir) -> list[str]:
    """`allowed` minus everything at or below a `denied` path, for an allow-only mechanism
    (Landlock): an allowed folder holding a denied path is replaced by its entries, recursively,
    leaving the denied ones out."""
    denied = [os.path.normpath(d) for d in denied]
    out: set[str] = set()

    def visit(p: str) -> None:
        if any(p == d or below(p, d) for d in denied):
            return
        if not any(below(d, p) for d in denied):
            out.add(p)
            return
        try:
            names = listdir(p)
        except OSError:
            return
        for name in names:
            visit(os.path.join(p, name))

    for a in allowed:
        visit(os.path.normpath(a))
    return sorted(out)
