"""Hostile submissions generated on the spot (never committed: some are megabytes): files whose
*form* attacks the grader's own process (what reads them, what decides the batch's layout), each
written by a function ``make(folder) -> path`` into a folder of submissions.

`INTAKE` holds the readers' attacks with what each must give (`Expect`); `write_class` writes a
class of N with every one of them mixed among ordinary students, for a batch test that must end
with N results. Other attacks join a class through `write_class(..., extra=...)`.
"""

from __future__ import annotations

import json
import shutil
import zipfile
from dataclasses import dataclass
from pathlib import Path
from collections.abc import Callable

ROOT = Path(__file__).resolve().parents[1]
CORRECT = ROOT / "submissions" / "masked-attention" / "correct" / "sdpa.py"
BUGGY = ROOT / "submissions" / "masked-attention" / "buggy" / "no_scaling.py"


@dataclass(frozen=True)
class Expect:
    graded: bool
    """True: the student's code runs and scores as written (here: the correct sample, full marks);
    False: a load error for that student alone."""
    says: str = ""
    """Part of the load error, when not graded."""


def notebook(path: Path, cells: list, *, raw_cells: bool = False) -> Path:
    """A v4 notebook whose code cells hold `cells` as they are (a source may be anything JSON)."""
    doc = {"nbformat": 4, "nbformat_minor": 5, "metadata": {},
           "cells": [c if raw_cells else {"cell_type": "code", "id": f"c{i}", "metadata": {}, "outputs": [],
                                          "execution_count": None, "source": c} for i, c in enumerate(cells)]}
    path.write_text(json.dumps(doc), encoding="utf-8")
    return path


def _correct() -> str:
    return CORRECT.read_text(encoding="utf-8")


# --- what the reader is made to do ---------------------------------------------------------------

def self_check_flood(folder: Path, lines: int = 16_000) -> Path:
    """A cell of thousands of self-check calls (quadratic to neutralise, once)."""
    flood = "from grader import notebook\n" + 'notebook.check("causal_mask")\n' * lines
    return notebook(folder / "flood_checks.ipynb", [_correct(), flood])


def blank_line(folder: Path, blanks: int = 300_000) -> Path:
    """One identifier and 300,000 blanks on a line (a backtracking magic regex: minutes)."""
    return notebook(folder / "blank_line.ipynb", [_correct(), "x" + " " * blanks + "\ny = 1\n"])


def tiny_statements(folder: Path, statements: int = 700_000, name: str = "tiny_statements.ipynb") -> Path:
    """A notebook of hundreds of thousands of tiny statements and one self-check (parsed: ~500 B a byte)."""
    return notebook(folder / name, [_correct(), 'from grader import notebook\nnotebook.check("x")\n'
                                    + "x=1\n" * statements])


def old_mac_line_breaks(folder: Path) -> Path:
    """Self-check calls after old-Mac ``\\r`` line breaks (an honest editor's accident)."""
    src = _correct().replace("\n", "\r")
    return notebook(folder / "old_mac.ipynb", [src, "from grader import notebook\rnotebook.check('causal_mask')\r",
                                               "x = 1\rnotebook.check('padding_mask')"])


def source_is_a_number(folder: Path) -> Path:
    return notebook(folder / "source_number.ipynb", [_correct(), 42])


def source_is_null(folder: Path) -> Path:
    return notebook(folder / "source_null.ipynb", [None, _correct()])


def source_is_an_object(folder: Path) -> Path:
    return notebook(folder / "source_object.ipynb", [_correct(), {"a": 1}])


def cells_are_not_a_list(folder: Path) -> Path:
    path = folder / "cells_object.ipynb"
    path.write_text(json.dumps({"nbformat": 4, "nbformat_minor": 5, "metadata": {}, "cells": {"a": 1}}))
    return path


