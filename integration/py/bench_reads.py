#!/usr/bin/env python3
"""Time cold reads of checkpoints out of a ckptfs mount beside a plain
directory on the same disk, and print the times as JSON.

The checkpoints are those of bench_torchio.py's training (a bag-of-words
classifier with Adam, 119 MiB per save with the defaults), saved --saves
times into both directories: as torch.save files (MOUNT/ckpt-N.pt) and as
safetensors files of the same tensors (MOUNT/st/model-N.safetensors), so
that the mount codes save k as a delta at the depth its policy gives it.
Every pair is checked byte for byte, and the deepest pair tensor by tensor
through mappings (torch.load(mmap=True), safe_open). Then, per repetition
(--reps), the order of mount and plain alternating, each read is cold (the file, and for
the mount every file of --store, written back and dropped from the page
cache) and timed on the deepest save (the last of those with the largest
chain depth; not the family's newest, which the store may keep decoded as
the next save's reference):
  load        torch.load
  load_mmap   torch.load(mmap=True), then every tensor summed (touches it)
  safe_open   safetensors.safe_open, every tensor read with get_tensor and
              summed (safetensors maps the file: summing touches it)
  cp_out      cp to --outdir (plain), then deleted
  verify      cp of the newest save out, as a script's verify step would
and, per save k (--depth-reps times), `cp` of ckpt-k.pt out: read time
against the chain depth of save k (read from the mount's xattrs).
Run it with a Python that has torch >= 2.1 and safetensors.
"""
import argparse
import filecmp
import json
import os
import subprocess
import sys
import time

import torch
from safetensors import safe_open
from safetensors.torch import save_file

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_torchio import drop_daemon_caches, evict, evict_tree, training  # noqa: E402


def flat(state):
    """The state's tensors as one flat dict, as save_file wants them."""
    out = {}
    for k, v in state["model"].items():
        out["model." + k] = v.contiguous()
    for pid, st in state["optimizer"]["state"].items():
        for k, v in st.items():
            if torch.is_tensor(v) and v.dim() > 0:
                out["opt.%s.%s" % (pid, k)] = v.contiguous()
    return out


