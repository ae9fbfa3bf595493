"""Helpers for both case files (shipped in the kit: nothing secret here).

Every expected value and every wrong answer the diagnosis recognises is computed in the setup,
in float64, so a student kit carries them precomputed and needs no reference.
"""

from __future__ import annotations

import math

import torch

from grader.cases import Setup, SetupContext, Verdict
from grader.checks.compare import check_comparable, is_tensor, not_a_tensor
from grader.checks.stats import check_frequencies, frequency_problems
from grader.results import Evidence
from grader.i18n import Msg, tr, verbatim
from grader.sandbox import StudentError

from . import solution  # the assignment's reference (in a kit: a stand-in; setups come stored)

MESSAGES = {
    "cross-entropy": tr("The loss is the mean over real tokens of −log_softmax(logits)[target], with each target "
                        "compared at its own position."),
    "loss-padding": tr("Your loss matches the mean over every position, padding included: count only real tokens "
                       "(mask) in the sum and in the count."),
    "loss-padding/not-finite": tr("A sequence in this batch has no real token: dividing anything by its own count "
                                  "is 0/0. Sum the losses of all real tokens and divide once by mask.sum()."),
    "loss-denominator": tr("Your loss matches the sum over real tokens divided by B·T: divide by the number of real "
                           "tokens, mask.sum()."),
    "ignore-index": tr("Your loss matches ignoring target id 0 (ignore_index=0): the mask says which tokens are "
                       "real, whatever their id."),
    "log-softmax": tr("The loss is not finite for large logits: log(softmax(x)) underflows to log(0) = −∞; use "
                      "torch.log_softmax (or F.cross_entropy)."),
    "loss-overflow": tr("The loss is not finite for float16 logits over many tokens: a float16 sum overflows past "
                        "65504; compute in float32 (logits.float())."),
    "loss-overflow/in-dtype": tr("Half precision rounds away the loss's digits (and a float16 sum overflows past "
                                 "65504): compute in float32 (logits.float()) and return a float32 loss."),
    "output-dtype": tr("The loss is a float32 scalar, whatever the dtype of the logits."),
    "greedy-at-zero": tr("At temperature 0, return logits.argmax(-1): dividing by 0 gives inf and NaN."),
    "temperature": tr("Draws follow softmax(logits / temperature): divide the logits by the temperature."),
    "softmax-axis": tr("The draws are uniform over the vocabulary: the softmax runs over the vocabulary (dim=-1), "
                       "not over the batch."),
    "generator": tr("Draw with the generator you are given (torch.multinomial(..., generator=generator))."),
    "sample-shape": tr("sample_next returns one int64 token id per row: shape (B,)."),
}


# --- the loss -------------------------------------------------------------------------------

APART = 5.0
"""How many of the check's tolerances (`loss_tolerance`) every mistake a loss batch diagnoses must
lie from the right loss and from the other mistakes: far enough that a student near one is
named by it and by no other."""

BEYOND = 1.5
"""How many tolerances a wrong computation without a diagnosis (`wrong_losses`) must lie from the
right loss: it fails the check with a margin. (A loss rounded to bfloat16 is at most 0.2 % off,
so it cannot be held `APART`.)"""

DRAWS = 50
"""How many draws a loss batch tries before its sizes are called a design error."""


def loss_tolerance(want: float) -> float:
    """How far a loss may be from the float64 reference and still pass."""
    return 1e-4 + 1e-3 * abs(want)


