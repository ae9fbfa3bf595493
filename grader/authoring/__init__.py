"""The instructor's tools around an assignment: `grader release` (the student kit) and `grader validate`."""
