#!/usr/bin/env python3
"""make demo's part inside the mount, through the Python API (python/ckptfs):
mount, train with the Hugging Face Trainer and ckptfs's TrainerCallback
(a line per save in the training's log), verify every file against the same
training into a plain directory, print the report, unmount.

    demo_train.py --run DIR --plain DIR --store DIR -- TRAINER-ARGS...
"""
import argparse
import filecmp
import json
import os
import statistics
import subprocess
import sys
import time

import ckptfs


def step(text):
    print("\n== " + text, flush=True)


def without_ckptfs(state):
    """trainer_state.json without the figures the callback logged: the plain
    run, which had no mount to measure, logged none."""
    state = dict(state)
    history = []
    for entry in state.get("log_history", []):
        entry = {k: v for k, v in entry.items() if not k.startswith("ckptfs/")}
        if set(entry) - {"epoch", "step"}:
            history.append(entry)
    state["log_history"] = history
    return state


def verify(run, plain):
    import torch
    from safetensors.torch import load_file

    files = loaded = figures = 0
    for root, _, names in os.walk(plain):
        for name in sorted(names):
            q = os.path.join(root, name)
            p = os.path.join(run, os.path.relpath(q, plain))
            files += 1
            if name == "trainer_state.json":
                with open(p) as f, open(q) as g:
                    a, b = json.load(f), json.load(g)
                assert without_ckptfs(a) == without_ckptfs(b), "%s differs beyond the ckptfs figures" % p
                figures += any(k.startswith("ckptfs/") for e in a["log_history"] for k in e)
            elif not filecmp.cmp(p, q, shallow=False):
                raise SystemExit("demo: %s differs from the plain run's" % p)
            if name.endswith(".safetensors"):
                a, b = load_file(p), load_file(q)
                assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a), p
                loaded += 1
            elif name.endswith((".pt", ".pth", ".bin")):
                torch.load(p, weights_only=False)
                loaded += 1
    if not figures:
        raise SystemExit("demo: no trainer_state.json in the mount holds the callback's ckptfs figures")
    extra = sum(len(n) for _, _, n in os.walk(run)) - files
    if extra:
        raise SystemExit("demo: the mount holds %d files the plain run does not" % extra)
    print("all %d files identical to the plain run's (trainer_state.json apart from the ckptfs figures in its "
          "log history); loaded %d checkpoint files back (safetensors tensors equal)" % (files, loaded))


