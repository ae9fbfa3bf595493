"""Autograder for attention assignments: sandboxed student code, trusted reference, teaching feedback."""

__version__ = "0.2.0"
