"""The jail's mechanisms: namespaces, mounts, uid and rlimits (``enter.py``, which also probes what
this machine allows), Landlock (``landlock.py``), the seccomp filter (``seccomp.py``), per-worker
cgroups (``cgroups.py``) and which files a worker may read (``paths.py``).

``enter.py``, ``landlock.py`` and ``seccomp.py`` use the standard library only: the jail probe runs
``enter.py`` as a script (``python -I``), importing the other two as its neighbours.
"""
