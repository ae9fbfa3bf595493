"""The environment self-test: before anything is graded, a probe runs in a real worker, in the real
jail, and does what correct code needs. A jail that would take points from correct code (a
virtualenv its mounts hide, a library it cannot read, a dtype or the meta device failing) stops the
command with one clear message instead of grading wrong.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from grader.sandbox.errors import EnvironmentBroken, SandboxError

PROBE = '''
import importlib.util
import os
import sys

import torch


def probe(meta):
    problems = []
    for p in sys.path:
        if p != os.getcwd() and not os.access(p, os.R_OK | os.X_OK):
            problems.append(f"the folder {p} on sys.path cannot be read from inside the jail")
    # Modules a correct submission may import lazily: their files must be readable here.
    for name in ("torch.fx.experimental.symbolic_shapes", "torch.nn.functional", "numpy.linalg",
                 "json.decoder", "colorsys"):
        try:
            spec = importlib.util.find_spec(name)
            with open(spec.origin, "rb") as f:
                f.read(1)
        except Exception as e:
            problems.append(f"the module {name} cannot be read ({type(e).__name__}: {e})")
    try:
        import colorsys  # not imported by the zygote: a real import from the standard library
    except Exception as e:
        problems.append(f"importing colorsys failed ({type(e).__name__}: {e})")
    for dtype in (torch.float32, torch.float64, torch.float16, torch.bfloat16):
        try:
            x = torch.linspace(-1, 1, 12, dtype=dtype).reshape(3, 4)
            w = (x @ x.T).masked_fill(~torch.ones(3, 3, dtype=torch.bool).tril(), float("-inf"))
            (w.softmax(-1) @ x).sum().item()
        except Exception as e:
            problems.append(f"{dtype} attention failed ({type(e).__name__}: {e})")
    if meta:
        try:
            a = torch.empty(2, 3, 4, device="meta")
            (a @ a.transpose(-1, -2)).softmax(-1).masked_fill(torch.ones(3, 3, dtype=torch.bool, device="meta"), 0.0)
        except Exception as e:
            problems.append(f"the meta device failed ({type(e).__name__}: {e})")
    try:
        with open("selftest.txt", "w") as f:
            f.write("ok")
        with open("selftest.txt") as f:
            assert f.read() == "ok"
        os.remove("selftest.txt")
    except Exception as e:
        problems.append(f"the scratch folder is not writable ({type(e).__name__}: {e})")
    return problems
'''


@dataclass(frozen=True)
class _Unit:
    label: str = "selftest.py"
    cell: None = None
    source: str = PROBE


@dataclass(frozen=True)
class _Probe:
    """Shaped like a loaded submission (what `Sandbox.open` reads of one)."""

    path: str = "selftest.py"
    kind: str = "py"
    units: tuple = (_Unit(),)
    files: dict = field(default_factory=dict)
    error: None = None


def check(sandbox, *, meta: bool) -> None:
    """Run the probe in a fresh worker of `sandbox`; raise `EnvironmentBroken` naming every problem."""
    with sandbox.open(_Probe()) as w:
        if not w.load.ok:
            raise EnvironmentBroken(f"the self-test could not load in the sandbox ({w.load.message}; "
                                    f"{w.output()[1][-500:].strip()})")
        try:
            problems = w.call("probe", meta)
        except SandboxError as e:
            raise EnvironmentBroken(f"the self-test failed in the sandbox ({e})") from e
    if type(problems) is not list or problems:
        listed = "; ".join(str(p) for p in problems) if type(problems) is list else repr(problems)
        raise EnvironmentBroken(f"it would fail correct code on this machine, so nothing was graded "
                                f"(isolation {sandbox.isolation}): {listed}")
