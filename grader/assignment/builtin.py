"""The built-in (attention) vocabulary's words: what a student reads, what a teacher reads.

Results graded before assignments declared their concepts in spec.toml (grader/assignment/concepts.py) are
rendered with these; the bundled assignments' spec.toml files carry the same texts.

`EXPLANATIONS` speaks to one student about their failure (two plain, kind sentences).
`CLASS_PHRASES` completes "N % of the class ..." on the dashboard.
A test checks that both cover every concept id.
"""

from __future__ import annotations

from grader.i18n import N_
from grader.results import Concept

# Titles of the concepts results graded before assignments declared their own.
CONCEPTS: dict[str, str] = {
    "mask-fill-value": N_("Masked scores must be -inf (or finfo(dtype).min) before the softmax"),
    "mask-after-softmax": N_("The mask must be applied before the softmax, not to the weights"),
    "fully-masked-rows": N_("A query that may see no key must give zeros and finite gradients"),
    "padding-broadcast": N_("Padding hides keys: a (B, T) mask broadcasts as (B, 1, 1, T)"),
    "mask-combination": N_("Causal and padding masks combine with AND (keep masks)"),
    "causal-alignment": N_("New queries are the last positions: query i sees keys j <= Lk - Lq + i"),
    "causal-diagonal": N_("A token may attend to itself: the diagonal is visible"),
    "kv-cache-growth": N_("The cache grows by the new tokens at every step"),
    "kv-cache-append": N_("append() concatenates on the time axis and returns all keys and values"),
    "head-split": N_("Split heads with view(B, T, h, d_k).transpose(1, 2)"),
    "head-merge": N_("Merge heads with transpose(1, 2).reshape(B, T, d_model) before W_o"),
    "scaling": N_("Scores are divided by sqrt(d_k) of one head"),
    "softmax-axis": N_("The softmax runs over keys (the last dimension)"),
    "dtype-overflow": N_("Fill values must fit the dtype (fp16 cannot hold -1e9 or fp32's min)"),
    "mask-dtype-promotion": N_("A float32 mask added to float16/bfloat16 scores promotes them: build masks in the scores' dtype"),
    "mask-convention": N_("Masks are bool keep-masks (True = may attend), not additive 0/-inf floats"),
    "output-dtype": N_("Outputs keep the input dtype"),
    "device-placement": N_("Masks and buffers are created on the inputs' device"),
    "dropout": N_("No randomness in eval mode: dropout must be off"),
    "numerical-stability": N_("Subtract the row max before exp (or use torch.softmax)"),
    "causal-leak": N_("An output must not depend on later tokens"),
    "signature": N_("The function or class must exist with the documented signature"),
    "validation": N_("Invalid arguments must raise ValueError with a clear message"),
    "load-error": N_("The submission could not be loaded"),
    "timeout": N_("The code ran past its time limit"),
    "crash": N_("The worker process died while running the code"),
    "exception": N_("The code raised an exception"),
    "not-run": N_("Not run"),
}


