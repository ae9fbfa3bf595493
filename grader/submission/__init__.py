"""Submissions as files: found on the command line, named, and loaded into code units (nothing executed)."""
