"""grader/assignment/kit.py: how `grader check` finds a student kit and tells the starter from the work."""

import json
from pathlib import Path

import pytest

from grader.assignment.kit import (Choice, choose_main, code_fingerprint, find_kit, is_untouched, kit_info,
                                   locate_assignment, starter_fingerprints, untouched_note)
from grader.assignment.spec import infer
from grader.errors import GraderError, UnknownAssignment
from grader.i18n import EMPTY

STARTER_PY = "def causal_mask(n):\n    raise NotImplementedError\n"


def _notebook(*sources: str, outputs: bool = False) -> bytes:
    cells = [{"cell_type": "markdown", "metadata": {}, "source": ["# Title"]}]
    for i, src in enumerate(sources):
        cells.append({"cell_type": "code", "metadata": {}, "source": src.splitlines(keepends=True),
                      "execution_count": i + 1 if outputs else None,
                      "outputs": [{"output_type": "stream", "name": "stdout", "text": ["hi\n"]}] if outputs else []})
    return json.dumps({"cells": cells, "metadata": {}, "nbformat": 4, "nbformat_minor": 5}).encode()


def _kit(root: Path, name: str = "masked-attention", starters: dict[str, str] | None = None) -> Path:
    folder = root / "assignments" / name
    folder.mkdir(parents=True)
    table = "".join(f'"{k}" = "{v}"\n' for k, v in (starters or {}).items())
    (folder / "spec.toml").write_text(f'id = "{name}"\n\n[kit]\nhidden_cases = 3\nhidden_points = 4.5\n'
                                      f'submission = "attention.py"\n\n[kit.starters]\n{table}', encoding="utf-8")
    return folder


def test_a_fingerprint_ignores_outputs_line_endings_and_trailing_whitespace():
    assert code_fingerprint(STARTER_PY.encode(), "a.py") == code_fingerprint(
        STARTER_PY.replace("\n", "  \r\n").encode(), "a.py")
    assert code_fingerprint(STARTER_PY.encode(), "a.py") != code_fingerprint(b"def causal_mask(n):\n    return 1\n",
                                                                              "a.py")
    run = code_fingerprint(_notebook("import torch", STARTER_PY, outputs=True), "a.ipynb")
    assert run == code_fingerprint(_notebook("import torch", STARTER_PY), "a.ipynb")
    assert run != code_fingerprint(_notebook("import torch", STARTER_PY + "x = 1\n"), "a.ipynb")
    assert code_fingerprint(b"{not json", "a.ipynb") is None


def test_kit_info_reads_the_kit_table_and_a_full_assignment_has_none(tmp_path):
    folder = _kit(tmp_path, starters={"attention.py": "abc"})
    info = kit_info(folder)
    assert (info.hidden_cases, info.hidden_points, info.submission, info.starters) == (3, 4.5, "attention.py",
                                                                                     {"attention.py": "abc"})
    full = tmp_path / "full"
    full.mkdir()
    (full / "spec.toml").write_text('id = "full"\n', encoding="utf-8")
    assert kit_info(full) is None


def test_starter_fingerprints_come_from_the_kit_or_the_instructors_starter_folder(tmp_path):
    assert starter_fingerprints(_kit(tmp_path, starters={"attention.py": "abc"})) == {"attention.py": "abc"}
    full = tmp_path / "full"
    (full / "starter").mkdir(parents=True)
    (full / "spec.toml").write_text('id = "full"\n', encoding="utf-8")
    (full / "starter" / "attention.py").write_text(STARTER_PY, encoding="utf-8")
    (full / "starter" / "notes.txt").write_text("not code", encoding="utf-8")
    assert starter_fingerprints(full) == {"attention.py": code_fingerprint(STARTER_PY.encode(), "attention.py")}
    broken = tmp_path / "broken"
    broken.mkdir()
    (broken / "spec.toml").write_text("id = [", encoding="utf-8")
    assert starter_fingerprints(broken) == {}


@pytest.fixture
def kit_folder(tmp_path):
    """A student's kit folder with both starters, as released."""
    nb = _notebook(STARTER_PY)
    (tmp_path / "attention.py").write_text(STARTER_PY, encoding="utf-8")
    (tmp_path / "attention.ipynb").write_bytes(nb)
    starters = {"attention.py": code_fingerprint(STARTER_PY.encode(), "attention.py"),
                "attention.ipynb": code_fingerprint(nb, "attention.ipynb")}
    return tmp_path, starters


def test_the_changed_twin_is_graded_and_the_note_says_why(kit_folder):
    folder, starters = kit_folder
    chosen = choose_main(folder, "attention.py", starters)
    assert (chosen.main, str(chosen.note)) == (
        "attention.py", "Graded attention.py: attention.py and attention.ipynb are both the starter as released.")
    (folder / "attention.ipynb").write_bytes(_notebook("def causal_mask(n):\n    return None\n"))
    chosen = choose_main(folder, "attention.py", starters)
    assert (chosen.main, str(chosen.note)) == (
        "attention.ipynb", "Graded attention.ipynb: attention.py next to it is the starter as released (unchanged).")
    assert is_untouched(folder / "attention.py", starters) and not is_untouched(folder / "attention.ipynb", starters)
    assert str(untouched_note(folder / "attention.py", starters)) == (
        "attention.py is the starter as released (unchanged); your work seems to be in attention.ipynb: "
        "grader check attention.ipynb")
    (folder / "attention.py").write_text("def causal_mask(n):\n    return 1\n", encoding="utf-8")
    assert choose_main(folder, "attention.py", starters).main == "attention.py"  # both changed: the main module
    assert untouched_note(folder / "attention.py", starters) == EMPTY


def test_a_folder_without_both_twins_is_left_to_the_loader(tmp_path):
    (tmp_path / "attention.py").write_text(STARTER_PY, encoding="utf-8")
    assert choose_main(tmp_path, "attention.py", {}) == Choice(None)


def test_find_kit_finds_kits_only_and_the_first_start_wins(tmp_path):
    a, b = tmp_path / "a", tmp_path / "b"
    first = _kit(a)
    _kit(b)
    full = b / "assignments" / "instructor-only"
    full.mkdir(parents=True)
    (full / "spec.toml").write_text('id = "instructor-only"\n', encoding="utf-8")
    assert find_kit(a, b, tmp_path / "nowhere") == {"masked-attention": first.resolve()}


def test_locate_assignment_prefers_the_kit_next_to_the_submission(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    kit = _kit(tmp_path / "kit")
    sub = tmp_path / "kit" / "attention.py"
    sub.write_text(STARTER_PY, encoding="utf-8")
    assert locate_assignment(None, sub) == kit.resolve()
    assert locate_assignment("masked-attention", sub) == kit.resolve()
    assert locate_assignment(str(kit), None) == kit.resolve()
    with pytest.raises(UnknownAssignment, match="unknown assignment 'nope'"):
        locate_assignment("nope", sub)


def test_with_no_assignment_known_the_error_says_what_to_run(tmp_path):
    sub = tmp_path / "attention.py"
    sub.write_text(STARTER_PY, encoding="utf-8")
    with pytest.raises(GraderError, match="knows no assignment here. Run grader check in your kit's folder"):
        infer(sub, {})
    assert "known assignments: none" not in str(UnknownAssignment("masked-attention", []))
    assert "Run the command in your kit's folder" in str(UnknownAssignment("masked-attention", []))
    assert "did you mean 'masked-attention'?" in str(UnknownAssignment("masked-atention", ["masked-attention"] * 2))
