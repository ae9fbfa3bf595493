"""The local back-end: N grading slots on this machine, sharing one sandbox (one warm zygote) and
one computation of the reference setups, once the reference has scored 100 % in this jail. On the
CPU on Linux the slots are forked processes (`grader.batch.slots`); otherwise threads of this
process.

The sandbox starts (its self-test runs) on a thread while this one computes the reference setups,
or reads them from the setup cache (`grader.grading.setup_cache`).
"""

from __future__ import annotations

import contextlib
import gc
import queue
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import torch

from grader.assignment.spec import Assignment
from grader.batch import slots
from grader.batch.config import Ready, Todo
from grader.batch.recording import Tally
from grader.errors import GraderError
from grader.grading.engine import Engine, limits_for
from grader.grading.factory import EarlySandbox, batch_engines, reference_setups
from grader.sandbox import Budget, Limits, Sandbox

if TYPE_CHECKING:
    from grader.sandbox.host.portable import PortableSandbox


class LocalBackend:
    """`cfg.jobs` slots here: forked processes on the CPU on Linux (fork()-safe there), else threads."""

    def __init__(self, assignment: Assignment, device: torch.device, jobs: int, *, debug: bool = False,
                 lang: str | None = None, accept_isolation: str | None = None, cache_dir: Path | None = None,
                 isolation: str | None = None, batch_cpus: float | None = None,
                 batch_memory_bytes: int | None = None):
        self.assignment, self.device, self.jobs, self.debug = assignment, device, jobs, debug
        self.accept_isolation = accept_isolation
        self.cache_dir = cache_dir
        """Where the reference setups are kept between runs (None: computed every run)."""
        self.isolation = isolation
        """How the workers start (``--isolation``; None: ``GRADER_ISOLATION``, else auto)."""
        self.batch_cpus, self.batch_memory_bytes = batch_cpus, batch_memory_bytes
        """What all the slots' workers may use at once (None: one CPU and one memory cap per slot)."""
        self.lang = lang
        """The students' feedback language the reports record (``--lang``)."""
        self.engines: list[Engine] = []
        self.sandbox: Sandbox | PortableSandbox | None = None
        """The one sandbox every slot's engine grades on, while the slots are up."""
        self.forked = False

    @contextlib.contextmanager
    def start(self, total: int, stop: threading.Event) -> Iterator[Ready]:
        n = min(self.jobs, total)
        self.forked = n > 1 and self.device.type == "cpu" and sys.platform.startswith("linux")
        saved_threads = torch.get_num_threads()
        torch.set_num_threads(1)  # N slots on few cores: one grader thread each avoids oversubscription
        sandbox: Sandbox | PortableSandbox | None = None
        early: EarlySandbox | None = None
        try:
            limits = limits_for(self.assignment)
            early = EarlySandbox(limits, str(self.device), warm_meta=True, accept_isolation=self.accept_isolation,
                                 isolation=self.isolation,
                                 budget=batch_budget(limits, n, self.batch_cpus, self.batch_memory_bytes))
            setups = reference_setups(self.assignment, self.device, public_only=False, cache_dir=self.cache_dir)
            self.sandbox = sandbox = start_sandbox(early)
            self.engines = batch_engines(self.assignment, sandbox, self.device, 1 if self.forked else n,
                                         lang=self.lang, setups=setups)
            freeze_heap()
            yield Ready(sandbox.isolation, sandbox.isolation, n, warning=no_cgroup_warning(sandbox))
        finally:
            stop.set()
            self.sandbox = None
            if sandbox is not None:
                sandbox.close()
            elif early is not None:
                early.close()
            torch.set_num_threads(saved_threads)

    def grade(self, todo: Todo, tally: Tally, stop: threading.Event) -> None:
        if self.sandbox is None:
            raise RuntimeError("the local back-end grades only while its slots are up (inside `start`)")
        if self.forked:
            slots.run(self.engines[0], self.sandbox, todo, min(self.jobs, len(todo)), tally, stop, self.debug)
        else:
            grade_in_threads(self.engines, todo, tally, stop, self.debug)


def no_cgroup_warning(sandbox: Sandbox | PortableSandbox) -> str:
    """What a batch says once at start-up where no cgroup bounds the workers ("" where one does)."""
    return "" if "cgroup" in sandbox.features else f"the sandbox bounds less here than it should: {sandbox.limits_note}."


def batch_budget(limits: Limits, slots: int, cpus: float | None, memory_bytes: int | None) -> Budget:
    """What the batch's workers may use together: by default one CPU and one worker's memory cap
    per slot, however many workers the slots keep alive at once (each also starts its next one
    early). An operator error where a budget is below what one worker may use."""
    budget = Budget(cpus=cpus if cpus is not None else float(slots) * limits.cpu_quota,
                    memory_bytes=memory_bytes if memory_bytes is not None else slots * limits.memory_bytes)
    if budget.cpus < limits.cpu_quota or budget.memory_bytes < limits.memory_bytes:
        raise GraderError(f"--batch-cpus {format(budget.cpus, 'g')} / --batch-memory "
                          f"{format(budget.memory_bytes / (1 << 30), '.3g')}G is less than one worker may use "
                          f"({format(limits.cpu_quota, 'g')} CPU, {format(limits.memory_bytes / (1 << 30), '.3g')}G): "
                          "give the batch at least that")
    return budget


def start_sandbox(early: EarlySandbox) -> Sandbox | PortableSandbox:
    """One sandbox (one warm zygote) for every slot, once its start on `early`'s thread is done: a
    Sandbox is thread-safe and can be shared with forked slots, spawns are serialised at the
    zygote, and a second zygote would cost CPU at start-up and memory (docs/performance.md)."""
    try:
        return early.get()
    except Exception as e:  # noqa: BLE001
        raise GraderError(f"the sandbox could not start: {e}") from e


def freeze_heap() -> None:
    """Keep what exists now (torch, the reference setups) out of every later cyclic collection: a
    full collection over torch's objects is slow, and grading allocates enough to trigger one every
    few submissions (docs/performance.md). No collection first: little garbage, for a delay before
    the first result."""
    gc.freeze()


def grade_in_threads(engines: list[Engine], todo: Todo, tally: Tally, stop: threading.Event, debug: bool) -> None:
    """One grading thread per engine; results are recorded here, in the calling thread."""
    jobs: queue.Queue = queue.Queue()
    for item in todo:
        jobs.put(item)
    done_q: queue.Queue = queue.Queue()
    threads = [threading.Thread(target=_slot, args=(e, jobs, done_q, stop, debug), daemon=True,
                                name=f"grade-slot-{i}") for i, e in enumerate(engines)]
    for t in threads:
        t.start()
    while any(t.is_alive() for t in threads) or not done_q.empty():
        try:
            tally.take(*done_q.get(timeout=0.1))
        except queue.Empty:
            continue


def _slot(engine: Engine, jobs: queue.Queue, done_q: queue.Queue, stop: threading.Event, debug: bool) -> None:
    """One grading thread: take submissions until none are left or a stop is requested."""
    while not stop.is_set():
        try:
            key, sub = jobs.get_nowait()
        except queue.Empty:
            return
        done_q.put((key, *slots.grade_or_fault(engine, key, sub, debug)))
