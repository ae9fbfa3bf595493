"""Which device `grade_one` starts the sandbox for before torch is imported (`early_device`)."""

from __future__ import annotations

import glob
import os

import pytest

from grader.grading import single


@pytest.mark.parametrize("named", ["cpu", "cuda", "cuda:1"])
def test_a_named_device_is_taken_as_it_is(named):
    assert single.early_device(named) == named


def test_an_unknown_name_waits_for_torch_to_refuse_it():
    assert single.early_device("tpu") is None


def _linux_with(monkeypatch, nodes: list[str]) -> None:
    monkeypatch.setattr(single.sys, "platform", "linux")
    monkeypatch.setattr(glob, "glob", lambda pattern: [n for n in nodes if n.startswith("/dev/nvidia")])
    monkeypatch.setattr(os.path, "exists", lambda p: p in nodes)


def test_auto_on_linux_without_gpu_nodes_is_the_cpu(monkeypatch):
    _linux_with(monkeypatch, [])
    assert single.early_device("auto") == "cpu"


@pytest.mark.parametrize("node", ["/dev/nvidia0", "/dev/nvidiactl", "/dev/kfd", "/dev/dxg"])
def test_auto_with_any_gpu_node_is_left_to_torch(monkeypatch, node):
    _linux_with(monkeypatch, [node])
    assert single.early_device("auto") is None


def test_auto_on_macos_is_the_cpu(monkeypatch):
    monkeypatch.setattr(single.sys, "platform", "darwin")
    assert single.early_device("auto") == "cpu"


def test_auto_on_windows_depends_on_the_cuda_driver(monkeypatch, tmp_path):
    monkeypatch.setattr(single.sys, "platform", "win32")
    monkeypatch.setenv("SystemRoot", str(tmp_path))
    assert single.early_device("auto") == "cpu"
    (tmp_path / "System32").mkdir()
    (tmp_path / "System32" / "nvcuda.dll").write_bytes(b"")
    assert single.early_device("auto") is None
