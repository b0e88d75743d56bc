#!/usr/bin/env python3
"""Check from_pretrained through a ckptfs mount: --saves save_pretrained
calls of a small GPT-2 that drifts between saves (so the mount codes them as
a chain), into MOUNT/checkpoint-K and PLAIN/checkpoint-K; then each is
loaded cold with from_pretrained (which maps model.safetensors) from both,
and every tensor compared. Prints one line per save; exits 1 on a mismatch.
Needs transformers and safetensors (the venv's Python).
"""
import argparse
import os
import sys
import time

import torch
from transformers import GPT2Config, GPT2LMHeadModel

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_torchio import drop_daemon_caches, evict, evict_tree  # noqa: E402


def main():
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--mount", required=True)
    p.add_argument("--store", required=True)
    p.add_argument("--plain", required=True)
    p.add_argument("--saves", type=int, default=4)
    a = p.parse_args()
    torch.manual_seed(0)
    model = GPT2LMHeadModel(GPT2Config(n_layer=4, n_embd=512, n_head=8, vocab_size=32000))
    for k in range(a.saves):
        with torch.no_grad():
            for t in model.parameters():
                t.add_(torch.randn_like(t) * 1e-4)
        for root in (a.mount, a.plain):
            model.save_pretrained(os.path.join(root, "checkpoint-%d" % k))
    ok = True
    for k in range(a.saves):
        d = os.path.join(a.mount, "checkpoint-%d" % k)
        for f in os.listdir(d):
            evict(os.path.join(d, f))
        evict_tree(a.store)
        drop_daemon_caches(a.mount)
        t0 = time.perf_counter()
        got = GPT2LMHeadModel.from_pretrained(d).state_dict()
        took = time.perf_counter() - t0
        want = GPT2LMHeadModel.from_pretrained(os.path.join(a.plain, "checkpoint-%d" % k)).state_dict()
        same = got.keys() == want.keys() and all(torch.equal(got[n], want[n]) for n in want)
        depth = os.getxattr(os.path.join(d, "model.safetensors"), "user.ckptfs.chain_depth").decode()
        print("checkpoint-%d: chain depth %s, from_pretrained %.2f s cold, identical %s" % (k, depth, took, same))
        ok = ok and same
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
