#!/usr/bin/env python3
"""The resume probe: a training state saved a few times into a ckptfs mount
and a plain directory, then read back cold as a restarted job reads it.

  bench_resume.py save --mib 1024 --saves 4 DIR [DIR ...]
  bench_resume.py read --reps 5 --mount MNT --store STORE --plain DIR NAME

save: bench_save1g.py's training state (float32 weights, Adam's exp_avg and
exp_avg_sq, a master copy), --mib in all, saved --saves times into every
DIR as ckpt-N.pt with torch.save; before each save the state moves on by
one optimizer step, as between two checkpoints, and after it the previous
checkpoint is deleted (a Trainer's save_total_limit=1). It prints the newest name.

read: run it on a fresh mount of the store (the caller remounts it, so that
the daemon starts empty, as after a restart). Per repetition the mount and
the plain directory take turns, the order alternating; each timed read is
cold (the file, and for the mount every file of --store, written back and
dropped from the page cache; the daemon's read cache dropped):
  load   torch.load(weights_only=True)
  read   the file read in 1 MiB calls (cp's pattern, without a writer)
  again  the same read at once a second time: warm, from the page cache
It checks the two files byte for byte and prints the times as JSON.
"""
import argparse
import filecmp
import json
import os
import sys
import time

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_save1g import next_step, training_state  # noqa: E402
from bench_torchio import drop_daemon_caches, evict, evict_tree  # noqa: E402


def save(a):
    state = training_state(a.mib)
    name = None
    for i in range(a.saves):
        if i:
            next_step(state)
        prev, name = name, "ckpt-%d.pt" % i
        for d in a.dirs:
            torch.save(state, os.path.join(d, name))
            if prev:
                os.remove(os.path.join(d, prev))
    print(name)


def read_all(path):
    with open(path, "rb", buffering=0) as f:
        while f.read(1 << 20):
            pass


def read(a):
    sides = {"mount": os.path.join(a.mount, a.name), "plain": os.path.join(a.plain, a.name)}

    def cold(side):
        evict(sides[side])
        if side == "mount":
            evict_tree(a.store)
            drop_daemon_caches(a.mount)

    def timed(fn, *args):
        t = time.perf_counter()
        fn(*args)
        return time.perf_counter() - t

    times = {op: {s: [] for s in sides} for op in ("load", "read", "again")}
    for r in range(a.reps):
        order = ["mount", "plain"] if r % 2 == 0 else ["plain", "mount"]
        for side in order:
            cold(side)
            times["load"][side].append(timed(lambda p: torch.load(p, weights_only=True), sides[side]))
            cold(side)
            times["read"][side].append(timed(read_all, sides[side]))
            times["again"][side].append(timed(read_all, sides[side]))
        print("rep %d: %s" % (r, {op: {s: round(v[-1], 3) for s, v in t.items()} for op, t in times.items()}),
              file=sys.stderr, flush=True)
    identical = filecmp.cmp(sides["mount"], sides["plain"], shallow=False)
    json.dump({"bytes": os.path.getsize(sides["plain"]), "identical": identical, "times": times}, sys.stdout)
    print()


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="cmd", required=True)
    s = sub.add_parser("save")
    s.add_argument("--mib", type=int, default=1024)
    s.add_argument("--saves", type=int, default=4)
    s.add_argument("dirs", nargs="+")
    r = sub.add_parser("read")
    r.add_argument("--reps", type=int, default=5)
    r.add_argument("--mount", required=True)
    r.add_argument("--store", required=True)
    r.add_argument("--plain", required=True)
    r.add_argument("name")
    a = p.parse_args()
    save(a) if a.cmd == "save" else read(a)


if __name__ == "__main__":
    main()
