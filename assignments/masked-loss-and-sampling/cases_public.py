"""Public cases: every requirement of the README once, on small inputs of its own."""

from __future__ import annotations

from grader.cases import case

from ._common import (check_generator, check_gradient, check_greedy, check_loss, check_sampling, check_single_row,
                      gradient_setup, greedy_setup, loss_batch, sampling_setup)

LOSS = ("masked_cross_entropy",)
SAMPLE = ("sample_next",)


@case("ce_no_padding", title="masked_cross_entropy with every token real", concept="cross-entropy",
      hidden=False, uses=LOSS)
def ce_no_padding(ctx):
    return loss_batch(ctx, 2, 4, 5, [4, 4])


@ce_no_padding.check
def _(student, s, param):
    i = s.inputs
    return check_loss(student.masked_cross_entropy(i["logits"], i["targets"], i["mask"]), s, concept="cross-entropy")


@case("ce_right_padding", title="masked_cross_entropy with right padding", concept="loss-padding",
      points=2, hidden=False, uses=LOSS)
def ce_right_padding(ctx):
    return loss_batch(ctx, 3, 6, 7, [6, 3, 1])


@ce_right_padding.check
def _(student, s, param):
    i = s.inputs
    return check_loss(student.masked_cross_entropy(i["logits"], i["targets"], i["mask"]), s, concept="loss-padding")


@case("ce_large_logits", title="masked_cross_entropy stays finite for logits of ±100", concept="log-softmax",
      hidden=False, uses=LOSS)
def ce_large_logits(ctx):
    return loss_batch(ctx, 2, 5, 6, [5, 4], scale=100.0, must_fail=("shifted", "log-softmax"))


@ce_large_logits.check
def _(student, s, param):
    i = s.inputs
    return check_loss(student.masked_cross_entropy(i["logits"], i["targets"], i["mask"]), s, concept="log-softmax",
                      nan_concept="log-softmax")


@case("ce_half_many_tokens", title="masked_cross_entropy on float16 logits over 8192 tokens",
      concept="loss-overflow", hidden=False, uses=LOSS)
def ce_half_many_tokens(ctx):
    import torch

    return loss_batch(ctx, 2, 4096, 8, [4096, 4000], scale=12.0, dtype=torch.float16,
                      must_fail=("shifted", "in-dtype"))


@ce_half_many_tokens.check
def _(student, s, param):
    i = s.inputs
    return check_loss(student.masked_cross_entropy(i["logits"], i["targets"], i["mask"]), s, concept="loss-overflow",
                      nan_concept="loss-overflow")


@case("ce_padding_gradient", title="masked_cross_entropy gives padding zero gradient", concept="loss-padding",
      hidden=False, uses=LOSS)
def ce_padding_gradient(ctx):
    return gradient_setup(ctx)


@ce_padding_gradient.check
def _(student, s, param):
    return check_gradient(student, s)


@case("ce_padding_targets_out_of_vocab", title="masked_cross_entropy with padding targets outside the vocabulary",
      concept="loss-padding", hidden=False, uses=LOSS, on_error={"out of bounds": "padding-targets"})
def ce_padding_targets_out_of_vocab(ctx):
    return loss_batch(ctx, 2, 5, 6, [5, 2], pad_targets="out-of-range")


@ce_padding_targets_out_of_vocab.check
def _(student, s, param):
    i = s.inputs
    return check_loss(student.masked_cross_entropy(i["logits"], i["targets"], i["mask"]), s, concept="loss-padding")


@case("sample_greedy", title="sample_next at temperature 0 is the argmax", concept="greedy-at-zero",
      hidden=False, uses=SAMPLE, on_error={"probability tensor contains": "greedy-at-zero",
                                          "division by zero": "greedy-at-zero"})
def sample_greedy(ctx):
    return greedy_setup(ctx, 4, 9)


@sample_greedy.check
def _(student, s, param):
    return check_greedy(student, s)


@case("sample_temperature", title="sample_next at temperature 0.5 draws from softmax(logits / 0.5)",
      concept="temperature", points=2, hidden=False, uses=SAMPLE)
def sample_temperature(ctx):
    return sampling_setup(ctx, 4000, 6, 0.5, seed=11)


@sample_temperature.check
def _(student, s, param):
    return check_sampling(student, s)


@case("sample_uses_generator", title="sample_next draws with the generator it is given", concept="generator",
      hidden=False, uses=SAMPLE)
def sample_uses_generator(ctx):
    return sampling_setup(ctx, 500, 5, 1.0, seed=23)


@sample_uses_generator.check
def _(student, s, param):
    return check_generator(student, s)


@case("sample_single_row", title="sample_next for a batch of one returns shape (1,)", concept="sample-shape",
      hidden=False, uses=SAMPLE)
def sample_single_row(ctx):
    return sampling_setup(ctx, 1, 7, 1.0, seed=31)


@sample_single_row.check
def _(student, s, param):
    return check_single_row(student, s)
