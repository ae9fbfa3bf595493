# Hostile: a segfault and an output flood mid-grading.
import ctypes


def segfault():
    return ctypes.string_at(0)


def flood():
    while True:
        print("x" * 1000)
