# Hostile: raises at import with a message full of the words a timeout uses. Expected: load-error, not
# timeout (the engine classifies by the exception that ended loading, never by its text).
raise RuntimeError("took too long: ran out of time (time limit exceeded, timed out)")
