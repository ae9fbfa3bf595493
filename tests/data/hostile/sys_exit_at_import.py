# Hostile: sys.exit(0) at import. Expected: recorded as a SystemExit unit error; answer() still works.
import sys


def answer():
    return 42


sys.exit(0)
