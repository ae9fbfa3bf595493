"""Student and CI commands: self-check, grade a pull request, release the student kit.

``grader check`` must answer in well under 3 s cold, and most of that is ``import torch``, paid both
here and in the sandbox's zygote. So the assignment folder is found from spec.toml files alone
(torch-free), the sandbox is started on a background thread at once, and only then does this
process load the cases (which imports torch): on two cores both imports run side by side. Keep
this module's top-level imports light: ``grader.cli.app`` imports it for every command, and what
is imported before ``prestart_sandbox`` delays the zygote (so the assignment, grading and report
modules are imported inside the commands).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING

import click

from grader.errors import GraderError, OutputNotWritable
from grader.cli.common import (ExitCode, cache_folder, cache_options, exit_now, isolation_option, lang_option,
                               operator_errors, prestart_sandbox,
                               student_errors)
from grader.cli.click_language import StudentCommand
from grader.i18n import LANGUAGES, N_, tr
from grader.report.outdir import writable_dir
from grader.timings import mark

if TYPE_CHECKING:
    from grader.grading.single import Graded

def _readable_submission(path: Path) -> Path:
    if not path.exists():
        if path.with_suffix(".ipynb").exists():
            raise GraderError(tr("submission {path} does not exist (did you mean the .ipynb?)", path=str(path)))
        raise GraderError(tr("submission {path} does not exist", path=str(path)))
    if path.is_symlink():
        return path  # not opened here: the loader decides (grader ci refuses links the pull request made)
    try:
        if path.is_dir():
            os.listdir(path)
        else:
            with open(path, "rb") as f:
                f.read(1)
    except OSError as e:
        raise GraderError(tr("cannot read submission {path}: {reason}", path=str(path),
                             reason=str(e.strerror or e))) from e
    return path


def _writable_file(path: Path) -> Path:
    writable_dir(path.parent if str(path.parent) else Path("."))
    if path.is_dir():
        raise OutputNotWritable(tr("cannot write to {path}: it is a folder", path=str(path)))
    return path


# --- grader check --------------------------------------------------------------------------

CHECK_HELP = N_(
    "Check your work on the public cases before you submit.\n\n"
    "Runs SUBMISSION (a .py file, a notebook, a folder or a .zip) in a sandboxed process against the "
    "assignment's public cases, prints a line per case with a hint for each failure, and writes an HTML "
    "report with the details. In a folder holding both the .py and the .ipynb starter, the one you changed "
    "is graded (the output says which). Hidden cases run only at grading time: passing here is not the "
    "final grade.\n\n"
    "\b\n"
    "Examples:\n"
    "  grader check attention.ipynb                # in the kit folder, working in the notebook\n"
    "  grader check attention.py                   # ... or in the .py file\n"
    "  grader check .                              # the kit folder: the file you changed\n"
    "  grader check my_attention.py -a masked-attention\n"
    "  grader check mha.py -o reports/ --verbose\n"
    "  grader check attention.py --lang zh-CN      # feedback in Chinese\n\n"
    "\b\n"
    "Exit status: 0 every public case passed, 1 some did not, 2 usage error.")


@click.command(cls=StudentCommand, help=CHECK_HELP)
@click.argument("submission", type=click.Path(path_type=Path))
@click.option("-a", "--assignment", "assignment", metavar="ASSIGNMENT",
              help=N_("Assignment name or folder [default: the kit next to SUBMISSION, or the one it matches]."))
@click.option("-o", "--output", "out_dir", type=click.Path(file_okay=False, path_type=Path),
              default=Path("grader-report"), show_default=True, help=N_("Folder for the HTML report."))
@click.option("--device", type=click.Choice(["cpu", "cuda", "auto"]), default="auto", show_default=True,
              help=N_("Where the reference and your code run."))
@click.option("-v", "--verbose", is_flag=True, help=N_("Show evidence for failures, your code's tracebacks for "
                                                       "errors, and up to 40 lines of what it printed (5 without -v)."))
@cache_options
@lang_option
@isolation_option
@student_errors
def check(submission: Path, assignment: str | None, out_dir: Path, device: str, verbose: bool,
          cache_dir: Path | None, no_cache: bool, lang: str | None, isolation: str | None) -> None:
    """``grader check``: its help is `CHECK_HELP` (in the catalog, so a Chinese kit shows it in Chinese)."""
    # Warm the meta device in the zygote now, beside this process's imports: the public cases try
    # device placement on meta tensors, which would otherwise cost each worker its first meta op.
    prestart_sandbox(device, warm_meta=True, isolation=isolation, resident_pages=False)  # one submission (grade_one)
    from grader.assignment.kit import locate_assignment
    from grader.cli.case_progress import CaseProgress
    from grader.grading.single import all_passed, grade_one
    from grader.report.check_text import check_lines

    _readable_submission(submission)
    writable_dir(out_dir)
    folder = locate_assignment(assignment, submission)
    progress = CaseProgress()
    try:
        g = grade_one(folder, submission, public_only=True, device=device, close_in_background=True, lang=lang,
                      cache_dir=cache_folder(cache_dir, no_cache), isolation=isolation, on_step=progress.step,
                      while_waiting=_prepare_report)
    finally:
        progress.close()
    try:
        for line in check_lines(g, verbose=verbose):
            click.echo(line)
        from grader.report import write_submission

        try:
            path = write_submission(g.report, out_dir / _report_name(g.report.submission.id, submission))
        except OSError as e:
            raise OutputNotWritable(tr("cannot write the report into {path}: {reason}", path=str(out_dir),
                                       reason=str(e.strerror or e))) from e
        click.echo(tr("Report: {path}", path=str(path)).render(g.report.lang))
        mark("report.written")
    finally:
        g.finish()
    exit_now(ExitCode.OK if all_passed(g.report) else ExitCode.FAILED)


def _prepare_report(lang: str) -> None:
    """The report page's templates compiled while the sandbox starts: off the path after grading."""
    from grader.report.html import prepare_submission_page

    prepare_submission_page(lang)


