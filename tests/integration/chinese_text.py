"""What counts as English in a line a Chinese-speaking student reads: the tests of the Chinese
CLI, notebook and kit output share it (test_cli_lang.py proves it still catches English)."""

from __future__ import annotations

import re

# What may stay in Latin letters in a Chinese line: code. A run of ASCII holding code punctuation
# (`masked_attention`, `torch.finfo(scores.dtype).min`, `-inf`, `(B, 1, 1, T)`, `[attention_basic]`,
# `mask-fill-value`, a path), an exception class (`NotImplementedError`), and these words of the
# tutorials' own vocabulary that they leave untranslated.
CODE_RUN = re.compile(r"[\x21-\x7e]*[_.()=\[\]'`/<>@^~|&:\-+*][\x21-\x7e]*")
EXCEPTION = re.compile(r"\b[A-Z][a-z]+(?:[A-Z][a-z]*)+\b")
LATIN_KEPT = {"softmax", "dropout", "NaN", "inf", "dtype", "float16", "bfloat16", "float32", "torch", "AND", "OR",
              "GPU", "CPU", "meta", "Lk", "Lq", "KV", "bool", "True", "False", "tril", "triu", "eval", "int64", "float64",
              "Python", "Token", "cgroup", "v1", "v2", "GiB", "root"}


CASE_ID = re.compile(r" \[.*\](?: — [\w-]+)?$")
"""The case id (``[causal_mask_offset[2 of 5]]``) and concept id ending a case line."""


def english_words(text: str) -> list[str]:
    """Latin-letter words of `text` that are not code (see CASE_ID, CODE_RUN, EXCEPTION, LATIN_KEPT)."""
    text = EXCEPTION.sub(" ", CODE_RUN.sub(" ", CASE_ID.sub("", text)))
    return [w for w in re.findall(r"[A-Za-z][A-Za-z0-9]+", text) if w not in LATIN_KEPT]
