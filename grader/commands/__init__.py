"""Click commands, one module per workflow; each registers itself on ``grader.cli.main``."""
