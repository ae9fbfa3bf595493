"""Which isolation a command runs under: --isolation, else GRADER_ISOLATION, else auto; auto is
the portable worker off Linux."""

from __future__ import annotations

import sys

import pytest

from grader.errors import GraderError
from grader.grading.factory import isolation_choice


def test_the_option_wins_over_the_environment(monkeypatch):
    monkeypatch.setenv("GRADER_ISOLATION", "portable")
    assert isolation_choice("auto") == ("auto" if sys.platform.startswith("linux") else "portable")
    assert isolation_choice(None) == "portable"
    monkeypatch.delenv("GRADER_ISOLATION")
    assert isolation_choice("portable") == "portable"


@pytest.mark.parametrize("platform", ["win32", "darwin"])
def test_windows_and_macos_use_the_portable_worker(monkeypatch, platform):
    monkeypatch.delenv("GRADER_ISOLATION", raising=False)
    monkeypatch.setattr(sys, "platform", platform)
    assert isolation_choice(None) == "portable"


def test_linux_keeps_the_jail_by_default(monkeypatch):
    monkeypatch.delenv("GRADER_ISOLATION", raising=False)
    monkeypatch.setattr(sys, "platform", "linux")
    assert isolation_choice(None) == "auto"


def test_an_unknown_level_is_an_operator_error(monkeypatch):
    monkeypatch.setenv("GRADER_ISOLATION", "docker")
    with pytest.raises(GraderError, match=r"unknown isolation 'docker' .*known: auto, portable"):
        isolation_choice(None)
