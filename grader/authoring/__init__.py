"""The instructor's tools around an assignment: `grader release` (the student kit, or with --gradescope the autograder.zip) and `grader validate`."""