def depth_of(path):
    try:
        return int(os.getxattr(path, "user.ckptfs.chain_depth").decode())
    except OSError:
        return -1


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--mount", required=True)
    p.add_argument("--store", required=True)
    p.add_argument("--plain", required=True)
    p.add_argument("--outdir", required=True)
    p.add_argument("--saves", type=int, default=6, help="saves per format (the last is the deepest)")
    p.add_argument("--reps", type=int, default=5)
    p.add_argument("--depth-reps", type=int, default=3)
    p.add_argument("--no-safetensors", action="store_true", help="save torch.save files only (skip safe_open)")
    p.add_argument("--ops", default="load,load_mmap,safe_open,cp_out,verify")
    p.add_argument("--vocab", type=int, default=40000)
    p.add_argument("--dim", type=int, default=256)
    p.add_argument("--hidden", type=int, default=512)
    p.add_argument("--steps-per-save", type=int, default=5)
    a = p.parse_args()

    model, opt, train = training(a.vocab, a.dim, a.hidden)

    for d in (a.plain, a.outdir, os.path.join(a.mount, "st"), os.path.join(a.plain, "st")):
        os.makedirs(d, exist_ok=True)
    names = []
    step = 0
    for _ in range(a.saves):
        train(a.steps_per_save)
        step += a.steps_per_save
        state = {"model": model.state_dict(), "optimizer": opt.state_dict(), "step": step}
        names.append(step)
        for root in (a.mount, a.plain):
            torch.save(state, os.path.join(root, "ckpt-%06d.pt" % step))
            if not a.no_safetensors:
                save_file(flat(state), os.path.join(root, "st", "model-%06d.safetensors" % step))
    pt = lambda root, s: os.path.join(root, "ckpt-%06d.pt" % s)  # noqa: E731
    st = lambda root, s: os.path.join(root, "st", "model-%06d.safetensors" % s)  # noqa: E731
    kinds = (pt,) if a.no_safetensors else (pt, st)
    identical = all(filecmp.cmp(f(a.mount, s), f(a.plain, s), shallow=False) for s in names for f in kinds)
    print("saves done, identical=%s" % identical, file=sys.stderr, flush=True)

    def cold(side, path):
        evict(path)
        if side == "mount":
            evict_tree(a.store)
            drop_daemon_caches(a.mount)

    def pair(r):
        both = [("mount", a.mount), ("plain", a.plain)]
        return both if r % 2 == 0 else both[::-1]

    depths = [depth_of(pt(a.mount, s)) for s in names]
    deep = [s for s, d in zip(names, depths) if d == max(depths)][-1]
    sdepths = [0 if a.no_safetensors else depth_of(st(a.mount, s)) for s in names]
    sdeep = [s for s, d in zip(names, sdepths) if d == max(sdepths)][-1]

    def do(op, root, side):
        last = deep
        if op == "load":
            torch.load(pt(root, last), weights_only=False)
        elif op == "load_mmap":
            sd = torch.load(pt(root, last), mmap=True, weights_only=False)
            sum(float(t.sum()) for t in list(sd["model"].values()))
            for s in sd["optimizer"]["state"].values():
                sum(float(t.sum()) for t in s.values() if torch.is_tensor(t) and t.dim() > 0)
        elif op == "safe_open":
            with safe_open(st(root, sdeep), framework="pt") as f:
                for k in f.keys():
                    float(f.get_tensor(k).sum())
        elif op in ("cp_out", "verify"):
            dst = os.path.join(a.outdir, side + ".pt")
            subprocess.run(["cp", pt(root, names[-1] if op == "verify" else last), dst], check=True)
            os.remove(dst)

    def mmap_identical():
        """Every tensor read through mappings of the mount (cold) equals the
        plain file's: safe_open, and torch.load(mmap=True)."""
        for side in ("mount", "plain"):
            cold(side, pt(a.mount if side == "mount" else a.plain, deep))
        m = torch.load(pt(a.mount, deep), mmap=True, weights_only=False)
        p = torch.load(pt(a.plain, deep), mmap=True, weights_only=False)
        same = all(torch.equal(m["model"][k], p["model"][k]) for k in p["model"])
        for i, st_p in p["optimizer"]["state"].items():
            same = same and all(torch.equal(m["optimizer"]["state"][i][k], v) for k, v in st_p.items() if torch.is_tensor(v))
        if a.no_safetensors:
            return same
        cold("mount", st(a.mount, sdeep))
        with safe_open(st(a.mount, sdeep), framework="pt") as fm, safe_open(st(a.plain, sdeep), framework="pt") as fp:
            same = same and sorted(fm.keys()) == sorted(fp.keys())
            same = same and all(torch.equal(fm.get_tensor(k), fp.get_tensor(k)) for k in fp.keys())
        return same

    identical = identical and mmap_identical()
    ops = [op for op in a.ops.split(",") if op]
    times = {op: {"mount": [], "plain": []} for op in ops}
    for r in range(a.reps):
        for op in ops:
            for side, root in pair(r):
                cold(side, st(root, sdeep) if op == "safe_open" else pt(root, names[-1] if op == "verify" else deep))
                t0 = time.perf_counter()
                do(op, root, side)
                times[op][side].append(time.perf_counter() - t0)
        print("rep %d done" % r, file=sys.stderr, flush=True)

    depth = []
    for s in names:
        row = {"save": s, "depth": depth_of(pt(a.mount, s)), "newest": s == names[-1], "mount": [], "plain": []}
        for r in range(a.depth_reps):
            for side, root in pair(r):
                cold(side, pt(root, s))
                dst = os.path.join(a.outdir, side + ".pt")
                t0 = time.perf_counter()
                subprocess.run(["cp", pt(root, s), dst], check=True)
                row[side].append(time.perf_counter() - t0)
                os.remove(dst)
        depth.append(row)
    json.dump({"checkpoint_bytes": os.path.getsize(pt(a.plain, deep)),
               "safetensors_bytes": 0 if a.no_safetensors else os.path.getsize(st(a.plain, sdeep)),
               "deepest": max(depths), "deepest_safetensors": max(sdepths),
               "newest_depth": depths[-1],
               "identical": identical, "times": times, "depth": depth}, sys.stdout)
    print()


if __name__ == "__main__":
    main()
