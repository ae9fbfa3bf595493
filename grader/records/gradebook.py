"""The gradebook: every grading run and every student's score in it, kept across runs (SQLite).

One row per run (when, which assignment and version, which grader, how it ended) and one row per
(run, student). A student skipped through the ledger is still recorded in the run, marked
``reused``, so each completed run holds the whole class. Each score is its own committed
transaction: a run stopped part-way keeps what it recorded and is marked ``interrupted``.
"""

from __future__ import annotations

import csv
import io
import sqlite3
from dataclasses import astuple, dataclass, fields
from datetime import datetime, UTC
from pathlib import Path

from grader.errors import GraderError
from grader.records.ledger import BUSY_TIMEOUT_S, connect, translate
from grader.report.text import csv_cell, fmt_points
from grader.results import GradeReport
from grader.untrusted import storable

GRADEBOOK_NAME = "gradebook.sqlite"

_SCHEMA = [
    """CREATE TABLE IF NOT EXISTS runs (
        id             INTEGER PRIMARY KEY AUTOINCREMENT,
        started_at     TEXT NOT NULL,
        finished_at    TEXT,
        assignment     TEXT NOT NULL,
        version        TEXT NOT NULL,
        grader_version TEXT NOT NULL,
        device         TEXT NOT NULL,
        isolation      TEXT NOT NULL,
        out_dir        TEXT NOT NULL,
        status         TEXT NOT NULL,
        graded         INTEGER NOT NULL DEFAULT 0,
        reused         INTEGER NOT NULL DEFAULT 0,
        failed_to_load INTEGER NOT NULL DEFAULT 0,
        errors         INTEGER NOT NULL DEFAULT 0
    )""",
    """CREATE TABLE IF NOT EXISTS scores (
        run_id     INTEGER NOT NULL REFERENCES runs(id),
        student_id TEXT NOT NULL,
        earned     REAL NOT NULL,
        possible   REAL NOT NULL,
        percent    REAL NOT NULL,
        reused     INTEGER NOT NULL,
        load_ok    INTEGER NOT NULL,
        sha256     TEXT NOT NULL,
        filename   TEXT NOT NULL,
        graded_at  TEXT NOT NULL,
        PRIMARY KEY (run_id, student_id)
    )""",
    "CREATE INDEX IF NOT EXISTS scores_student ON scores(student_id)",
]


@dataclass(frozen=True)
class Run:
    id: int
    started_at: str
    finished_at: str | None
    assignment: str
    version: str
    grader_version: str
    device: str
    isolation: str
    out_dir: str
    status: str
    """"running", "complete", "interrupted" or "failed"."""
    graded: int
    reused: int
    failed_to_load: int
    errors: int


@dataclass(frozen=True)
class ScoreRow:
    """One student's score in one run (what `export --csv` writes, one row each)."""

    run_id: int
    run_started_at: str
    run_status: str
    assignment: str
    version: str
    grader_version: str
    student_id: str
    earned: float
    possible: float
    percent: float
    reused: bool
    """True when the result came from the ledger (same submission already graded)."""
    load_ok: bool
    sha256: str
    filename: str
    graded_at: str


_SCORE_SELECT = """
SELECT s.run_id, r.started_at, r.status, r.assignment, r.version, r.grader_version, s.student_id, s.earned,
       s.possible, s.percent, s.reused, s.load_ok, s.sha256, s.filename, s.graded_at
FROM scores s JOIN runs r ON r.id = s.run_id
"""


def now_iso() -> str:
    return datetime.now(UTC).replace(microsecond=0).isoformat().replace("+00:00", "Z")


