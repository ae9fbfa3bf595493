"""Instructor commands: grade a folder of submissions, the gradebook, re-render reports."""