def bad_utf8_zip_name(folder: Path) -> Path:
    """A zip whose member name carries the UTF-8 flag but is not UTF-8."""
    path = folder / "bad_name.zip"
    with zipfile.ZipFile(path, "w") as z:
        z.writestr("attention.py", _correct())
        z.writestr("notesXX.txt", "x")
    raw = bytearray(path.read_bytes().replace(b"notesXX.txt", b"notes\xff\xfe.txt"))
    for signature, flags_at in ((b"PK\x03\x04", 6), (b"PK\x01\x02", 8)):  # local and central headers
        at = raw.find(signature)
        while at >= 0:
            raw[at + flags_at + 1] |= 0x08  # general purpose bit 11: "this name is UTF-8"
            at = raw.find(signature, at + 4)
    path.write_bytes(bytes(raw))
    return path


def named_like_the_main_module(folder: Path) -> Path:
    """The unrenamed starter's name, handed in flat among the class."""
    path = folder / "attention.py"
    shutil.copy(CORRECT, path)
    return path


def sample_tree_file(folder: Path) -> Path:
    """A student's expected.toml declaring host files: never read in a folder of submissions."""
    path = folder / "expected.toml"
    path.write_text('["/etc/passwd"]\nassignment = "masked-attention"\n["../outside.py"]\n'
                    'assignment = "masked-attention"\n', encoding="utf-8")
    return path


def same_lms_id_twice(folder: Path) -> list[Path]:
    first, second = folder / "doe_jane_12345_attention.py", folder / "doe_jane_12345_attention_v2.py"
    shutil.copy(BUGGY, first)
    shutil.copy(CORRECT, second)
    return [first, second]


INTAKE: dict[str, tuple[Callable[[Path], object], dict[str, Expect]]] = {
    "self-check flood": (self_check_flood, {"flood_checks": Expect(True)}),
    "identifier and 300,000 blanks": (blank_line, {"blank_line": Expect(True)}),
    # the memory budget or the deadline, whichever this machine reaches first
    "700,000 tiny statements": (tiny_statements, {"tiny_statements": Expect(False, "the limit for one submission")}),
    "old-Mac line breaks": (old_mac_line_breaks, {"old_mac": Expect(True)}),
    "source a number": (source_is_a_number, {"source_number": Expect(False, "is a JSON number, not text")}),
    "source null": (source_is_null, {"source_null": Expect(False, "is a JSON null, not text")}),
    "source an object": (source_is_an_object, {"source_object": Expect(False, "is a JSON object, not text")}),
    "cells not a list": (cells_are_not_a_list, {"cells_object": Expect(False, "is not a valid notebook")}),
    "zip name flagged UTF-8": (bad_utf8_zip_name, {"bad_name": Expect(False, "marked as UTF-8 that is not")}),
    "named like the main module": (named_like_the_main_module, {"attention": Expect(True)}),
    "expected.toml": (sample_tree_file, {}),
}
"""name -> (writer, {student id it gives: what it must give}). The same-LMS-id pair is separate:
its ids carry hashes (`same_lms_id_twice`)."""


def write_class(folder: Path, size: int = 30,
                extra: list[Callable[[Path], object]] = ()) -> dict[str, Expect]:
    """A class of `size` in `folder`: every `INTAKE` attack, the same-LMS-id pair, `extra`, and
    ordinary students (correct and buggy samples) up to `size` submissions. Returns the expected
    outcome per student id for the attacks of `INTAKE` (the rest: see their writers)."""
    folder.mkdir(parents=True, exist_ok=True)
    expected: dict[str, Expect] = {}
    count = 0
    for make, expect in INTAKE.values():
        make(folder)
        expected.update(expect)
        count += len(expect)
    same_lms_id_twice(folder)
    count += 2
    for make in extra:
        made = make(folder)
        count += len(made) if isinstance(made, list) else 1
    for i in range(size - count):
        shutil.copy(CORRECT if i % 2 else BUGGY, folder / f"student{i:02d}.py")
    return expected
