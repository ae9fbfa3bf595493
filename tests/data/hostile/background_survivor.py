# Hostile (bounded): a setsid grandchild that would outlive the worker, named `token` (its comm)
# so the test can look for it. Expected: killed with the worker.
import ctypes
import os
import time


def spawn(token, sleep_s=120):
    pid = os.fork()
    if pid == 0:
        os.setsid()
        if os.fork() == 0:
            libc = ctypes.CDLL(None)
            libc.prctl(15, token.encode()[:15], 0, 0, 0)  # PR_SET_NAME
            time.sleep(sleep_s)
        os._exit(0)
    os.waitpid(pid, 0)
    time.sleep(0.2)  # let the grandchild rename itself
    return True
