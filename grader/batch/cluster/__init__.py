"""Batch grading on a Dask cluster (`grader grade --cluster`): one task per submission.

    instructor (grader.batch.run)                          each Dask worker process
    ledger hits skipped before submitting              GraderPlugin.setup: the assignment's files
    payload = the submission's bytes, name, kind  -->    -> Sandbox (own warm zygote) + Engine (setups once)
                                                       grade_remote: bytes -> private temp dir -> load
    record each result once, by ledger key        <--    -> Engine.grade -> to_dict(report): plain JSON data

The workers grade exactly as a local run does (same Sandbox, limits and Engine); the instructor's
process stays the only writer of the ledger, gradebook, reports and exports. A worker that dies
costs nothing: Dask runs its task again elsewhere. A task that killed `allowed-failures + 1` workers
comes back as `KilledWorker` and is recorded as that submission's crash. `distributed` is optional
(the `cluster` extra) and imported only by these modules, and only with --cluster: the --cluster
value (`spec`), what travels to a worker and back (`payload`), the worker's side (`worker`), the
instructor's connection, the run's back-end (`backend`).
"""
