"""grader.submission.intake: every submission read in a bounded child process; a file that would
stall, exhaust or crash the reader is that student's load error, and the next student is read."""

from __future__ import annotations

import os
import time

import pytest

import hostile_inputs
from grader.submission.intake import Intake, IntakeLimits, load_bounded
from grader.submission.load import load_submission

CORRECT = hostile_inputs.CORRECT


@pytest.fixture(scope="module")
def intake():
    with Intake() as reader:
        yield reader


def test_a_bounded_load_gives_what_an_in_process_load_gives(intake, tmp_path):
    folder = tmp_path / "carol"
    (folder / "data").mkdir(parents=True)
    (folder / "attention.py").write_text(CORRECT.read_text())
    (folder / "data" / "weights.bin").write_bytes(bytes(range(256)) * 3)
    for path in (CORRECT, folder, hostile_inputs.old_mac_line_breaks(tmp_path)):
        assert intake.load(path, main_module="attention.py") == load_submission(path, main_module="attention.py")


@pytest.mark.slow  # full tier: megabytes of notebook, or a deadline to wait for
@pytest.mark.parametrize("attack", sorted(hostile_inputs.INTAKE))
def test_each_hostile_input_is_read_or_refused_for_its_student_alone(intake, tmp_path, attack):
    make, expected = hostile_inputs.INTAKE[attack]
    make(tmp_path)
    for sid, expect in expected.items():
        [path] = [p for p in tmp_path.iterdir() if p.stem == sid]
        sub = intake.load(path, main_module="attention.py")
        if expect.graded:
            assert sub.error is None and sub.units, str(sub.error)
        else:
            assert sub.error is not None and expect.says in str(sub.error) and not sub.units
    ordinary = intake.load(CORRECT)  # the reader goes on with the next student
    assert ordinary.error is None and ordinary.units


@pytest.mark.slow  # full tier: megabytes of notebook, or a deadline to wait for
def test_a_file_that_never_ends_is_stopped_at_the_deadline(tmp_path):
    fifo = tmp_path / "stuck.py"
    os.mkfifo(fifo)  # open() blocks for ever: nobody writes
    with Intake(IntakeLimits(seconds=3)) as reader:
        began = time.monotonic()
        sub = reader.load(fifo)
        # the allowance for a fresh reader's start does not lengthen the reading (it was 3 + 30 s)
        assert time.monotonic() - began < 3 + 15
        assert str(sub.error) == ("reading stuck.py took longer than 3 seconds, the limit for one submission; "
                             "submit your code without generated or pasted data")
        assert reader.load(CORRECT).error is None  # a fresh reader for the next one


@pytest.mark.slow  # full tier: megabytes of notebook, or a deadline to wait for
def test_a_file_that_needs_too_much_memory_is_stopped_at_the_budget(tmp_path):
    path = hostile_inputs.tiny_statements(tmp_path, statements=200_000)
    with Intake(IntakeLimits(memory_bytes=24 << 20)) as reader:
        sub = reader.load(path)
        assert sub.error is not None and "needed more than 24 MB of memory" in str(sub.error)
        assert len(sub.sha256) == 64  # known before parsing: a rerun skips it as unchanged
        assert reader.load(CORRECT).error is None


@pytest.mark.slow  # full tier: megabytes of notebook, or a deadline to wait for
def test_a_notebook_whose_self_check_cell_is_huge_reads_within_the_deadline(tmp_path):
    path = hostile_inputs.self_check_flood(tmp_path)
    with Intake(IntakeLimits(seconds=120)) as reader:  # quadratic before: minutes on this machine
        sub = reader.load(path)
    assert sub.error is None
    flood = sub.units[1].source
    assert "check(" not in flood and flood.count("\n") == 16_001


def test_symbolic_links_under_the_checkout_are_refused_when_asked(tmp_path):
    secret = tmp_path / "runner" / "hidden.py"
    secret.parent.mkdir()
    secret.write_text("SECRET = 1\n")
    repo = tmp_path / "repo"
    (repo / "real").mkdir(parents=True)
    (repo / "attention.py").symlink_to(secret)
    (repo / "linked").symlink_to(secret.parent, target_is_directory=True)
    for path in (repo / "attention.py", repo / "linked" / "hidden.py"):
        sub = load_bounded(path, link_root=repo)
        assert sub.error is not None and "is a symbolic link; commit the file itself" in str(sub.error)
        assert not sub.units
    assert load_bounded(repo / "attention.py").error is None  # `grader grade` of a named link follows it


def test_a_reader_bug_on_unforeseen_input_is_that_students_error(tmp_path, monkeypatch):
    from grader.submission import load

    def broken(*args, **kwargs):
        raise KeyError("cells")

    monkeypatch.setattr(load, "_notebook_units", broken)
    path = hostile_inputs.source_is_a_number(tmp_path)
    sub = load.load_submission(path)
    assert str(sub.error) == "source_number.ipynb could not be read (KeyError: 'cells')"


def test_the_reader_process_is_gone_when_the_intake_closes():
    reader = Intake().start()
    proc = reader._proc if hasattr(reader, "_proc") else None  # noqa: SLF001 - only to watch it exit
    assert reader.load(CORRECT).error is None
    reader.close()
    assert proc is not None and proc.poll() is not None
