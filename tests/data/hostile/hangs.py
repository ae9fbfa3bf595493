# Hostile: functions that never return. Expected: WorkerTimeout, worker dead, nothing left running.
import signal
import time


def spin():
    signal.signal(signal.SIGTERM, signal.SIG_IGN)  # ignoring polite signals must not help
    while True:
        pass


def sleep_forever():
    time.sleep(10**6)
