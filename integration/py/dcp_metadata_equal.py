#!/usr/bin/env python3
"""Exit 0 if two torch.distributed.checkpoint .metadata files describe the
same checkpoint: equal in every field except storage_meta.save_id, a random
UUID that dcp.save draws anew on every save (so the bytes of two identical
saves differ). Exit 1, saying what differs, otherwise."""
import pickle
import sys


def load(p):
    with open(p, "rb") as f:
        m = pickle.load(f)
    if getattr(m, "storage_meta", None) is not None:
        m.storage_meta.save_id = None
    return m


a, b = load(sys.argv[1]), load(sys.argv[2])
diff = [f for f in vars(a) if getattr(a, f) != getattr(b, f)]
if diff or type(a) is not type(b):
    print("dcp metadata differ in %s" % (diff or "type"), file=sys.stderr)
    sys.exit(1)
