"""Finding a batch's submissions: folders of files or sub-folders, LMS names, what is skipped, clear errors."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from grader.submission.discover import discover
from grader.errors import GraderError, NoSubmissions
from grader.submission.ids import name_hash


def _touch(path: Path, text: str = "x = 1\n") -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def _ids(found) -> list[str]:
    return [f.id for f in found.submissions]


def test_folder_of_files_and_student_folders_gives_one_submission_each(tmp_path):
    _touch(tmp_path / "alice.py")
    _touch(tmp_path / "bob.ipynb", "{}")
    _touch(tmp_path / "carol.zip")
    _touch(tmp_path / "dave" / "submission.py")
    found = discover([tmp_path])
    assert _ids(found) == ["alice", "bob", "carol", "dave"]
    assert found.submissions[3].path == tmp_path / "dave"


def test_lms_export_names_give_stable_ids(tmp_path):
    _touch(tmp_path / "doe_jane_12345_attention.ipynb", "{}")
    _touch(tmp_path / "smith_late_67890_11111_attention.py")
    assert _ids(discover([tmp_path])) == ["doe_jane_12345", "smith_67890"]


def test_hidden_files_pycache_other_types_and_our_outputs_are_skipped(tmp_path):
    _touch(tmp_path / "alice.py")
    _touch(tmp_path / ".DS_Store")
    _touch(tmp_path / ".ipynb_checkpoints" / "alice-checkpoint.py")
    _touch(tmp_path / "__pycache__" / "alice.cpython-311.pyc")
    _touch(tmp_path / "README.md")
    _touch(tmp_path / "old_run" / "gradebook.sqlite")
    _touch(tmp_path / "out" / "results" / "alice.json")
    found = discover([tmp_path], exclude=tmp_path / "out")
    assert _ids(found) == ["alice"]
    assert sorted(p.name for p in found.skipped) == ["README.md", "old_run", "out"]


def test_the_folder_holding_the_output_folder_is_skipped(tmp_path):
    _touch(tmp_path / "alice.py")
    (tmp_path / "reports" / "masked-attention").mkdir(parents=True)
    found = discover([tmp_path], exclude=tmp_path / "reports" / "masked-attention")
    assert _ids(found) == ["alice"] and [p.name for p in found.skipped] == ["reports"]


def test_a_students_file_named_like_the_main_module_never_makes_the_class_one_submission(tmp_path):
    _touch(tmp_path / "class" / "attention.py")  # the unrenamed starter, handed in by one student
    _touch(tmp_path / "class" / "alice.py")
    _touch(tmp_path / "class" / "bob.ipynb", "{}")
    assert _ids(discover([tmp_path / "class"])) == ["alice", "attention", "bob"]


def test_the_operator_names_a_folder_as_one_students_submission(tmp_path):
    _touch(tmp_path / "erin" / "attention.py")
    _touch(tmp_path / "erin" / "helpers.py")
    found = discover([tmp_path / "erin"], folders_are_submissions=True)
    assert _ids(found) == ["erin"] and found.submissions[0].path == tmp_path / "erin"


def test_explicit_files_and_folders_combine(tmp_path):
    _touch(tmp_path / "class" / "alice.py")
    late = _touch(tmp_path / "late" / "bob.py")
    assert _ids(discover([tmp_path / "class", late])) == ["alice", "bob"]


def test_expected_toml_in_a_folder_of_submissions_is_never_read(tmp_path):
    _touch(tmp_path / "alice.py")
    _touch(tmp_path / "mallory.py")
    (tmp_path / "expected.toml").write_text('["/etc/passwd"]\nassignment = "a"\n["alice.py"]\nassignment = "b"\n')
    found = discover([tmp_path])
    assert _ids(found) == ["alice", "mallory"] and [p.name for p in found.skipped] == ["expected.toml"]
    (tmp_path / "expected.toml").write_text("this is [not toml")  # malformed: still just a skipped file
    assert _ids(discover([tmp_path])) == ["alice", "mallory"]


def test_two_files_with_one_lms_id_are_both_graded_under_ids_of_their_own_with_a_warning(tmp_path):
    a = _touch(tmp_path / "doe_jane_12345_attention.py")
    b = _touch(tmp_path / "doe_jane_12345_attention_v2.ipynb", "{}")
    _touch(tmp_path / "alice.py")
    found = discover([tmp_path])
    ids = {f.path.name: f.id for f in found.submissions}
    assert ids == {"alice.py": "alice", a.name: f"doe_jane_12345-{name_hash(a.name)}",
                   b.name: f"doe_jane_12345-{name_hash(b.name)}"}
    [warning] = found.warnings
    assert str(a) in warning and str(b) in warning and "'doe_jane_12345'" in warning and "--newest" in warning


def test_newest_keeps_only_the_latest_file_of_a_student(tmp_path):
    a = _touch(tmp_path / "doe_jane_12345_attention.py")
    b = _touch(tmp_path / "doe_jane_12345_attention_v2.ipynb", "{}")
    os.utime(a, (1_000_000_000, 1_000_000_000))
    found = discover([tmp_path], newest=True)
    assert [(f.id, f.path) for f in found.submissions] == [("doe_jane_12345", b)]
    [warning] = found.warnings
    assert str(a) in warning and f"only the newest, {b}" in warning


def test_one_file_name_in_two_folders_gives_two_students(tmp_path):
    one, two = _touch(tmp_path / "one" / "alice.py"), _touch(tmp_path / "two" / "alice.py")
    found = discover([tmp_path / "one", tmp_path / "two"])
    assert sorted(f.path for f in found.submissions) == [one, two]
    assert len({f.id for f in found.submissions}) == 2 and len(found.warnings) == 1


def test_empty_folder_is_no_submissions(tmp_path):
    _touch(tmp_path / "notes.txt")
    with pytest.raises(NoSubmissions, match=r"no submissions found in .*skipped 1 other entries: notes\.txt"):
        discover([tmp_path])


def test_missing_path_and_wrong_file_type_are_errors(tmp_path):
    with pytest.raises(GraderError, match=r"nope\.py does not exist"):
        discover([tmp_path / "nope.py"])
    with pytest.raises(GraderError, match=r"notes\.txt is not a submission: expected a \.py, \.ipynb or \.zip"):
        discover([_touch(tmp_path / "notes.txt")])
