"""What runs in the worker's processes: the warm zygote, the supervisor, the server that runs student code.

``zygote.py`` forks each worker from a torch image that ``warmup.py`` warmed; ``supervisor.py``
forks and watches the worker; ``server.py`` runs the student's code and answers the grader's
requests. Imported there before the jail hides the grader's files; never imports the grader's
other parts.
"""
