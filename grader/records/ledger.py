"""The ledger: which submissions an output folder has already graded, so a re-run skips them.

An entry is keyed by everything that determines a result: the student id, the submission's
sha256, the assignment id and version, the grader version and the grading mode (public-only or
all cases, and the device). It stores the canonical result JSON itself, so a skipped submission's
result can be restored even if its ``results/<id>.json`` was deleted.

SQLite in WAL mode: each `record` is one committed transaction, so a batch killed at any moment
leaves every entry either fully there or absent (never half-written, never duplicated).
"""

from __future__ import annotations

import json
import sqlite3
from dataclasses import dataclass
from datetime import datetime, UTC
from pathlib import Path

from grader.errors import GradebookBusy, GraderError
from grader.untrusted import json_text, storable
from grader.results import GradeReport, report_from_dict, to_dict

LEDGER_NAME = "ledger.sqlite"
BUSY_TIMEOUT_S = 10.0

_SCHEMA = """
CREATE TABLE IF NOT EXISTS entries (
    student_id     TEXT NOT NULL,
    sha256         TEXT NOT NULL,
    assignment     TEXT NOT NULL,
    version        TEXT NOT NULL,
    grader_version TEXT NOT NULL,
    mode           TEXT NOT NULL,
    result_json    TEXT NOT NULL,
    recorded_at    TEXT NOT NULL,
    PRIMARY KEY (student_id, sha256, assignment, version, grader_version, mode)
)
"""


@dataclass(frozen=True)
class LedgerKey:
    student_id: str
    sha256: str
    assignment: str
    version: str
    grader_version: str
    mode: str
    """"all@cpu", "public@cuda", ...: which cases ran, on which device."""


def mode_of(*, public_only: bool, device: str) -> str:
    return f"{'public' if public_only else 'all'}@{device}"


def connect(path: Path, *, readonly: bool = False, busy_timeout_s: float = BUSY_TIMEOUT_S) -> sqlite3.Connection:
    """An SQLite connection in WAL mode with a busy timeout; lock errors become `GradebookBusy`."""
    try:
        if readonly:
            conn = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True, timeout=busy_timeout_s)
        else:
            conn = sqlite3.connect(path, timeout=busy_timeout_s)
            conn.execute("PRAGMA journal_mode=WAL")
            conn.execute("PRAGMA synchronous=FULL")
    except sqlite3.OperationalError as e:
        raise translate(e, path) from e
    return conn


def translate(e: sqlite3.Error, path: Path) -> GraderError:
    """An SQLite error as an operator error: busy/locked -> GradebookBusy, anything else -> GraderError."""
    text = str(e)
    if "locked" in text or "busy" in text:
        return GradebookBusy(f"{path} is busy (another grader is writing to it: {text}); "
                             "try again when it has finished")
    return GraderError(f"cannot use {path}: {text}")


class Ledger:
    """The ledger of one output folder. Use as a context manager."""

    def __init__(self, out_dir: Path, *, busy_timeout_s: float = BUSY_TIMEOUT_S):
        self.path = Path(out_dir) / LEDGER_NAME
        self._conn = connect(self.path, busy_timeout_s=busy_timeout_s)
        try:
            with self._conn:
                self._conn.execute(_SCHEMA)
        except sqlite3.Error as e:
            self._conn.close()
            raise translate(e, self.path) from e

    def lookup(self, key: LedgerKey) -> GradeReport | None:
        """The stored result for `key`, or None (also when the stored JSON is no longer readable)."""
        try:
            row = self._conn.execute(
                "SELECT result_json FROM entries WHERE student_id=? AND sha256=? AND assignment=? AND version=? "
                "AND grader_version=? AND mode=?", _values(key)).fetchone()
        except sqlite3.Error as e:
            raise translate(e, self.path) from e
        if row is None:
            return None
        try:
            return report_from_dict(json.loads(row[0]))
        except (ValueError, KeyError, TypeError):
            return None  # written by an older schema: grade again

    def record(self, key: LedgerKey, report: GradeReport, data: dict | None = None) -> None:
        """Store `report` under `key` (replacing an earlier entry with the same key), committed.
        `data`: ``to_dict(report)`` when the caller already has it."""
        text = json_text(to_dict(report) if data is None else data)
        now = datetime.now(UTC).replace(microsecond=0).isoformat()
        try:
            with self._conn:
                self._conn.execute("INSERT OR REPLACE INTO entries VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                                   (*_values(key), text, now))
        except sqlite3.Error as e:
            raise translate(e, self.path) from e

    def __len__(self) -> int:
        return self._conn.execute("SELECT COUNT(*) FROM entries").fetchone()[0]

    def close(self) -> None:
        self._conn.close()

    def __enter__(self) -> Ledger:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _values(key: LedgerKey) -> tuple[str, ...]:
    # storable(): SQLite refuses a str holding a lone surrogate; whatever a key holds, it is stored.
    return tuple(storable(v) for v in (key.student_id, key.sha256, key.assignment, key.version,
                                       key.grader_version, key.mode))

