"""Finding a batch's submissions: folders of files or sub-folders, LMS names, what is skipped, clear errors."""

from __future__ import annotations

from pathlib import Path

import pytest

from grader.submission.discover import discover
from grader.errors import GraderError, NoSubmissions


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
    found = discover([tmp_path], assignment_id="masked-attention")
    assert _ids(found) == ["alice", "bob", "carol", "dave"]
    assert found.submissions[3].path == tmp_path / "dave"


def test_lms_export_names_give_stable_ids(tmp_path):
    _touch(tmp_path / "doe_jane_12345_attention.ipynb", "{}")
    _touch(tmp_path / "smith_late_67890_11111_attention.py")
    assert _ids(discover([tmp_path], assignment_id="a")) == ["doe_jane_12345", "smith_67890"]


def test_hidden_files_pycache_other_types_and_our_outputs_are_skipped(tmp_path):
    _touch(tmp_path / "alice.py")
    _touch(tmp_path / ".DS_Store")
    _touch(tmp_path / ".ipynb_checkpoints" / "alice-checkpoint.py")
    _touch(tmp_path / "__pycache__" / "alice.cpython-311.pyc")
    _touch(tmp_path / "README.md")
    _touch(tmp_path / "old_run" / "gradebook.sqlite")
    _touch(tmp_path / "out" / "results" / "alice.json")
    found = discover([tmp_path], assignment_id="a", exclude=tmp_path / "out")
    assert _ids(found) == ["alice"]
    assert sorted(p.name for p in found.skipped) == ["README.md", "old_run", "out"]


def test_the_folder_holding_the_output_folder_is_skipped(tmp_path):
    _touch(tmp_path / "alice.py")
    (tmp_path / "reports" / "masked-attention").mkdir(parents=True)
    found = discover([tmp_path], assignment_id="a", exclude=tmp_path / "reports" / "masked-attention")
    assert _ids(found) == ["alice"] and [p.name for p in found.skipped] == ["reports"]


def test_a_folder_holding_the_main_module_is_one_students_submission(tmp_path):
    _touch(tmp_path / "erin" / "submission.py")
    _touch(tmp_path / "erin" / "helpers.py")
    found = discover([tmp_path / "erin"], assignment_id="a", main_module="submission.py")
    assert _ids(found) == ["erin"]


def test_explicit_files_and_folders_combine(tmp_path):
    _touch(tmp_path / "class" / "alice.py")
    late = _touch(tmp_path / "late" / "bob.py")
    assert _ids(discover([tmp_path / "class", late], assignment_id="a")) == ["alice", "bob"]


def test_sample_tree_grades_the_samples_declared_for_the_assignment(tmp_path):
    _touch(tmp_path / "masked-attention" / "correct" / "good.py")
    _touch(tmp_path / "masked-attention" / "buggy" / "bad.py")
    _touch(tmp_path / "mha-kv-cache" / "correct" / "other.py")
    (tmp_path / "expected.toml").write_text(
        '["masked-attention/correct/good.py"]\nassignment = "masked-attention"\n'
        '["masked-attention/buggy/bad.py"]\nassignment = "masked-attention"\n'
        '["mha-kv-cache/correct/other.py"]\nassignment = "mha-kv-cache"\n')
    assert _ids(discover([tmp_path], assignment_id="masked-attention")) == ["bad", "good"]


def test_two_files_with_the_same_id_is_an_error_naming_both(tmp_path):
    a = _touch(tmp_path / "doe_jane_12345_attention.py")
    b = _touch(tmp_path / "doe_jane_12345_attention_v2.ipynb", "{}")
    with pytest.raises(GraderError, match=r"doe_jane_12345_attention\.py and .*doe_jane_12345_attention_v2\.ipynb "
                                          r"both give student id 'doe_jane_12345'") as e:
        discover([tmp_path], assignment_id="a")
    assert str(a) in e.value.message and str(b) in e.value.message


def test_empty_folder_is_no_submissions(tmp_path):
    _touch(tmp_path / "notes.txt")
    with pytest.raises(NoSubmissions, match=r"no submissions found in .*skipped 1 other entries: notes\.txt"):
        discover([tmp_path], assignment_id="a")


def test_missing_path_and_wrong_file_type_are_errors(tmp_path):
    with pytest.raises(GraderError, match=r"nope\.py does not exist"):
        discover([tmp_path / "nope.py"], assignment_id="a")
    with pytest.raises(GraderError, match=r"notes\.txt is not a submission: expected a \.py, \.ipynb or \.zip"):
        discover([_touch(tmp_path / "notes.txt")], assignment_id="a")
