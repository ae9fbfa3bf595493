"""`grader.cli.common.large_batch`: the guess, made before anything is read, of whether a batch is
large enough for its zygote's heap in huge pages; and `grader grade` acting on it."""

from __future__ import annotations

from pathlib import Path

from click.testing import CliRunner

import grader.cli.common as common
from grader.cli.app import main
from grader.cli.common import LARGE_BATCH, large_batch


def _files(folder: Path, n: int) -> Path:
    folder.mkdir()
    for i in range(n):
        (folder / f"student{i:03}.py").write_text("")
    return folder


def test_a_folder_counts_its_entries_and_a_file_counts_one(tmp_path):
    small = _files(tmp_path / "small", LARGE_BATCH - 1)
    assert not large_batch([small])
    assert large_batch([small, tmp_path / "late.py"])  # one file more, given on its own
    assert large_batch([_files(tmp_path / "big", LARGE_BATCH)])
    assert not large_batch([tmp_path / "missing"])  # counts one; the batch then reports it missing
    sub = small / "student000.py"
    assert not large_batch([sub] * (LARGE_BATCH - 1))


def test_grade_starts_a_huge_heap_zygote_for_a_large_folder_only(tmp_path, monkeypatch):
    asked = []
    monkeypatch.setattr(common, "prestart_sandbox", lambda device, **kw: asked.append(kw["huge_heap"]))
    for folder, n in ((tmp_path / "class", LARGE_BATCH), (tmp_path / "late", 12)):
        result = CliRunner().invoke(main, ["grade", str(_files(folder, n)), "-a", "no-such-assignment",
                                           "-o", str(tmp_path / "out")])
        assert result.exit_code == 2, result.output  # the unknown assignment, after the zygote's start
    assert asked == [True, False]
