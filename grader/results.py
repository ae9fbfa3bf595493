"""Plain result objects: what grading one submission produced, and its versioned JSON form.

Everything here is JSON-serialisable by construction (str, int, float, bool, None, lists,
nested dataclasses, str enums, `Msg`). Instructors and other tools read these files, so field names
are stable; a breaking change bumps `SCHEMA_VERSION`.

What a student reads is a `Msg` field (msgids and arguments, English through ``str()``), rendered
in a language only where it is shown. The JSON keeps each twice: ``message`` the English text (for
people and tools), ``message_i18n`` the msgids (for ``grader report --lang``); reading makes one
`Msg` again, and a file without ``_i18n`` keys (schema 1) its English text.
"""

from __future__ import annotations

import dataclasses
import enum
import math
from dataclasses import dataclass, field
from typing import Any

from grader.explorer import Explorer, explorer_from_dict
from grader.i18n import DEFAULT as DEFAULT_LANG, EMPTY, Msg, english, tr

SCHEMA_VERSION = 3
"""2: messages also as gettext msgids with arguments (``*_i18n``), the report's ``lang``. 3: ``output_digest``."""
READABLE_VERSIONS = (1, 2, 3)
"""Version 1 results read as English-only messages (looked up by their English text when shown)."""
I18N = "_i18n"
"""The suffix of the JSON key that keeps a `Msg` field's msgids beside its English text."""


@dataclass(frozen=True)
class Concept:
    """One diagnosis an assignment declares (spec.toml ``[[concepts]]``), as the report shows it."""

    id: str
    title: str
    """One line: the rule, e.g. "The softmax runs over keys (the last dimension)"."""
    explanation: str = ""
    """Two plain, kind sentences to one student about their failure."""
    dashboard: str = ""
    """Completes "N % of the class ..." on the instructor's dashboard."""


class Outcome(str, enum.Enum):
    PASSED = "passed"
    FAILED = "failed"
    ERROR = "error"
    TIMEOUT = "timeout"


@dataclass(frozen=True)
class Points:
    earned: float
    """Points this case awarded."""
    possible: float
    """Points this case is worth."""

    @property
    def percent(self) -> float:
        return 100.0 * self.earned / self.possible if self.possible else 100.0

    def display_percent(self) -> str:
        """Never shows 100 % unless everything was earned (and never 0 % unless nothing was)."""
        pct = self.percent
        if self.earned < self.possible and pct > 99.0:
            return "99%"
        if 0 < self.earned and pct < 1.0:
            return "1%"
        return f"{pct:.0f}%"


Score = Points  # a submission's total has the same shape as one case's points


@dataclass(frozen=True)
class Heatmap:
    """A small query x key matrix to draw: attention weights (or a mask) of one batch item and head."""

    title: Msg
    """What this slice is, e.g. "batch 0, head 1"."""
    expected: list[list[float]]
    """Reference values, rows = queries, columns = keys."""
    actual: list[list[float]] | None
    """The submission's values (None when it produced none)."""
    keep: list[list[bool]] | None = None
    """The reference keep mask (True = may attend) for shading future/padding cells."""
    kind: str = "weights"
    """"weights" (floats in [0, 1]) or "mask" (0/1 cells)."""
    row_offset: int = 0
    """Index of the first query row shown (large matrices are shown as a window)."""
    col_offset: int = 0
    """Index of the first key column shown."""


