"""The built-in (attention) vocabulary's words: what a student reads, what a teacher reads.

Results graded before assignments declared their concepts in spec.toml (grader/assignment/concepts.py) are
rendered with these; the bundled assignments' spec.toml files carry the same texts.

`EXPLANATIONS` speaks to one student about their failure (two plain, kind sentences).
`CLASS_PHRASES` completes "N % of the class ..." on the dashboard.
A test checks that both cover every concept id.
"""

from __future__ import annotations

from grader.results import Concept

EXPLANATIONS: dict[str, str] = {
    "mask-fill-value": (
        "Cells a query may not see must hold −∞ (or torch.finfo(dtype).min) before the softmax, "
        "because exp(−∞) = 0 is the only way to give them exactly zero weight. "
        "A fill of 0 becomes exp(0) = 1, so those hidden keys still take weight away from the visible ones."
    ),
    "mask-after-softmax": (
        "The mask belongs on the scores, before the softmax, so the softmax shares all of each row's weight among the visible keys. "
        "Zeroing weights after the softmax removes some of that weight, so the rows no longer add up to one."
    ),
    "fully-masked-rows": (
        "When a query may see no key at all, softmax over a row of −∞ is 0/0 and gives NaN, and over a row of one finite fill "
        "(such as torch.finfo(dtype).min) it gives every key 1/Lk, so the output is the mean of v. "
        "Neither is zero: detect such rows with mask.any(-1) and set their weights to 0 (torch.where), which also keeps the gradients finite."
    ),
    "padding-broadcast": (
        "A padding mask of shape (B, T) says which keys are real, so it has to line up with the key axis of the (B, H, T_q, T_k) scores. "
        "Reshaping it to (B, 1, 1, T) lets it broadcast over heads and queries instead of being matched against the wrong axis."
    ),
    "mask-combination": (
        "With keep masks (True = may attend) a cell is visible only if both the causal mask and the padding mask allow it. "
        "That is a logical AND; using OR or adding the masks lets through cells that one of them forbids."
    ),
    "causal-alignment": (
        "When the queries are the last Lq of Lk positions (as in cached decoding), query i sits at absolute position Lk − Lq + i. "
        "It may see every key j up to that position, so the causal mask has to be shifted rather than starting at the top-left corner."
    ),
    "causal-diagonal": (
        "Each token is allowed to look at itself, so the diagonal of a causal mask is visible. "
        "torch.tril keeps the diagonal; an off-by-one (diagonal=-1 or triu without offset) hides it."
    ),
    "kv-cache-growth": (
        "Every decoding step adds exactly the new tokens' keys and values to the cache. "
        "If the cache does not grow by that amount, later steps attend to too few or repeated positions."
    ),
    "kv-cache-append": (
        "append() should concatenate the new keys and values on the time axis and return everything cached so far. "
        "Returning only the new entries, or joining on another axis, breaks attention over earlier tokens."
    ),
    "head-split": (
        "Splitting into heads means view(B, T, h, d_k) followed by transpose(1, 2), giving (B, h, T, d_k). "
        "A direct view to (B, h, T, d_k) mixes features from different positions into one head."
    ),
    "head-merge": (
        "After attention, heads are merged with transpose(1, 2) and then reshape(B, T, d_model) before the output projection. "
        "Skipping the transpose puts values from different positions next to each other."
    ),
    "scaling": (
        "Scores are divided by √d_k, where d_k is the size of one head, not of the whole model. "
        "This keeps the softmax from becoming too peaked as the head size grows."
    ),
    "softmax-axis": (
        "Each query spreads its attention over the keys, so the softmax runs over the last (key) dimension. "
        "Over any other axis, the weights of a query no longer add up to one."
    ),
    "dtype-overflow": (
        "A fill value has to fit the dtype: float16 cannot hold −1e9 or float32's minimum and turns them into −∞ or garbage. "
        "Use float('-inf') or torch.finfo(scores.dtype).min so the value matches the tensor."
    ),
    "mask-dtype-promotion": (
        "A float32 tensor added to float16 or bfloat16 scores promotes them to float32, so the weights come out float32 and weights @ v meets a half-precision v. "
        "An additive mask built with torch.zeros(...) or torch.full(...) is float32 unless you pass dtype=scores.dtype (and device=scores.device); masked_fill on a bool mask avoids the question."
    ),
    "mask-convention": (
        "Masks here are bool keep-masks: True means the query may attend to that key, as in F.scaled_dot_product_attention. "
        "An additive 0/−∞ float mask, or True meaning 'hide' (as in nn.MultiheadAttention), is another convention; convert at the boundary (additive == 0, ~ignore_mask)."
    ),
    "output-dtype": (
        "The output should have the same dtype as the inputs, so half-precision inputs give half-precision outputs. "
        "Check for a hard-coded .float() or a float32 constant that silently upcasts."
    ),
    "device-placement": (
        "Masks and buffers need to be created on the same device as the inputs, for example with device=x.device. "
        "A mask made on the CPU fails, or copies slowly, when the model runs on a GPU."
    ),
    "dropout": (
        "In eval mode attention must be deterministic, so dropout has to be switched off. "
        "Use nn.Dropout (which respects model.eval()) or pass dropout_p only while training."
    ),
    "numerical-stability": (
        "exp of a large score overflows to ∞, so a softmax by hand subtracts each row's maximum first. "
        "torch.softmax already does this for you."
    ),
    "causal-leak": (
        "In causal attention, changing a later token must not change the output at an earlier position. "
        "If it does, some future information is reaching the earlier queries."
    ),
    "signature": (
        "The grader calls your code by the documented name and arguments, so it must exist exactly as the assignment describes. "
        "Check the spelling, the argument order and that it is defined at the top level of your file."
    ),
    "validation": (
        "Invalid arguments should raise a ValueError that says what was wrong and what was expected. "
        "Use an if-statement with raise rather than assert, which python -O removes."
    ),
    "load-error": (
        "The grader could not load your submission, so none of its functions could be tested. "
        "Running the file (or every notebook cell) from a fresh start usually shows the problem."
    ),
    "timeout": (
        "Your code took longer than the time limit for this case. "
        "Look for an unintended loop over positions or a very large tensor being built."
    ),
    "crash": (
        "The process running your code stopped unexpectedly, for example by running out of memory. "
        "Check for very large allocations or anything that exits the interpreter."
    ),
}

