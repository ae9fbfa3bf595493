# Hostile: tries to write outside its directory, read the grader's files, and reach the network.
import socket


def write(path, text="pwned"):
    with open(path, "w") as f:
        f.write(text)
    return True


def read(path):
    with open(path) as f:
        return f.read()


def connect(port):
    s = socket.create_connection(("127.0.0.1", port), timeout=2)
    s.sendall(b"leak")
    s.close()
    return True


def whoami():
    import os
    return [os.getuid(), os.getcwd(), os.environ.get("HOME"), sorted(os.environ)]
