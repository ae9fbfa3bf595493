"""Instructor commands: grade a folder of submissions, the gradebook, re-render reports."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import click

from grader.cli.common import (ExitCode, cache_folder, cache_options, dashboard_lang_option, exit_now,
                               isolation_option, lang_option, operator_errors)
from grader.cli.courses import canvas_column_option, course_options, echo_lms, echo_similarity
from grader.cli.progress import Progress
from grader.cli.progress import shown as _shown
from grader.errors import GraderError
from grader.i18n import LANGUAGES
from grader.timings import mark


# --- grader grade ------------------------------------------------------------------------------

class _Size(click.ParamType):
    """A number of bytes written as 16G, 512M, 2GiB or plain bytes."""

    name = "size"
    _UNITS = {"": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30, "t": 1 << 40}

    def convert(self, value, param, ctx):  # noqa: ANN001 - click's signature
        if isinstance(value, int):
            return value
        text = str(value).strip().lower().removesuffix("ib").removesuffix("b")
        unit = text[-1:] if text[-1:] in self._UNITS else ""
        try:
            number = float(text[:-1] if unit else text)
        except ValueError:
            self.fail(f"{value!r} is not a size (write it as 16G, 512M or a number of bytes)", param, ctx)
        if number <= 0:
            self.fail(f"{value!r} is not a size above zero", param, ctx)
        return int(number * self._UNITS[unit])


SIZE = _Size()


@click.command()
@click.argument("submissions", nargs=-1, required=True, type=click.Path(path_type=Path))
@click.option("-a", "--assignment", required=True, help="Assignment id (see `grader list`) or folder.")
@click.option("-o", "--output", "out_dir", type=click.Path(path_type=Path), default=None,
              help="Output folder [default: reports/ASSIGNMENT].")
@click.option("-j", "--jobs", type=click.IntRange(min=1), default=None,
              help="Submissions graded at once, each in its own sandbox [default: number of CPUs].")
@click.option("--force", is_flag=True, help="Grade again what the ledger says is already graded.")
@click.option("--release-hidden", is_flag=True, help="Show hidden cases' details in the students' reports.")
@click.option("--device", type=click.Choice(["auto", "cpu", "cuda"]), default="auto", show_default=True,
              help="Where the reference and the students' code run.")
@click.option("--gradebook", "gradebook_path", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="Gradebook file [default: OUTPUT/gradebook.sqlite].")
@click.option("--wait", is_flag=True, help="If another run is writing to OUTPUT, wait for it instead of failing.")
@click.option("--cluster", metavar="ADDRESS|local:N", default=None,
              help="Grade on a Dask cluster: a TLS scheduler address (tls://host:8786) or local:N worker processes. "
                   "Needs the cluster extra; see docs/cluster.md.")
@click.option("--tls", "tls", nargs=3, type=click.Path(exists=True, dir_okay=False), default=None,
              metavar="CA CERT KEY", help="--cluster tls://...: the course CA, this machine's certificate and key.")
@click.option("--insecure-cluster", is_flag=True,
              help="Allow a plain-TCP (tcp://) scheduler: no encryption, and anyone who can reach it can join "
                   "as a worker. Only on a network you trust.")
@click.option("--accept-isolation", "accept_isolation", metavar="LEVEL", default=None,
              help="Grade with this weaker sandbox level where the start-up self-test proves less than the "
                   "level claims (the error names it); every result records it.")
@click.option("--batch-cpus", type=click.FloatRange(min=0.01), default=None, metavar="N",
              help="CPUs all of the batch's workers may use at once, the ones each slot starts early "
                   "included (a cgroup over them all) [default: one per slot].")
@click.option("--batch-memory", type=SIZE, default=None, metavar="SIZE",
              help="Memory all of the batch's workers may use at once, e.g. 16G (past it the largest "
                   "is ended as over its memory limit) [default: one worker's cap per slot].")
@click.option("--folders-are-submissions", is_flag=True, help="Each folder in SUBMISSIONS is ONE student's submission.")
@click.option("--newest", is_flag=True, help="Of several files with one LMS student id, grade only the newest.")
@click.option("-v", "--verbose", is_flag=True, help="One line per submission and tracebacks of errors.")
@course_options
@cache_options
@lang_option
@dashboard_lang_option
@isolation_option
@operator_errors
def grade(submissions: tuple[Path, ...], assignment: str, out_dir: Path | None, jobs: int | None, force: bool,
          release_hidden: bool, device: str, gradebook_path: Path | None, wait: bool, cluster: str | None,
          tls: tuple[str, str, str] | None, insecure_cluster: bool,
          accept_isolation: str | None, batch_cpus: float | None, batch_memory: int | None,
          folders_are_submissions: bool, newest: bool, verbose: bool,
          no_similarity: bool, canvas_column: str | None, cache_dir: Path | None, no_cache: bool,
          lang: str | None, dashboard_lang: str | None, isolation: str | None) -> None:
    """Grade a class: every submission in SUBMISSIONS (folders or files), in parallel.

    A folder holds one .py, .ipynb or .zip file or one sub-folder per student; the
    student id comes from the name (an LMS export's lastname_firstname_12345_hw.ipynb
    gives lastname_firstname_12345). Each result is saved as soon as it is graded;
    a re-run grades only new or changed submissions (--force grades all again), so an
    interrupted run resumes where it stopped. Every run's scores go into the gradebook.
    A folder is a folder of submissions whatever its files are called (--folders-are-submissions:
    one student's); two files of one LMS id are both graded, under ids of their own, with a warning.
    Each worker gets one CPU and its memory cap; all of them together, the one each slot starts
    early included, get --batch-cpus and --batch-memory (by default one CPU and one cap per slot),
    where cgroups can be written (docs/hosts.md).

    \b
    Examples:
      grader grade submissions/ -a masked-attention
      grader grade canvas_export/ -a masked-attention -o reports/hw3 -j 4
      grader grade canvas_export/ -a masked-attention -j 8 --batch-cpus 6 --batch-memory 12G
      grader grade late/alice.py late/bob.ipynb -a masked-attention -o reports/hw3
      grader grade canvas_export/ -a masked-attention -o reports/hw3 --force
      grader grade canvas_export/ -a masked-attention -o reports/hw3 --cluster tls://head-node:8786 \\
          --tls ca.pem grader.pem grader-key.pem
      grader grade canvas_export/ -a masked-attention --lang zh-CN --dashboard-lang en

    \b
    Writes, under OUTPUT (default reports/ASSIGNMENT):
      results/<id>.json   canonical results      <id>.html   each student's report
      index.html          the class dashboard     grades.csv, junit.xml, summary.md, gradescope/
      similarity.html     pairs to review         canvas.csv, moodle.csv   LMS imports (docs/lms.md)
      gradebook.sqlite    every run's scores      ledger.sqlite   what is already graded

    Exit status: 0 when the batch ran (students failing cases is not an error),
    1 when some submissions could not be graded, 2 for usage errors, 130 when interrupted.
    """
    if cluster is None:  # the local sandbox's zygote imports torch while this process loads the rest
        from grader.cli.common import large_batch, prestart_sandbox

        prestart_sandbox(device, warm_meta=True, isolation=isolation, huge_heap=large_batch(submissions))
    from grader.cli.common import resolve_assignment
    from grader.grading.single import quiet_gc

    with quiet_gc():
        from grader.batch.config import BatchConfig
        from grader.batch.run import run_batch
    mark("imports")

    if cluster is not None and (batch_cpus is not None or batch_memory is not None):
        raise click.UsageError("--batch-cpus/--batch-memory bound this machine's slots; with --cluster, bound "
                               "each worker machine where it runs (docs/cluster.md)")
    if cluster is not None and jobs is not None:
        raise click.UsageError("-j/--jobs and --cluster cannot be combined: the cluster's workers grade in "
                               "parallel (--cluster local:N for N local worker processes)")
    try:
        a = resolve_assignment(assignment)
        cfg = BatchConfig(assignment=a, paths=list(submissions), out_dir=out_dir or Path("reports") / a.id,
                          jobs=jobs or os.cpu_count() or 1, force=force, release_hidden=release_hidden,
                          device=device, gradebook=gradebook_path, wait=wait, debug=verbose, cluster=cluster,
                          lang=lang, dashboard_lang=dashboard_lang, accept_isolation=accept_isolation,
                          isolation=isolation,
                          cluster_tls=tls or None, insecure_cluster=insecure_cluster,
                          folders_are_submissions=folders_are_submissions, newest=newest,
                          batch_cpus=batch_cpus, batch_memory_bytes=batch_memory,
                          similarity=not no_similarity, canvas_column=canvas_column,
                          cache_dir=cache_folder(cache_dir, no_cache))
        progress = Progress(verbose=verbose)
        try:
            result = run_batch(cfg, progress.on_event)
        finally:
            progress.close()
    except KeyboardInterrupt:
        click.echo("\nStopped. Results saved so far are kept; run the same command again to grade the rest.",
                   err=True)
        sys.exit(ExitCode.INTERRUPTED)
    _print_summary(result, cfg)
    if result.interrupted:
        exit_now(ExitCode.INTERRUPTED)
    if result.errors:
        click.echo(f"Error: {len(result.errors)} submission(s) could not be graded because of a grader fault "
                   "(listed above); they are not recorded: run the same command again to retry them.", err=True)
        exit_now(ExitCode.FAILED)
    exit_now(ExitCode.OK)


def _print_summary(result, cfg) -> None:
    if result.interrupted:
        click.echo(f"Interrupted: {result.graded} graded and saved this run ({result.reused} reused); "
                   "run the same command again to grade the rest.", err=True)
        return
    where = f"--cluster {cfg.cluster}" if cfg.cluster else f"-j {cfg.jobs}"
    click.echo(f"{result.found} submission(s): {result.graded} graded, {result.reused} reused from the ledger, "
               f"{result.failed_to_load} failed to load, {len(result.errors)} not graded "
               f"({result.elapsed_s:.1f} s, {where}{', ' + result.isolation if result.isolation else ''})")
    s = result.summary
    if s is None:
        return
    earlier = f" ({result.earlier} from earlier runs)" if result.earlier else ""
    click.echo("")
    click.echo(f"  students {s.n}{earlier}   mean {s.mean:.1f}%   median {s.median:.1f}%   "
               f"failed to load {s.failed_to_load}")
    if s.concept_rates:
        click.echo("  most failed concepts:")
        for rate in s.concept_rates[:5]:
            click.echo(f"    {rate.concept:<22} {rate.students:>4}/{rate.total:<4} {rate.percent:5.1f}%")
    click.echo("")
    click.echo(f"Dashboard: {result.dashboard}")
    echo_similarity(result.similarity, result.similar_pairs, result.lms)
    click.echo(f"Gradebook: {result.gradebook}")


# --- grader report -----------------------------------------------------------------------------

@click.command("report")
@click.argument("results_dir", type=click.Path(path_type=Path))
@click.option("-o", "--output", "out_dir", type=click.Path(path_type=Path), default=None,
              help="Where to write [default: the folder holding RESULTS_DIR].")
@click.option("--release-hidden", is_flag=True, help="Show hidden cases' details in the students' reports.")
@click.option("-v", "--verbose", is_flag=True, help="Tracebacks of errors.")
@click.option("--lang", "lang", type=click.Choice(LANGUAGES), default=None,
              help="Language of the students' reports [default: the one each was graded in].")
@canvas_column_option
@dashboard_lang_option
@operator_errors
def report_cmd(results_dir: Path, out_dir: Path | None, release_hidden: bool, verbose: bool, lang: str | None,
               canvas_column: str | None, dashboard_lang: str | None) -> None:
    """Re-create the HTML reports, dashboard and exports from saved results, without grading.

    RESULTS_DIR is a results/ folder of <id>.json files written by `grader grade`
    (or the output folder holding it).

    \b
    Examples:
      grader report reports/masked-attention/results
      grader report reports/masked-attention --release-hidden
      grader report reports/masked-attention/results -o /tmp/preview
      grader report reports/masked-attention --lang zh-CN     # the same results, in Chinese
    """
    from grader.batch.recording import OutputLock, prepare_output
    from grader.report.rerender import rerender

    if (results_dir / "results").is_dir():
        results_dir = results_dir / "results"
    if not results_dir.is_dir():
        raise GraderError(f"no results folder at {results_dir}; expected the results/ folder (or the output "
                          "folder holding it) that `grader grade` wrote")
    target = out_dir if out_dir is not None else results_dir.resolve().parent
    with OutputLock(prepare_output(target), hint="try again when it has finished"):
        written = rerender(results_dir, target, release_hidden=release_hidden, lang=lang,
                           dashboard_lang=dashboard_lang, canvas_column=canvas_column)
    click.echo(f"Wrote {len(written.reports)} report(s), grades.csv, junit.xml, summary.md and gradescope/.")
    click.echo(f"Dashboard: {written.index}")
    echo_lms(written.lms)


# --- grader gradebook --------------------------------------------------------------------------

_gradebook_option = click.option("--gradebook", "gradebook_path", type=click.Path(dir_okay=False, path_type=Path),
                                 default=None, help="The gradebook file.")
_outdir_option = click.option("-d", "--dir", "out_dir", type=click.Path(file_okay=False, path_type=Path),
                              default=None, help="An output folder of `grader grade` (uses its gradebook.sqlite).")


def _find_gradebook(gradebook_path: Path | None, out_dir: Path | None) -> Path:
    from grader.records.gradebook import GRADEBOOK_NAME

    if gradebook_path is not None:
        return gradebook_path
    if out_dir is not None:
        return out_dir / GRADEBOOK_NAME
    found = sorted(Path("reports").glob(f"*/{GRADEBOOK_NAME}")) + sorted(Path(".").glob(GRADEBOOK_NAME))
    if len(found) == 1:
        return found[0]
    if not found:
        raise GraderError(f"no gradebook found (looked for reports/*/{GRADEBOOK_NAME}); "
                          "pass -d OUTDIR or --gradebook PATH")
    raise GraderError(f"several gradebooks found ({', '.join(map(str, found))}); pick one with -d OUTDIR "
                      "or --gradebook PATH")


@click.group()
def gradebook() -> None:
    """Read the gradebook that `grader grade` keeps: every run and every score.

    \b
    Examples:
      grader gradebook runs -d reports/masked-attention
      grader gradebook export --csv -d reports/masked-attention -o grades_all_runs.csv
      grader gradebook export --csv --latest -d reports/masked-attention
      grader gradebook history doe_jane_12345 -d reports/masked-attention
    """


@gradebook.command("export")
@click.option("--csv", "as_csv", is_flag=True, required=True, help="CSV, one row per student per run.")
@click.option("-o", "--output", "output", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="File to write [default: standard output].")
@click.option("--latest", is_flag=True, help="Only each student's score in their latest run.")
@click.option("-a", "--assignment", default=None, help="Only this assignment's runs.")
@_gradebook_option
@_outdir_option
@operator_errors
def export_cmd(as_csv: bool, output: Path | None, latest: bool, assignment: str | None,
               gradebook_path: Path | None, out_dir: Path | None) -> None:
    """Export the gradebook's scores as CSV.

    Columns: run_id, run_started_at, run_status, assignment, version, grader_version,
    student_id, earned, possible, percent, reused, load_ok, sha256, filename, graded_at.

    \b
    Examples:
      grader gradebook export --csv -d reports/masked-attention > all_runs.csv
      grader gradebook export --csv --latest --gradebook course.sqlite -o final.csv
    """
    from grader.records.gradebook import Gradebook, scores_csv
    from grader.report.outdir import write_text_atomic

    with Gradebook(_find_gradebook(gradebook_path, out_dir), readonly=True) as book:
        text = scores_csv(book.scores(latest=latest, assignment=assignment))
    if output is None:
        click.echo(text, nl=False)
        return
    try:
        write_text_atomic(output, text)
    except OSError as e:
        from grader.errors import OutputNotWritable
        raise OutputNotWritable(f"cannot write {output}: {e.strerror or e}") from e
    click.echo(f"Wrote {output}", err=True)


@gradebook.command("history")
@click.argument("students", nargs=-1, required=True)
@_gradebook_option
@_outdir_option
@operator_errors
def history_cmd(students: tuple[str, ...], gradebook_path: Path | None, out_dir: Path | None) -> None:
    """Each run's score of STUDENTS (ids as in the reports).

    \b
    Examples:
      grader gradebook history doe_jane_12345 -d reports/masked-attention
      grader gradebook history alice bob --gradebook course.sqlite
    """
    from grader.records.gradebook import Gradebook
    from grader.report.text import fmt_points

    path = _find_gradebook(gradebook_path, out_dir)
    with Gradebook(path, readonly=True) as book:
        rows = {s: book.history(s) for s in students}
        unknown = [s for s, r in rows.items() if not r]
        if unknown:
            known = book.students()
            listing = ", ".join(map(_shown, known[:20])) + (", ..." if len(known) > 20 else "")
            raise GraderError(f"no scores for {', '.join(_shown(repr(u)) for u in unknown)} in {path}; "
                              f"students there: {listing or 'none'}")
    for i, (student, history) in enumerate(rows.items()):
        if i:
            click.echo("")
        click.echo(_shown(student))
        click.echo(f"  {'run':>4}  {'started (UTC)':<20}  {'assignment':<18} {'version':<8} {'score':>11} "
                   f"{'percent':>8}  file")
        for h in history:
            note = "  (reused)" if h.reused else ""
            note += "" if h.load_ok else "  (failed to load)"
            note += "" if h.run_status == "complete" else f"  [{_shown(h.run_status)} run]"
            score = f"{fmt_points(h.earned)}/{fmt_points(h.possible)}"
            click.echo(f"  {h.run_id:>4}  {_shown(h.run_started_at):<20}  {_shown(h.assignment):<18} "
                       f"{_shown(h.version):<8} {score:>11} {h.percent:7.1f}%  {_shown(h.filename)}{note}")


@gradebook.command("runs")
@_gradebook_option
@_outdir_option
@operator_errors
def runs_cmd(gradebook_path: Path | None, out_dir: Path | None) -> None:
    """List the runs in the gradebook: when, what, how it ended.

    \b
    Example:
      grader gradebook runs -d reports/masked-attention
    """
    from grader.records.gradebook import Gradebook

    with Gradebook(_find_gradebook(gradebook_path, out_dir), readonly=True) as book:
        runs = book.runs()
    click.echo(f"{'run':>4}  {'started (UTC)':<20}  {'assignment':<18} {'version':<8} {'status':<11} "
               f"{'graded':>6} {'reused':>6} {'no load':>7} {'errors':>6}")
    for r in runs:
        click.echo(f"{r.id:>4}  {_shown(r.started_at):<20}  {_shown(r.assignment):<18} {_shown(r.version):<8} "
                   f"{_shown(r.status):<11} "
                   f"{r.graded:>6} {r.reused:>6} {r.failed_to_load:>7} {r.errors:>6}")
