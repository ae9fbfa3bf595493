"""Plumbing shared by the commands: which assignment, and an engine with its sandbox."""

from __future__ import annotations

import enum
import functools
import os
import sys
import threading
import traceback
from pathlib import Path
from typing import TYPE_CHECKING, Any
from collections.abc import Callable

import click

from grader.errors import GraderError
from grader.i18n import DEFAULT, LANGUAGES, N_, choose, tr

if TYPE_CHECKING:
    from grader.assignment.spec import Assignment


def lang_option(fn):
    """``--lang en|zh-CN``: the language of what the student reads (default: the assignment's
    ``lang`` in spec.toml, else the locale, LC_ALL/LANG)."""
    return click.option("--lang", "lang", type=click.Choice(LANGUAGES), default=None,
                        help=N_("Language of the student's feedback [default: the assignment's `lang`, "
                                "else the locale (LC_ALL/LANG), else en]."))(fn)


def isolation_option(fn):
    """``--isolation auto|portable`` (else ``GRADER_ISOLATION``): how the sandboxed worker is started."""
    return click.option(
        "--isolation", "isolation", type=click.Choice(["auto", "portable"]), default=None,
        envvar="GRADER_ISOLATION", show_envvar=True,
        help=N_("How your code's worker process is started. auto: the strongest jail this machine has "
                "(Linux: namespaces, Landlock, seccomp, cgroups); on Windows and macOS the portable worker. "
                "portable: a fresh Python process over pipes, time limits by killing its process tree, "
                "memory polled; it hides no file from the code (README: Isolation by platform) "
                "[default: auto]."))(fn)


def dashboard_lang_option(fn):
    return click.option("--dashboard-lang", "dashboard_lang", type=click.Choice(LANGUAGES), default=None,
                        help="Language of the class dashboard (index.html) [default: the locale, else en], "
                             "whatever --lang the students' reports are in.")(fn)


CACHE_DIR_ENV = "GRADER_CACHE_DIR"
NO_CACHE_ENV = "GRADER_NO_CACHE"


def cache_options(fn):
    """``--cache-dir DIR`` and ``--no-cache``: where the reference setups are kept between runs
    (`grader.grading.setup_cache`), passed on as ``cache_dir`` (None: no cache)."""
    fn = click.option("--no-cache", "no_cache", is_flag=True, envvar=NO_CACHE_ENV, show_envvar=True,
                      help=N_("Compute the reference results again instead of reading them from the cache."))(fn)
    return click.option("--cache-dir", "cache_dir", type=click.Path(file_okay=False, path_type=Path),
                        envvar=CACHE_DIR_ENV, show_envvar=True, default=None,
                        help=N_("Folder keeping the reference results between runs, per assignment, grader and "
                                "machine [default: the user cache folder, e.g. ~/.cache/attention-grader/setups]."))(fn)


def cache_folder(cache_dir: Path | None, no_cache: bool) -> Path | None:
    """The setup cache's folder (None: ``--no-cache``): ``--cache-dir``, else the platform's user
    cache folder (XDG_CACHE_HOME or ~/.cache, ~/Library/Caches, %LOCALAPPDATA%)."""
    if no_cache:
        return None
    if cache_dir is not None:
        return cache_dir
    if sys.platform == "win32":
        base = Path(os.environ.get("LOCALAPPDATA") or Path.home() / "AppData" / "Local")
    elif sys.platform == "darwin":
        base = Path.home() / "Library" / "Caches"
    else:
        base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return base / "attention-grader" / "setups"


class ExitCode(enum.IntEnum):
    OK = 0
    FAILED = 1
    """Grading ran, and the student's work (or a validation) did not pass."""
    USAGE = 2
    """The grader was asked to do something it cannot: bad arguments, unknown assignment, busy gradebook."""
    INTERRUPTED = 130
    """Stopped by Ctrl-C / SIGTERM; what finished was recorded and a re-run resumes."""


def exit_now(code: int) -> None:
    """Exit with ``code`` once a command is done. As a real command (not under CliRunner or a
    test's capture) with no other thread left, run the exit handlers (the sandbox's and the
    early zygote's clean-up) and skip the interpreter's tear-down of torch's modules, 0.1-0.6 s
    (docs/performance.md): everything of ours is written and closed by then."""
    out, err = sys.stdout, sys.stderr  # None without a console (pythonw): then no fast path
    if out is sys.__stdout__ and err is sys.__stderr__ and out is not None and err is not None \
            and threading.active_count() == 1:
        import atexit

        atexit._run_exitfuncs()
        out.flush()
        err.flush()
        os._exit(int(code))
    sys.exit(code)


