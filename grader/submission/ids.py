"""Student ids from file and folder names: readable, stable, unique for every name, safe as a file
name anywhere, and never one of the names a batch writes in its output folder."""

from __future__ import annotations

import hashlib
import os
import re

_NUMERIC_ID = re.compile(r"^\d{4,}$")
ID_BYTES = 120
"""Longest readable part of an id, in UTF-8 bytes (a report's file name must stay under 255)."""


OUTPUT_NAMES = frozenset({
    "index", "grades", "results", "gradescope", "junit", "summary", "gradebook", "ledger",
    "similarity", "canvas", "moodle", "lms-unmatched",
    # names Windows reserves for devices: a report called con.html cannot be opened there
    "con", "prn", "aux", "nul", *(f"com{i}" for i in range(10)), *(f"lpt{i}" for i in range(10)),
})
"""Stems of what a batch writes in its output folder (index.html, grades.csv, results/, gradescope/,
junit.xml, summary.md, gradebook.sqlite, ledger.sqlite, similarity.html/.csv, canvas.csv, moodle.csv,
lms-unmatched.csv) and device names: never a student's report
name (`grader.submission.ids.student_id`, `grader.report.dashboard.report_filename` add a hash to them)."""


def student_id(path: str | os.PathLike) -> str:
    """A stable, readable id, unique for every file or folder name, safe as a file name anywhere.

    LMS exports put the student before a numeric id: everything up to and including the first
    all-digit token of 4+ digits is kept, "late" markers dropped, so
    ``doe_jane_12345_attention.ipynb`` and Canvas's ``doejane_late_12345_67890_hw.py`` give
    ``doe_jane_12345`` and ``doejane_12345`` (two files with the same number are the same student).
    Without such a token the whole stem is the id (``alice.py`` -> ``alice``, ``李雷.py`` -> ``李雷``,
    folder ``bob/`` -> ``bob``).

    Lower-cased (case-folded); letters and digits of any script, ``-``, ``_`` and ``.`` are kept,
    anything else becomes ``-``. When that changed the name (``Alice.py``, ``a b.py``, a name that
    is not UTF-8), or the name is one of the grader's own outputs (``index.py``, see
    `OUTPUT_NAMES`), an 8-character hash of the exact name is appended:
    ``Alice.py`` -> ``alice-<hash>`` never meets ``alice.py`` -> ``alice``, also where file names
    are compared without case.
    """
    return id_and_lms(path)[0]


def id_and_lms(path: str | os.PathLike) -> tuple[str, bool]:
    """(student id, whether it is an LMS id: the student's number makes it one student's)."""

    name = os.path.basename(os.path.normpath(os.fspath(path)))
    stem = name if os.path.isdir(path) else re.sub(r"\.(py|ipynb|zip)$", "", name, flags=re.I)
    tokens = [t for t in stem.split("_") if t.lower() != "late"]
    lms = False
    for i, tok in enumerate(tokens):
        if _NUMERIC_ID.match(tok):
            tokens, lms = tokens[: i + 1], True
            break
    kept = "_".join(tokens)
    readable = readable_id(kept)
    if readable and (lms or readable == kept) and readable not in OUTPUT_NAMES:
        return readable, lms
    return f"{readable or 'submission'}-{name_hash(name)}", False


def readable_id(text: str) -> str:
    """`text` case-folded, with every run of characters other than letters, marks and digits (of
    any script), ``-``, ``_`` and ``.`` turned into one ``-``; no leading or trailing ``-._``;
    at most `ID_BYTES` bytes of UTF-8."""
    import unicodedata

    folded = unicodedata.normalize("NFC", text).casefold()
    out = "".join(ch if ch in "-_." or unicodedata.category(ch)[0] in "LMN" else "\0" for ch in folded)
    out = re.sub("\0+", "-", out).strip("-._")
    while len(out.encode("utf-8", "surrogatepass")) > ID_BYTES:
        out = out[:-1]
    return out.rstrip("-._")


def name_hash(name: str | bytes, length: int = 8) -> str:
    """A short hash of a name's exact bytes (a name that is not UTF-8 included)."""
    raw = name if isinstance(name, bytes) else os.fsencode(name)
    return hashlib.sha256(raw).hexdigest()[:length]
