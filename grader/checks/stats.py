"""Sampling checks: are a student's draws distributed as the reference distribution says?

Exact comparison needs the student to consume the generator exactly as the reference does
(``torch.multinomial`` vs ``torch.distributions.Categorical`` draw differently from the same
state), so sampling cases compare frequencies instead: over ``n`` draws, the count of each
outcome ``i`` is Binomial(n, p_i), and every count must lie within ``k`` standard deviations
(sqrt(n p_i (1 - p_i))) of n p_i, plus one draw of slack for the discreteness. With k = 5 a
correct sampler fails one case in about a million per outcome; a sampler of another distribution
(temperature not applied, softmax over the wrong axis) is far outside once n is a few thousand.
Pass the case's own seeded ``torch.Generator`` so that a verdict is reproducible: it crosses the
wire as its state (``grader.sandbox.wire``), and the worker builds a generator in that state.
"""

from __future__ import annotations

import math

import torch

from grader.i18n import Msg, tr
from grader.cases import Verdict
from grader.checks.compare import is_tensor, not_a_tensor
from grader.results import Evidence


def frequency_problems(samples: torch.Tensor, probs: torch.Tensor, *, k: float = 5.0) -> list[Msg]:
    """For 1-D integer ``samples`` of outcomes 0..V-1 and a (V,) reference distribution: one line per
    outcome whose count is more than ``k`` sigma (+1) from n p, worst first ([] when all are within)."""
    n = samples.numel()
    p = probs.detach().to("cpu", torch.float64).flatten()
    p = p / p.sum()
    counts = torch.bincount(samples.detach().to("cpu").flatten().long(), minlength=p.numel()).double()
    mean = n * p
    sigma = torch.sqrt(n * p * (1 - p))
    excess = (counts - mean).abs() - (k * sigma + 1.0)
    bad = torch.nonzero(excess > 0).flatten().tolist()
    bad.sort(key=lambda i: -float(excess[i] / max(float(sigma[i]), 1e-12)))
    return [tr("outcome {i}: drawn {count} times in {n}, expected {mean} ± {k}·{sigma}", i=i, count=int(counts[i]),
               n=n, mean=format(mean[i], ".1f"), k=format(k, "g"), sigma=format(sigma[i], ".1f")) for i in bad]


def check_frequencies(actual: object, probs: torch.Tensor, *, what: Msg | str, concept: str, message: Msg | str,
                      k: float = 5.0) -> Verdict:
    """Check the draws ``actual`` (a 1-D integer tensor of outcomes) against the distribution ``probs``."""
    if not is_tensor(actual):
        return not_a_tensor(actual, what)
    assert isinstance(actual, torch.Tensor)
    if actual.dtype.is_floating_point or actual.dtype in (torch.bool, torch.complex64, torch.complex128):
        return Verdict.fail(concept, tr("{what} should hold integer outcomes, but is {dtype}.", what=what,
                                        dtype=str(actual.dtype)),
                            Evidence(actual_dtype=str(actual.dtype)))
    if actual.device.type == "meta":
        return Verdict.fail(concept, tr("{what} is on the meta device; it cannot be checked.", what=what))
    flat = actual.detach().to("cpu").flatten()
    V = probs.numel()
    if flat.numel() and (int(flat.min()) < 0 or int(flat.max()) >= V):
        return Verdict.fail(concept, tr("{what} holds outcomes outside 0..{last}: ", what=what, last=V - 1) + message,
                            Evidence(notes=[tr("{what}: min {min}, max {max}", what=what, min=int(flat.min()),
                                               max=int(flat.max()))]))
    problems = frequency_problems(flat, probs, k=k)
    if not problems:
        return Verdict.ok()
    return Verdict.fail(concept, message, Evidence(notes=[tr("{what}: {reason}", what=what, reason=p)
                                                          for p in problems[:5]]))


def sigma_of_count(n: int, p: float) -> float:
    """The standard deviation of how often an outcome of probability ``p`` comes up in ``n`` draws."""
    return math.sqrt(n * p * (1 - p))