def evict(path):
    """Write back and drop a file's cached pages: the next read is cold."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    finally:
        os.close(fd)


def load_checkpoint(d):
    """Reads a Trainer checkpoint directory as a resume does: the weights
    (safetensors) and the optimizer, scheduler and RNG states (torch.load)."""
    import torch
    from safetensors.torch import load_file

    for name in sorted(os.listdir(d)):
        p = os.path.join(d, name)
        if name.endswith(".safetensors"):
            load_file(p)
        elif name.endswith((".pt", ".pth", ".bin")):
            torch.load(p, weights_only=False)


def restore(run, plain, store, reps=5):
    """Times the resume read of the newest checkpoint, cold, in the mount
    (mounted afresh: the daemon starts empty, as after a restart) and in the
    plain run, taking turns, and a second load at once (warm); prints the
    medians."""
    newest = max((d for d in os.listdir(plain) if d.startswith("checkpoint-")), key=lambda d: int(d.split("-")[1]))
    size = sum(os.path.getsize(os.path.join(plain, newest, n)) for n in os.listdir(os.path.join(plain, newest)))
    depths = []
    for n in sorted(os.listdir(os.path.join(run, newest))):
        try:
            depths.append(int(os.getxattr(os.path.join(run, newest, n), "user.ckptfs.chain_depth")))
        except OSError:
            pass
    times = {"ckptfs": [], "plain": []}
    again = {"ckptfs": [], "plain": []}
    for r in range(reps):
        for side in (["ckptfs", "plain"] if r % 2 == 0 else ["plain", "ckptfs"]):
            root = run if side == "ckptfs" else plain
            for n in os.listdir(os.path.join(root, newest)):
                evict(os.path.join(root, newest, n))
            if side == "ckptfs":
                for d, _, names in os.walk(store):
                    for n in names:
                        evict(os.path.join(d, n))
                with open(os.path.join(run, ".ckptfs", "drop_caches"), "w") as f:
                    f.write("1\n")
            t = time.perf_counter()
            load_checkpoint(os.path.join(root, newest))
            times[side].append(time.perf_counter() - t)
            t = time.perf_counter()
            load_checkpoint(os.path.join(root, newest))  # again at once: warm
            again[side].append(time.perf_counter() - t)
    m, p = statistics.median(times["ckptfs"]), statistics.median(times["plain"])
    print("restore of %s (%.1f MB, chain depth %s): ckptfs %.3f s, plain %.3f s: %.2fx plain (cold, medians of %d)"
          % (newest, size / 1e6, "/".join(map(str, depths)) or "?", m, p, m / p, reps))
    m, p = statistics.median(again["ckptfs"]), statistics.median(again["plain"])
    print("loaded again at once (warm; with FUSE passthrough, ckptfs serves it from read copies in the host's "
          "page cache): ckptfs %.3f s, plain %.3f s: %.2fx plain" % (m, p, m / p))


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--run", required=True)
    p.add_argument("--plain", required=True)
    p.add_argument("--store", required=True)
    p.add_argument("train", nargs=argparse.REMAINDER)
    a = p.parse_args()
    train = [x for x in a.train if x != "--"]

    step("mount ckptfs at %s through the Python API: ckptfs.mount(run, store=..., precondition=True, "
         "device_size=\"512MiB\") (a simulated SSD preconditioned to a worn-in state, so that saves cause erases "
         "once the page caches write them back: at the dirty expiry, fsync or unmount)"
         % a.run)
    with ckptfs.mount(a.run, store=a.store, precondition=True, device_size="512MiB") as m:
        print("mounted %s, ckptfs %s; saves reach the store through %s staging files (passthrough: the kernel "
              "serves them; daemon-written: without FUSE passthrough)" % (m.path, ckptfs.version(),
                                                                        m.stats()["save_mode"]))

        step("train: GPT-2 (4 layers, 256 wide, 3.2 M parameters), AdamW, 300 steps; the Hugging Face Trainer "
             "saves checkpoint-N/ every 50 steps and keeps the last 3; ckptfs.callbacks.TrainerCallback logs "
             "each save's figures through the Trainer (the 'ckptfs/...' entries) and a line per save")
        subprocess.run([sys.executable] + train + ["--out", m.path, "--ckptfs-callback"], check=True)
        for d in sorted(os.listdir(m.path)):
            print("%-20s %s" % (d, " ".join(sorted(os.listdir(os.path.join(m.path, d))))))

        step("verify: every file byte for byte against the plain run, then load every checkpoint back")
        verify(m.path, a.plain)

        step("report: what the simulated SSD wrote, against a plain filesystem (the shadow device)")
        sys.stdout.flush()
        subprocess.run([ckptfs.binary(), "stats", "--files", m.path], check=True)

        step("unmount (leaving the with block waits until every commit is saved)")
    print("unmounted %s" % a.run)

    step("report after the unmount, which wrote both page caches back (erases and lifetime)")
    sys.stdout.flush()
    subprocess.run([ckptfs.binary(), "stats", "--store", a.store], check=True)

    step("restore after a restart: mount the store again and read the newest checkpoint back as a resume "
         "does (model.safetensors, optimizer.pt, ...), cold, against the plain run's copy")
    with ckptfs.mount(a.run, store=a.store):
        restore(a.run, a.plain, a.store)
    print("unmounted %s" % a.run)


if __name__ == "__main__":
    main()
