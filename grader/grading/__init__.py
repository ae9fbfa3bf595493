"""Grading one submission: each case's setup, run in a sandboxed worker, judged, into a GradeReport."""
