"""What runs in the worker's processes: the warm zygote (``zygote.py``), the supervisor that forks
and watches each worker (``supervisor.py``) and the server that runs the student's code and
answers the grader's requests (``server.py``).

Imported there before the jail hides the grader's files; never imports the grader's other parts.
"""
