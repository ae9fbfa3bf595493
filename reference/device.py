"""Device helpers live with the grader (``grader.device``), which a student install carries
without this package. Re-exported for existing imports."""

from grader.device import exact_float32, resolve_device  # noqa: F401
