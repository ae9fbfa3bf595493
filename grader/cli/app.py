"""Command line: parse, call one function, echo, exit code. No grading logic lives here."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from grader import __version__
from grader.cli.click_language import StudentGroup
from grader.cli.common import ExitCode, OperatorError, operator_errors
from grader.i18n import N_
from grader.timings import mark


def _default_submissions() -> Path | None:
    for p in (Path.cwd() / "submissions", Path(__file__).resolve().parents[2] / "submissions"):
        if (p / "expected.toml").is_file():
            return p
    return None


@click.group(cls=StudentGroup, context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100},
             help=N_("Grade attention assignments: causal and padding masks, masked attention, multi-head "
                     "attention and KV-cache decoding.\n\n"
                     "Student code always runs in a separate, sandboxed worker process; the grader compares "
                     "its outputs with a trusted reference and explains every failure.\n\n"
                     "\b\n"
                     "Students:     grader check attention.py\n"
                     "Instructors:  grader grade submissions/ -a masked-attention -o reports/run1\n"
                     "CI:           grader ci attention.py -a masked-attention --min-score 80\n"
                     "Authors:      grader validate masked-attention"))
@click.version_option(__version__, prog_name="grader", help=N_("Show the version and exit."))
def main() -> None:
    """The ``grader`` command (its help, in the catalog, is what ``grader --help`` shows)."""
    mark("cli")


@main.command("list")
def list_cmd() -> None:
    """List the assignments this grader knows, with versions and point totals.

    A broken assignment gets one line saying why; the others are listed all the same
    (exit status 2 when any is broken).

    \b
    Example:
      grader list
    """
    from grader.assignment.spec import available, load_assignment

    found = available()
    if not found:
        raise OperatorError("no assignments found (looked in ./assignments and $GRADER_ASSIGNMENTS)")
    from grader.errors import GraderError

    broken = 0
    for name in sorted(found):
        try:
            a = load_assignment(found[name])
        except GraderError as e:
            broken += 1
            click.echo(f"{name:<20} BROKEN  {e}")
            continue
        public = a.possible(public_only=True)
        click.echo(f"{a.id:<20} v{a.version:<6} {a.possible():>5g} points ({public:g} public)  {a.title}")
    if broken:
        raise click.exceptions.Exit(2)


@main.command()
@click.argument("assignment")
@click.option("--submissions", "submissions_dir", type=click.Path(file_okay=False, path_type=Path),
              default=None, help="Folder holding expected.toml and the sample submissions "
                                 "[default: ./submissions].")
@click.option("--device", default="auto", show_default=True, help="Reference device: auto, cpu or cuda.")
@click.option("--seeds", "other_seeds", type=click.IntRange(0, 1000), default=0, show_default=True,
              help="Also grade the reference and every sample with the cases' inputs drawn from the seeds 1..N: "
                   "a kit draws its own seed, so no verdict may hold for one seed only.")
@operator_errors
def validate(assignment: str, submissions_dir: Path | None, device: str, other_seeds: int) -> None:
    """Prove ASSIGNMENT before students see it.

    Checks that the trusted reference scores 100 %, that every sample submission
    declared in submissions/expected.toml fails exactly its declared cases with its
    declared concepts, that two runs are identical and that no hidden case is public.
    With --seeds N, the reference and the samples again under N other seeds: a case
    whose mistake shows only on some draws of its inputs fails here.

    \b
    Examples:
      grader validate masked-attention
      grader validate masked-attention --seeds 5
    """
    from grader.assignment.spec import load_assignment
    from grader.authoring.validate import validate as run_validation
    from grader.grading.factory import grading

    a = load_assignment(assignment)
    with grading(a, device=device) as engine:
        sandbox = engine.sandbox
        result = run_validation(a, engine, submissions_dir or _default_submissions(), other_seeds=other_seeds)
    for check in result.checks:
        mark = "ok  " if check.ok else "FAIL"
        click.echo(f"{mark} {check.name}" + (f"\n     {check.detail}" if check.detail and not check.ok else ""))
    passed = sum(c.ok for c in result.checks)
    click.echo(f"{a.id} v{a.version}: {passed}/{len(result.checks)} checks passed (isolation: {sandbox.isolation})")
    sys.exit(ExitCode.OK if result.ok else ExitCode.FAILED)


# Each workflow's commands live in their own module; this list is the whole command line.
def _register() -> None:
    from grader.cli import instructor, student

    for command in (student.check, student.ci, student.release,
                    instructor.grade, instructor.report_cmd, instructor.gradebook):
        main.add_command(command)


_register()
