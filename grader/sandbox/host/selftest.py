"""The environment self-test: before anything is graded, a probe runs in a real worker, in the real
jail, and does what correct code needs. A jail that would take points from correct code (a
virtualenv its mounts hide, a library it cannot read, a dtype or the meta device failing) stops the
command with one clear message instead of grading wrong.

Then the same worker tries to exceed each limit the isolation level claims, and the grader checks
that the limit fired (`prove_limits`): with cgroups, its memory, pids and cpu limits are first
lowered to just above what it uses (so the proofs cost milliseconds, not gigabytes): starting
threads past pids.max must be refused, a spin must be throttled by the cpu quota, and allocating
past the memory cap must end in the OOM killer; with memory polling ("rss"), the polled cap is
lowered the same way and an allocation past it must get the worker killed. What fired is what the
level may claim (`Proof.unproven` names the rest).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from grader.sandbox.errors import EnvironmentBroken, SandboxError
from grader.timings import mark
from grader.i18n import Msg, join, tr

PROBE = '''
import importlib.util
import os
import sys

import torch


def probe(meta):
    problems = []
    for p in sys.path:
        if p != os.getcwd() and not os.access(p, os.R_OK | os.X_OK):
            problems.append(f"the folder {p} on sys.path cannot be read from inside the jail")
    # Modules a correct submission may import lazily: their code must load here (compiled or
    # from source, as an import reads it).
    for name in ("torch.fx.experimental.symbolic_shapes", "torch.nn.functional", "numpy.linalg",
                 "json.decoder", "colorsys"):
        try:
            spec = importlib.util.find_spec(name)
            spec.loader.get_code(spec.name)
        except Exception as e:
            problems.append(f"the module {name} cannot be read ({type(e).__name__}: {e})")
    try:
        import colorsys  # not imported by the zygote: a real import from the standard library
    except Exception as e:
        problems.append(f"importing colorsys failed ({type(e).__name__}: {e})")
    for dtype in (torch.float32, torch.float64, torch.float16, torch.bfloat16):
        try:
            x = torch.linspace(-1, 1, 12, dtype=dtype).reshape(3, 4)
            w = (x @ x.T).masked_fill(~torch.ones(3, 3, dtype=torch.bool).tril(), float("-inf"))
            (w.softmax(-1) @ x).sum().item()
        except Exception as e:
            problems.append(f"{dtype} attention failed ({type(e).__name__}: {e})")
    if meta:
        try:
            a = torch.empty(2, 3, 4, device="meta")
            (a @ a.transpose(-1, -2)).softmax(-1).masked_fill(torch.ones(3, 3, dtype=torch.bool, device="meta"), 0.0)
        except Exception as e:
            problems.append(f"the meta device failed ({type(e).__name__}: {e})")
    try:
        with open("selftest.txt", "w") as f:
            f.write("ok")
        with open("selftest.txt") as f:
            assert f.read() == "ok"
        os.remove("selftest.txt")
    except Exception as e:
        problems.append(f"the scratch folder is not writable ({type(e).__name__}: {e})")
    return problems


def exceed_pids(n):
    """Start up to n threads (each a task for pids.max); how many started before one was refused."""
    import threading

    stop = threading.Event()
    started = []
    try:
        for _ in range(n):
            t = threading.Thread(target=stop.wait)
            t.start()
            started.append(t)
    except RuntimeError:
        pass
    stop.set()
    for t in started:
        t.join()
    return len(started)


def spin(cpu_seconds, wall_seconds):
    """Busy-loop until this process has used `cpu_seconds` of CPU (or `wall_seconds` passed)."""
    import time

    c0, w0 = time.process_time(), time.monotonic()
    while time.process_time() - c0 < cpu_seconds and time.monotonic() - w0 < wall_seconds:
        pass
    return time.process_time() - c0


def exceed_memory(n, hold_seconds):
    """Allocate and touch n bytes, then hold them (a polled cap needs time to see them)."""
    import time

    block = b"\\x01" * n
    time.sleep(hold_seconds)
    return len(block)


def exceed_all(threads, cpu_seconds, nbytes):
    """Past each cgroup limit in turn (the grader watches the cgroup's counters meanwhile)."""
    exceed_pids(threads)
    spin(cpu_seconds, 2.0)
    exceed_memory(nbytes, 2.0)
'''

MEMORY_HEADROOM = 1 << 20
"""The proof lowers the memory cap to what the worker uses plus this, then allocates that use plus
4 times this."""
RSS_HEADROOM = 32 << 20
"""The same for a polled cap (resident memory moves by more than a page or two on its own)."""
PIDS_HEADROOM = 3
"""... and pids.max to the worker's tasks plus this, then starts ten times as many threads."""
PROOF_SPIN_S = 0.003
"""CPU seconds the proof spins for, under a quota of 1 ms per 2 ms (throttled within the first)."""
PROOF_TIMEOUT_S = 3.0
"""How long the proof waits for every limit to fire (milliseconds, normally)."""


@dataclass(frozen=True)
class _Unit:
    label: str = "selftest.py"
    cell: None = None
    source: str = PROBE


@dataclass(frozen=True)
class _Probe:
    """Shaped like a loaded submission (what `Sandbox.open` reads of one)."""

    path: str = "selftest.py"
    kind: str = "py"
    units: tuple = (_Unit(),)
    files: dict = field(default_factory=dict)
    error: None = None


@dataclass(frozen=True)
class Proof:
    """Which limits the self-test saw fire."""

    fired: dict[str, bool] = field(default_factory=dict)
    """"memory", "pids", "cpu" -> the limit stopped the probe when it tried to exceed it."""
    why: dict[str, str] = field(default_factory=dict)
    """For a limit that did not fire: what happened instead."""

    @property
    def unproven(self) -> list[str]:
        return [k for k, ok in self.fired.items() if not ok]


def check(sandbox, *, meta: bool, hierarchy=None) -> Proof:
    """Run the probe in a fresh worker of `sandbox` (raise `EnvironmentBroken` naming every
    problem), then try to exceed each limit its level claims there; returns what fired."""
    mark("selftest.start")
    with sandbox.open(_Probe()) as w:
        if not w.load.ok:
            raise EnvironmentBroken(f"the self-test could not load in the sandbox ({w.load.message}; "
                                    f"{w.output()[1][-500:].strip()})")
        try:
            # Bounded by the worker's whole life, not one call's limit: in a worker that is a fresh
            # interpreter (no zygote), the probe pays the first meta op and lazy imports itself.
            problems = w.call_within(sandbox.limits.submission_timeout_s, "probe", meta)
        except SandboxError as e:
            raise EnvironmentBroken(f"the self-test failed in the sandbox ({e})") from e
        if type(problems) is not list or problems:
            listed = "; ".join(str(p) for p in problems) if type(problems) is list else repr(problems)
            raise EnvironmentBroken(f"it would fail correct code on this machine, so nothing was graded "
                                    f"(isolation {sandbox.isolation}): {listed}")
        mark("selftest.probe")
        proof = prove_limits(w, sandbox.features, hierarchy)
    mark("selftest.end")
    return proof


def prove_limits(w, features: frozenset[str], hierarchy) -> Proof:
    """Try to exceed, in worker `w`, each limit `features` claim (cgroup: memory, pids, and cpu
    where `hierarchy` has it; rss: memory); the worker is dead afterwards."""
    from grader.sandbox.errors import CrashKind, WorkerCrashed

    if "cgroup" in features and hierarchy is not None:
        return _prove_cgroup(w, hierarchy)
    if "rss" not in features:
        return Proof()
    w.lower_memory_poll(w.memory_in_use() + RSS_HEADROOM)
    try:
        w.call("exceed_memory", 4 * RSS_HEADROOM, 2.0)
        return Proof({"memory": False}, {"memory": "an allocation past the polled memory cap went on"})
    except WorkerCrashed as e:
        died = {} if e.kind is CrashKind.MEMORY else {"memory": f"the worker died otherwise ({e})"}
        return Proof({"memory": e.kind is CrashKind.MEMORY}, died)
    except SandboxError as e:
        return Proof({"memory": False}, {"memory": f"the worker failed instead ({e})"})


def _prove_cgroup(w, hierarchy) -> Proof:
    """One request past every cgroup limit (threads, a spin, an allocation), its effect read from
    the cgroup's own counters while it runs: no reply is awaited, nor the OOM-killed worker's exit."""
    from grader.sandbox.jail import cgroups

    paths = w.cgroups
    in_use = cgroups.tighten_for_proof(hierarchy, paths, memory_headroom=MEMORY_HEADROOM, pids_headroom=PIDS_HEADROOM)
    # Past the cap even if the kernel reclaims all that was charged when the cap was set (file
    # pages the worker read: a host's proactive reclaim may take them at any moment).
    w.call_no_wait("exceed_all", 10 * PIDS_HEADROOM, PROOF_SPIN_S, in_use + 4 * MEMORY_HEADROOM)
    checks = {"pids": lambda: cgroups.refused_tasks(paths) > 0, "memory": lambda: cgroups.memory_capped(paths)}
    if hierarchy.cpu:
        checks["cpu"] = lambda: cgroups.throttled(paths) > 0
    fired = dict.fromkeys(checks, False)
    deadline = time.monotonic() + PROOF_TIMEOUT_S
    while not all(fired.values()) and time.monotonic() < deadline:
        time.sleep(0.002)
        fired.update({k: True for k, seen in checks.items() if not fired[k] and seen()})
    w.retire()
    why = {"pids": "threads started past pids.max were not refused", "cpu": "a spinning worker was never "
           "throttled by its cpu quota", "memory": "an allocation past the memory cap was not stopped"}
    return Proof(fired, {k: why[k] for k, ok in fired.items() if not ok})



def proven_level(features: frozenset[str], proof: Proof, *, accept: str | None) -> str:
    """The level every result records: the planned one when each limit it claims fired; else the
    weaker level that was proven, when the instructor accepts it by name (`accept`), else
    `EnvironmentBroken` (nothing is graded)."""
    from grader.sandbox.host.isolation import level_name

    claimed = level_name(features)
    if not proof.unproven:
        return claimed
    weaker = features - {"cgroup" if "cgroup" in features else "rss"}
    proven = level_name(frozenset(weaker))
    if accept == proven:
        return f"{proven} (accepted: {', '.join(proof.unproven)} limit not proven)"
    listed = "; ".join(f"{k}: {v}" for k, v in proof.why.items())
    raise EnvironmentBroken(f"the isolation level {claimed} claims {', '.join(proof.unproven)} limits that did "
                            f"not fire in the self-test ({listed}), so nothing was graded; to grade with the "
                            f"weaker level, pass --accept-isolation {proven}")


def limits_note(features: frozenset[str], hierarchy, limits, *, chosen: str = "auto", budget=None) -> Msg:
    """In plain words, what bounds each worker's resources here (recorded in every result, shown to
    the student with ``-v`` in their language), and the `budget` they share, where one was applied."""
    note = _worker_limits(features, hierarchy, limits, chosen)
    if budget is None or "cgroup" not in features or hierarchy is None:
        return note
    gib = format(budget.memory_bytes / (1 << 30), ".3g")
    shared = (tr("all workers at once, pre-started ones included: {cpus} CPUs and {gib} GiB",
                 cpus=format(budget.cpus, "g"), gib=gib) if hierarchy.cpu
              else tr("all workers at once, pre-started ones included: {gib} GiB", gib=gib))
    return join([note, shared], "; ")


def _worker_limits(features: frozenset[str], hierarchy, limits, chosen: str) -> Msg:
    gib = format(limits.memory_bytes / (1 << 30), ".3g")
    if "cgroup" in features and hierarchy is not None:
        if hierarchy.cpu:
            return tr("cgroup v{version}: {gib} GiB memory (swap off), {pids} processes, {cpu} CPU per worker, each "
                      "seen to fire at start-up", version=hierarchy.version, gib=gib, pids=limits.max_pids,
                      cpu=format(limits.cpu_quota, "g"))
        return tr("cgroup v{version}: {gib} GiB memory (swap off), {pids} processes, no CPU cap (no cpu controller) "
                  "per worker, each seen to fire at start-up", version=hierarchy.version, gib=gib, pids=limits.max_pids)
    if chosen == "process":
        return tr("the process level uses no cgroup: memory is polled against {gib} GiB, and there is no per-worker "
                  "process or CPU cap", gib=gib)
    return tr("no cgroup could be written here (this needs root with cgroup v1, or a delegated cgroup v2 subtree): "
              "memory is polled against {gib} GiB, and there is no per-worker process or CPU cap", gib=gib)
