#!/usr/bin/env python3
"""dcp_ranks.py: multi-node checkpoints for the remote tests (issue 29).

One process per rank saves into its own node's mount; a single process
checks what the union of the nodes' trees shows.

  save  --mode dcp|deepspeed --dir DIR --steps 1,2,3 [--scale K] [--interval S]
        one process per rank, env RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT
        (gloo). Rank r writes into its own DIR (its node's mount).
        dcp: torch.distributed.checkpoint.save to DIR/step-N: rank r's
          tensors (keys named after r, and its shard of a DTensor) go to its
          __r_0.distcp, rank 0 writes .metadata last, after every rank.
        deepspeed: torch.save into DIR/global_stepN/ of
          mp_rank_00_model_states.pt (rank 0) and
          zero_pp_rank_r_mp_rank_00_optim_states.pt (each rank); after a
          barrier rank 0 writes DIR/latest ("global_stepN").
  check (or load) --mode M --dir UNION --steps 1,2,3 [--world 2] [--scale K]
        load each step from the union dir in one process (dcp: resharded to
        one rank) and compare every tensor, exactly, with the values the
        ranks saved. deepspeed: latest must name the last step.
  watch --mode M --dir UNION --steps 1,2,3 [--world 2] [--timeout S]
        poll a --follow mount; as soon as a step's .metadata (dcp) or
        latest (deepspeed) shows it, load and verify it, and print a JSON line
        {"step": N, ...}. Stops once every step (dcp) or the last step
        (deepspeed) is verified.

A step written NxK (e.g. --steps 1,2x8) is saved, checked and watched at
--scale K: tensors K times bigger. Any mismatch or load error exits
non-zero, saying what.
"""
import argparse
import json
import os
import sys
import time
import warnings
import zlib

import torch

# A load in one process is the point here, not a mistake.
warnings.filterwarnings("ignore", message="torch.distributed is disabled")

ROWS = 128  # rows of a rank's tensors, times --scale
COLS = 1024


def values(name, step, shape):
    """The tensor `name` holds at `step`: a fixed random base (seeded by the
    name) plus a small drift that grows with the step, so that consecutive
    steps differ in their low bits only, as training steps do."""
    g = torch.Generator().manual_seed(zlib.crc32(name.encode()))
    base = torch.randn(shape, generator=g, dtype=torch.float32) * 0.05
    n = base.numel()
    drift = torch.sin(torch.arange(n, dtype=torch.float32) * 0.01).reshape(shape)
    return base + drift * (step * 1e-4)


def rank_model(step, rank, scale):
    """Rank r's own model tensors: keys no other rank has."""
    rows = ROWS * scale
    return {
        "rank%d.w" % rank: values("rank%d.w" % rank, step, (rows, COLS)),
        "rank%d.b" % rank: values("rank%d.b" % rank, step, (COLS,)),
    }


def rank_optim(step, rank, scale):
    """Adam-like moments of rank r's weight; exp_avg_sq stays positive."""
    rows = ROWS * scale
    w = "rank%d.w" % rank
    return {
        w + ".exp_avg": values(w + ".exp_avg", step, (rows, COLS)) * 0.1,
        w + ".exp_avg_sq": values(w + ".exp_avg_sq", step, (rows, COLS)).abs() * 1e-3,
    }