def _report_name(student_id: str, submission: Path) -> str:
    """``attention.html`` for attention.py, ``attention.ipynb.html`` for the notebook beside it: a
    kit holds both, and checking one must not overwrite the other's report."""
    from grader.report.dashboard import report_filename

    stem = report_filename(student_id)
    return f"{stem}.ipynb.html" if submission.suffix.lower() == ".ipynb" else f"{stem}.html"


# --- grader ci -----------------------------------------------------------------------------

def ci_lines(g: Graded, *, min_score: float, file: str | None) -> tuple[list[str], bool]:
    """(lines to print, passed?) for ``grader ci``: annotations, then a fenced human summary."""
    from grader.report.annotations import failure_annotations, fenced, neutralise
    from grader.report.text import fmt_points, one_line
    from grader.results import Outcome

    r = g.report
    passed = r.score.percent >= min_score - 1e-9 and r.score.possible > 0
    listing = [f"{r.assignment.id} v{r.assignment.version}: {neutralise(one_line(r.submission.filename))} scored "
               f"{fmt_points(r.score.earned)}/{fmt_points(r.score.possible)} ({r.score.display_percent()}); "
               f"required {min_score:g}%: {'PASS' if passed else 'FAIL'}"]
    for c in r.cases:
        mark = "ok  " if c.outcome is Outcome.PASSED else c.outcome.value.upper().ljust(4)
        where = " (hidden)" if c.hidden else ""
        listing.append(f"  {mark} {neutralise(one_line(c.id))}{where}" + (f" - {c.concept}" if c.concept else ""))
    listing.append(f"Sandbox isolation: {g.isolation}")
    if r.environment.limits:
        listing.append(f"Sandbox limits: {r.environment.limits}")
    return failure_annotations(r, file=file) + fenced(listing), passed


def _checkout_root(path: Path) -> Path:
    """The folder a pull request controls: the git checkout holding `path` (found without following
    links), else the workspace. Below it, ``grader ci`` follows no symbolic link."""
    here = Path(os.path.abspath(path))
    for root in here.parents:
        if (root / ".git").exists():
            return root
    return Path(os.path.abspath(os.environ.get("GITHUB_WORKSPACE") or Path.cwd()))


def _repo_path(path: Path) -> str:
    """The submission's path inside its git checkout (what GitHub matches annotations against)."""
    p = path.resolve()
    for root in p.parents:
        if (root / ".git").exists():
            return p.relative_to(root).as_posix()
    base = Path(os.environ.get("GITHUB_WORKSPACE") or Path.cwd()).resolve()
    return p.relative_to(base).as_posix() if p.is_relative_to(base) else p.as_posix()