CLASS_PHRASES: dict[str, str] = {
    "mask-fill-value": "filled masked scores with 0 (or another finite value) instead of −∞",
    "mask-after-softmax": "applied the mask after the softmax instead of before it",
    "fully-masked-rows": "returned NaN (or the mean of v) for queries that may see no key",
    "padding-broadcast": "broadcast the padding mask along the wrong axis",
    "mask-combination": "combined the causal and padding masks with something other than AND",
    "causal-alignment": "did not shift the causal mask when queries are the last positions",
    "causal-diagonal": "hid the diagonal of the causal mask",
    "kv-cache-growth": "let the KV cache grow by the wrong amount",
    "kv-cache-append": "appended to the KV cache on the wrong axis or returned only the new entries",
    "head-split": "split heads without the transpose",
    "head-merge": "merged heads without the transpose",
    "scaling": "scaled the scores by the wrong factor",
    "softmax-axis": "ran the softmax over the wrong axis",
    "dtype-overflow": "used a fill value that does not fit the dtype",
    "mask-dtype-promotion": "let a float32 mask promote half-precision scores",
    "mask-convention": "used a mask with another convention than bool True = may attend",
    "output-dtype": "changed the output dtype",
    "device-placement": "created masks or buffers on the wrong device",
    "dropout": "left dropout on in eval mode",
    "numerical-stability": "wrote a softmax that overflows on large scores",
    "causal-leak": "let outputs depend on later tokens",
    "signature": "did not match a documented name or signature",
    "validation": "did not raise ValueError for invalid arguments",
    "load-error": "handed in a submission that could not be loaded",
    "timeout": "ran past a time limit",
    "crash": "crashed the worker process",
}


def explanation(concept: str | None) -> str:
    """The two-sentence explanation for `concept` ("" for None or an unknown id)."""
    return EXPLANATIONS.get(concept or "", "")


def class_phrase(concept: "Concept") -> str:
    """The dashboard phrase for `concept`, falling back to its one-line summary."""
    return concept.dashboard or f"failed on: {concept.title}"
