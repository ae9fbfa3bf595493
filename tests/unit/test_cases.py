"""grader/cases.py: what case authors write with (`@case`, Verdict, Setup) and what they can rely on."""

import torch

from grader.cases import Case, CaseInstance, SetupContext, Setup, Verdict, case


def _setup(ctx: SetupContext) -> Setup:
    return Setup({"x": ctx.randn(2)})


def test_a_verdict_is_a_placeholder_only_when_it_failed_without_a_concept():
    assert Verdict.ok().passed and not Verdict.ok().placeholder
    failed = Verdict.fail("causal-diagonal", "hides the diagonal")
    assert (failed.passed, failed.concept, failed.placeholder) == (False, "causal-diagonal", False)
    todo = Verdict.not_implemented("Not implemented yet: causal_mask")
    assert (todo.passed, todo.concept, todo.placeholder) == (False, None, True)


def test_the_decorator_declares_a_case_and_check_attaches_its_second_half():
    c = case("basic", title="Basic", concept="c", points=2, hidden=False, uses=("attention",))(_setup)
    assert isinstance(c, Case) and (c.id, c.points, c.hidden, c.uses) == ("basic", 2.0, False, ("attention",))
    assert c.check_fn is None

    @c.check
    def check(student, setup, param):
        return Verdict.ok()

    assert c.check_fn is check
    file, line = c.where().rsplit(":", 1)
    assert file == __file__ and int(line) == _setup.__code__.co_firstlineno


def test_cases_are_hidden_unless_declared_public():
    assert case("h", title="t", concept="c")(_setup).hidden


def test_parameters_become_instances_sharing_the_points_evenly():
    c = case("sizes", title="t", concept="c", points=3, params={"small": 2, "mid": 4, "large": 8})(_setup)
    insts = c.instances()
    assert [(i.id, i.param) for i in insts] == [("sizes[small]", 2), ("sizes[mid]", 4), ("sizes[large]", 8)]
    assert [i.points for i in insts] == [1.0, 1.0, 1.0] and all(i.case is c for i in insts)
    single = case("one", title="t", concept="c", points=1.5)(_setup).instances()
    assert [(i.id, i.param, i.points) for i in single] == [("one", None, 1.5)]


def test_each_instance_draws_its_own_numbers_the_same_on_every_run():
    c = case("sizes", title="t", concept="c", params={"a": 1, "b": 2})(_setup)
    a, b = c.instances()

    def first(inst: CaseInstance, seed: int) -> torch.Tensor:
        return torch.randn(4, generator=inst.generator(seed))

    assert torch.equal(first(a, 7), first(a, 7))
    assert not torch.equal(first(a, 7), first(b, 7))  # another instance id
    assert not torch.equal(first(a, 7), first(a, 8))  # another assignment seed


def test_setup_noise_is_drawn_in_float64_then_cast_so_dtypes_share_the_numbers():
    def ctx():
        return SetupContext(torch.Generator().manual_seed(1), None, torch.device("cpu"))

    x32 = ctx().randn(3, 4)
    x16 = ctx().randn(3, 4, dtype=torch.float16, scale=2.0)
    assert x32.dtype == torch.float32 and x16.dtype == torch.float16 and x32.shape == (3, 4)
    assert torch.allclose(x16.float(), (x32.double() * 2).half().float())
