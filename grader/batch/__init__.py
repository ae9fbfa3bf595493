"""The instructor's batch (`grader grade`): submissions graded in slots on this machine or on a Dask cluster, each result recorded as it comes, then the class's reports and summary."""
