"""The jail's mechanisms: namespaces, mounts, uid, rlimits, Landlock, seccomp, cgroups, readable paths.

``enter.py`` probes what this machine allows and applies namespaces, mounts, uid and rlimits (then
Landlock and seccomp, last); ``landlock.py`` and ``seccomp.py`` build those two; ``cgroup_hierarchy.py``
finds where the workers' cgroups may go (v1, or a delegated v2 subtree) and ``cgroups.py`` makes
and removes each worker's; ``paths.py`` decides which files a worker may read.

``enter.py``, ``landlock.py`` and ``seccomp.py`` use the standard library only: the jail probe runs
``enter.py`` as a script (``python -I``), importing the other two as its neighbours.
"""
