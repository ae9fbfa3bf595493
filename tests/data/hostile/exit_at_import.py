# Hostile: leaves the process at import, hoping the grader reads "exit 0" as success.
import os


def answer():
    return 42


os._exit(0)
