#!/usr/bin/env python3
"""torch.save of a ~1 GiB training state into several directories side by
side, and the time until it is durable; the times as JSON on stdout.

The state is a model's float32 weights and the Adam state of a training
(exp_avg, exp_avg_sq, a master copy), --mib in all; between repetitions every
tensor moves a little, as between two checkpoints of a training.

  bench_save1g.py --reps 5 --pause 6 NAME=DIR [NAME=DIR ...]

Per repetition, the targets take turns, the order rotating. Before each
save the target's previous checkpoint is deleted, the directory is fsynced
(on a ckptfs mount that waits for its commits still in the background),
sync(2) runs, and the script sleeps --pause seconds. Then it times
torch.save(state, DIR/ckpt.pt) ("save") and that plus fsync of the file
("durable"). The pause stands for the minutes between a training's saves;
on a virtual machine it also lets the guest hand the memory it freed back
to the host (free page reporting waits 2 s), so that no target's save
reuses pages that another target's delete has just freed. --pause 0
measures saves that follow the delete at once. After the last repetition
every target's file is compared byte for byte with the first target's.
"""
import argparse
import filecmp
import json
import os
import sys
import time

import torch


def fsync(path):
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def training_state(mib):
    """A model's float32 weights and the Adam state of its training
    (exp_avg, exp_avg_sq, a master copy): four tensors, mib MiB in all,
    the same for a seed."""
    torch.manual_seed(0)
    n = (mib << 20) // 16  # four float32 tensors
    w = torch.randn(n) * 0.05
    return {"model": {"weight": w},
            "optimizer": {"exp_avg": torch.randn(n) * 1e-3, "exp_avg_sq": torch.rand(n) * 1e-6,
                          "master": w + 1e-4 * torch.randn(n)},
            "step": 0}


def next_step(state):
    """Moves state on to the next checkpoint: one more optimizer step's
    worth of change."""
    g = torch.randn(state["model"]["weight"].numel()) * 1e-3
    state["optimizer"]["exp_avg"].mul_(0.9).add_(g, alpha=0.1)
    state["optimizer"]["exp_avg_sq"].mul_(0.999).add_(g * g, alpha=0.001)
    state["optimizer"]["master"].sub_(state["optimizer"]["exp_avg"], alpha=1e-3)
    state["model"]["weight"].sub_(state["optimizer"]["exp_avg"], alpha=1e-3)
    state["step"] += 1


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--reps", type=int, default=5)
    p.add_argument("--pause", type=float, default=6.0)
    p.add_argument("--mib", type=int, default=1024)
    p.add_argument("targets", nargs="+", help="NAME=DIR")
    a = p.parse_args()
    targets = [t.split("=", 1) for t in a.targets]

    state = training_state(a.mib)
    times = {name: {"save": [], "durable": []} for name, _ in targets}
    for r in range(a.reps):
        k = r % len(targets)
        for name, d in targets[k:] + targets[:k]:
            path = os.path.join(d, "ckpt.pt")
            if os.path.exists(path):
                os.remove(path)
            fsync(d)
            os.sync()
            time.sleep(a.pause)
            t0 = time.perf_counter()
            torch.save(state, path)
            t1 = time.perf_counter()
            fsync(path)
            t2 = time.perf_counter()
            times[name]["save"].append(t1 - t0)
            times[name]["durable"].append(t2 - t0)
        print("repetition %d: %s" % (r, " ".join("%s %.2f s" % (nm, times[nm]["save"][-1]) for nm, _ in targets)),
              file=sys.stderr, flush=True)
        next_step(state)
    ref = os.path.join(targets[0][1], "ckpt.pt")
    identical = all(filecmp.cmp(os.path.join(d, "ckpt.pt"), ref, shallow=False) for _, d in targets[1:])
    size = os.path.getsize(ref)
    for _, d in targets:
        os.remove(os.path.join(d, "ckpt.pt"))
    json.dump({"checkpoint_bytes": size, "pause_s": a.pause, "identical": identical, "times": times}, sys.stdout)
    print()


if __name__ == "__main__":
    main()
