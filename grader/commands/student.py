"""Student and CI commands: self-check, grade a pull request, release the student kit.

``grader check`` must answer in well under 3 s cold, and most of that is ``import torch``, paid both
here and in the sandbox's zygote. So the assignment folder is found from spec.toml files alone
(torch-free), the sandbox is started on a background thread at once, and only then does this
process load the cases (which imports torch): on two cores both imports run side by side. Keep
this module's top-level imports light: ``grader.cli`` imports it for every command.
"""

from __future__ import annotations

import dataclasses
import functools
import inspect
import os
import sys
import threading
import traceback
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

import click

from grader.cli import ExitCode, main
from grader.errors import GraderError, OutputNotWritable
from grader.commands.common import prestart_sandbox, quiet_gc
from grader.outdir import writable_dir
from grader.kit import Choice, choose_main, locate_assignment, read_spec, starter_fingerprints, untouched_note

# --- errors --------------------------------------------------------------------------------

def _friendly(fn: Callable[..., Any]) -> Callable[..., Any]:
    """Operator errors as one ``Error: ...`` line (exit 2); ``--verbose`` adds the traceback."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        verbose = kwargs.get("verbose", False)
        try:
            return fn(*args, **kwargs)
        except GraderError:
            if verbose:
                traceback.print_exc()
            raise
        except (click.exceptions.Exit, click.Abort, click.ClickException, SystemExit, KeyboardInterrupt):
            raise
        except Exception as e:
            from grader.sandbox import SandboxError

            if verbose:
                traceback.print_exc()
            if isinstance(e, SandboxError):
                raise GraderError(f"the sandbox could not run: {e}") from e
            raise GraderError(f"unexpected {type(e).__name__}: {e} (rerun with --verbose for details)") from e

    return wrapper


def _readable_submission(path: Path) -> Path:
    if not path.exists():
        hint = " (did you mean the .ipynb?)" if path.with_suffix(".ipynb").exists() else ""
        raise GraderError(f"submission {path} does not exist{hint}")
    try:
        if path.is_dir():
            os.listdir(path)
        else:
            with open(path, "rb") as f:
                f.read(1)
    except OSError as e:
        raise GraderError(f"cannot read submission {path}: {e.strerror or e}") from e
    return path


def _writable_file(path: Path) -> Path:
    writable_dir(path.parent if str(path.parent) else Path("."))
    if path.is_dir():
        raise OutputNotWritable(f"cannot write to {path}: it is a folder")
    return path


# --- grading with an early sandbox ---------------------------------------------------------


class EarlySandbox:
    """A ``Sandbox`` (and its zygote, which imports torch) started on a thread, right away."""

    def __init__(self, folder: Path, device: str):
        self.box: list[Any] = []
        self.error: BaseException | None = None
        limits = read_spec(folder).get("limits") or {}
        self._thread = threading.Thread(target=self._run, args=(limits, device), daemon=True,
                                        name="grader-sandbox-start")
        self._thread.start()

    @classmethod
    def start(cls, folder: Path, device: str) -> "EarlySandbox | None":
        """Start now when ``device`` is known without torch; None for "auto" (decided later)."""
        return cls(folder, device) if device == "cpu" or device.startswith("cuda") else None

    def _run(self, limits: dict, device: str) -> None:
        try:
            from grader.sandbox import Limits, Sandbox

            try:
                lim = Limits(**limits)
            except TypeError:
                lim = Limits()  # grade_one() reports the bad key once the assignment is loaded
            # One submission rarely needs the meta device, so the zygote should not warm it up.
            extra = {"warm_meta": False} if "warm_meta" in inspect.signature(Sandbox).parameters else {}
            self.box.append(Sandbox(lim, device=device, **extra))
        except BaseException as e:  # re-raised on the calling thread by get()
            self.error = e

    def get(self):
        self._thread.join()
        if self.error is not None:
            raise self.error
        return self.box[0]

    def close(self) -> None:
        self._thread.join()
        if self.box:
            self.box[0].close()


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
    note: str = ""
    """Which file was graded and why, when that was a choice (a folder with attention.py and
    attention.ipynb) or the file graded is the untouched starter."""

    def finish(self) -> None:
        """Wait until the sandbox is closed (its workers killed, scratch and cgroups removed)."""
        if self.closing is not None:
            self.closing.join()


def grade_one(folder: Path, submission: Path, *, public_only: bool, device: str,
              close_in_background: bool = False, only: list[str] | None = None,
              early: EarlySandbox | None = None) -> Graded:
    """Grade one submission against the assignment in ``folder``, the sandbox started first.

    ``only``: run just these case instance ids (the pytest plugin's selection).
    ``early``: a sandbox already starting (``EarlySandbox.start``); grade_one closes it. Anything
    with ``get()`` and ``close()`` will do: ``grader.notebook`` passes one whose close() keeps its
    sandbox warm for the kernel's next check.
    ``close_in_background``: shut the sandbox down on a thread (the zygote takes a while to exit)
    while the caller prints and writes reports; call ``Graded.finish()`` before exiting.
    """
    if early is None:
        early = EarlySandbox.start(folder, device)
    graded: Graded | None = None
    try:
        with quiet_gc():
            from grader.assignments import load_assignment
            from grader.engine import Engine, limits_for
            from grader.kit import kit_info
            from grader.load import load_submission

            a = load_assignment(folder)
        if early is None:
            from grader.device import resolve_device

            device = str(resolve_device(device))
            early = EarlySandbox(folder, device)
        limits = limits_for(a)
        starters = starter_fingerprints(folder)
        choice = choose_main(submission, a.main_module, starters) if submission.is_dir() else Choice(None)
        path = submission.resolve() if submission.is_dir() else submission  # `grader check .` names the folder
        sub = load_submission(path, main_module=choice.main or a.main_module, cell_tag=a.cell_tag)
        engine = Engine(a, None, public_only=public_only, device=device)
        if only is not None:
            engine.instances = [i for i in engine.instances if i.id in set(only)]
        engine.prepare()  # inputs and reference results, while the sandbox may still be starting
        sandbox = engine.sandbox = early.get()
        if sandbox.limits != limits:
            raise GraderError(f"{folder / 'spec.toml'}: the [limits] table could not be applied")
        if any(i.case.meta for i in engine.instances) and hasattr(sandbox, "warm_meta"):
            sandbox.warm_meta()  # once in the zygote, instead of in the worker (no-op when warm already)
        report = engine.grade(sub)
        hidden = [i for i in a.instances() if i.case.hidden]
        info = kit_info(folder)
        n_hidden = len(hidden) + (info.hidden_cases if info else 0)
        p_hidden = sum(i.points for i in hidden) + (info.hidden_points if info else 0.0)
        if public_only:
            report = dataclasses.replace(report, hidden_cases=n_hidden, hidden_points=p_hidden)
        graded = Graded(report=report, assignment=a, isolation=sandbox.isolation, hidden_cases=n_hidden,
                        hidden_points=p_hidden, note=choice.note or untouched_note(submission, starters))
    finally:
        if early is not None:
            if graded is not None and close_in_background:
                closing = threading.Thread(target=early.close, name="grader-sandbox-close")
                closing.start()
                graded = dataclasses.replace(graded, closing=closing)
            else:
                early.close()
    return graded


# --- terminal ------------------------------------------------------------------------------

def _marks() -> tuple[str, str]:
    enc = getattr(sys.stdout, "encoding", None) or "ascii"
    try:
        "✓✗—".encode(enc)
        return "✓", "✗"
    except (UnicodeEncodeError, LookupError):
        return "ok", "FAIL"


def _pts(x: float) -> str:
    return f"{round(x, 2):g}"


def hidden_sentence(n: int, points: float) -> str:
    s = "case" if n == 1 else "cases"
    return (f"{n} hidden {s} will run at grading time (worth {_pts(points)} more points); "
            "this self-check is not your grade.")


def lead_sentence(public_points: float, hidden_cases: int, hidden_points: float) -> str:
    """How much of the grade the public cases check: what a self-check leads with, not a percentage."""
    hidden = (f"{hidden_cases} hidden case{'' if hidden_cases == 1 else 's'} at grading time" if hidden_cases
              else "no hidden cases")
    return f"Public cases: {_pts(public_points)} of {_pts(public_points + hidden_points)} points checked, {hidden}."


def check_lines(g: Graded, *, verbose: bool = False) -> list[str]:
    """What ``grader check`` prints: one line per case, a hint under each failure, the total."""
    from grader.report.text import one_line
    from grader.results import Outcome

    r = g.report
    ok, bad = _marks()
    dash = "—" if ok == "✓" else "-"
    lines = [f"{r.assignment.id} v{r.assignment.version} {dash} self-check of {one_line(r.submission.filename, 200)} "
             f"(public cases only)"]
    if g.note:
        lines.append(one_line(g.note, 300))
    if not r.load.ok:
        lines.append(f"Your submission could not be loaded: {one_line(r.load.message, 400)}")
    for e in r.load.cell_errors:
        lines.append(f"Error while loading ({one_line(e.where(), 100)}): {one_line(e.error, 300)}")
    for c in r.cases:
        if c.outcome is Outcome.PASSED:
            lines.append(f"  {ok} {one_line(c.title, 100)} [{c.id}]")
            continue
        concept = c.concept or ("not implemented yet" if c.not_implemented else c.outcome.value)
        lines.append(f"  {bad} {one_line(c.title, 100)} [{c.id}] {dash} {concept}")
        lines.append(f"      {one_line(c.message, 240 if not verbose else 2000)}")
        if verbose and c.concept:
            from grader.report.view import evidence_facts

            known = r.vocabulary().get(concept)
            lines.append(f"      ({known.title if known else concept})")
            lines += [f"      {f.label}: {one_line(f.value, 300)}" for f in evidence_facts(c.evidence)]
    passed = sum(c.outcome is Outcome.PASSED for c in r.cases)
    lines.append(lead_sentence(r.score.possible, g.hidden_cases, g.hidden_points))
    lines.append(f"Passed {passed} of {len(r.cases)} public cases ({_pts(r.score.earned)}/{_pts(r.score.possible)} "
                 "points)" + ("; this self-check is not your grade." if g.hidden_cases else "."))
    if not g.hidden_cases and passed == len(r.cases) and r.load.ok:
        lines.append("All cases passed.")
    if verbose:
        lines.append(f"Assignment folder: {g.assignment.dir}")
        lines.append(f"Sandbox isolation: {g.isolation}")
    return lines


def _all_passed(report) -> bool:
    from grader.results import Outcome

    return report.load.ok and all(c.outcome is Outcome.PASSED for c in report.cases)


def _exit_now(code: int) -> None:
    """Exit with ``code``. As a real command (not under CliRunner or a test's capture), skip the
    interpreter's tear-down of torch (~0.4 s): everything of ours is written and closed by now."""
    if sys.stdout is sys.__stdout__ and sys.stderr is sys.__stderr__ and threading.active_count() == 1:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(int(code))
    sys.exit(code)


# --- grader check --------------------------------------------------------------------------

@main.command()
@click.argument("submission", type=click.Path(path_type=Path))
@click.option("-a", "--assignment", "assignment", metavar="ASSIGNMENT",
              help="Assignment name or folder [default: the kit next to SUBMISSION, or the one it matches].")
@click.option("-o", "--output", "out_dir", type=click.Path(file_okay=False, path_type=Path),
              default=Path("grader-report"), show_default=True, help="Folder for the HTML report.")
@click.option("--device", type=click.Choice(["cpu", "cuda", "auto"]), default="auto", show_default=True,
              help="Where the reference and your code run.")
@click.option("-v", "--verbose", is_flag=True, help="Show evidence for failures, and tracebacks for errors.")
@_friendly
def check(submission: Path, assignment: str | None, out_dir: Path, device: str, verbose: bool) -> None:
    """Check your work on the public cases before you submit.

    Runs SUBMISSION (a .py file, a notebook, a folder or a .zip) in a sandboxed process
    against the assignment's public cases, prints a line per case with a hint for each
    failure, and writes an HTML report with the details. In a folder holding both the
    .py and the .ipynb starter, the one you changed is graded (the output says which).
    Hidden cases run only at grading time: passing here is not the final grade.

    \b
    Examples:
      grader check attention.ipynb                # in the kit folder, working in the notebook
      grader check attention.py                   # ... or in the .py file
      grader check .                              # the kit folder: the file you changed
      grader check my_attention.py -a masked-attention
      grader check mha.py -o reports/ --verbose

    \b
    Exit status: 0 every public case passed, 1 some did not, 2 usage error.
    """
    # Warm the meta device in the zygote now, beside this process's imports: the public cases try
    # device placement on meta tensors, which would otherwise cost each worker its first meta op.
    prestart_sandbox(device, warm_meta=True)
    _readable_submission(submission)
    writable_dir(out_dir)
    folder = locate_assignment(assignment, submission)
    g = grade_one(folder, submission, public_only=True, device=device, close_in_background=True)
    try:
        for line in check_lines(g, verbose=verbose):
            click.echo(line)
        from grader.report import write_submission
        from grader.report.dashboard import report_filename

        try:
            path = write_submission(g.report, out_dir / f"{report_filename(g.report.submission.id)}.html")
        except OSError as e:
            raise OutputNotWritable(f"cannot write the report into {out_dir}: {e.strerror or e}") from e
        click.echo(f"Report: {path}")
    finally:
        g.finish()
    _exit_now(ExitCode.OK if _all_passed(g.report) else ExitCode.FAILED)


# --- grader ci -----------------------------------------------------------------------------

def ci_lines(g: Graded, *, min_score: float, file: str | None) -> tuple[list[str], bool]:
    """(lines to print, passed?) for ``grader ci``: annotations, then a fenced human summary."""
    from grader.annotations import failure_annotations, fenced, neutralise
    from grader.report.text import one_line
    from grader.results import Outcome

    r = g.report
    passed = r.score.percent >= min_score - 1e-9 and r.score.possible > 0
    listing = [f"{r.assignment.id} v{r.assignment.version}: {neutralise(one_line(r.submission.filename))} scored "
               f"{_pts(r.score.earned)}/{_pts(r.score.possible)} ({r.score.display_percent()}); "
               f"required {min_score:g}%: {'PASS' if passed else 'FAIL'}"]
    for c in r.cases:
        mark = "ok  " if c.outcome is Outcome.PASSED else c.outcome.value.upper().ljust(4)
        where = " (hidden)" if c.hidden else ""
        listing.append(f"  {mark} {neutralise(one_line(c.id))}{where}" + (f" - {c.concept}" if c.concept else ""))
    listing.append(f"Sandbox isolation: {g.isolation}")
    return failure_annotations(r, file=file) + fenced(listing), passed


def _repo_path(path: Path) -> str:
    """The submission's path inside its git checkout (what GitHub matches annotations against)."""
    p = path.resolve()
    for root in p.parents:
        if (root / ".git").exists():
            return p.relative_to(root).as_posix()
    base = Path(os.environ.get("GITHUB_WORKSPACE") or Path.cwd()).resolve()
    return p.relative_to(base).as_posix() if p.is_relative_to(base) else p.as_posix()


@main.command()
@click.argument("submission", type=click.Path(path_type=Path))
@click.option("-a", "--assignment", "assignment", required=True, metavar="ASSIGNMENT",
              help="Assignment folder from an instructor-controlled checkout (or a name on "
                   "$GRADER_ASSIGNMENTS). Never a folder the pull request can change.")
@click.option("--min-score", type=click.FloatRange(0, 100), default=100.0, show_default=True,
              help="Percent of all points (public and hidden) needed to pass.")
@click.option("--junit", "junit_path", type=click.Path(dir_okay=False, path_type=Path),
              default=Path("grader-junit.xml"), show_default=True, help="JUnit XML file to write.")
@click.option("--summary", "summary_path", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="Markdown summary file to append to [default: $GITHUB_STEP_SUMMARY, else none].")
@click.option("--device", type=click.Choice(["cpu", "cuda", "auto"]), default="auto", show_default=True,
              help="Where the reference and your code run.")
@click.option("-v", "--verbose", is_flag=True, help="Tracebacks for errors.")
@_friendly
def ci(submission: Path, assignment: str, min_score: float, junit_path: Path, summary_path: Path | None,
       device: str, verbose: bool) -> None:
    """Grade a pull request: public and hidden cases, JUnit XML, job summary, annotations.

    Prints one GitHub error annotation per failing case (hidden cases by title and concept
    only; nothing the student wrote can start a workflow command), writes the JUnit XML
    and appends a Markdown summary to $GITHUB_STEP_SUMMARY. See docs/ci.md and
    examples/github-workflow.yml: take the grader and the assignment from a source the
    pull request cannot change.

    \b
    Examples:
      grader ci submission/attention.py -a instructor/assignments/masked-attention
      grader ci mha.py -a mha-kv-cache --min-score 80 --junit out/junit.xml

    \b
    Exit status: 0 score >= --min-score, 1 below it, 2 usage error.
    """
    prestart_sandbox(device, warm_meta=True)  # hidden cases run on the meta device (see `check`)
    _readable_submission(submission)
    _writable_file(junit_path)
    if summary_path is None and os.environ.get("GITHUB_STEP_SUMMARY"):
        summary_path = Path(os.environ["GITHUB_STEP_SUMMARY"])
    if summary_path is not None:
        _writable_file(summary_path)
    folder = locate_assignment(assignment, None, kits=False)
    from grader.kit import kit_info

    if kit_info(folder) is not None:
        raise GraderError(f"{folder} is a student kit (public cases only); grader ci needs the full "
                          "assignment from an instructor-controlled source")
    g = grade_one(folder, submission, public_only=False, device=device)
    from grader.report import markdown_summary, write_junit

    lines, passed = ci_lines(g, min_score=min_score, file=_repo_path(submission))
    for line in lines:
        click.echo(line)
    try:
        write_junit([g.report], junit_path)
        if summary_path is not None:
            with open(summary_path, "a", encoding="utf-8") as f:
                f.write(markdown_summary([g.report]) + "\n")
    except OSError as e:
        raise OutputNotWritable(f"cannot write the CI results: {e.strerror or e}") from e
    sys.exit(ExitCode.OK if passed else ExitCode.FAILED)


# --- grader release ------------------------------------------------------------------------

@main.command()
@click.argument("assignment")
@click.option("-o", "--output", "out_dir", type=click.Path(file_okay=False, path_type=Path), required=True,
              help="New (or empty) folder for the kit.")
@click.option("-v", "--verbose", is_flag=True, help="Tracebacks for errors.")
@_friendly
def release(assignment: str, out_dir: Path, verbose: bool) -> None:
    """Write the student kit of ASSIGNMENT: starters, README, public cases only.

    The kit holds the starter .py/.ipynb, the README, the public cases and a spec.toml
    that records how many hidden cases exist (never which), plus a conftest.py so that
    `pytest` inside the kit runs one test per public case through the sandbox. The
    release is refused if any shipped file names a hidden case or the seed.

    \b
    Examples:
      grader release masked-attention -o dist/masked-attention-kit
      cd dist/masked-attention-kit && grader check attention.ipynb && pytest
    """
    from grader.assignments import load_assignment
    from grader.kit import release as write_kit

    a = load_assignment(assignment)
    kit = write_kit(a, out_dir)
    for p in kit.files:
        click.echo(f"  {p.relative_to(kit.dir)}")
    click.echo(f"Kit for {a.id} v{a.version} in {kit.dir}: {kit.public_cases} public cases; "
               f"{kit.hidden_cases} hidden cases stay with you (counted, not shipped).")
