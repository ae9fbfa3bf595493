"""Code fingerprints as MOSS takes them: normalised tokens, hashed k-grams, winnowing.

Student text is hostile: it is only ever tokenized here (Python's own ``tokenize``, linear in its
length), never executed or imported, and both its length and its token count are capped.
Comments are dropped, names become ``N`` (attribute names after ``.`` are kept: they are the
library's, e.g. ``.masked_fill``), strings ``S``; keywords, operators and numbers stay. So
renaming variables or rewriting comments changes no fingerprint.

Winnowing (Schleimer, Wilkerson and Aiken, SIGMOD 2003): of every window of `WINDOW` consecutive
k-gram hashes the smallest is kept (the rightmost on a tie), so any match of at least
``WINDOW + K - 1`` tokens is found.
"""

from __future__ import annotations

import hashlib
import io
import keyword
import tokenize
from dataclasses import dataclass

K = 10
"""Tokens per k-gram (a line of attention code is ~8-15 tokens)."""
WINDOW = 6
MAX_CHARS = 100_000
"""Characters of one submission's code that are fingerprinted; the rest is ignored."""
MAX_TOKENS = 20_000
"""Tokens of one submission fingerprinted (a full solution has about 1,500)."""
MAX_LINE = 300
"""Characters of one line tokenized: ``tokenize`` slows down on very long lines, and code has none."""

_SKIP = {tokenize.COMMENT, tokenize.NL, tokenize.ENCODING, tokenize.ENDMARKER}


@dataclass(frozen=True)
class Token:
    text: str
    """Normalised: ``N`` for a name, ``S`` for a string, else the token itself."""
    unit: int
    """Index of the code unit (notebook cell, file) it came from."""
    line: int
    """1-based line in that unit."""


@dataclass(frozen=True)
class Fingerprints:
    """A document's winnowed k-gram hashes, each with the (unit, line) spans it covers."""

    spans: dict[int, list[tuple[tuple[int, int], ...]]]
    """hash -> for each place its k-gram occurs, the (unit, line) pairs it covers."""

    @property
    def hashes(self) -> set[int]:
        return set(self.spans)


def normalised_tokens(sources: list[str]) -> list[Token]:
    """Tokens of each source in turn, normalised (see the module docstring), capped in length."""
    out: list[Token] = []
    budget = MAX_CHARS
    for unit, source in enumerate(sources):
        if budget <= 0 or len(out) >= MAX_TOKENS:
            break
        text = source[:budget]
        budget -= len(text)
        text = "\n".join(line[:MAX_LINE] for line in text.split("\n"))
        prev, statement_start, in_docstring = "", True, False
        try:
            for tok in tokenize.generate_tokens(io.StringIO(text).readline):
                if tok.type in _SKIP:
                    continue
                if in_docstring:  # a string standing alone as a statement is a docstring: dropped
                    in_docstring = tok.type != tokenize.NEWLINE
                    if in_docstring and tok.type not in (tokenize.STRING, *_FSTRING_TYPES):
                        in_docstring = False  # "a" + b: an expression after all; counted from here
                    else:
                        continue
                if statement_start and tok.type == tokenize.STRING:
                    in_docstring = True
                    continue
                statement_start = tok.type in (tokenize.NEWLINE, tokenize.INDENT, tokenize.DEDENT)
                if tok.type == tokenize.NAME:
                    norm = tok.string if keyword.iskeyword(tok.string) or prev == "." else "N"
                elif tok.type == tokenize.STRING or tok.type in _FSTRING_TYPES:
                    norm = "S"
                elif tok.type == tokenize.NEWLINE:
                    norm = ";"
                elif tok.type in (tokenize.INDENT, tokenize.DEDENT):
                    norm = ">" if tok.type == tokenize.INDENT else "<"
                else:
                    norm = tok.string
                prev = tok.string
                out.append(Token(norm, unit, tok.start[0]))
                if len(out) >= MAX_TOKENS:
                    break
        except (tokenize.TokenError, IndentationError, SyntaxError, ValueError):
            pass  # code that does not tokenize to the end: what came before still counts
    return out


_FSTRING_TYPES = {getattr(tokenize, n) for n in ("FSTRING_START", "FSTRING_MIDDLE", "FSTRING_END")
                  if hasattr(tokenize, n)}


def _hash(texts: list[str]) -> int:
    return int.from_bytes(hashlib.blake2b("\x1f".join(texts).encode("utf-8", "replace"), digest_size=8).digest(),
                          "big")


def winnow(hashes: list[int], window: int = WINDOW) -> list[int]:
    """Indices of the hashes winnowing keeps: each window's minimum, the rightmost on ties, once."""
    if len(hashes) <= window:
        return [min(range(len(hashes)), key=lambda i: (hashes[i], -i))] if hashes else []
    kept: list[int] = []
    for start in range(len(hashes) - window + 1):
        best = start
        for i in range(start + 1, start + window):
            if hashes[i] <= hashes[best]:
                best = i
        if not kept or kept[-1] != best:
            kept.append(best)
    return kept


def fingerprints(tokens: list[Token], *, k: int = K, window: int = WINDOW) -> Fingerprints:
    """The winnowed fingerprints of a token stream."""
    texts = [t.text for t in tokens]
    grams = [_hash(texts[i:i + k]) for i in range(len(texts) - k + 1)]
    spans: dict[int, list] = {}
    for i in winnow(grams, window):
        covered = tuple(dict.fromkeys((t.unit, t.line) for t in tokens[i:i + k]))
        spans.setdefault(grams[i], []).append(covered)
    return Fingerprints(spans)