@click.command()
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
@cache_options
@lang_option
@isolation_option
@student_errors
def ci(submission: Path, assignment: str, min_score: float, junit_path: Path, summary_path: Path | None,
       device: str, verbose: bool, cache_dir: Path | None, no_cache: bool, lang: str | None,
       isolation: str | None) -> None:
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
    # Hidden cases run on the meta device (see `check`); one submission, as `check`.
    prestart_sandbox(device, warm_meta=True, isolation=isolation, resident_pages=False)
    _readable_submission(submission)
    _writable_file(junit_path)
    if summary_path is None and os.environ.get("GITHUB_STEP_SUMMARY"):
        summary_path = Path(os.environ["GITHUB_STEP_SUMMARY"])
    if summary_path is not None:
        _writable_file(summary_path)
    from grader.assignment.kit import kit_info, locate_assignment
    from grader.grading.single import grade_one

    folder = locate_assignment(assignment, None, kits=False)

    if kit_info(folder) is not None:
        raise GraderError(f"{folder} is a student kit (public cases only); grader ci needs the full "
                          "assignment from an instructor-controlled source")
    g = grade_one(folder, submission, public_only=False, device=device, lang=lang,
                  link_root=_checkout_root(submission), cache_dir=cache_folder(cache_dir, no_cache),
                  isolation=isolation)
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

@click.command()
@click.argument("assignment")
@click.option("-o", "--output", "out_dir", type=click.Path(file_okay=False, path_type=Path), required=True,
              help="New (or empty) folder for the kit.")
@click.option("-v", "--verbose", is_flag=True, help="Tracebacks for errors.")
@click.option("--lang", "lang", type=click.Choice(LANGUAGES), default=None,
              help="The students' language: the kit's default for `grader check`, and its README "
                   "[default: the assignment's `lang`, else en].")
@click.option("--gradescope", is_flag=True,
              help="Write OUTPUT/autograder.zip for Gradescope instead: the instructor's, with the hidden "
                   "cases and the reference (docs/gradescope.md). Never give it to students.")
@click.option("--hidden-visibility", type=click.Choice(["hidden", "after_due_date", "after_published", "visible"]),
              default="after_published", show_default=True,
              help="With --gradescope: when students see the hidden cases' scores on Gradescope.")
@operator_errors
def release(assignment: str, out_dir: Path, verbose: bool, lang: str | None, gradescope: bool,
            hidden_visibility: str) -> None:
    """Write the student kit of ASSIGNMENT: starters, README, public cases only.

    The kit holds the starter .py/.ipynb, the README, the public cases and a spec.toml
    that records how many hidden cases exist (never which), plus a conftest.py so that
    `pytest` inside the kit runs one test per public case through the sandbox. The
    release is refused if any shipped file names a hidden case or the seed.

    \b
    Examples:
      grader release masked-attention -o dist/masked-attention-kit
      grader release masked-attention -o dist/kit-zh --lang zh-CN
      cd dist/masked-attention-kit && grader check attention.ipynb && pytest
      grader release masked-attention --gradescope -o dist/gradescope   # upload dist/gradescope/autograder.zip
    """
    from grader.assignment.spec import load_assignment
    from grader.authoring.release import release as write_kit

    a = load_assignment(assignment)
    if gradescope:
        from grader.authoring.gradescope import build_autograder_zip

        made = build_autograder_zip(a, out_dir, hidden_visibility=hidden_visibility, lang=lang)
        click.echo(f"Gradescope autograder for {a.id} v{a.version}: {made.path} ({len(made.files)} files; "
                   f"{made.hidden_cases} hidden cases inside, shown {hidden_visibility}).")
        click.echo("It holds the hidden cases and the reference: upload it to Gradescope, never to students.")
        return
    kit = write_kit(a, out_dir, lang=lang)
    for p in kit.files:
        click.echo(f"  {p.relative_to(kit.dir)}")
    click.echo(f"Kit for {a.id} v{a.version} in {kit.dir}: {kit.public_cases} public cases; "
               f"{kit.hidden_cases} hidden cases stay with you (counted, not shipped).")