def loss_batch(ctx: SetupContext, B: int, T: int, V: int, lengths: list[int], *, side: str = "right",
               scale: float = 1.0, sure: float = 1.0, dtype: torch.dtype = torch.float32,
               pad_targets: str = "in-range", must_fail: tuple[str, ...] = ("shifted",)) -> Setup:
    """Logits of a model that is fairly sure of most real targets, targets with some real ones equal
    to 0, a padding mask from ``lengths``; the reference loss and the loss each classic mistake
    gives, in float64.

    A scalar loss tells formulas apart only where their values differ, so the batch is drawn again
    (from the case's own generator: the same draws on every machine) until every mistake
    (``solution.loss_mistakes``) and every wrong computation named in ``must_fail``
    (`wrong_losses`) is far from the reference (`APART`, `BEYOND`), and the mistakes from each other.
    Then a verdict or a diagnosis never rests on a lucky draw, whatever the seed. The draws make
    that likely: real targets get ``sure`` x ``scale`` more logit (so the loss depends on which
    target each position is compared with), real tokens whose id is 0 do not (so leaving them out
    moves the loss), and padding is loud (its target's logit lowered by 4 x ``scale``).

    Raises:
        ValueError: no draw of `DRAWS` kept the wrong answers apart (a design error in the case).
    """
    for _ in range(DRAWS):
        logits, targets, mask = _draw_batch(ctx, B, T, V, lengths, side, scale, sure, pad_targets)
        logits = logits.to(dtype)
        expected = solution.oracle_loss(logits, targets, mask)
        mutants = solution.loss_mistakes(logits, targets, mask) if int(mask.sum()) else {}
        wrong = wrong_losses(logits, targets, mask, must_fail)
        if _apart(expected, mutants, wrong):
            return Setup(inputs=dict(logits=logits, targets=targets, mask=mask), expected=expected,
                         extra=dict(mutants=mutants))
    raise ValueError(f"loss_batch({B}, {T}, {V}, {lengths}): no draw of {DRAWS} keeps the wrong answers "
                     f"{sorted(must_fail)} and the mistakes apart from the right loss; change the case's sizes")


def _draw_batch(ctx: SetupContext, B: int, T: int, V: int, lengths: list[int], side: str, scale: float,
                sure: float, pad_targets: str) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    logits = ctx.randn(B, T, V, dtype=torch.float64, scale=scale)
    targets = torch.randint(1, V, (B, T), generator=ctx.gen)
    pos = torch.arange(T)
    n = torch.tensor(lengths)[:, None]
    mask = pos < n if side == "right" else pos >= T - n  # (B, T), True = real
    targets = torch.where(mask & (pos % 3 == 0), 0, targets)  # real tokens whose id is 0: ignore_index=0 drops them
    hit = torch.nn.functional.one_hot(targets, V).double()  # (B, T, V)
    confident = (mask & (targets != 0)).double()[..., None]
    logits = logits + sure * scale * hit * confident - 4.0 * scale * hit * (~mask).double()[..., None]
    if pad_targets == "out-of-range":
        targets = torch.where(mask, targets, torch.where(pos % 2 == 0, -100, V + 7))
    return logits, targets, mask


def wrong_losses(logits: torch.Tensor, targets: torch.Tensor, mask: torch.Tensor,
                 names: tuple[str, ...]) -> dict[str, float]:
    """What wrong code that no mistake model names gives on this batch: "shifted" (each position
    compared with the next target, a language-model habit), "in-dtype" (the loss computed and
    summed in the logits' dtype), "log-softmax" (log(softmax(x)) in float32)."""
    safe = torch.where(mask, targets, 0)
    out = {}
    if "shifted" in names and logits.shape[1] > 1 and bool(mask[:, 1:].any()):
        out["shifted"] = solution.oracle_loss(logits[:, :-1], safe[:, 1:], mask[:, 1:])
    if "in-dtype" in names:
        nll = -torch.log_softmax(logits, -1).gather(-1, safe.unsqueeze(-1)).squeeze(-1)
        out["in-dtype"] = float((nll * mask).sum() / mask.sum().clamp_min(1))
    if "log-softmax" in names:
        p = torch.softmax(logits.float(), -1).gather(-1, safe.unsqueeze(-1)).squeeze(-1)
        out["log-softmax"] = float((-torch.log(p) * mask).sum() / mask.sum().clamp_min(1))
    return out


