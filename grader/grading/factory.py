"""The one place a sandbox and an engine are built, with the same checks wherever grading runs.

Every entry point gets its sandbox and engine here: ``grader check`` / ``grader ci`` / the kit's
pytest plugin / the notebook self-check (through `grader.grading.single`), ``grader grade``'s
local slots, each Dask worker, ``grader validate`` and the benchmarks. So every one of them
passes the same checks before it grades anyone:

1. the environment self-test (`grader.sandbox.host.selftest`), run by the Sandbox itself: a real
   worker in the real jail does what correct code needs, and tries to exceed each limit the
   isolation level claims; a level that claims more than it proves stops here
   (``accept_isolation``: the one weaker level an instructor accepts explicitly);
2. for a batch (``prove_reference``): the trusted reference, graded as a submission in this jail,
   scores 100 %, or nothing is graded.

Starting early is one mechanism in two steps: `prestart_zygote` (standard library only: the
zygote imports torch beside this process's own imports) and `EarlySandbox` (the rest of the
Sandbox's start on a thread, adopting that zygote, while the reference setups are computed, or
read from the on-disk cache of `grader.grading.setup_cache`).

Each step marks its phase for the start-up breakdown (`grader.timings`: only under GRADER_TIMINGS).
"""

from __future__ import annotations

import contextlib
import os
import sys
import threading
from collections.abc import Collection
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol
from collections.abc import Callable, Iterator

from grader.timings import mark

if TYPE_CHECKING:
    import torch

    from grader.assignment.spec import Assignment
    from grader.cases import Setup
    from grader.grading.engine import Engine
    from grader.grading.protocols import GradingSandbox
    from grader.results import CaseResult
    from grader.sandbox import Budget, Limits, Sandbox
    from grader.sandbox.host.portable import PortableSandbox


ISOLATIONS = ("auto", "portable")
"""What ``--isolation`` and ``GRADER_ISOLATION`` choose from: the strongest level this machine has
(Linux), or the portable worker (a spawned interpreter over pipes: what Windows and macOS use)."""


def isolation_choice(isolation: str | None = None) -> str:
    """The isolation asked for (`isolation`, else ``GRADER_ISOLATION``, else "auto"), as it will
    run here: "auto" is "portable" off Linux, where the jailed worker cannot start."""
    from grader.errors import GraderError

    chosen = isolation or os.environ.get("GRADER_ISOLATION") or "auto"
    if chosen not in ISOLATIONS:
        raise GraderError(f"unknown isolation {chosen!r} (GRADER_ISOLATION or --isolation); "
                          f"known: {', '.join(ISOLATIONS)}")
    if chosen == "auto" and not sys.platform.startswith("linux"):
        return "portable"
    return chosen


def prestart_zygote(device: str, *, warm_meta: bool = False, isolation: str | None = None,
                    resident_pages: bool = True, huge_heap: bool = False) -> Callable[[], None]:
    """Start the zygote now, before this process imports torch (the Sandbox built later adopts it);
    returns what stops it when no Sandbox adopted it (a command that ended on a usage error).
    The portable worker has no zygote: nothing starts. `resident_pages`: see `sandbox_for`;
    `huge_heap`: see `grader.sandbox.host.zygote.HUGE_HEAP`."""
    if isolation_choice(isolation) == "portable":
        return lambda: None
    from grader.sandbox.host.zygote import discard, prestart

    mark("zygote.spawn")
    p = prestart(device, warm_meta=warm_meta, resident_pages=resident_pages, huge_heap=huge_heap)
    return lambda: discard(p)


