"""What runs in the grader: the `Sandbox`, and starting, talking to and killing each worker.

Nothing here runs student code. Torch-free on import: ``grader.sandbox.host.zygote.prestart()``
starts the zygote before this process imports torch.
"""
