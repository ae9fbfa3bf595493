"""The line `grader check` shows while a slow step runs: only on a terminal, after a second, in
the feedback's language, erased when the step ends."""

from __future__ import annotations

import io

from grader.cli import case_progress
from grader.cli.case_progress import CaseProgress


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_a_step_longer_than_the_delay_gets_its_line_with_the_time_and_limit():
    p = CaseProgress(Terminal())
    try:
        p.step("causal_mask on a square sequence", 10.0, "en")
        started = p._step[1]
        assert p.line(started + 0.5) is None  # most cases end before anything is shown
        assert p.line(started + 3.2) == "running causal_mask on a square sequence … 3 s (limit 10 s)"
        p.step(None, 0.0, "en")
        assert p.line(started + 30) is None
    finally:
        p.close()


def test_the_line_is_in_the_kits_language():
    p = CaseProgress(Terminal())
    try:
        p.step("padding_mask with side='left'", 10.0, "zh-CN")
        line = p.line(p._step[1] + 2)
        assert line.startswith("正在运行：") and "2 秒（限时 10 秒）" in line
    finally:
        p.close()


def test_the_thread_rewrites_the_line_in_place_and_erases_it(monkeypatch):
    monkeypatch.setattr(case_progress, "DELAY_S", 0.0)
    monkeypatch.setattr(case_progress, "TICK_S", 0.01)
    out = Terminal()
    p = CaseProgress(out)
    p.step("slow case", 10.0, "en")
    import time

    deadline = time.monotonic() + 10
    while "running slow case" not in out.getvalue() and time.monotonic() < deadline:
        time.sleep(0.01)
    p.close()
    text = out.getvalue()
    assert text.startswith("\r\x1b[2Krunning slow case … 0 s (limit 10 s)")
    assert text.endswith("\r\x1b[2K")  # erased: the case lines print on a clean line
    assert "\n" not in text


def test_nothing_is_written_when_not_a_terminal():
    out = io.StringIO()
    p = CaseProgress(out)
    p.step("slow case", 10.0, "en")
    p.close()
    assert out.getvalue() == ""