@dataclass(frozen=True)
class Evidence:
    """What the grader saw. Every field is optional; cases fill what applies."""

    expected_shape: list[int] | None = None
    actual_shape: list[int] | None = None
    expected_dtype: str | None = None
    actual_dtype: str | None = None
    max_abs_error: float | None = None
    allowed_error: float | None = None
    first_bad_index: list[int] | None = None
    expected_value: float | None = None
    """Reference value at first_bad_index."""
    actual_value: float | None = None
    """Submission value at first_bad_index."""
    leaking_cells: list[list[int]] | None = None
    """(query, key) cells (first heatmap's batch item and head) given weight the mask forbids."""
    row_sums: list[float] | None = None
    """Per-query sums of the submission's attention weights (one batch item and head)."""
    nan_locations: list[list[int]] | None = None
    """Indices (first few) where the submission's output is NaN."""
    heatmaps: list[Heatmap] = field(default_factory=list)
    notes: list[Msg] = field(default_factory=list)
    """Further plain-language observations."""
    traceback: str | None = None
    """For errors: the student's exception, traceback cut to their own frames."""
    explorer: Explorer | None = None  # scores, mask parts and weights the report's mask explorer replays
    output_digest: str | None = None
    """A failed case's SHA-256 (32 hex) of all its calls returned: equal digests, identical wrong outputs."""


@dataclass(frozen=True)
class CaseResult:
    id: str
    """Stable case id, with the parameter label for parametrised cases: "causal_example[left]"."""
    title: str
    outcome: Outcome
    points: Points
    hidden: bool
    concept: str | None
    """One id of the assignment's concepts (``GradeReport.concepts``) when the case did not pass, else None. A case that did not pass has no
    concept only when the code it calls is not implemented yet (it raised NotImplementedError, as
    the starter's placeholders do): that is no misconception, so nothing is diagnosed."""
    message: Msg
    """One or two plain sentences for the student. Never reveals hidden inputs."""
    evidence: Evidence = field(default_factory=Evidence)
    duration_s: float = 0.0

    @property
    def not_implemented(self) -> bool:
        """The code this case calls still raises NotImplementedError (see ``concept``)."""
        return self.outcome is Outcome.ERROR and self.concept is None


@dataclass(frozen=True)
class SubmissionInfo:
    id: str
    """Student id derived from the file or folder name."""
    sha256: str
    """Hash of the submission's bytes (what the ledger keys on)."""
    filename: str
    kind: str
    """"py", "ipynb", "folder" or "zip"."""


@dataclass(frozen=True)
class AssignmentInfo:
    id: str
    version: str
    title: str = ""


@dataclass(frozen=True)
class CellError:
    """A notebook cell (or module) that raised while the submission was loaded; grading went on."""

    cell: int | None
    """The code cell's number, counting code cells only (markdown cells carry no number); None for a module."""
    error: str
    traceback: str
    label: Msg = EMPTY
    """How the student finds the cell: "code cell 5 (def causal_mask(q_len, ...)" (empty in older results)."""

    def where(self) -> Msg:
        """The label, else the cell's number ("code cell 5"), else the module's top-level code."""
        if self.label:
            return self.label
        return tr("code cell {n}", n=self.cell) if self.cell is not None else tr("the module's top-level code")

    def raised(self) -> Msg:
        """This unit's error as the reason nothing loaded: "code cell 5 (...) raised NameError: ..."."""
        if self.error.startswith(("SyntaxError", "IndentationError", "TabError")):  # none of it ran
            return tr("{where} does not compile: {error}", where=self.where(), error=self.error)
        return tr("{where} raised {error}", where=self.where(), error=self.error)


@dataclass(frozen=True)
class LoadInfo:
    ok: bool
    """False when nothing could be graded (unreadable file, syntax error, crash at import)."""
    message: Msg = EMPTY
    """Why it could not load, or that some cells raised."""
    cell_errors: list[CellError] = field(default_factory=list)
    stdout: str = ""
    """The submission's captured output until the first hidden case started, truncated. Never parsed."""
    stderr: str = ""
    hidden_stdout: str = ""
    """Output printed once the first hidden case's inputs had gone to the submission: it may quote
    hidden inputs, so it is kept for the instructor (this file) and never shown to the student
    (reports, JUnit, CI logs, summaries) unless the instructor releases hidden cases."""
    hidden_stderr: str = ""


