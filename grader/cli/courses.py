"""What `grader grade` and `grader report` say about the files a course brings elsewhere: the LMS
gradebook imports and the similarity report."""

from __future__ import annotations

from pathlib import Path

import click

canvas_column_option = click.option(
    "--canvas-column", default=None, metavar="NAME",
    help="The assignment's column in canvas.csv, as Canvas's gradebook names it, e.g. 'HW3 (12345)' "
         "[default: the assignment's title]. See docs/lms.md.")


def echo_lms(lms) -> None:
    """One line per LMS file written, and every graded submission that matched no LMS name."""
    from grader.untrusted import name

    if lms is None:
        return
    if lms.canvas is not None:
        click.echo(f"Canvas import: {lms.canvas} ({lms.matched_canvas} student(s))")
    if lms.moodle is not None:
        click.echo(f"Moodle grading worksheet: {lms.moodle} ({lms.matched_moodle} student(s))")
    if lms.unmatched_ids:
        shown = ", ".join(name(s, 80) for s in lms.unmatched_ids[:20]) + (", ..." if len(lms.unmatched_ids) > 20 else "")
        click.echo(f"Not in any LMS file ({len(lms.unmatched_ids)}; their file names carry no LMS id, enter "
                   f"their scores by hand): {shown}. All listed in {lms.unmatched}", err=True)


no_similarity_option = click.option("--no-similarity", is_flag=True,
                                    help="Skip the similarity report (similarity.html, docs/lms.md).")


def course_options(fn):
    """`grader grade`'s --no-similarity and --canvas-column."""
    return no_similarity_option(canvas_column_option(fn))


def echo_similarity(page: Path | None, pairs: int, lms=None) -> None:
    """The similarity report's line, then the LMS files' (`echo_lms`)."""
    if page is not None:
        click.echo(f"Similarity: {page} ({pairs} pair(s) with evidence to review)")
    echo_lms(lms)
