"""The case API instructors write against.

A case has two halves, both run in the trusted grader process:

* ``setup(ctx)`` builds inputs from a seeded generator and computes the reference's
  expected values. It never sees the student, so the engine computes it once per batch and
  reuses it for every submission.
* ``check(student, s, param)`` calls the student through the sandboxed worker (``student`` is a
  proxy; nothing of the student's runs here) and returns a ``Verdict``.

Example (in ``assignments/<slug>/cases_hidden.py``; ``attention_case`` comes from the
assignment's ``_common.py`` and computes with the reference)::

    @case("causal_example", title="An example: causal attention",
          concept="mask-fill-value", points=2, hidden=True)
    def causal_example(ctx):
        q, k, v = (ctx.randn(2, 4, 33, 16) for _ in range(3))
        keep = reference.causal_mask(33, device=ctx.device)
        return Setup(inputs=dict(q=q, k=k, v=v, mask=keep), expected=attention_case(q, k, v, keep))

    @causal_example.check
    def _(student, s, param):
        return check_attention(student.masked_attention(**s.inputs), s.expected, concept=..., message=...)
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from typing import Any
from collections.abc import Callable

import torch

from grader.i18n import EMPTY, Msg, message_of
from grader.results import Evidence


@dataclass(frozen=True)
class Verdict:
    """What a check decided. ``concept`` and ``message`` matter only when it did not pass."""

    passed: bool
    concept: str | None = None
    message: Msg = EMPTY
    """What the student reads (``tr("...")``), rendered in their language where it is shown. The
    constructors below also take plain English text (`grader.i18n.english`)."""
    evidence: Evidence = field(default_factory=Evidence)

    @staticmethod
    def ok(message: Msg | str = "", evidence: Evidence | None = None) -> Verdict:
        return Verdict(True, None, message_of(message), evidence or Evidence())

    @staticmethod
    def fail(concept: str, message: Msg | str, evidence: Evidence | None = None) -> Verdict:
        """``concept``: an id the assignment declares (the engine checks it against spec.toml)."""
        return Verdict(False, concept, message_of(message), evidence or Evidence())

    @property
    def placeholder(self) -> bool:
        """Failed because the code is not written yet (``not_implemented``), not because it is wrong."""
        return not self.passed and self.concept is None

    @staticmethod
    def not_implemented(message: Msg | str, evidence: Evidence | None = None) -> Verdict:
        """The code the case calls is still a placeholder (NotImplementedError): no concept, no hint."""
        return Verdict(False, None, message_of(message), evidence or Evidence())


@dataclass
class Setup:
    """Inputs and reference results of one case parameter, computed once per batch."""

    inputs: dict[str, Any]
    expected: Any = None
    extra: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class SetupContext:
    """What a case's setup gets: its own seeded generator, its parameter and the reference device."""

    gen: torch.Generator
    param: Any
    device: torch.device

    def randn(self, *shape: int, dtype: torch.dtype = torch.float32, scale: float = 1.0) -> torch.Tensor:
        """Normal noise drawn on the CPU from this case's generator (same numbers on every device)."""
        return (torch.randn(*shape, generator=self.gen, dtype=torch.float64) * scale).to(self.device, dtype)


SetupFn = Callable[[SetupContext], Setup]
CheckFn = Callable[[Any, Setup, Any], Verdict]


class Case:
    """One gradable check. Built by the ``@case`` decorator; ``.check`` attaches the second half."""

    def __init__(self, id: str, *, title: str, concept: str, points: float, hidden: bool,
                 uses: tuple[str, ...], params: dict[str, Any] | None, setup: SetupFn,
                 on_error: dict[str, str] | None = None, meta: bool = False):
        # Concepts are checked against the assignment's spec.toml when the assignment loads.
        self.id = id
        self.title = title
        self.concept = concept
        self.points = float(points)
        self.hidden = hidden
        self.uses = uses
        self.params = params
        self.setup = setup
        self.on_error = dict(on_error or {})
        self.meta = meta
        self.check_fn: CheckFn | None = None

    def where(self) -> str:
        """``file:line`` of the case's setup function, for an instructor's error message."""
        code = getattr(self.setup, "__code__", None)
        return f"{code.co_filename}:{code.co_firstlineno}" if code else self.id

    def check(self, fn: CheckFn) -> CheckFn:
        self.check_fn = fn
        return fn

    def instances(self) -> list[CaseInstance]:
        """One instance per parameter (points split evenly), or one for an unparametrised case."""
        if not self.params:
            return [CaseInstance(self, self.id, None, self.points)]
        share = self.points / len(self.params)
        return [CaseInstance(self, f"{self.id}[{label}]", value, share) for label, value in self.params.items()]

    def __repr__(self) -> str:
        return f"Case({self.id!r}, hidden={self.hidden})"


@dataclass(frozen=True)
class CaseInstance:
    case: Case
    id: str
    param: Any
    points: float

    def generator(self, assignment_seed: int) -> torch.Generator:
        """A generator seeded from the assignment's seed and this instance's id: deterministic per version."""
        digest = hashlib.sha256(f"{assignment_seed}:{self.id}".encode()).digest()
        gen = torch.Generator()
        gen.manual_seed(int.from_bytes(digest[:8], "little") & ((1 << 63) - 1))
        return gen


def case(id: str, *, title: str, concept: str, points: float = 1.0, hidden: bool = True,
         uses: tuple[str, ...] = (), params: dict[str, Any] | None = None,
         on_error: dict[str, str] | None = None, meta: bool = False) -> Callable[[SetupFn], Case]:
    """Declare a case. ``uses`` names the student entry points it calls (a missing one fails it
    with the ``signature`` concept without running it); ``params`` maps labels to values, each
    reported separately with an equal share of ``points``; ``on_error`` maps a substring of the
    student's exception ("must match the size of tensor") to the concept it reveals in this case;
    ``meta``: the case runs student code on the meta device (the sandbox warms it up once)."""

    def wrap(setup: SetupFn) -> Case:
        return Case(id, title=title, concept=concept, points=points, hidden=hidden, uses=uses,
                    params=params, setup=setup, on_error=on_error, meta=meta)

    return wrap