@dataclass(frozen=True)
class Environment:
    grader_version: str
    torch_version: str
    python_version: str
    device: str
    isolation: str
    """The sandbox level that ran this submission, e.g. "namespaces+uid+landlock+seccomp+cgroup+rlimits"
    or "process+rss+rlimits": only what the self-test proved at start-up."""
    dtypes: list[str] = field(default_factory=list)
    limits: Msg = EMPTY
    """What bounded the worker's memory, processes and CPU, in plain words (empty before it was recorded)."""


@dataclass(frozen=True)
class GradeReport:
    submission: SubmissionInfo
    assignment: AssignmentInfo
    score: Points
    cases: list[CaseResult]
    load: LoadInfo
    environment: Environment
    graded_at: str
    """ISO 8601 UTC timestamp."""
    public_only: bool = False
    """True for a student self-check (hidden cases not run): not an official grade."""
    hidden_cases: int = 0
    """Self-check only: how many hidden case instances will run at grading time (never which)."""
    hidden_points: float = 0.0
    """Self-check only: what those hidden cases are worth."""
    concepts: list[Concept] = field(default_factory=list)
    """The assignment's diagnosis vocabulary as graded, so a re-render years later uses the same
    words (empty in results written before 0.3: the built-in vocabulary names those)."""
    lang: str = DEFAULT_LANG
    """The language the student's feedback was chosen in ("en", "zh-CN"); ``grader report --lang``
    renders the same results in another."""
    schema_version: int = SCHEMA_VERSION

    def concepts_failed(self) -> list[str]:
        seen: list[str] = []  # in order; "not-run" follows from another case: not a concept
        for c in self.cases:
            if c.outcome is not Outcome.PASSED and c.concept and c.concept != "not-run" and c.concept not in seen:
                seen.append(c.concept)
        return seen


# --- JSON round trip -------------------------------------------------------------------------

def _clean_float(x: float) -> Any:
    """JSON has no NaN/inf: the strings "nan", "inf", "-inf" instead (read back by `_num`)."""
    return "nan" if math.isnan(x) else ("inf" if x > 0 else "-inf") if math.isinf(x) else x


_PLAIN = (str, int, bool, type(None))
_VALUE, _MSG, _MSGS = 0, 1, 2
"""How a dataclass field is written: its value; a `Msg` as English text plus msgids; a list of them."""
_FIELDS: dict[type, tuple[tuple[str, int], ...]] = {}


def _field_kind(f: dataclasses.Field) -> int:
    # Annotations are strings under `from __future__ import annotations`, types otherwise.
    if f.type in (Msg, "Msg"):
        return _MSG
    if f.type in ("list[Msg]", list[Msg]):
        return _MSGS
    return _VALUE


def _fields_of(t: type) -> tuple[tuple[str, int], ...] | None:
    found = _FIELDS.get(t)
    if found is None and dataclasses.is_dataclass(t):
        found = _FIELDS[t] = tuple((f.name, _field_kind(f)) for f in dataclasses.fields(t))
    return found


def _as_msg(value: Any) -> Msg:
    return value if isinstance(value, Msg) else english(str(value or ""))  # what untyped case code may pass