def _apart(want: float, mutants: dict[str, float], wrong: dict[str, float]) -> bool:
    """Every finite wrong computation lies `BEYOND` tolerances from ``want``; every mistake that
    differs from ``want`` at all lies `APART` tolerances from it and from the other mistakes."""
    tol = loss_tolerance(want)
    far = APART * tol

    def differs(x: float) -> bool:  # a mistake that cannot show on this batch gives the right loss exactly
        return abs(x - want) > 1e-9 * max(1.0, abs(want))

    if any(math.isfinite(x) and abs(x - want) <= BEYOND * tol for x in wrong.values()):
        return False
    shown = [x for x in mutants.values() if math.isfinite(x) and differs(x)]
    if any(abs(x - want) <= far for x in shown):
        return False
    return all(abs(a - b) > far for i, a in enumerate(shown) for b in shown[i + 1:])


def check_loss(actual: object, s: Setup, *, concept: str, nan_concept: str | None = None,
               what: Msg | str = "masked_cross_entropy(logits, targets, mask)") -> Verdict:
    """A 0-dim float32 tensor, finite, within tolerance of the reference; else the mistake whose
    value it reproduces, or, when it reproduces none, what is wrong (value against expected) under
    the generic "cross-entropy" concept: no cause the evidence does not show."""
    if not is_tensor(actual):
        return not_a_tensor(actual, what)
    assert isinstance(actual, torch.Tensor)
    ev = Evidence(expected_shape=[], actual_shape=list(actual.shape), expected_dtype="torch.float32",
                  actual_dtype=str(actual.dtype))
    if actual.device.type == "meta" or actual.dim() != 0 or not actual.dtype.is_floating_point:
        return Verdict.fail("output-dtype", tr("{what} should be a 0-dim float tensor (a scalar), got shape {shape} "
                                               "and {dtype}.", what=what, shape=tuple(actual.shape), dtype=actual.dtype), ev)
    value = float(actual.detach().to("cpu", torch.float64))
    want = s.expected
    if not torch.isfinite(torch.tensor(value)):
        c = nan_concept or concept
        said = MESSAGES.get(f"{c}/not-finite") or MESSAGES[c]
        return Verdict.fail(c, tr("{what} is {value}. ", what=what, value=value) + said, ev)
    if actual.dtype != torch.float32:
        return Verdict.fail("output-dtype", tr("{what} is {dtype}, expected torch.float32.", what=what, dtype=actual.dtype), ev)
    tol = loss_tolerance(want)
    facts = Evidence(expected_value=want, actual_value=value, max_abs_error=abs(value - want), allowed_error=tol,
                     expected_shape=[], actual_shape=[])
    if abs(value - want) <= tol:
        return Verdict.ok()
    for mistake, m in s.extra["mutants"].items():
        if abs(value - m) <= tol and abs(m - want) > 3 * tol:  # unambiguously that mistake
            return Verdict.fail(mistake, MESSAGES[mistake], facts)
    half = s.inputs["logits"].dtype
    if half in (torch.float16, torch.bfloat16) and rounded_in(value, want, half):
        return Verdict.fail("loss-overflow", tr("{what} is {value}, expected {want}: {value} is a {dtype} number "
                                                "within {dtype}'s rounding of the expected loss. ", what=what,
                                                value=f"{value:.6g}", want=f"{want:.6g}", dtype=str(half).removeprefix("torch."))
                            + MESSAGES["loss-overflow/in-dtype"], facts)
    return Verdict.fail("cross-entropy", tr("{what} is {value}, expected {want} (allowed error {tol}); it matches "
                                            "none of the classic mistakes this case checks for. ", what=what,
                                            value=f"{value:.6g}", want=f"{want:.6g}", tol=f"{tol:.2g}")
                        + MESSAGES["cross-entropy"], facts)


