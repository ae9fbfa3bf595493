"""The isolation plan: which jail features this machine gives every worker, chosen once per Sandbox.

`choose` reads the jail probe (``python -I jail/enter.py``, started with the zygote) and the cgroup mounts;
the resulting `IsolationPlan` is frozen and the same for every worker the Sandbox starts.
`worker_config` turns it, with the `Limits`, into the JSON configuration each worker applies to
itself (``grader.sandbox.jail.enter``). A feature is in the plan only where it will be fully applied:
the worker reports what it applied, and the grader refuses a worker that applied anything else.
"""

from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import dataclass

from grader.sandbox.host import zygote
from grader.sandbox.host.process import dead
from grader.sandbox.jail import cgroup_hierarchy, cgroups, paths
from grader.sandbox.limits import GiB, Limits

LINUX = sys.platform.startswith("linux")
ORDER = ("namespaces", "uid", "landlock", "seccomp", "cgroup", "rss", "rlimits")
"""The features in the order a level's name lists them ("namespaces+uid+...+rlimits")."""


@dataclass(frozen=True)
class IsolationPlan:
    features: frozenset[str]
    """What every worker applies: namespaces, uid, landlock, seccomp, cgroup, rss, rlimits."""
    hierarchy: cgroup_hierarchy.Hierarchy | None = None
    """Where a worker's cgroups go (v1 or v2); None: rss polling."""
    hide: tuple[str, ...] = ()
    """Ancestors of the read paths masked in the worker (the read paths below them are bound back)."""
    read_paths: tuple[str, ...] = ()
    """What the worker may read (empty at the "process" level: nothing is hidden from it)."""
    cover: tuple[str, ...] = ()
    """The grader's own files, covered by empty mounts in the worker."""
    devices: tuple[str, ...] = ()
    """The device nodes of the worker's own /dev, and the only ones Landlock lets it open."""
    landlock_abi: int = 0
    resident: bool = False
    """Each worker also restricts its reads to the files its zygote made resident (the page cache
    then carries no bit from one worker to another: ``grader.sandbox.jail.resident``)."""
    userns: bool = False
    """The namespaces need a user namespace (the grader is not root)."""

    @property
    def name(self) -> str:
        return level_name(self.features)


def level_name(features: frozenset[str]) -> str:
    """A level's name, e.g. "namespaces+uid+landlock+seccomp+cgroup+rlimits" or "process+rss+rlimits"."""
    base = [] if "namespaces" in features else ["process"]
    return "+".join(base + [f for f in ORDER if f in features])


def choose(isolation: str, probe_proc: subprocess.Popen | None, env: dict[str, str], root: str,
           device: str = "cpu") -> IsolationPlan:
    """The plan for `isolation` ("auto": the strongest available; "process"), from the probe
    `probe_proc` started earlier (or one started now); the probe is waited for or killed."""
    feats = {"rlimits"}
    if isolation == "process" or not LINUX:
        # No namespaces, uid, Landlock or cgroups; the system-call filter still, where Linux has it.
        if LINUX and zygote.probe_result(probe_proc or zygote.start_probe(env, root)).get("seccomp"):
            feats.add("seccomp")
        elif probe_proc is not None:
            probe_proc.kill()
            probe_proc.wait()
        feats.add("rss")
        return IsolationPlan(features=frozenset(feats))
    # jail/enter.py runs as a script (standard library only), started with the zygote.
    probe = zygote.probe_result(probe_proc or zygote.start_probe(env, root))
    userns = False
    if probe.get("namespaces"):
        feats.add("namespaces")
        userns = bool(probe.get("userns"))
    read_paths, cover = paths.worker_paths(device)
    hide: list[str] = []
    if probe.get("root"):
        hidden = paths.hidden_ancestors(read_paths)
        if not hidden or "namespaces" in feats:
            feats.add("uid")
            hide = hidden  # masked in the worker; the read paths below them are bound back
    abi = 0
    if probe.get("landlock", 0) >= 1:
        feats.add("landlock")
        abi = probe["landlock"]
    if probe.get("seccomp"):
        feats.add("seccomp")
    hierarchy = cgroup_hierarchy.find()
    if hierarchy is not None:
        feats.add("cgroup")
        cgroups.remove_stale(hierarchy, dead)
    else:
        feats.add("rss")
    return IsolationPlan(features=frozenset(feats), hierarchy=hierarchy, hide=tuple(hide),
                         read_paths=tuple(read_paths), cover=tuple(cover), devices=tuple(paths.worker_devices(paths.gpu_devices(device))),
                         landlock_abi=abi, userns=userns)


def worker_sys_path(readable: tuple[str, ...]) -> list[str]:
    """The worker's sys.path: this process's folders that the worker may read (all but the grader's
    own where nothing is hidden from it: the "process" level)."""
    if readable:
        return [p for p in paths.library_path() if os.path.isdir(p)
                and any(p == r or paths.below(p, r) for r in readable)]
    secret, checkout = paths.grader_paths()
    mine = secret + ([checkout] if checkout else [])
    return [p for p in paths.library_path() if os.path.isdir(p)
            and not any(p == m or paths.below(p, m) for m in mine)]


def worker_config(plan: IsolationPlan, lim: Limits, *, scratch: str, main: str, cgroups: list[str],
                  sys_path: list[str], device: str) -> dict:
    """The configuration one worker applies to itself (sent as JSON; ``jail.enter_*`` reads it)."""
    return {
        "features": sorted(plan.features - {"rss"}), "scratch": scratch, "main": main,
        "hide": list(plan.hide), "read_paths": list(plan.read_paths), "cover": list(plan.cover),
        "devices": list(plan.devices),
        "scratch_bytes": lim.scratch_bytes, "scratch_inodes": lim.scratch_files,
        "landlock_abi": plan.landlock_abi, "resident": plan.resident, "userns": plan.userns, "cgroups": cgroups,
        "cpu_seconds": int(2 * lim.submission_timeout_s) + 1, "max_file_bytes": lim.max_file_bytes,
        "sys_path": sys_path,
        "address_space": (max(3 * GiB, lim.memory_bytes + 3 * GiB // 2)
                          if "rss" in plan.features and device == "cpu" else 0),
        "nproc": 0, "cuda_visible_devices": os.environ.get("CUDA_VISIBLE_DEVICES"),
        "device": device, "gpu_memory_bytes": lim.gpu_memory_bytes,
    }