def _dataclass_dict(obj: Any, fields: tuple[tuple[str, int], ...]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for name, kind in fields:
        value = getattr(obj, name)
        if kind == _MSG:
            m = _as_msg(value)
            out[name], out[name + I18N] = str(m), (m.to_list() or None)
        elif kind == _MSGS:
            ms = [_as_msg(v) for v in value]
            out[name], out[name + I18N] = [str(m) for m in ms], [m.to_list() for m in ms]
        else:
            out[name] = to_dict(value)
    return out


def to_dict(obj: Any) -> Any:
    """Dataclasses/enums/lists -> plain JSON values (NaN/inf become strings).

    Runs once per graded submission (the ledger and the results file share its result) over
    thousands of floats (heatmaps), so it dispatches on the exact type first."""
    t = type(obj)
    if t is float:
        return obj if math.isfinite(obj) else _clean_float(obj)
    if t in _PLAIN:
        return obj
    if t is Msg:
        return obj.to_list()
    if t is list or t is tuple:
        return [to_dict(x) for x in obj]
    fields = _fields_of(t)
    if fields is not None:
        out = _dataclass_dict(obj, fields)
        # Most cases pass and fill no evidence: a field left out reads back as its default.
        return {k: v for k, v in out.items() if v != _EVIDENCE_DEFAULTS[k]} if t is Evidence else out
    if isinstance(obj, enum.Enum):
        return obj.value
    if isinstance(obj, (list, tuple)):
        return [to_dict(x) for x in obj]
    if isinstance(obj, float):
        return _clean_float(obj)
    return obj


_EVIDENCE_DEFAULTS = _dataclass_dict(Evidence(), _fields_of(Evidence) or ())  # every key, at its default

def _num(x: Any) -> Any:
    return float(x) if isinstance(x, str) and x in ("nan", "inf", "-inf") else x


def _matrix(rows: Any) -> Any:
    return None if rows is None else [[v if type(v) is not str else _num(v) for v in row] for row in rows]


def _read_messages(d: dict, cls: type) -> dict[str, Any]:
    """``d`` with each `Msg` field of `cls` read back from its two keys: the msgids where the file has
    them, else (schema 1, or text no one marked) the English text, looked up when shown."""
    out = {k: v for k, v in d.items() if not k.endswith(I18N)}
    for name, kind in _fields_of(cls) or ():
        if kind == _VALUE:
            continue
        texts, items = d.get(name), d.get(name + I18N)
        if kind == _MSG:
            out[name] = Msg.from_list(items) if items else english(str(texts or ""))
        elif kind == _MSGS:
            texts, items = texts or [], items or []
            out[name] = ([Msg.from_list(m) for m in items] if len(items) == len(texts)
                         else [english(str(t)) for t in texts])
    return out


def _evidence_from(d: dict) -> Evidence:
    d = _read_messages(d, Evidence)
    d["heatmaps"] = [
        Heatmap(**{**_read_messages(h, Heatmap), "expected": _matrix(h["expected"]), "actual": _matrix(h.get("actual"))})
        for h in d.get("heatmaps", [])
    ]
    d["explorer"] = explorer_from_dict(d.get("explorer"))
    for key in ("max_abs_error", "allowed_error", "expected_value", "actual_value"):
        d[key] = _num(d.get(key))
    if d.get("row_sums") is not None:
        d["row_sums"] = [_num(v) for v in d["row_sums"]]
    return Evidence(**d)


def case_from_dict(d: dict) -> CaseResult:
    d = _read_messages(d, CaseResult)
    return CaseResult(id=d["id"], title=d["title"], outcome=Outcome(d["outcome"]), points=Points(**d["points"]),
                      hidden=d["hidden"], concept=d.get("concept"), message=d["message"],
                      evidence=_evidence_from(d.get("evidence", {})), duration_s=d.get("duration_s", 0.0))


def report_from_dict(d: dict) -> GradeReport:
    version = d.get("schema_version")
    if version not in READABLE_VERSIONS:
        raise ValueError(f"result schema_version {version!r} is not supported (expected one of "
                         f"{', '.join(map(str, READABLE_VERSIONS))})")
    load = _read_messages(d["load"], LoadInfo)
    load["cell_errors"] = [CellError(**_read_messages(e, CellError)) for e in load.get("cell_errors", [])]
    return GradeReport(
        submission=SubmissionInfo(**d["submission"]),
        assignment=AssignmentInfo(**d["assignment"]),
        score=Points(**d["score"]),
        cases=[case_from_dict(c) for c in d["cases"]],
        load=LoadInfo(**load),
        environment=Environment(**_read_messages(d["environment"], Environment)),
        graded_at=d["graded_at"],
        public_only=d.get("public_only", False),
        hidden_cases=int(d.get("hidden_cases", 0)),
        hidden_points=float(d.get("hidden_points", 0.0)),
        concepts=[Concept(**c) for c in d.get("concepts", [])],
        lang=str(d.get("lang", DEFAULT_LANG)),
        schema_version=version,
    )
