"""Grading one submission, the sandbox started first: what ``grader check``, ``grader ci``, the
kit's pytest plugin and the notebook self-check share.

``grade_one`` loads the assignment and the submission while an ``EarlySandbox``
(`grader.grading.factory`) starts on a thread (its zygote imports torch), computes the reference
results, then builds the engine on that sandbox, grades and returns a ``Graded``: the report plus what a self-check says around it (hidden counts, which file).
"""

from __future__ import annotations

import contextlib
import dataclasses
import gc
import os
import sys
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from collections.abc import Callable, Iterator

from grader.assignment.kit import Choice, choose_main, read_spec, starter_fingerprints, untouched_note
from grader.errors import GraderError
from grader.grading.factory import EarlySandbox, StartingSandbox, engine_for, reference_setups
from grader.i18n import EMPTY, Msg
from grader.timings import mark


@contextlib.contextmanager
def quiet_gc() -> Iterator[None]:
    """Cyclic garbage collection off while importing torch and the grader: the imports create
    about a million objects and almost no garbage, and the collector would walk the growing heap
    again and again (~0.3 s of the ~1.5 s import here). Back on afterwards."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


def start_early(folder: Path, device: str, isolation: str | None = None) -> EarlySandbox:
    """The sandbox for the assignment in `folder` (its spec's [limits]), starting on a thread now."""
    # One submission rarely needs the meta device, so the zygote should not warm it up. Its pages
    # need not be made resident: the page cache is a channel between workers of different authors,
    # and this one's author runs code of their own on this machine anyway (a kernel, a shell, the
    # CI workflow), unjailed. The read set still applies (grader.sandbox.jail.resident).
    return EarlySandbox(read_spec(folder).limits, device, warm_meta=False, isolation=isolation,
                        resident_pages=False)


def early_device(device: str) -> str | None:
    """The device the sandbox can be started for now, before this process imports torch: `device`
    when it names one; for "auto", the CPU where this machine shows no GPU that torch could use
    (Linux: no NVIDIA, AMD or WSL GPU device node; Windows: no CUDA driver; macOS: never one);
    else None (only torch can tell). A wrong guess costs time, not a wrong sandbox: `grade_one`
    checks it against torch once imported."""
    if device == "cpu" or device.startswith("cuda"):
        return device
    if device != "auto":
        return None
    if sys.platform == "darwin":
        return "cpu"
    if sys.platform.startswith("linux"):
        from grader.sandbox.jail.paths import gpu_devices

        amd_or_wsl = ("/dev/kfd", "/dev/dxg")
        return None if gpu_devices("cuda") or any(os.path.exists(p) for p in amd_or_wsl) else "cpu"
    if sys.platform == "win32":
        driver = Path(os.environ.get("SystemRoot", r"C:\Windows"), "System32", "nvcuda.dll")
        return None if driver.exists() else "cpu"
    return None


@dataclass(frozen=True)
class Graded:
    report: Any
    """The GradeReport."""
    assignment: Any
    isolation: str
    hidden_cases: int
    """Hidden case instances of the assignment, run or not (a kit knows only their count)."""
    hidden_points: float
    closing: threading.Thread | None = None
    """The sandbox's shutdown, still running when grade_one(close_in_background=True) returned."""
    note: Msg = EMPTY
    """Which file was graded and why, when that was a choice (a folder with attention.py and
    attention.ipynb) or the file graded is the untouched starter."""

    def finish(self) -> None:
        """Wait until the sandbox is closed (its workers killed, scratch and cgroups removed)."""
        if self.closing is not None:
            self.closing.join()


def grade_one(folder: Path, submission: Path, *, public_only: bool, device: str,
              close_in_background: bool = False, only: list[str] | None = None,
              early: StartingSandbox | None = None, lang: str | None = None,
              link_root: Path | None = None, cache_dir: Path | None = None, isolation: str | None = None,
              on_step: Callable[[Any, float, str], None] | None = None,
              while_waiting: Callable[[str], None] | None = None) -> Graded:
    """Grade one submission against the assignment in ``folder``, the sandbox started first.

    ``only``: run just these case instance ids (the pytest plugin's selection).
    ``early``: a sandbox already starting (`start_early`); grade_one closes it. ``grader.notebook``
    passes one whose close() keeps its sandbox warm for the kernel's next check.
    ``lang``: the feedback's language (``--lang``; default the assignment's, else the locale).
    ``close_in_background``: shut the sandbox down on a thread (the zygote takes a while to exit)
    while the caller prints and writes reports; call ``Graded.finish()`` before exiting.
    ``link_root``: refuse a submission that is, or lies under, a symbolic link below this folder
    (``grader ci``: the pull request's checkout).
    ``cache_dir``: where the reference results are kept between runs (`grader.grading.setup_cache`;
    None: computed every time).
    ``isolation``: "auto" or "portable" (default ``GRADER_ISOLATION``, else "auto";
    `grader.grading.factory.isolation_choice`).
    ``on_step``: ``Engine.on_step`` (what runs now, for a progress line).
    ``while_waiting``: called with the feedback's language on a thread of its own while the sandbox
    finishes starting (`grader check` compiles its report's templates then); waited for before
    grade_one returns. What it raises is ignored: the caller meets the same again when it needs it.
    """
    started_for = early_device(device) if early is None else None
    if started_for is not None:
        early = start_early(folder, started_for, isolation)
    from grader.submission.intake import Intake

    intake = Intake().start()  # the submission is read in its own bounded process, started now
    graded: Graded | None = None
    helper: threading.Thread | None = None
    try:
        with quiet_gc():
            from grader.assignment.spec import load_assignment
            from grader.grading.engine import limits_for
            from grader.assignment.kit import kit_info
            a = load_assignment(folder)
        mark("imports")
        if early is None or (started_for is not None and started_for != device):
            from grader.device import resolve_device

            device = str(resolve_device(device))
            if early is not None and device != started_for:  # a GPU the guess missed
                early.close()
                early = None
        if early is None:
            early = start_early(folder, device, isolation)
        limits = limits_for(a)
        starters = starter_fingerprints(folder)
        choice = choose_main(submission, a.main_module, starters) if submission.is_dir() else Choice(None)
        path = submission.resolve() if submission.is_dir() else submission  # `grader check .` names the folder
        sub = intake.load(path, main_module=choice.main or a.main_module, cell_tag=a.cell_tag, link_root=link_root)
        intake.close()
        # Inputs and reference results, while the sandbox may still be starting.
        setups = reference_setups(a, device, public_only=public_only, only=only, cache_dir=cache_dir)
        if while_waiting is not None:
            from grader.i18n import choose

            helper = threading.Thread(target=_ignoring_errors, args=(while_waiting, choose(lang, a.lang)),
                                      name="grader-while-waiting", daemon=True)
            helper.start()
        sandbox = early.get()
        if sandbox.limits != limits:
            raise GraderError(f"{folder / 'spec.toml'}: the [limits] table could not be applied")
        engine = engine_for(a, sandbox, public_only=public_only, device=device, lang=lang, only=only,
                            setups=setups)
        engine.on_step = on_step
        engine.prepare()
        if any(i.case.meta for i in engine.instances):
            sandbox.warm_meta()  # once in the zygote, instead of in the worker (no-op when warm already)
        mark("grade.start")
        report = engine.grade(sub)
        mark("grade.end")
        hidden = [i for i in a.instances() if i.case.hidden]
        info = kit_info(folder)
        n_hidden = len(hidden) + (info.hidden_cases if info else 0)
        p_hidden = sum(i.points for i in hidden) + (info.hidden_points if info else 0.0)
        if public_only:
            report = dataclasses.replace(report, hidden_cases=n_hidden, hidden_points=p_hidden)
        graded = Graded(report=report, assignment=a, isolation=sandbox.isolation, hidden_cases=n_hidden,
                        hidden_points=p_hidden, note=choice.note or untouched_note(submission, starters))
    finally:
        intake.close()
        if helper is not None:
            helper.join()
        if early is not None:
            if graded is not None and close_in_background:
                closing = threading.Thread(target=early.close, name="grader-sandbox-close")
                closing.start()
                graded = dataclasses.replace(graded, closing=closing)
            else:
                early.close()
    return graded


def _ignoring_errors(fn: Callable[[str], None], lang: str) -> None:
    try:
        fn(lang)
    except Exception:  # an optional head start only
        pass


def all_passed(report) -> bool:
    from grader.results import Outcome

    return report.load.ok and all(c.outcome is Outcome.PASSED for c in report.cases)
