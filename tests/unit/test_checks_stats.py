"""Sampling checks: frequencies within k sigma of the reference distribution."""

from __future__ import annotations

import torch

from grader.checks.stats import check_frequencies, frequency_problems

P = torch.tensor([0.5, 0.3, 0.15, 0.05])


def draws(p: torch.Tensor, n: int = 4000, seed: int = 0) -> torch.Tensor:
    return torch.multinomial(p, n, replacement=True, generator=torch.Generator().manual_seed(seed))


def test_draws_of_the_right_distribution_pass_for_many_seeds():
    assert all(check_frequencies(draws(P, seed=s), P, what="samples", concept="c", message="m").passed
               for s in range(20))


def test_draws_without_the_temperature_fail_and_say_which_outcome():
    flat = torch.softmax(torch.log(P) / 2.0, -1)  # T = 2 not applied the right way round
    v = check_frequencies(draws(flat), P, what="samples", concept="temperature", message="m")
    assert not v.passed and v.concept == "temperature"
    assert str(v.evidence.notes[0]) == "samples: outcome 3: drawn 512 times in 4000, expected 200.0 ± 5·13.8"  # worst


def test_floats_and_out_of_range_outcomes_are_refused():
    assert "integer outcomes" in str(check_frequencies(torch.zeros(3), P, what="s", concept="c", message="m").message)
    v = check_frequencies(torch.tensor([0, 4]), P, what="s", concept="c", message="m")
    assert not v.passed and "outside 0..3" in str(v.message)


def test_frequency_problems_is_empty_on_exact_expected_counts():
    exact = torch.cat([torch.full((int(1000 * p),), i) for i, p in enumerate(P.tolist())])
    assert frequency_problems(exact, P) == []