def sandbox_for(limits: Limits, device: str, *, warm_meta: bool = True, use_zygote: bool = True,
                accept_isolation: str | None = None, isolation: str | None = None,
                budget: Budget | None = None, resident_pages: bool = True) -> Sandbox | PortableSandbox:
    """A Sandbox whose environment self-test (limits included) has passed (`EnvironmentBroken`,
    a `SandboxError`, where it did not). `isolation`: see `isolation_choice`; `budget`: what all
    its workers may use together (where cgroups bound them; not the portable worker);
    `resident_pages`: every page a worker may read made resident first, so that the page cache
    carries nothing between workers (False only where one submission is graded and its author
    runs code on this machine anyway: `grader.grading.single`)."""
    mark("sandbox.start")
    if isolation_choice(isolation) == "portable":
        from grader.sandbox.host.portable import PortableSandbox

        sandbox: Sandbox | PortableSandbox = PortableSandbox(limits, device=device, warm_meta=warm_meta, accept_isolation=accept_isolation)
    else:
        from grader.sandbox import Sandbox

        sandbox = Sandbox(limits, device=device, warm_meta=warm_meta, use_zygote=use_zygote,
                          accept_isolation=accept_isolation, budget=budget, resident_pages=resident_pages)
    mark("sandbox.ready", isolation=sandbox.isolation)
    return sandbox


def engine_for(assignment: Assignment, sandbox: GradingSandbox, *, device: torch.device | str = "cpu",
               public_only: bool = False, lang: str | None = None, only: Collection[str] | None = None,
               setups: dict[str, Setup] | None = None) -> Engine:
    """An engine on `sandbox`. `only`: the case instance ids to run; `setups`: reference results
    computed already (`reference_setups`)."""
    from grader.grading.engine import Engine

    return Engine(assignment, sandbox, public_only=public_only, device=device, lang=lang, only=only,
                  setups=setups)


def reference_setups(assignment: Assignment, device: torch.device | str, *, public_only: bool,
                     only: Collection[str] | None = None, cache_dir: Path | None = None) -> dict[str, Setup] | None:
    """Every case's inputs and reference results, before any sandbox exists (None for a student
    kit: the engine reads the results stored at release). `cache_dir`: where they are kept between
    runs (`grader.grading.setup_cache`; None: computed here, every time)."""
    import torch

    from grader.grading.setup_cache import cached, open_cache
    from grader.grading.setups import compute_setup

    if assignment.stored is not None:
        return None
    dev = torch.device(device)
    wanted = {i.id: i for i in assignment.instances(public_only=public_only) if only is None or i.id in only}
    mark("setups.start")
    setups, how = cached(open_cache(cache_dir), assignment, dev, list(wanted),
                         lambda ids: {i: compute_setup(assignment, wanted[i], dev) for i in ids})
    mark("setups.end", cache=how)
    return setups


def prove_reference(engine: Engine) -> None:
    """The trusted reference, graded as a submission in this sandbox's jail like any other, must
    score 100 %, or nothing is graded (`GraderError`): correct code would lose points here. Where
    no reference submission can be written (an instructor's own assignment without one), there is
    nothing to prove."""
    from grader.errors import GraderError
    from grader.results import Outcome

    mark("reference.start")
    results = reference_results(engine)
    mark("reference.end")
    if results is None:
        return
    failed = [r for r in results if r.outcome is not Outcome.PASSED]
    if failed:
        listed = "; ".join(f"{r.id}: {r.message}" for r in failed[:3]) + (" ..." if len(failed) > 3 else "")
        raise GraderError(f"the trusted reference fails {len(failed)} of {len(results)} cases in this "
                          f"machine's sandbox ({engine.sandbox.isolation}), so correct code would lose "
                          f"points here; nothing was graded. {listed}")
    engine.learn_reference_runs(results)


def reference_results(engine: Engine) -> list[CaseResult] | None:
    """The trusted reference's case results, graded in a worker of `engine`'s sandbox; its worker
    is gone when this returns (a batch forks its slot processes next). None: no reference
    submission could be written."""
    import tempfile
    from pathlib import Path

    from grader.errors import GraderError
    from grader.grading.reference_run import reference_submission
    from grader.sandbox import SandboxError
    from grader.submission.load import load_submission

    a = engine.assignment
    with tempfile.TemporaryDirectory(prefix="grader-reference-") as tmp:
        try:
            path = reference_submission(a, Path(tmp))
        except (GraderError, OSError):
            return None
        try:
            report = engine.grade(load_submission(path, main_module=a.main_module, cell_tag=a.cell_tag),
                                  wait_for_exit=True)
        except SandboxError as e:
            raise GraderError(f"the trusted reference could not run in this machine's sandbox ({e}); "
                              "nothing was graded") from e
    return report.cases


