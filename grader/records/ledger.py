"""The ledger: which submissions an output folder has already graded, so a re-run skips them.

An entry is keyed by everything that determines a result: the student id, the submission's
sha256, the assignment id, the grading mode (public-only or all cases, and the device) and the
assignment's fingerprint (`grader.assignment.fingerprint`: its cases, reference, spec.toml and the
grader's version). A stored entry whose fingerprint differs is not reused, and `lookup` says which
parts changed, so a run can say why it grades again. It stores the canonical result JSON itself, so
a skipped submission's result can be restored even if its ``results/<id>.json`` was deleted.

SQLite in WAL mode: each `record` is one committed transaction, so a batch killed at any moment
leaves every entry either fully there or absent (never half-written, never duplicated).
"""

from __future__ import annotations

import json
import sqlite3
from dataclasses import dataclass
from datetime import datetime, UTC
from pathlib import Path

from grader.assignment.fingerprint import Fingerprint
from grader.errors import GradebookBusy, GraderError
from grader.untrusted import json_text, storable
from grader.results import GradeReport, report_from_dict, to_dict

LEDGER_NAME = "ledger.sqlite"
BUSY_TIMEOUT_S = 10.0

_SCHEMA = """
CREATE TABLE IF NOT EXISTS graded (
    student_id     TEXT NOT NULL,
    sha256         TEXT NOT NULL,
    assignment     TEXT NOT NULL,
    mode           TEXT NOT NULL,
    fingerprint    TEXT NOT NULL,
    result_json    TEXT NOT NULL,
    recorded_at    TEXT NOT NULL,
    PRIMARY KEY (student_id, sha256, assignment, mode)
)
"""
_EARLIER = "entries"
"""The table of ledgers written before entries carried a fingerprint: read only, to say why they
are graded again."""


@dataclass(frozen=True)
class LedgerKey:
    student_id: str
    sha256: str
    assignment: str
    mode: str
    """"all@cpu", "public@cuda", ...: which cases ran, on which device."""
    fingerprint: Fingerprint
    """What grades the submission (`grader.assignment.fingerprint.fingerprint`)."""


@dataclass(frozen=True)
class Lookup:
    """What the ledger holds for a key."""

    report: GradeReport | None
    """The stored result, when it was graded by exactly this (None: grade it)."""
    changed: tuple[str, ...] = ()
    """When the same file was graded before by something else: what changed since (parts of
    `grader.assignment.fingerprint.PARTS`); empty for a file never graded."""


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

    def lookup(self, key: LedgerKey) -> Lookup:
        """The stored result for `key`, or why there is none to reuse."""
        try:
            row = self._conn.execute(
                "SELECT fingerprint, result_json FROM graded WHERE student_id=? AND sha256=? AND assignment=? "
                "AND mode=?", _where(key)).fetchone()
        except sqlite3.Error as e:
            raise translate(e, self.path) from e
        if row is None:
            return Lookup(None, ("grader",) if self._graded_earlier(key) else ())
        try:
            changed = key.fingerprint.changed(Fingerprint.from_dict(json.loads(row[0])))
        except (ValueError, TypeError, AttributeError):
            changed = ("grader",)
        if changed:
            return Lookup(None, changed)
        try:
            return Lookup(report_from_dict(json.loads(row[1])))
        except (ValueError, KeyError, TypeError):
            return Lookup(None, ("grader",))  # written by an older schema: grade again

    def _graded_earlier(self, key: LedgerKey) -> bool:
        """The file has an entry in a ledger table written before fingerprints."""
        try:
            if not self._conn.execute("SELECT 1 FROM sqlite_master WHERE type='table' AND name=?",
                                      (_EARLIER,)).fetchone():
                return False
            return self._conn.execute(f"SELECT 1 FROM {_EARLIER} WHERE student_id=? AND sha256=? AND assignment=? "
                                      "AND mode=?", _where(key)).fetchone() is not None
        except sqlite3.Error:
            return False

    def record(self, key: LedgerKey, report: GradeReport, data: dict | None = None) -> None:
        """Store `report` under `key` (replacing an earlier entry for the same file and mode), committed.
        `data`: ``to_dict(report)`` when the caller already has it."""
        text = json_text(to_dict(report) if data is None else data)
        now = datetime.now(UTC).replace(microsecond=0).isoformat()
        try:
            with self._conn:
                self._conn.execute("INSERT OR REPLACE INTO graded VALUES (?, ?, ?, ?, ?, ?, ?)",
                                   (*_where(key), json.dumps(key.fingerprint.to_dict(), sort_keys=True), text, now))
        except sqlite3.Error as e:
            raise translate(e, self.path) from e

    def __len__(self) -> int:
        return self._conn.execute("SELECT COUNT(*) FROM graded").fetchone()[0]

    def close(self) -> None:
        self._conn.close()

    def __enter__(self) -> Ledger:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _where(key: LedgerKey) -> tuple[str, ...]:
    # storable(): SQLite refuses a str holding a lone surrogate; whatever a key holds, it is stored.
    return tuple(storable(v) for v in (key.student_id, key.sha256, key.assignment, key.mode))