def rounded_in(value: float, want: float, dtype: torch.dtype) -> bool:
    """``value`` is a number of ``dtype`` within two of its rounding steps of ``want``: the evidence
    of a loss computed (or rounded) in half precision, rather than of another formula."""
    exact = float(torch.tensor(value, dtype=torch.float64).to(dtype)) == value
    return exact and abs(value - want) <= 2 * torch.finfo(dtype).eps * abs(want)


def gradient_setup(ctx: SetupContext) -> Setup:
    s = loss_batch(ctx, 2, 5, 6, [5, 2])
    logits = s.inputs["logits"].double().requires_grad_(True)
    solution.masked_cross_entropy(logits, s.inputs["targets"], s.inputs["mask"]).backward()
    s.extra["grad"] = logits.grad.detach()
    mask = s.inputs["mask"]
    s.extra["grad_bt"] = s.extra["grad"] * (int(mask.sum()) / mask.numel())  # the loss divided by B·T
    return s


def check_gradient(student, s: Setup) -> Verdict:
    i = s.inputs
    what = tr("the gradient of masked_cross_entropy with respect to logits")
    try:
        _, (grad,) = student.vjp("masked_cross_entropy", (i["logits"], i["targets"], i["mask"]), wrt=[0],
                                 cotangent=torch.tensor(1.0))
    except StudentError as e:
        if "does not require grad" not in e.message:
            raise  # the engine reports what the student's code raised (a placeholder as not implemented)
        return Verdict.fail("cross-entropy", tr("No gradient reaches the logits: your loss does not depend on them "
                                                "(a constant, or computed from detached values). ")
                            + MESSAGES["cross-entropy"], Evidence(notes=[verbatim(f"{e.exc_type}: {e.message[:160]}")]))
    if not is_tensor(grad) or tuple(grad.shape) != tuple(i["logits"].shape):
        return Verdict.fail("loss-padding", tr("{what} is missing or has the wrong shape.", what=what))
    bad = check_comparable(grad, what, concept="loss-padding")
    if bad:
        return bad
    g = grad.detach().to("cpu", torch.float64)
    leak = g[~i["mask"]].abs().max().item() if (~i["mask"]).any() else 0.0
    zero_ids = i["mask"] & (i["targets"] == 0)
    if leak > 1e-7 and zero_ids.any() and g[zero_ids].abs().max().item() < 1e-9:
        return Verdict.fail("ignore-index", tr("Padding positions get gradient and real tokens with id 0 get none: ") + MESSAGES["ignore-index"], Evidence(notes=[tr("{what}: nonzero at padding", what=what)]))
    if leak > 1e-7:
        return Verdict.fail("loss-padding", tr("Padding positions get gradient (up to {leak}): padding must add "
                                               "nothing to the loss, so its gradient is 0.", leak=f"{leak:.3g}"),
                            Evidence(notes=[tr("{what}: nonzero at padding", what=what)]))
    err = (g - s.extra["grad"]).abs().max().item()
    if err <= 1e-5:
        return Verdict.ok()
    facts = Evidence(max_abs_error=err, allowed_error=1e-5)
    if (g - s.extra["grad_bt"]).abs().max().item() <= 1e-5:
        return Verdict.fail("loss-denominator", tr("{what} is the reference's times (real tokens / B·T): ", what=what)
                            + MESSAGES["loss-denominator"], facts)
    return Verdict.fail("cross-entropy", tr("{what} differs from the reference by up to {err} at real tokens (allowed "
                                            "1e-05). ", what=what, err=f"{err:.3g}") + MESSAGES["cross-entropy"], facts)


# --- sampling -------------------------------------------------------------------------------

def sampling_setup(ctx: SetupContext, N: int, V: int, temperature: float, seed: int) -> Setup:
    """N identical rows of random logits: one call gives N draws of the same distribution."""
    row = ctx.randn(V, scale=1.5)
    probs = solution.sampling_probs(row, temperature)
    return Setup(inputs=dict(logits=row.expand(N, V).clone(), temperature=temperature, seed=seed),
                 expected=probs,
                 extra=dict(mutants={"temperature": torch.softmax(row.double() * temperature, -1),
                                     "softmax-axis": torch.full((V,), 1.0 / V, dtype=torch.float64)}))


