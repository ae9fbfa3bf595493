"""What a batch is asked to do (`BatchConfig`), what it tells the command as it goes (`Event`) and
what it did (`BatchResult`, its `Summary`); between the run and its back-end: the submissions to
grade (`Todo`) and the slots being up (`Ready`)."""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, TypeAlias

from grader.assignment.spec import Assignment
from grader.report.lms import LmsFiles
from grader.results import GradeReport

if TYPE_CHECKING:
    from grader.records.ledger import LedgerKey
    from grader.submission.load import LoadedSubmission

Todo: TypeAlias = "list[tuple[LedgerKey, LoadedSubmission]]"
"""What a back-end is handed to grade: each submission with the key its result is recorded under."""


@dataclass(frozen=True)
class BatchConfig:
    assignment: Assignment
    paths: list[Path]
    out_dir: Path
    jobs: int = 1
    force: bool = False
    """Grade again even what the ledger already holds."""
    release_hidden: bool = False
    device: str = "auto"
    gradebook: Path | None = None
    """Default: <out_dir>/gradebook.sqlite."""
    wait: bool = False
    """Wait for another run holding the output folder instead of failing."""
    debug: bool = False
    """Add the traceback to the message of a submission the grader could not grade."""
    cluster: str | None = None
    """Grade on a Dask cluster instead of local slots: "local:N" or a scheduler address (grader.batch.cluster)."""
    lang: str | None = None
    """The students' feedback language (``--lang``; default: the assignment's, else the locale)."""
    dashboard_lang: str | None = None
    """The dashboard's language (``--dashboard-lang``; default: the locale)."""
    similarity: bool = True
    """Write the similarity report (similarity.html and .csv) over this run's submissions."""
    canvas_column: str | None = None
    """The Canvas assignment column's header in canvas.csv (default: the assignment's title)."""
    cluster_tls: tuple[str, str, str] | None = None
    """The instructor's TLS files for a tls:// scheduler: CA, certificate, key (``--tls``)."""
    insecure_cluster: bool = False
    """Allow a plain-TCP scheduler (``--insecure-cluster``)."""
    accept_isolation: str | None = None
    """The weaker sandbox level the instructor accepts where the self-test proves less than the
    level claims (``--accept-isolation``); every result records it."""
    isolation: str | None = None
    """How local workers start (``--isolation``): "auto", "portable", or None (``GRADER_ISOLATION``,
    else "auto"). A cluster's workers choose by their own environment."""
    folders_are_submissions: bool = False
    """Each folder in `paths` is one student's submission, not a folder of submissions."""
    newest: bool = False
    """Of several submissions giving one LMS student id, grade only the newest (else each under its own id)."""
    cache_dir: Path | None = None
    """Where the reference setups are kept between runs (``--cache-dir``; None: ``--no-cache``)."""
    batch_cpus: float | None = None
    """CPUs all the local slots' workers may use at once, pre-started ones included (``--batch-cpus``;
    None: one per slot)."""
    batch_memory_bytes: int | None = None
    """Memory they may use at once (``--batch-memory``; None: one worker's cap per slot)."""


class EventKind(str, enum.Enum):
    """What a batch progress `Event` reports."""

    WAITING = "waiting"
    """For another run's lock on the output folder (``message`` says whose)."""
    PLAN = "plan"
    """Before grading: how many to grade, how many the ledger holds (``message``: why some are graded again)."""
    READY = "ready"
    """The sandboxes started (``seconds`` it took, ``message`` the isolation, ``reused`` the slots)."""
    WARNING = "warning"
    """``message`` says what: the batch's layout, before grading; what the sandbox cannot bound here."""
    GRADED = "graded"
    """One submission graded (``report``)."""
    ERROR = "error"
    """The grader could not grade one submission (``message`` says why)."""
    STOPPING = "stopping"
    """Interrupted: finishing what runs, grading nothing new."""


@dataclass(frozen=True)
class Event:
    """Progress, for the command to show: one per finished submission (GRADED or ERROR) and a few
    around them."""

    kind: EventKind
    done: int
    total: int
    """Submissions to grade in this run (those the ledger already holds are not counted)."""
    student_id: str = ""
    report: GradeReport | None = None
    seconds: float = 0.0
    failing: int = 0
    """Graded so far below 100 % (or not graded because of a grader error)."""
    message: str = ""
    """(plan) Why files graded before are graded again (`grader.batch.run.regrade_reasons`), else empty."""
    reused: int = 0
    """(plan) Submissions taken from the ledger instead of graded; (ready) number of slots."""


@dataclass(frozen=True)
class Ready:
    """The back-end's slots are up."""

    isolation: str
    """The sandbox level they grade with (recorded in the run)."""
    message: str
    """What the "ready" event says (the isolation, and where for a cluster)."""
    slots: int
    warning: str = ""
    """Said once at start-up when the sandbox bounds less than it should (no cgroup could be
    written: memory only polled, no process or CPU cap); "" otherwise."""


@dataclass(frozen=True)
class ConceptRate:
    concept: str
    students: int
    """Students failing at least one case of this concept."""
    total: int

    @property
    def percent(self) -> float:
        return 100.0 * self.students / self.total if self.total else 0.0


@dataclass(frozen=True)
class Summary:
    """A batch's statistics for the terminal (`grader.batch.outputs.summarize`)."""

    n: int
    mean: float
    median: float
    failed_to_load: int
    concept_rates: list[ConceptRate]
    """Most failed first."""


@dataclass
class BatchResult:
    out_dir: Path
    found: int = 0
    graded: int = 0
    reused: int = 0
    regraded: dict[tuple[str, ...], int] = field(default_factory=dict)
    """Files the ledger holds a result for from before a change, graded again: what changed (parts of
    `grader.assignment.fingerprint.PARTS`) -> how many."""
    failed_to_load: int = 0
    errors: list[tuple[str, str]] = field(default_factory=list)
    """(student id, message) of submissions the grader could not grade (not recorded; retried next run)."""
    interrupted: bool = False
    dashboard: Path | None = None
    summary: Summary | None = None
    earlier: int = 0
    """Results in the folder from earlier runs for students not in this batch (shown on the dashboard too)."""
    similarity: Path | None = None
    """similarity.html, when it was written."""
    similar_pairs: int = 0
    """Pairs listed in it."""
    lms: LmsFiles | None = None
    """The LMS gradebook imports written (`grader.report.lms.LmsFiles`), once written."""
    gradebook: Path | None = None
    isolation: str = ""
    """The sandbox level the slots ran with (empty when nothing was graded)."""
    elapsed_s: float = 0.0
    pages_written: set[str] = field(default_factory=set)
    """Submission ids whose HTML page this run wrote as it graded them (not rendered again at the end)."""
    recorded: dict[str, GradeReport] = field(default_factory=dict)
    """This run's results by file name (`<id>.json`): each report as its file was written or found
    to hold; the end of the batch reads only the other files of the results folder."""