def emb_shape(world, scale):
    """A tensor every rank holds a block of rows of."""
    return (ROWS // 2 * scale * world, 512)


def expected_dcp(step, world, scale):
    """The whole DCP state as one rank loads it."""
    model, optim = {}, {}
    for r in range(world):
        model.update(rank_model(step, r, scale))
        optim.update(rank_optim(step, r, scale))
    model["emb"] = values("emb", step, emb_shape(world, scale))
    return {"model": model, "optim": optim, "step": step}


# ---- save ------------------------------------------------------------------


def dtensor_api():
    try:
        from torch.distributed.device_mesh import init_device_mesh
        from torch.distributed.tensor import Shard, distribute_tensor
    except ImportError:  # torch < 2.4
        from torch.distributed._tensor import Shard, distribute_tensor
        from torch.distributed._tensor.device_mesh import init_device_mesh
    return init_device_mesh, Shard, distribute_tensor


def save(a):
    import torch.distributed as dist

    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    dist.init_process_group("gloo", init_method="env://", rank=rank, world_size=world)
    try:
        if a.mode == "dcp":
            save_dcp(a, dist, rank, world)
        else:
            save_deepspeed(a, dist, rank, world)
        dist.barrier()
    finally:
        dist.destroy_process_group()


def save_dcp(a, dist, rank, world):
    import torch.distributed.checkpoint as dcp

    init_device_mesh, Shard, distribute_tensor = dtensor_api()
    mesh = init_device_mesh("cpu", (world,))
    for i, step in enumerate(a.steps):
        if i and a.interval:
            time.sleep(a.interval)
        model = rank_model(step, rank, a.scale[step])
        # A tensor sharded by rows across the ranks (FSDP-like): the
        # reader reassembles it from every rank's file.
        full = values("emb", step, emb_shape(world, a.scale[step]))
        model["emb"] = distribute_tensor(full, mesh, [Shard(0)])
        sd = {"model": model, "optim": rank_optim(step, rank, a.scale[step]), "step": step}
        dcp.save(sd, checkpoint_id=os.path.join(a.dir, "step-%d" % step))
        log("rank %d saved step-%d into %s" % (rank, step, a.dir))


def deepspeed_files(step, world, scale):
    """{relative path: object} of one DeepSpeed-style step, and the rank that
    writes each file."""
    tag = "global_step%d" % step
    files = {}
    model = {}
    for r in range(world):
        model.update(rank_model(step, r, scale))
    files[tag + "/mp_rank_00_model_states.pt"] = (0, {
        "module": model, "global_steps": step, "dp_world_size": world})
    for r in range(world):
        name = "%s/zero_pp_rank_%d_mp_rank_00_optim_states.pt" % (tag, r)
        files[name] = (r, {"optimizer_state_dict": rank_optim(step, r, scale),
                           "partition": r, "global_steps": step})
    return files


def save_deepspeed(a, dist, rank, world):
    for i, step in enumerate(a.steps):
        if i and a.interval:
            time.sleep(a.interval)
        for rel, (owner, obj) in deepspeed_files(step, world, a.scale[step]).items():
            if owner == rank:
                path = os.path.join(a.dir, rel)
                os.makedirs(os.path.dirname(path), exist_ok=True)
                torch.save(obj, path)
        dist.barrier()  # every rank's files are closed
        if rank == 0:
            with open(os.path.join(a.dir, "latest"), "w") as f:
                f.write("global_step%d" % step)
        log("rank %d saved global_step%d into %s" % (rank, step, a.dir))


# ---- check -----------------------------------------------------------------


class Mismatch(Exception):
    pass


def compare(where, got, want):
    """Exact comparison of nested dicts of tensors and plain values."""
    if isinstance(want, dict):
        if not isinstance(got, dict):
            raise Mismatch("%s: a %s, want a dict" % (where, type(got).__name__))
        if set(got) != set(want):
            raise Mismatch("%s: keys %s, want %s" % (where, sorted(got), sorted(want)))
        for k in want:
            compare("%s.%s" % (where, k), got[k], want[k])
    elif isinstance(want, torch.Tensor):
        if not isinstance(got, torch.Tensor):
            raise Mismatch("%s: a %s, want a tensor" % (where, type(got).__name__))
        if got.shape != want.shape or got.dtype != want.dtype:
            raise Mismatch("%s: %s %s, want %s %s" % (where, got.dtype, tuple(got.shape), want.dtype, tuple(want.shape)))
        if not torch.equal(got, want):
            bad = (got != want).nonzero()
            raise Mismatch("%s: %d of %d values differ, first at %s: %r, want %r" % (
                where, len(bad), want.numel(), tuple(bad[0].tolist()),
                got[tuple(bad[0])].item(), want[tuple(bad[0])].item()))
    elif got != want:
        raise Mismatch("%s: %r, want %r" % (where, got, want))


def check_dcp_step(union, step, world, scale):
    import torch.distributed.checkpoint as dcp

    d = os.path.join(union, "step-%d" % step)
    want = expected_dcp(step, world, scale)
    # Load into zeros of the right shapes: every value must come from the files.
    sd = {
        "model": {k: torch.zeros_like(v) for k, v in want["model"].items()},
        "optim": {k: torch.zeros_like(v) for k, v in want["optim"].items()},
        "step": -1,
    }
    meta = dcp.FileSystemReader(d).read_metadata()
    files = sorted({s.relative_path for s in meta.storage_data.values()})
    shards = ["__%d_0.distcp" % r for r in range(world)]
    if files != shards:
        raise Mismatch("step-%d/.metadata names %s, want the shards of %d ranks %s" % (step, files, world, shards))
    dcp.load(sd, checkpoint_id=d, no_dist=True)
    compare("step-%d" % step, sd, want)
    return files


def check_deepspeed_step(union, step, world, scale):
    files = deepspeed_files(step, world, scale)
    for rel, (_, want) in files.items():
        got = torch.load(os.path.join(union, rel), weights_only=True)
        compare(rel, got, want)
    return sorted(files)


def load_errors():
    # dcp's CheckpointException is a BaseException, not an Exception.
    from torch.distributed.checkpoint.api import CheckpointException
    return (Exception, CheckpointException)


LOAD_ERRORS = load_errors()


def check_step(a, step):
    if a.mode == "dcp":
        return check_dcp_step(a.dir, step, a.world, a.scale[step])
    return check_deepspeed_step(a.dir, step, a.world, a.scale[step])


def read_latest(union):
    try:
        with open(os.path.join(union, "latest")) as f:
            return f.read()
    except FileNotFoundError:
        return None


def check(a):
    for step in a.steps:
        try:
            files = check_step(a, step)
        except LOAD_ERRORS as e:
            fail("step %d in %s: %s" % (step, a.dir, brief(e)))
        print(json.dumps({"step": step, "files": files}), flush=True)
    if a.mode == "deepspeed":
        latest = read_latest(a.dir)
        if latest != "global_step%d" % a.steps[-1]:
            fail("%s/latest is %r, want %r" % (a.dir, latest, "global_step%d" % a.steps[-1]))


# ---- watch -----------------------------------------------------------------


def visible_steps(a):
    """The steps the follower shows as complete: those whose .metadata
    exists (dcp), or the one latest names (deepspeed)."""
    if a.mode == "dcp":
        try:
            names = os.listdir(a.dir)
        except FileNotFoundError:
            return []
        out = []
        for n in names:
            if n.startswith("step-") and n[5:].isdigit():
                if os.path.exists(os.path.join(a.dir, n, ".metadata")):
                    out.append(int(n[5:]))
        return sorted(out)
    latest = read_latest(a.dir)
    if latest is None:
        return []
    if not latest.startswith("global_step") or not latest[11:].isdigit():
        fail("%s/latest shows %r: a partial or foreign write" % (a.dir, latest))
    return [int(latest[11:])]


def watch(a):
    start = time.monotonic()
    want = set(a.steps)
    done = set()
    polls = 0
    while True:
        polls += 1
        for step in visible_steps(a):
            if step in done:
                continue
            if step not in want:
                fail("the follower shows step %d, which no rank saved (saved: %s)" % (step, a.steps))
            t = time.monotonic()
            # From the writer's close of the file that completes the step
            # (its mtime) to the follower showing it: one clock on one host.
            marker = os.path.join(a.dir, "step-%d" % step, ".metadata") if a.mode == "dcp" else os.path.join(a.dir, "latest")
            try:
                lag = round(time.time() - os.stat(marker).st_mtime, 3)
            except OSError:
                lag = None
            try:
                files = check_step(a, step)
            except LOAD_ERRORS as e:
                fail("step %d became visible in %s but is not whole: %s" % (step, a.dir, brief(e)))
            done.add(step)
            print(json.dumps({"step": step, "files": files, "seen_at": round(t - start, 3), "lag_s": lag,
                              "verify_seconds": round(time.monotonic() - t, 3)}), flush=True)
        finished = done == want if a.mode == "dcp" else a.steps[-1] in done
        if finished:
            log("watch: verified steps %s after %d polls" % (sorted(done), polls))
            return
        if time.monotonic() - start > a.timeout:
            fail("watch: after %.0fs the follower showed steps %s, want %s" % (
                a.timeout, sorted(done), sorted(want) if a.mode == "dcp" else a.steps[-1]))
        time.sleep(a.poll)


# ---- main ------------------------------------------------------------------


def brief(e):
    """An exception in one line: dcp's CheckpointException carries every
    rank's traceback, whose last line is the cause."""
    lines = [l for l in str(e).splitlines() if l.strip()]
    return "%s: %s" % (type(e).__name__, lines[-1] if lines else "")


def log(msg):
    print(msg, file=sys.stderr, flush=True)


def fail(msg):
    print("dcp_ranks.py: FAIL: " + msg, file=sys.stderr, flush=True)
    sys.exit(1)


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("command", choices=["save", "check", "load", "watch"])
    p.add_argument("--mode", choices=["dcp", "deepspeed"], default="dcp")
    p.add_argument("--dir", required=True, help="save: this rank's mount; check, watch: the union mount")
    p.add_argument("--steps", required=True, help="comma-separated step numbers, e.g. 1,2,3; 2x8: step 2 at --scale 8")
    p.add_argument("--world", type=int, default=2, help="check, watch: how many ranks saved")
    p.add_argument("--scale", type=int, default=1, help="tensor rows, in units of %d (1: ~1.5 MB a rank a step)" % ROWS)
    p.add_argument("--interval", type=float, default=0.0, help="save: seconds between steps")
    p.add_argument("--timeout", type=float, default=120.0, help="watch: give up after this many seconds")
    p.add_argument("--poll", type=float, default=0.05, help="watch: seconds between polls")
    a = p.parse_args()
    # "2x8": step 2 at --scale 8.
    steps = [s.partition("x") for s in a.steps.split(",")]
    a.steps = [int(n) for n, _, _ in steps]
    a.scale = {int(n): int(k) if k else a.scale for n, _, k in steps}
    if a.command == "save":
        save(a)
    elif a.command == "watch":
        watch(a)
    else:
        check(a)


if __name__ == "__main__":
    main()
