# Hostile: an infinite loop at import. Expected: load fails with WorkerTimeout (phase "loading").
def never_defined_in_time():
    return 1


while True:
    pass