class Gradebook:
    """An open gradebook. Use as a context manager; `readonly=True` never creates or changes the file."""

    def __init__(self, path: Path, *, readonly: bool = False, busy_timeout_s: float = BUSY_TIMEOUT_S):
        self.path = Path(path)
        if readonly and not self.path.is_file():
            raise GraderError(f"no gradebook at {self.path}; run `grader grade ... -o DIR` first, "
                              "or pass --gradebook PATH / -d OUTDIR")
        self._conn = connect(self.path, readonly=readonly, busy_timeout_s=busy_timeout_s)
        try:
            if not readonly:
                with self._conn:
                    for stmt in _SCHEMA:
                        self._conn.execute(stmt)
            else:
                self._conn.execute("SELECT 1 FROM runs LIMIT 1")
        except sqlite3.Error as e:
            self._conn.close()
            raise translate(e, self.path) from e

    # --- writing ---

    def start_run(self, *, assignment: str, version: str, grader_version: str, device: str, isolation: str,
                  out_dir: str) -> int:
        """A new run (status "running"); earlier runs on the same folder left "running" died: mark them interrupted."""
        with self._write():
            self._conn.execute("UPDATE runs SET status='interrupted' WHERE status='running' AND out_dir=?",
                               (storable(out_dir),))
            cur = self._conn.execute(
                "INSERT INTO runs (started_at, assignment, version, grader_version, device, isolation, out_dir, "
                "status) VALUES (?, ?, ?, ?, ?, ?, ?, 'running')",
                (now_iso(), *map(storable, (assignment, version, grader_version, device, isolation, out_dir))))
        if cur.lastrowid is None:  # sqlite sets it for every INSERT
            raise RuntimeError("the gradebook gave the new run no id")
        return cur.lastrowid

    def record(self, run_id: int, report: GradeReport, *, reused: bool) -> None:
        s = report.score
        with self._write():
            self._conn.execute(
                "INSERT OR REPLACE INTO scores VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (run_id, storable(report.submission.id), s.earned, s.possible, round(s.percent, 4), int(reused),
                 int(report.load.ok), storable(report.submission.sha256), storable(report.submission.filename),
                 storable(report.graded_at)))

    def finish_run(self, run_id: int, *, status: str, graded: int, reused: int, failed_to_load: int,
                   errors: int, isolation: str = "") -> None:
        with self._write():
            self._conn.execute(
                "UPDATE runs SET finished_at=?, status=?, graded=?, reused=?, failed_to_load=?, errors=?, "
                "isolation=COALESCE(NULLIF(?, ''), isolation) WHERE id=?",
                (now_iso(), status, graded, reused, failed_to_load, errors, storable(isolation), run_id))

    def _write(self) -> _Tx:
        return _Tx(self._conn, self.path)

    # --- reading ---

    def runs(self) -> list[Run]:
        rows = self._query("SELECT * FROM runs ORDER BY id")
        return [Run(*r) for r in rows]

    def scores(self, *, latest: bool = False, assignment: str | None = None) -> list[ScoreRow]:
        """Every score (by run, then student), or with `latest` each student's score in their latest run."""
        where, args = ("WHERE r.assignment = ?", [storable(assignment)]) if assignment else ("", [])
        if latest:
            cond = ("s.run_id = (SELECT MAX(s2.run_id) FROM scores s2 JOIN runs r2 ON r2.id = s2.run_id "
                    "WHERE s2.student_id = s.student_id AND r2.assignment = r.assignment)")
            where = f"{where} AND {cond}" if where else f"WHERE {cond}"
        rows = self._query(f"{_SCORE_SELECT} {where} ORDER BY r.assignment, s.run_id, s.student_id", args)
        return [_score(r) for r in rows]

    def history(self, student_id: str) -> list[ScoreRow]:
        rows = self._query(f"{_SCORE_SELECT} WHERE s.student_id = ? ORDER BY s.run_id", [storable(student_id)])
        return [_score(r) for r in rows]

    def students(self) -> list[str]:
        return [r[0] for r in self._query("SELECT DISTINCT student_id FROM scores ORDER BY student_id")]

    def _query(self, sql: str, args: list | tuple = ()) -> list[tuple]:
        try:
            return self._conn.execute(sql, args).fetchall()
        except sqlite3.Error as e:
            raise translate(e, self.path) from e

    def close(self) -> None:
        self._conn.close()

    def __enter__(self) -> Gradebook:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class _Tx:
    """One committed transaction; SQLite errors become operator errors."""

    def __init__(self, conn: sqlite3.Connection, path: Path):
        self._conn, self._path = conn, path

    def __enter__(self) -> None:
        self._conn.__enter__()

    def __exit__(self, exc_type, exc, tb) -> None:
        try:
            self._conn.__exit__(exc_type, exc, tb)
        except sqlite3.Error as e:
            raise translate(e, self._path) from e
        if isinstance(exc, sqlite3.Error):
            raise translate(exc, self._path) from exc


def _score(row: tuple) -> ScoreRow:
    values = list(row)
    values[10] = bool(values[10])
    values[11] = bool(values[11])
    return ScoreRow(*values)


def scores_csv(rows: list[ScoreRow]) -> str:
    """CSV text, one line per score, columns named as ScoreRow's fields (formulas neutralised)."""
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow([f.name for f in fields(ScoreRow)])
    for r in rows:
        w.writerow([_cell(f.name, v) for f, v in zip(fields(ScoreRow), astuple(r))])
    return buf.getvalue()


def _cell(name: str, v: object) -> str:
    """As grades.csv writes them: points like 20.5, percent with two decimals, yes/no flags."""
    if isinstance(v, bool):
        return "yes" if v else "no"
    if name == "percent":
        return f"{v:.2f}"
    if isinstance(v, float):
        return fmt_points(v)
    return csv_cell(v) if isinstance(v, str) else str(v)
