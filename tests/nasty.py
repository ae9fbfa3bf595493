"""The nasty corpus: text a submission controls (what it raises, prints, returns, or is named), made to
break whatever shows it. Every sink's test feeds it these, and checks with the helpers below.

Importable from any test (pytest puts this folder, the conftest's, on sys.path).
"""

from __future__ import annotations

import re
from dataclasses import replace

from grader.i18n import verbatim

SURROGATE = "notes_\udce9.txt and a lone \ud800"
"""What os.fsdecode(b"notes_\\xe9.txt") gives, and an unpaired high surrogate."""
NUL = "nul\x00byte"
CR = "real 15/41\rfake 41/41 100%"
ANSI = "\x1b[2K\x1b[1;31mred\x1b[0m \x9b2J"
OSC = "\x1b]0;pwned title\x07 \x1b]8;;https://evil.example\x1b\\click\x1b]8;;\x1b\\"
RTL = "report\u202etxt.exe"
FORMULAS = ["=cmd|' /C calc'!A0", "+1+1", "-1+1", "@SUM(A1)", "|cmd", "\t=1", " =1"]
MENTION = "@org/team and @octocat"
LINKS = "https://evil.example/x www.evil.example"
EMOJI = ":tada: :+1:"
SCRIPT = "</script><script>alert(1)</script><img src=x onerror=alert(1)>"
XML_BAD = "\x01\x08\x0b\x0c\ufffe\uffff"
WORKFLOW = "::error::forged ::set-output name=x::y ##[error]forged"
BIG = "A" * (1 << 20)

CORPUS = [SURROGATE, NUL, CR, ANSI, OSC, RTL, *FORMULAS, MENTION, LINKS, EMOJI, SCRIPT, XML_BAD, WORKFLOW, BIG]
ALL = " ".join(CORPUS[:-1])
"""Every short entry in one string (a message, a file name, an id)."""
MULTILINE = "\n".join(CORPUS[:-1])

_BAD_CHARS = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069\ud800-\udfff\ufffe\uffff]")


def bad_chars(text: str) -> list[str]:
    """Characters no sink may let through: C0/C1 controls (tab and newline allowed), ESC, CR, bidi
    overrides, surrogates, XML-illegal non-characters."""
    return _BAD_CHARS.findall(text)


def nasty_report(base, text: str = ALL, big: str = BIG):
    """`base` (a GradeReport) with every field a submission can influence set to nasty text."""
    cases = [replace(c, message=verbatim(f"{text} {big}"),
                     evidence=replace(c.evidence, notes=[verbatim(text), verbatim(big)], traceback=f"{text}\n{big}",
                                      expected_dtype=text, actual_dtype=text))
             for c in base.cases]
    load = replace(base.load, message=verbatim(text), stdout=f"{MULTILINE}\n{big}", stderr=MULTILINE,
                   hidden_stdout=MULTILINE, hidden_stderr=MULTILINE,
                   cell_errors=[replace(e, error=text, traceback=MULTILINE) for e in base.load.cell_errors])
    return replace(base, submission=replace(base.submission, id=text, filename=text), cases=cases, load=load)