EXPLANATIONS: dict[str, str] = {
    "mask-fill-value": (
        N_("Cells a query may not see must hold −∞ (or torch.finfo(dtype).min) before the softmax, "
           "because exp(−∞) = 0 is the only way to give them exactly zero weight. "
           "A fill of 0 becomes exp(0) = 1, so those hidden keys still take weight away from the visible ones.")
    ),
    "mask-after-softmax": (
        N_("The mask belongs on the scores, before the softmax, so the softmax shares all of each row's weight among the visible keys. "
           "Zeroing weights after the softmax removes some of that weight, so the rows no longer add up to one.")
    ),
    "fully-masked-rows": (
        N_("When a query may see no key at all, softmax over a row of −∞ is 0/0 and gives NaN, and over a row of one finite fill "
           "(such as torch.finfo(dtype).min) it gives every key 1/Lk, so the output is the mean of v. "
           "Neither is zero: detect such rows with mask.any(-1) and set their weights to 0 (torch.where), which also keeps the gradients finite.")
    ),
    "padding-broadcast": (
        N_("A padding mask of shape (B, T) says which keys are real, so it has to line up with the key axis of the (B, H, T_q, T_k) scores. "
           "Reshaping it to (B, 1, 1, T) lets it broadcast over heads and queries instead of being matched against the wrong axis.")
    ),
    "mask-combination": (
        N_("With keep masks (True = may attend) a cell is visible only if both the causal mask and the padding mask allow it. "
           "That is a logical AND; using OR or adding the masks lets through cells that one of them forbids.")
    ),
    "causal-alignment": (
        N_("When the queries are the last Lq of Lk positions (as in cached decoding), query i sits at absolute position Lk − Lq + i. "
           "It may see every key j up to that position, so the causal mask has to be shifted rather than starting at the top-left corner.")
    ),
    "causal-diagonal": (
        N_("Each token is allowed to look at itself, so the diagonal of a causal mask is visible. "
           "torch.tril keeps the diagonal; an off-by-one (diagonal=-1 or triu without offset) hides it.")
    ),
    "kv-cache-growth": (
        N_("Every decoding step adds exactly the new tokens' keys and values to the cache. "
           "If the cache does not grow by that amount, later steps attend to too few or repeated positions.")
    ),
    "kv-cache-append": (
        N_("append() should concatenate the new keys and values on the time axis and return everything cached so far. "
           "Returning only the new entries, or joining on another axis, breaks attention over earlier tokens.")
    ),
    "head-split": (
        N_("Splitting into heads means view(B, T, h, d_k) followed by transpose(1, 2), giving (B, h, T, d_k). "
           "A direct view to (B, h, T, d_k) mixes features from different positions into one head.")
    ),
    "head-merge": (
        N_("After attention, heads are merged with transpose(1, 2) and then reshape(B, T, d_model) before the output projection. "
           "Skipping the transpose puts values from different positions next to each other.")
    ),
    "scaling": (
        N_("Scores are divided by √d_k, where d_k is the size of one head, not of the whole model. "
           "This keeps the softmax from becoming too peaked as the head size grows.")
    ),
    "softmax-axis": (
        N_("Each query spreads its attention over the keys, so the softmax runs over the last (key) dimension. "
           "Over any other axis, the weights of a query no longer add up to one.")
    ),
    "dtype-overflow": (
        N_("A fill value has to fit the dtype: float16 cannot hold −1e9 or float32's minimum and turns them into −∞ or garbage. "
           "Use float('-inf') or torch.finfo(scores.dtype).min so the value matches the tensor.")
    ),
    "mask-dtype-promotion": (
        N_("A float32 tensor added to float16 or bfloat16 scores promotes them to float32, so the weights come out float32 and weights @ v meets a half-precision v. "
           "An additive mask built with torch.zeros(...) or torch.full(...) is float32 unless you pass dtype=scores.dtype (and device=scores.device); masked_fill on a bool mask avoids the question.")
    ),
    "mask-convention": (
        N_("Masks here are bool keep-masks: True means the query may attend to that key, as in F.scaled_dot_product_attention. "
           "An additive 0/−∞ float mask, or True meaning 'hide' (as in nn.MultiheadAttention), is another convention; convert at the boundary (additive == 0, ~ignore_mask).")
    ),
    "output-dtype": (
        N_("The output should have the same dtype as the inputs, so half-precision inputs give half-precision outputs. "
           "Check for a hard-coded .float() or a float32 constant that silently upcasts.")
    ),
    "device-placement": (
        N_("Masks and buffers need to be created on the same device as the inputs, for example with device=x.device. "
           "A mask made on the CPU fails, or copies slowly, when the model runs on a GPU.")
    ),
    "dropout": (
        N_("In eval mode attention must be deterministic, so dropout has to be switched off. "
           "Use nn.Dropout (which respects model.eval()) or pass dropout_p only while training.")
    ),
    "numerical-stability": (
        N_("exp of a large score overflows to ∞, so a softmax by hand subtracts each row's maximum first. "
           "torch.softmax already does this for you.")
    ),
    "causal-leak": (
        N_("In causal attention, changing a later token must not change the output at an earlier position. "
           "If it does, some future information is reaching the earlier queries.")
    ),
    "signature": (
        N_("The grader calls your code by the documented name and arguments, so it must exist exactly as the assignment describes. "
           "Check the spelling, the argument order and that it is defined at the top level of your file.")
    ),
    "validation": (
        N_("Invalid arguments should raise a ValueError that says what was wrong and what was expected. "
           "Use an if-statement with raise rather than assert, which python -O removes.")
    ),
    "load-error": (
        N_("The grader could not load your submission, so none of its functions could be tested. "
           "Running the file (or every notebook cell) from a fresh start usually shows the problem.")
    ),
    "timeout": (
        N_("Your code took longer than the time limit for this case. "
           "Look for an unintended loop over positions or a very large tensor being built.")
    ),
    "crash": (
        N_("The process running your code stopped unexpectedly, for example by running out of memory. "
           "Check for very large allocations or anything that exits the interpreter.")
    ),
    "exception": (
        N_("Your code stopped with an exception in this case, so its result could not be checked. "
           "The message and the traceback (grader check -v) show where; make the same call yourself to see it.")
    ),
    "not-run": (
        N_("This case did not run because of what happened before it. The file did not load, the same "
           "function kept crashing or timing out, or the whole submission ran out of time.")
    ),
}

