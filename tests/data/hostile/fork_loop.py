# Hostile (bounded): forks up to `n` sleeping children. Expected: stopped by the pids limit; none survive.
import os
import time


def fork_many(n=200, sleep_s=120):
    made = 0
    for _ in range(n):
        try:
            pid = os.fork()
        except OSError:
            break
        if pid == 0:
            time.sleep(sleep_s)
            os._exit(0)
        made += 1
    return made
