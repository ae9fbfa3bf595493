"""Hidden cases: the same requirements on other inputs and in other combinations."""

from __future__ import annotations

import torch

from grader.cases import case

from ._common import check_greedy, check_loss, check_sampling, check_single_row, greedy_setup, loss_batch, sampling_setup

LOSS = ("masked_cross_entropy",)


@case("ce_left_padding_bf16", title="Loss: left padding, bfloat16 logits", concept="loss-padding", points=2,
      uses=LOSS)
def ce_left_padding_bf16(ctx):
    return loss_batch(ctx, 3, 7, 9, [7, 5, 2], side="left", dtype=torch.bfloat16,
                      must_fail=("shifted", "in-dtype"))


@ce_left_padding_bf16.check
def _(student, s, param):
    i = s.inputs
    return check_loss(student.masked_cross_entropy(i["logits"], i["targets"], i["mask"]), s, concept="loss-padding")


@case("ce_padding_ids_anything", title="Loss: padding targets out of the vocabulary", concept="ignore-index",
      uses=LOSS, on_error={"out of bounds": "padding-targets"})
def ce_padding_ids_anything(ctx):
    return loss_batch(ctx, 2, 6, 5, [6, 3], pad_targets="out-of-range")


@ce_padding_ids_anything.check
def _(student, s, param):
    i = s.inputs
    return check_loss(student.masked_cross_entropy(i["logits"], i["targets"], i["mask"]), s, concept="ignore-index")


@case("ce_empty_row", title="Loss: a sequence with no real token", concept="loss-padding", uses=LOSS)
def ce_empty_row(ctx):
    return loss_batch(ctx, 3, 4, 6, [4, 0, 2])


@ce_empty_row.check
def _(student, s, param):
    i = s.inputs
    return check_loss(student.masked_cross_entropy(i["logits"], i["targets"], i["mask"]), s, concept="loss-padding",
                      nan_concept="loss-padding")


@case("sample_hot", title="Sampling: temperature 2 over ten tokens", concept="temperature", points=2,
      uses=("sample_next",))
def sample_hot(ctx):
    return sampling_setup(ctx, 4000, 10, 2.0, seed=5)


@sample_hot.check
def _(student, s, param):
    return check_sampling(student, s)


@case("sample_greedy_wide", title="Sampling: temperature 0 over a wide vocabulary", concept="greedy-at-zero",
      uses=("sample_next",), on_error={"probability tensor contains": "greedy-at-zero",
                                       "division by zero": "greedy-at-zero"})
def sample_greedy_wide(ctx):
    return greedy_setup(ctx, 8, 300)


@sample_greedy_wide.check
def _(student, s, param):
    return check_greedy(student, s)


@case("sample_single_row_hot", title="Sampling: a batch of one at temperature 2 over a wide vocabulary",
      concept="sample-shape", uses=("sample_next",))
def sample_single_row_hot(ctx):
    return sampling_setup(ctx, 1, 50, 2.0, seed=41)


@sample_single_row_hot.check
def _(student, s, param):
    return check_single_row(student, s)
