"""Student exceptions -> concept: many classic mistakes announce themselves in PyTorch's errors."""

from __future__ import annotations

# (substring of "Type: message", concept), first match wins.
_PATTERNS: tuple[tuple[str, str], ...] = (
    ("without overflow", "dtype-overflow"),
    ("value cannot be converted to type", "dtype-overflow"),
    ("to have the same dtype", "dtype-overflow"),
    ("expected scalar type", "dtype-overflow"),
    ("expected m1 and m2", "dtype-overflow"),
    ("is not on the expected device", "device-placement"),
    ("expected all tensors to be on the same device", "device-placement"),
    ("on device meta", "device-placement"),
    ("unexpected keyword argument", "signature"),
    ("required positional argument", "signature"),
    ("positional argument but", "signature"),
    ("positional arguments but", "signature"),
    ("is not callable", "signature"),
    ("has no attribute", "signature"),
)


def concept_of_exception(exc_type: str, message: str, default: str,
                         case_patterns: dict[str, str] | None = None) -> str:
    """The concept an exception points to: the case's own patterns first, then PyTorch's well-known errors."""
    text = f"{exc_type}: {message}".lower()
    for needle, concept in list((case_patterns or {}).items()) + list(_PATTERNS):
        if needle.lower() in text:
            return concept
    return default
