#!/usr/bin/env python3
"""Time torch.save, torch.load and cp into and out of a ckptfs mount beside a
plain directory on the same disk, alternately, and print the times as JSON.

The checkpoints come from a real training: a bag-of-words text classifier
(an EmbeddingBag of --vocab x --dim, two linear layers) trained with Adam on
token bags labelled by a fixed random teacher, --steps-per-save steps between
saves. Each save is {'model', 'optimizer', 'step'}: the weights and both Adam
moments, more than 100 MB with the defaults, and every value moves between
saves as in any Adam training.

Per repetition r (--reps, default 5), the order of mount and plain alternates
(mount first when r is even):
  save    torch.save of the same state to MOUNT/ckpt-N.pt and PLAIN/ckpt-N.pt
          (and, with --fuse, to FUSE/ckpt-N.pt, a FUSE mount that forwards
          every write through its daemon: the floor of any filesystem served
          that way; the three in turn, the order rotating), each repetition
          after the previous one's commits landed and sync(2) wrote it back
  save_rotated  --reps more saves like those, each side's previous file
          deleted just before (a training that keeps one checkpoint), with --fuse
After all saves, each pair is checked byte for byte, then per repetition:
  load    torch.load of each (both cold: the file, and for the mount every
          file of --store, are written back and dropped from the page cache,
          and the daemon's rebuilt chunks dropped: .ckptfs/drop_caches)
  cp_in   cp of PLAIN/ckpt-N.pt (cold) to MOUNT/cpin/ and to PLAIN2/cpin/
  cp_out  cp of each ckpt-N.pt (cold) to OUT/ (plain), then deleted
"""
import argparse
import filecmp
import json
import os
import subprocess
import sys
import time

import torch


def evict(path):
    """Write back and drop a file's cached pages, so the next read is cold."""
    fd = os.open(path, os.O_RDONLY)
    try:
        try:
            os.fsync(fd)
        except OSError:
            pass
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    finally:
        os.close(fd)


def drop_daemon_caches(mount):
    """Make the ckptfs daemon forget the chunks it rebuilt for reads, as
    dropping the page cache does the kernel's: a read timed next is cold
    in the daemon too (its reference tier, the newest save of each series,
    stays)."""
    with open(os.path.join(mount, ".ckptfs", "drop_caches"), "w") as f:
        f.write("1\n")


def evict_tree(root):
    for d, _, names in os.walk(root):
        for n in names:
            p = os.path.join(d, n)
            if os.path.isfile(p) and not os.path.islink(p):
                try:
                    evict(p)
                except OSError:
                    pass  # files the daemon replaces while we walk


class Model(torch.nn.Module):
    def __init__(self, vocab, dim, hidden, classes=10):
        super().__init__()
        self.emb = torch.nn.EmbeddingBag(vocab, dim, mode="mean")
        self.fc1 = torch.nn.Linear(dim, hidden)
        self.fc2 = torch.nn.Linear(hidden, classes)

    def forward(self, tokens):
        return self.fc2(torch.relu(self.fc1(self.emb(tokens))))


