"""The on-disk setup cache: a run reads what an earlier run computed only when nothing it depends on
changed (each input of the key, changed alone, is a miss), and a damaged file is never trusted."""

import json
import os
import shutil
from pathlib import Path

import pytest
import torch
from safetensors.torch import save_file

import grader
from grader.assignment.spec import load_assignment
from grader.cases import Setup
from grader.grading import setup_cache, stored
from grader.grading.setup_cache import SetupCache, cache_key, cached

ASSIGNMENTS = Path(__file__).resolve().parents[2] / "assignments"
CPU = torch.device("cpu")


class Counting:
    """A stand-in for the reference's computation: counts the setups it is asked for."""

    def __init__(self):
        self.asked: list[str] = []

    def __call__(self, ids):
        self.asked += ids
        return {i: Setup(inputs={"x": torch.arange(4.0) + len(i)}, expected=torch.ones(2, 3, dtype=torch.bfloat16),
                         extra={"n": len(i), "why": "ok"}) for i in ids}


@pytest.fixture
def assignment(tmp_path):
    """A copy of an assignment whose reference lives in its folder (so the test can change it)."""
    folder = tmp_path / "masked-loss-and-sampling"
    shutil.copytree(ASSIGNMENTS / "masked-loss-and-sampling", folder, ignore=shutil.ignore_patterns("__pycache__"))
    return load_assignment(folder)


@pytest.fixture
def cache(tmp_path):
    return SetupCache(tmp_path / "cache")


def _ids(a):
    return [i.id for i in a.instances()]


def test_a_second_run_reads_what_the_first_computed(assignment, cache):
    first, second = Counting(), Counting()
    made, how = cached(cache, assignment, CPU, _ids(assignment), first)
    assert how == "miss" and first.asked == _ids(assignment)
    again, how = cached(cache, assignment, CPU, _ids(assignment), second)
    assert how == "hit" and second.asked == []
    for i in _ids(assignment):
        assert torch.equal(again[i].inputs["x"], made[i].inputs["x"])
        assert again[i].expected.dtype == torch.bfloat16 and torch.equal(again[i].expected, made[i].expected)
        assert again[i].extra == made[i].extra


def test_a_subset_is_read_from_a_file_holding_more_and_a_superset_computes_only_what_is_missing(assignment, cache):
    ids = _ids(assignment)
    cached(cache, assignment, CPU, ids[:2], Counting())
    more = Counting()
    _, how = cached(cache, assignment, CPU, ids, more)
    assert how == "miss" and more.asked == ids[2:]
    fewer = Counting()
    _, how = cached(cache, assignment, CPU, ids[1:3], fewer)
    assert how == "hit" and fewer.asked == []


def _append(path: Path, text: str) -> None:
    with open(path, "a", encoding="utf-8") as f:
        f.write(text)


CHANGES = {
    "a case file": lambda a, mp: _append(a.dir / "cases_hidden.py", "\n# a fixed hidden case\n"),
    "the reference": lambda a, mp: _append(a.dir / "solution.py", "\n# a corrected reference\n"),
    "spec.toml": lambda a, mp: _append(a.dir / "spec.toml", "\n# a new tolerance\n"),
    "the grader version": lambda a, mp: mp.setattr(grader, "__version__", "99.0.0"),
    "the grader's source": lambda a, mp: mp.setattr(setup_cache, "grader_source_digest", lambda: "0" * 64),
    "the torch version": lambda a, mp: mp.setattr(torch, "__version__", "9.9.9+other"),
    "torch's CPU kernels": lambda a, mp: mp.setattr(torch.backends.cpu, "get_cpu_capability", lambda: "OTHER"),
    "torch's thread count": lambda a, mp: mp.setattr(torch, "get_num_threads", lambda: 977),
}


@pytest.mark.parametrize("change", sorted(CHANGES))
def test_changing_any_input_of_the_key_misses(assignment, cache, monkeypatch, change):
    cached(cache, assignment, CPU, _ids(assignment), Counting())
    CHANGES[change](assignment, monkeypatch)
    again = Counting()
    _, how = cached(cache, assignment, CPU, _ids(assignment), again)
    assert how == "miss" and again.asked == _ids(assignment)


def test_another_device_misses(assignment, cache):
    cached(cache, assignment, CPU, _ids(assignment), Counting())
    again = Counting()
    _, how = cached(cache, assignment, torch.device("meta"), _ids(assignment), again)
    assert how == "miss" and again.asked == _ids(assignment)


def _the_file(cache: SetupCache, a) -> Path:
    path = cache.path(cache_key(a, CPU))
    assert path.is_file()
    return path


def _truncate(path: Path) -> None:
    path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])


def _flip_last_byte(path: Path) -> None:  # inside the last tensor's bytes
    data = bytearray(path.read_bytes())
    data[-1] ^= 0x40
    path.write_bytes(bytes(data))


def _garbage(path: Path) -> None:
    path.write_bytes(b"\x00" * 64)


def _other_key(path: Path) -> None:  # a valid file, written under another key, renamed into place
    tensors = {"t0": torch.zeros(2)}
    stored.write(path, {"x": Setup(inputs={"t": tensors["t0"]})}, {}, meta={"key": "{}"})


@pytest.mark.parametrize("damage", [_truncate, _flip_last_byte, _garbage, _other_key], ids=lambda f: f.__name__[1:])
def test_a_damaged_file_is_ignored_recomputed_and_written_again(assignment, cache, damage):
    made, _ = cached(cache, assignment, CPU, _ids(assignment), Counting())
    damage(_the_file(cache, assignment))
    again = Counting()
    got, how = cached(cache, assignment, CPU, _ids(assignment), again)
    assert how == "miss" and again.asked == _ids(assignment)
    assert all(torch.equal(got[i].inputs["x"], made[i].inputs["x"]) for i in _ids(assignment))
    third = Counting()
    assert cached(cache, assignment, CPU, _ids(assignment), third)[1] == "hit" and third.asked == []


def test_a_folder_others_can_write_is_not_used(assignment, cache):
    cache.folder.mkdir(mode=0o700)
    os.chmod(cache.folder, 0o777)
    cached(cache, assignment, CPU, _ids(assignment), Counting())
    assert list(cache.folder.iterdir()) == []
    again = Counting()
    assert cached(cache, assignment, CPU, _ids(assignment), again)[1] == "miss" and again.asked


def test_only_the_newest_files_of_an_assignment_are_kept(assignment, cache, monkeypatch):
    for n in range(setup_cache.KEEP + 3):
        monkeypatch.setattr(torch, "get_num_threads", lambda n=n: 1000 + n)
        cached(cache, assignment, CPU, _ids(assignment), Counting())
    assert len(list(cache.folder.glob(f"{assignment.id}-*.safetensors"))) == setup_cache.KEEP


def test_a_stored_file_names_only_dataclasses_and_nothing_it_names_is_called(tmp_path, monkeypatch):
    marks = tmp_path / "marks.jsonl"
    monkeypatch.setenv("GRADER_TIMINGS", str(marks))
    for named in ("grader.timings:mark", "grader.timings:os.system", "grader.cases:_private"):
        tree = {"c": {"inputs": {"$dc": named, "fields": {"phase": "called"}}, "expected": None, "extra": {"$dict": {}}}}
        path = tmp_path / "planted.safetensors"
        save_file({"t0": torch.zeros(1)}, str(path), metadata={"format": str(stored.FORMAT), "setups": json.dumps(tree)})
        with pytest.raises(ValueError, match="dataclass"):
            stored.read(path)
    assert not marks.exists()
