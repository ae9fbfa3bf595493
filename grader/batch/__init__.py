"""The instructor's batch (`grader grade`): slots on this machine or a Dask cluster, results recorded as they come."""