class OperatorError(click.ClickException):
    """What click prints as ``Error: ...`` and exits 2 with: a `GraderError` (or any unexpected
    exception) that reached a command; ``错误：...`` where the student's language is Chinese."""

    exit_code = ExitCode.USAGE

    def __init__(self, message: str, lang: str = DEFAULT):
        super().__init__(message)
        self.lang = lang

    def show(self, file: Any = None) -> None:
        if self.lang == DEFAULT:
            return super().show(file)
        click.echo(tr("Error: {message}", message=self.format_message()).render(self.lang),
                   file=file, err=file is None, color=self.show_color)


def operator_errors(fn: Callable[..., Any]) -> Callable[..., Any]:
    """How every command reports an operator error: one ``Error: ...`` line (exit 2), with the
    traceback too under ``--verbose``. An unexpected exception becomes such a line as well
    (a SandboxError says the sandbox could not run); click's own exits pass through. In English:
    the operator's commands (grade, validate, release) speak to the instructor."""
    return _reported(fn, lambda kwargs: DEFAULT)


def student_errors(fn: Callable[..., Any]) -> Callable[..., Any]:
    """`operator_errors` for a command a student runs (check, ci): the ``Error:`` line speaks the
    student's language (``--lang``, else the assignment's, else the locale)."""
    return _reported(fn, _student_language)


def _student_language(kwargs: dict[str, Any]) -> str:
    wanted = kwargs.get("lang")
    if not wanted:
        from grader.assignment.kit import language_near

        wanted = language_near(kwargs.get("submission"), kwargs.get("assignment"))
    return choose(wanted)


def _reported(fn: Callable[..., Any], language: Callable[[dict[str, Any]], str]) -> Callable[..., Any]:
    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        verbose = kwargs.get("verbose", False)
        try:
            return fn(*args, **kwargs)
        except GraderError as e:
            if verbose:
                traceback.print_exc()
            lang = language(kwargs)
            raise OperatorError(e.render(lang), lang) from e
        except (click.exceptions.Exit, click.Abort, click.ClickException, SystemExit, KeyboardInterrupt):
            raise
        except BrokenPipeError:
            _reader_went_away()
        except Exception as e:
            from grader.sandbox import SandboxError

            if verbose:
                traceback.print_exc()
            lang = language(kwargs)
            if isinstance(e, SandboxError):
                said = tr("the sandbox could not run: {error}", error=str(e))
            else:
                said = tr("unexpected {kind}: {error} (rerun with --verbose for details)", kind=type(e).__name__,
                          error=str(e))
            raise OperatorError(said.render(lang), lang) from e

    return wrapper


def _reader_went_away() -> None:
    """``grader check . | head -2``: the reader closed the pipe, which is not an error to report.
    Output still buffered would raise again at exit, so stdout is pointed at /dev/null first."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    sys.exit(ExitCode.FAILED)


def infer_assignment(submission: Path) -> Assignment:
    """The one assignment whose entry points the submission's text defines (read as text, never run)."""
    from grader.assignment.spec import available, infer, load_assignment

    return load_assignment(infer(submission, available()))


def resolve_assignment(name: str | None, submission: Path | None = None) -> Assignment:
    from grader.assignment.spec import load_assignment

    if name:
        return load_assignment(name)
    if submission is None:
        raise click.UsageError("missing -a/--assignment")
    return infer_assignment(submission)


def prestart_sandbox(device: str, *, warm_meta: bool = False, isolation: str | None = None,
                     resident_pages: bool = True, huge_heap: bool = False) -> None:
    """Start the sandbox's zygote now, before this process imports torch, so the two imports run
    side by side; the Sandbox made later adopts it, and when the command ends first (a usage
    error) it is stopped with the command. (The portable worker has no zygote.) `huge_heap`: for
    a large batch (`large_batch`)."""
    from grader.grading.factory import prestart_zygote

    click.get_current_context().call_on_close(prestart_zygote(device, warm_meta=warm_meta, isolation=isolation,
                                                              resident_pages=resident_pages, huge_heap=huge_heap))


LARGE_BATCH = 64
"""From how many submissions a batch's zygote keeps its heap in huge pages: ~8 ms of CPU less a
worker against ~0.25 s more for the zygote's import of torch (docs/performance.md; measured: a
loss at 12, even at 40, a gain at 200)."""


def large_batch(paths: tuple[Path, ...] | list[Path]) -> bool:
    """Whether `paths` (as ``grader grade`` is given them) hold at least `LARGE_BATCH` entries: a
    file counts one, a folder the entries directly in it (a file or a folder per student in an LMS
    export). A guess made before anything is read; counting stops at the threshold."""
    n = 0
    for p in paths:
        try:
            if not p.is_dir():
                n += 1
            else:
                with os.scandir(p) as entries:
                    for _ in entries:
                        n += 1
                        if n >= LARGE_BATCH:
                            return True
        except OSError:
            continue
        if n >= LARGE_BATCH:
            return True
    return False
