#!/usr/bin/env python3
"""Check the bfloat16 view of a checkpoint series (ckptfs issue 51).

  view_check.py check VIEWDIR EXPECT   every file of VIEWDIR (a series that
                                       tier_check.py write made, read under
                                       .ckptfs/view/bf16/) loads with
                                       torch.load, torch.load(mmap=True) and
                                       safetensors' safe_open; each float32
                                       tensor is its exact value (EXPECT)
                                       with the low 16 bits of every value
                                       zeroed; the other values are exact.
  view_check.py save DIR N             N checkpoints of bench_torchio.py's
                                       training (119 MiB each: weights and
                                       both Adam moments), DIR/ckpt-K.pt
  view_check.py raw DIR SET N          the float32 tensors of DIR/ckpt-K.pt
                                       (K < N, as save wrote them), each
                                       file's concatenated in order, as
                                       SET/ckpt-00000K.fp32.raw: a series
                                       the encode package's codec benchmark
                                       reads (CKPTFS_SERIES, CKPTFS_BENCH_SETS)
  view_check.py compare REPS NAME PLAIN MNT STORE [MNT STORE]...
                                       the exact file NAME and its view in
                                       each mount (its store given), and
                                       PLAIN, a copy on the plain disk, all
                                       cold, in rotating order: medians, and
                                       each over the first mount's exact
  view_check.py time EXACT VIEW REPS MOUNT STORE
                                       read each file whole, cold (the
                                       mount's caches and the page cache
                                       dropped first), alternating, in 1 MiB
                                       reads and with torch.load; prints
                                       the medians in seconds.
"""
import os
import statistics
import sys
import time

import torch
from safetensors import safe_open


def cut(t):
    """t with the low 16 bits of every float32 value zeroed."""
    return (t.contiguous().view(torch.int32) & -65536).view(torch.float32)


def same(a, b):
    return a.dtype == b.dtype and a.shape == b.shape and torch.equal(a, b)


def check(d, expect_path):
    expect = torch.load(expect_path)
    names = sorted(os.listdir(d))
    if not names:
        sys.exit("%s: empty" % d)
    for name in names:
        p = os.path.join(d, name)
        i = int(name.split("-")[1].split(".")[0])
        want = {k: cut(v) for k, v in expect[i].items()}
        if name.endswith(".pt"):
            want["optimizer.exp_avg"] = cut(expect[i]["layer.1.weight"] * 0.1)
            for mmap in (False, True):
                got = torch.load(p, mmap=mmap)
                tensors = dict(got["model"])
                tensors["optimizer.exp_avg"] = got["optimizer"]["exp_avg"]
                if got["step"] != i or got["optimizer"]["lr"] != 1e-3:
                    sys.exit("%s: non-tensor values changed" % name)
                for k in want:
                    if not same(tensors[k], want[k]):
                        sys.exit("%s (mmap=%s): %s is not its exact value cut to bfloat16" % (name, mmap, k))
        else:
            with safe_open(p, framework="pt") as f:
                keys = sorted(f.keys())
                if keys != sorted(want):
                    sys.exit("%s: tensors %s" % (name, keys))
                for k in keys:
                    if not same(f.get_tensor(k), want[k]):
                        sys.exit("%s: %s is not its exact value cut to bfloat16" % (name, k))
    print(len(names))


def raw(d, out, n):
    os.makedirs(out, exist_ok=True)
    for k in range(n):
        parts = []

        def walk(o):
            if torch.is_tensor(o):
                if o.dtype == torch.float32:
                    parts.append(o.contiguous().view(-1))
            elif isinstance(o, dict):
                for v in o.values():
                    walk(v)
            elif isinstance(o, (list, tuple)):
                for v in o:
                    walk(v)

        walk(torch.load(os.path.join(d, "ckpt-%d.pt" % k)))
        torch.cat(parts).numpy().tofile(os.path.join(out, "ckpt-%06d.fp32.raw" % k))
    open(os.path.join(out, ".done"), "w").close()


def save(d, n):
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from bench_torchio import training
    model, opt, train = training(40000, 256, 512)
    for k in range(n):
        train(5)
        torch.save({"model": model.state_dict(), "optimizer": opt.state_dict(), "step": k},
                   os.path.join(d, "ckpt-%d.pt" % k))


def cold(path, mount, store, how):
    """Seconds to read path cold: the daemon's rebuilt chunks, and the
    pages of the file and of every file of the store (the simulated
    device, staging files), dropped first."""
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from bench_torchio import drop_daemon_caches, evict, evict_tree
    if os.sep + os.path.join(".ckptfs", "view") + os.sep in path:
        evict(path)  # the kernel keeps a view file's pages across opens
    drop_daemon_caches(mount)
    evict_tree(store)
    start = time.perf_counter()  # a read copy is rebuilt at the open
    if how == "read":
        fd = os.open(path, os.O_RDONLY)
        try:
            while os.read(fd, 1 << 20):
                pass
        finally:
            os.close(fd)
    else:
        torch.load(path)
    return time.perf_counter() - start


def timing(exact, view, reps, mount, store):
    for how in ("read", "torch.load"):
        te, tv = [], []
        for r in range(reps):
            pair = [(exact, te), (view, tv)]
            for path, out in (pair if r % 2 == 0 else pair[::-1]):
                out.append(cold(path, mount, store, how))
        me, mv = statistics.median(te), statistics.median(tv)
        print("%-10s exact %.3f view %.3f view/exact %.3f" % (how, me, mv, mv / me))


def compare(reps, name, plain, mounts):
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from bench_torchio import evict
    cases = []
    for mnt, store in mounts:
        cases.append(("%s exact" % mnt, os.path.join(mnt, name), mnt, store))
        cases.append(("%s view" % mnt, os.path.join(mnt, ".ckptfs", "view", "bf16", name), mnt, store))

    def plain_read(how):
        evict(plain)
        start = time.perf_counter()
        if how == "read":
            with open(plain, "rb", buffering=0) as f:
                while f.read(1 << 20):
                    pass
        else:
            torch.load(plain)
        return time.perf_counter() - start

    for how in ("read", "torch.load"):
        t = {c[0]: [] for c in cases}
        t["plain"] = []
        for r in range(reps):
            for label, path, mnt, store in cases[r % len(cases):] + cases[:r % len(cases)]:
                t[label].append(cold(path, mnt, store, how))
            t["plain"].append(plain_read(how))
        base = statistics.median(t[cases[0][0]])
        for label, v in t.items():
            m = statistics.median(v)
            print("%-10s %-28s %.3f s  x%.2f  (%s)" % (how, label, m, m / base, " ".join("%.3f" % x for x in v)))


if __name__ == "__main__":
    if sys.argv[1] == "check":
        check(sys.argv[2], sys.argv[3])
    elif sys.argv[1] == "save":
        save(sys.argv[2], int(sys.argv[3]))
    elif sys.argv[1] == "raw":
        raw(sys.argv[2], sys.argv[3], int(sys.argv[4]))
    elif sys.argv[1] == "compare":
        a = sys.argv[5:]
        compare(int(sys.argv[2]), sys.argv[3], sys.argv[4], list(zip(a[0::2], a[1::2])))
    else:
        timing(sys.argv[2], sys.argv[3], int(sys.argv[4]), sys.argv[5], sys.argv[6])
