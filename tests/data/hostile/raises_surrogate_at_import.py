# Hostile: raises at import with a message holding a lone surrogate (a file name that is not UTF-8,
# decoded the way os.listdir does). Expected: a load-error result; the batch goes on, every export is written.
import os

raise RuntimeError("could not open " + os.fsdecode(b"notes_\xe9.txt"))
