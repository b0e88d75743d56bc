#!/usr/bin/env python3
"""Compare cold reads of one store through two ckptfs binaries (A/B), beside
plain copies of the same files, and print each median.

  read_ab.py --store S --plain DIR --bin A --bin B [--rounds 3] OP:PATH ...

PATH is relative to the mount and to DIR (which holds plain copies of the
files). OP is read (1 MiB calls), load (torch.load), load_mmap
(torch.load(mmap=True), every tensor summed) or safe_open (every tensor read
and summed). Per round, each binary in turn mounts S, every OP:PATH is timed
cold through it and then on the plain copy (the file, and for the mount every
file of S, written back and dropped from the page cache), and it unmounts.
"""
import argparse
import os
import statistics
import subprocess
import sys
import time
from collections import defaultdict

import torch
from safetensors import safe_open

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_torchio import evict, evict_tree  # noqa: E402


def run(op, path):
    if op == "read":
        with open(path, "rb", buffering=0) as f:
            while f.read(1 << 20):
                pass
    elif op in ("load", "load_mmap"):
        sd = torch.load(path, mmap=op == "load_mmap", weights_only=False)
        if op == "load_mmap":
            for t in sd["model"].values():
                float(t.sum())
            for st in sd["optimizer"]["state"].values():
                for t in st.values():
                    if torch.is_tensor(t) and t.dim() > 0:
                        float(t.sum())
    elif op == "safe_open":
        with safe_open(path, framework="pt") as f:
            for k in f.keys():
                float(f.get_tensor(k).sum())
    else:
        raise SystemExit("unknown op %r" % op)


def timed(op, path, store=None):
    evict(path)
    if store:
        evict_tree(store)
    t0 = time.perf_counter()
    run(op, path)
    return time.perf_counter() - t0


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--store", required=True)
    p.add_argument("--plain", required=True)
    p.add_argument("--mnt", default="/tmp/read_ab_mnt")
    p.add_argument("--bin", action="append", required=True)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("reads", nargs="+")
    a = p.parse_args()
    os.makedirs(a.mnt, exist_ok=True)
    times = defaultdict(list)
    for _ in range(a.rounds):
        for b in a.bin:
            subprocess.run([b, "mount", "--store", a.store, a.mnt], check=True, stdout=subprocess.DEVNULL)
            try:
                for r in a.reads:
                    op, rel = r.split(":", 1)
                    times[(r, b)].append(timed(op, os.path.join(a.mnt, rel), a.store))
                    times[(r, "plain")].append(timed(op, os.path.join(a.plain, rel)))
            finally:
                subprocess.run([b, "umount", a.mnt], check=True)
    for r in a.reads:
        cells = ["%s %.2f" % (b, statistics.median(times[(r, b)])) for b in a.bin + ["plain"]]
        print("%-40s %s" % (r, "  ".join(cells)))


if __name__ == "__main__":
    main()
