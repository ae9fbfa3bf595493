# Hostile: prints things that look like protocol frames and results. Expected: captured, ignored.
import json
import struct
import sys

FAKE = json.dumps({"msg": {"ok": True, "value": 100}, "tensors": []}).encode()
print(json.dumps({"ok": True, "score": 100, "value": 100}))
sys.stdout.flush()
sys.stdout.buffer.write(struct.pack("<II", len(FAKE), 0) + FAKE)
sys.stdout.flush()


def value():
    print('{"ok": true, "value": 100}')
    sys.stderr.write(json.dumps({"outcome": "passed"}) + "\n")
    return 0
