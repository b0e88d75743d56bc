#!/usr/bin/env python3
"""dcp_metadata_equal.py A1 B1 [A2 B2 ...]: exit 0 if each pair of
torch.distributed.checkpoint .metadata files describes the same checkpoint:
equal in every field except storage_meta.save_id, a random UUID that dcp.save
draws anew on every save (so the bytes of two identical saves differ). Exit 1,
saying which pairs differ and in what, otherwise."""
import pickle
import sys


def load(p):
    with open(p, "rb") as f:
        m = pickle.load(f)
    if getattr(m, "storage_meta", None) is not None:
        m.storage_meta.save_id = None
    return m


args = sys.argv[1:]
if not args or len(args) % 2:
    sys.exit("usage: dcp_metadata_equal.py A1 B1 [A2 B2 ...]")
bad = 0
for pa, pb in zip(args[::2], args[1::2]):
    a, b = load(pa), load(pb)
    diff = [f for f in vars(a) if getattr(a, f) != getattr(b, f)]
    if diff or type(a) is not type(b):
        print("%s and %s differ in %s" % (pa, pb, diff or "type"), file=sys.stderr)
        bad += 1
sys.exit(1 if bad else 0)