def training(vocab, dim, hidden):
    """The benchmark's model and Adam, seeded, and train(steps), which
    trains them on a synthetic task: every run saves the same series."""
    torch.manual_seed(0)
    torch.set_num_threads(1)
    model = Model(vocab, dim, hidden)
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    g = torch.Generator().manual_seed(1)
    teacher = torch.randn(vocab, 16, generator=g)
    head = torch.randn(16, 10, generator=g)
    loss_fn = torch.nn.CrossEntropyLoss()

    def train(steps):
        for _ in range(steps):
            tokens = torch.randint(0, vocab, (64, 32), generator=g)
            y = (teacher[tokens].mean(1) @ head).argmax(1)
            opt.zero_grad()
            loss_fn(model(tokens), y).backward()
            opt.step()

    return model, opt, train


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--mount", required=True)
    p.add_argument("--store", required=True, help="the mount's store directory (evicted before cold reads)")
    p.add_argument("--plain", required=True)
    p.add_argument("--plain2", required=True, help="second plain directory, the cp_in target beside the mount")
    p.add_argument("--outdir", required=True, help="plain directory cp_out copies to")
    p.add_argument("--fuse", help="a forwarding FUSE mount that saves are also timed into")
    p.add_argument("--reps", type=int, default=5)
    p.add_argument("--vocab", type=int, default=40000)
    p.add_argument("--dim", type=int, default=256)
    p.add_argument("--hidden", type=int, default=512)
    p.add_argument("--steps-per-save", type=int, default=5)
    a = p.parse_args()

    model, opt, train = training(a.vocab, a.dim, a.hidden)

    for d in (a.plain, a.plain2, a.outdir, os.path.join(a.mount, "cpin"), os.path.join(a.plain2, "cpin")):
        os.makedirs(d, exist_ok=True)
    times = {op: {"mount": [], "plain": []} for op in ("save", "load", "cp_in", "cp_out")}
    if a.fuse:
        times["save"]["fuse"] = []
    names = []

    def pair(r):
        both = [("mount", a.mount), ("plain", a.plain)]
        return both if r % 2 == 0 else both[::-1]

    step = 0
    def saves(r):
        if not a.fuse:
            return pair(r)
        three = [("mount", a.mount), ("plain", a.plain), ("fuse", a.fuse)]
        return three[r % 3:] + three[:r % 3]

    for r in range(a.reps):
        train(a.steps_per_save)
        step += a.steps_per_save
        state = {"model": model.state_dict(), "optimizer": opt.state_dict(), "step": step}
        name = "ckpt-%06d.pt" % step
        names.append(name)
        # Each save starts as a training's next one would, minutes later: the
        # previous ones committed (fsync of the mount's root waits for its
        # background commits) and written back to the disk.
        fd = os.open(a.mount, os.O_RDONLY)
        os.fsync(fd)
        os.close(fd)
        os.sync()
        for side, d in saves(r):
            t0 = time.perf_counter()
            torch.save(state, os.path.join(d, name))
            times["save"][side].append(time.perf_counter() - t0)
        print("save %d done" % r, file=sys.stderr, flush=True)

    # The same saves as a training that keeps one checkpoint: each side's
    # previous one is deleted just before the next, so that the plain
    # directory's page cache reuses the memory it has just freed.
    rotated_same = True
    if a.fuse:
        times["save_rotated"] = {"mount": [], "plain": [], "fuse": []}
        for d in (a.mount, a.plain, a.fuse):
            os.makedirs(os.path.join(d, "rot"), exist_ok=True)
        for r in range(a.reps):
            train(a.steps_per_save)
            step += a.steps_per_save
            state = {"model": model.state_dict(), "optimizer": opt.state_dict(), "step": step}
            fd = os.open(a.mount, os.O_RDONLY)
            os.fsync(fd)
            os.close(fd)
            os.sync()
            for side, d in saves(r):
                path = os.path.join(d, "rot", "ckpt.pt")
                if os.path.exists(path):
                    os.remove(path)
                t0 = time.perf_counter()
                torch.save(state, path)
                times["save_rotated"][side].append(time.perf_counter() - t0)
        rotated_same = all(filecmp.cmp(os.path.join(d, "rot", "ckpt.pt"), os.path.join(a.plain, "rot", "ckpt.pt"),
                                       shallow=False) for d in (a.mount, a.fuse))
        for d in (a.mount, a.plain, a.fuse):
            os.remove(os.path.join(d, "rot", "ckpt.pt"))
        print("rotated saves done", file=sys.stderr, flush=True)

    identical = rotated_same and all(
        filecmp.cmp(os.path.join(a.mount, n), os.path.join(a.plain, n), shallow=False) for n in names)
    if a.fuse:
        identical = identical and all(
            filecmp.cmp(os.path.join(a.fuse, n), os.path.join(a.plain, n), shallow=False) for n in names)
    size = os.path.getsize(os.path.join(a.plain, names[-1]))

    def cold(side, path):
        evict(path)
        if side == "mount":
            evict_tree(a.store)
            drop_daemon_caches(a.mount)

    for r, name in enumerate(names):
        for side, d in pair(r):
            path = os.path.join(d, name)
            cold(side, path)
            t0 = time.perf_counter()
            torch.load(path)
            times["load"][side].append(time.perf_counter() - t0)
        for side, d in pair(r):
            src = os.path.join(a.plain, name)
            dst = os.path.join(a.mount if side == "mount" else a.plain2, "cpin", name)
            evict(src)
            t0 = time.perf_counter()
            subprocess.run(["cp", src, dst], check=True)
            times["cp_in"][side].append(time.perf_counter() - t0)
        for side, d in pair(r):
            src = os.path.join(d, name)
            dst = os.path.join(a.outdir, side + "-" + name)
            cold(side, src)
            t0 = time.perf_counter()
            subprocess.run(["cp", src, dst], check=True)
            times["cp_out"][side].append(time.perf_counter() - t0)
            os.remove(dst)
        print("read %d done" % r, file=sys.stderr, flush=True)

    params = sum(t.numel() for t in model.parameters())
    json.dump({"checkpoint_bytes": size, "parameters": params, "steps_per_save": a.steps_per_save,
               "identical": identical, "times": times}, sys.stdout)
    print()


if __name__ == "__main__":
    main()
