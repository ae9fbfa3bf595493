"""The command line: ``grader`` and its commands, one module per workflow.

``app`` declares the group and the author commands (list, validate) and registers the others:
``student`` (check, ci, release) and ``instructor`` (grade, report, gradebook). ``common`` holds
what they share (exit codes, which assignment, an engine with its sandbox). Command bodies parse,
call one function, echo and exit; grading lives in :mod:`grader.grading` and :mod:`grader.batch`.
"""