CLASS_PHRASES: dict[str, str] = {
    "mask-fill-value": N_("filled masked scores with 0 (or another finite value) instead of −∞"),
    "mask-after-softmax": N_("applied the mask after the softmax instead of before it"),
    "fully-masked-rows": N_("returned NaN (or the mean of v) for queries that may see no key"),
    "padding-broadcast": N_("broadcast the padding mask along the wrong axis"),
    "mask-combination": N_("combined the causal and padding masks with something other than AND"),
    "causal-alignment": N_("did not shift the causal mask when queries are the last positions"),
    "causal-diagonal": N_("hid the diagonal of the causal mask"),
    "kv-cache-growth": N_("let the KV cache grow by the wrong amount"),
    "kv-cache-append": N_("appended to the KV cache on the wrong axis or returned only the new entries"),
    "head-split": N_("split heads without the transpose"),
    "head-merge": N_("merged heads without the transpose"),
    "scaling": N_("scaled the scores by the wrong factor"),
    "softmax-axis": N_("ran the softmax over the wrong axis"),
    "dtype-overflow": N_("used a fill value that does not fit the dtype"),
    "mask-dtype-promotion": N_("let a float32 mask promote half-precision scores"),
    "mask-convention": N_("used a mask with another convention than bool True = may attend"),
    "output-dtype": N_("changed the output dtype"),
    "device-placement": N_("created masks or buffers on the wrong device"),
    "dropout": N_("left dropout on in eval mode"),
    "numerical-stability": N_("wrote a softmax that overflows on large scores"),
    "causal-leak": N_("let outputs depend on later tokens"),
    "signature": N_("did not match a documented name or signature"),
    "validation": N_("did not raise ValueError for invalid arguments"),
    "load-error": N_("handed in a submission that could not be loaded"),
    "timeout": N_("ran past a time limit"),
    "crash": N_("crashed the worker process"),
    "exception": N_("raised an exception"),
    "not-run": N_("had cases that could not run"),
}


def explanation(concept: str | None) -> str:
    """The two-sentence explanation for `concept` ("" for None or an unknown id)."""
    return EXPLANATIONS.get(concept or "", "")


def class_phrase(concept: Concept) -> str:
    """The dashboard phrase for `concept`, falling back to its one-line summary."""
    return concept.dashboard or f"failed on: {concept.title}"
