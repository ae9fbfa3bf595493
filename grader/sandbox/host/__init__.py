"""What runs in the grader: the `Sandbox`, starting the zygote, and starting, talking to and
killing each submission's worker. Nothing here runs student code.

Torch-free on import (``grader.sandbox.host.zygote`` must start the zygote before ``import torch``).
"""