def draws_of(student, s: Setup, seed: int) -> object:
    i = s.inputs
    return student.sample_next(i["logits"], i["temperature"], generator=torch.Generator().manual_seed(seed))


def shape_problem(draws: object, n: int) -> Verdict | None:
    bad = check_comparable(draws, "sample_next(...)", concept="sample-shape")
    if bad:
        return bad
    assert isinstance(draws, torch.Tensor)
    if tuple(draws.shape) != (n,) or draws.dtype != torch.int64:
        return Verdict.fail("sample-shape", tr("sample_next(...) returned shape {shape} and {dtype}, expected ({n},) "
                                               "torch.int64. ", shape=tuple(draws.shape), dtype=draws.dtype, n=n) + MESSAGES["sample-shape"],
                            Evidence(expected_shape=[n], actual_shape=list(draws.shape),
                                     expected_dtype="torch.int64", actual_dtype=str(draws.dtype)))
    return None


def check_sampling(student, s: Setup, *, concept: str = "temperature") -> Verdict:
    draws = draws_of(student, s, s.inputs["seed"])
    bad = shape_problem(draws, s.inputs["logits"].shape[0])
    if bad:
        return bad
    verdict = check_frequencies(draws, s.expected, what="sample_next(...)", concept=concept,
                                message=MESSAGES[concept])
    if verdict.passed:
        return verdict
    for mistake, dist in s.extra["mutants"].items():
        if not frequency_problems(draws, dist):
            return Verdict.fail(mistake, MESSAGES[mistake], verdict.evidence)
    return verdict


def check_single_row(student, s: Setup) -> Verdict:
    """One row of logits: one draw of shape (1,), an id of the vocabulary (one draw says nothing
    about frequencies: the other cases judge those)."""
    draws = draws_of(student, s, s.inputs["seed"])
    bad = shape_problem(draws, 1)
    if bad:
        return bad
    assert isinstance(draws, torch.Tensor)
    V = s.inputs["logits"].shape[-1]
    token = int(draws.reshape(-1)[0])
    if not 0 <= token < V:
        return Verdict.fail("sample-shape", tr("sample_next(...) drew token {token}, outside the vocabulary 0..{last}.",
                                               token=token, last=V - 1))
    return Verdict.ok()


def check_generator(student, s: Setup) -> Verdict:
    n = s.inputs["logits"].shape[0]
    a1, a2, b = (draws_of(student, s, seed) for seed in (s.inputs["seed"], s.inputs["seed"], s.inputs["seed"] + 1))
    for d in (a1, a2, b):
        bad = shape_problem(d, n)
        if bad:
            return bad
    if not torch.equal(a1, a2):
        return Verdict.fail("generator", tr("Two generators seeded alike gave different draws: ") + MESSAGES["generator"])
    if torch.equal(a1, b):
        return Verdict.fail("generator", tr("Generators seeded differently gave the same draws, so the generator is "
                                            "not used. ") + MESSAGES["generator"])
    return Verdict.ok()


def greedy_setup(ctx: SetupContext, B: int, V: int) -> Setup:
    logits = ctx.randn(B, V, scale=2.0)
    return Setup(inputs=dict(logits=logits), expected=solution.sample_next(logits, 0.0))


def check_greedy(student, s: Setup) -> Verdict:
    got = student.sample_next(s.inputs["logits"], 0.0)
    bad = shape_problem(got, s.inputs["logits"].shape[0])
    if bad:
        return bad
    if torch.equal(got.cpu(), s.expected):
        return Verdict.ok()
    return Verdict.fail("greedy-at-zero", MESSAGES["greedy-at-zero"],
                        Evidence(notes=[tr("expected {expected}, got {got}", expected=s.expected.tolist(), got=got.tolist())]))