def batch_engines(assignment: Assignment, sandbox: GradingSandbox, device: torch.device, n: int, *,
                  lang: str | None = None, setups: dict[str, Setup] | None = None) -> list[Engine]:
    """`n` engines on `sandbox` sharing one computation of the reference setups (`setups`: those
    computed or read already, `reference_setups`), after the reference has scored 100 % in this
    jail (`prove_reference`)."""
    found = [engine_for(assignment, sandbox, device=device, lang=lang, setups=setups if i == 0 else None)
             for i in range(n)]
    found[0].prepare()
    prove_reference(found[0])
    for e in found[1:]:
        e.share_setups_from(found[0])
    return found


@contextlib.contextmanager
def grading(assignment: Assignment, *, device: str = "auto", public_only: bool = False,
            lang: str | None = None, use_zygote: bool = True, prove: bool = False,
            accept_isolation: str | None = None, isolation: str | None = None) -> Iterator[Engine]:
    """A proven sandbox and an engine on it (setups computed; with `prove`, the reference at 100 %)."""
    from grader.device import resolve_device
    from grader.grading.engine import limits_for

    dev = resolve_device(device)
    with sandbox_for(limits_for(assignment), str(dev), use_zygote=use_zygote,
                     accept_isolation=accept_isolation, isolation=isolation) as sandbox:
        engine = engine_for(assignment, sandbox, device=dev, public_only=public_only, lang=lang)
        engine.prepare()
        if prove:
            prove_reference(engine)
        yield engine


class StartingSandbox(Protocol):
    """A sandbox on its way: an `EarlySandbox`, or the one a notebook keeps warm between checks."""

    def get(self) -> Sandbox | PortableSandbox:
        """The sandbox once its self-test has passed (raises what stopped it)."""
        ...

    def close(self) -> None:
        """Done with it: stop it (a notebook's keeps it for the next check)."""
        ...


class EarlySandbox:
    """A Sandbox (and its zygote, which imports torch) started on a thread, right away; `get()`
    returns it once its self-test has passed (or raises what stopped it)."""

    def __init__(self, limits: dict[str, Any] | Limits, device: str, *, warm_meta: bool = False,
                 accept_isolation: str | None = None, isolation: str | None = None,
                 budget: Budget | None = None, resident_pages: bool = True):
        """`limits`: the `Limits`, or the spec's [limits] table (bad keys are reported once the
        assignment loads); `isolation`: see `isolation_choice`; `budget`, `resident_pages`: see
        `sandbox_for`."""
        self.box: list[Sandbox | PortableSandbox] = []
        self.error: BaseException | None = None
        self._isolation = isolation
        self._resident_pages = resident_pages
        self._thread = threading.Thread(target=self._run, args=(limits, device, warm_meta, accept_isolation, budget),
                                        daemon=True, name="grader-sandbox-start")
        self._thread.start()

    def _run(self, limits: dict[str, Any] | Limits, device: str, warm_meta: bool,
             accept_isolation: str | None, budget: Budget | None) -> None:
        try:
            from grader.sandbox import Limits

            if isinstance(limits, Limits):
                lim = limits
            else:
                try:
                    lim = Limits(**limits)
                except TypeError:
                    lim = Limits()  # the caller reports the bad key once the assignment is loaded
            self.box.append(sandbox_for(lim, device, warm_meta=warm_meta, accept_isolation=accept_isolation,
                                        isolation=self._isolation, budget=budget,
                                        resident_pages=self._resident_pages))
        except BaseException as e:  # re-raised on the calling thread by get()
            self.error = e

    def get(self) -> Sandbox | PortableSandbox:
        self._thread.join()
        if self.error is not None:
            raise self.error
        return self.box[0]

    def close(self) -> None:
        self._thread.join()
        if self.box:
            self.box[0].close()
