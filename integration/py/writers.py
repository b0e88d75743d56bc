#!/usr/bin/env python3
"""Today's checkpoint writers, each run for real on a tiny model on the CPU.

One subcommand per writer. Each trains a tiny model deterministically (seeded,
one thread, synthetic data, models built from configs: nothing is
downloaded) and saves --saves consecutive checkpoints into --out, exactly as
the library does it:

  hf-trainer               transformers Trainer, fp32 + AdamW, save_steps,
                           save_total_limit=2 (the oldest checkpoint-N/ is
                           deleted), safetensors: checkpoint-N/{model.safetensors,
                           optimizer.pt, scheduler.pt, rng_state.pth, ...}
  save-pretrained-sharded  model.save_pretrained(OUT/step-N, max_shard_size
                           small enough for 3 shards): model-0000K-of-00003.safetensors
                           and model.safetensors.index.json
  torch-last               torch.save({model, optimizer, step}) to ckpt_N.pt and,
                           each time, to last.pt (the same name rewritten)
  lightning                ModelCheckpoint(every_n_train_steps, save_top_k=-1,
                           save_last=True): epoch=E-step=S.ckpt and last.ckpt
  dcp                      torch.distributed.checkpoint.save of {model, optim}
                           into step-N/, one process (__0_0.distcp, .metadata)
  dcp-2rank                the same from 2 processes (gloo on the CPU), the model
                           sharded with FSDP2 fully_shard: each rank writes its
                           own shard, __0_0.distcp and __1_0.distcp
  safetensors              safetensors.torch.save_file of bf16 weights,
                           model-stepN.safetensors

With --archive DIR, after each save the files that save created or rewrote
are read back from --out and copied to DIR/<save index>/<path below --out>,
and DIR/manifest.json lists, per save, those paths in the order they were
last written. A test can then compare every save, not only the files left at
the end, and replay the saves in order under their final names.

Prints one JSON line on stdout: writer, saves, save_seconds (time spent inside
the library's save calls, rotation included, archiving excluded), seconds.
"""
import argparse
import json
import os
import shutil
import sys
import time

import torch

STEPS_PER_SAVE = 5  # training steps between saves (--every)


def seed_all(seed=0):
    import random

    import numpy as np

    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)
    torch.set_num_threads(1)
    torch.use_deterministic_algorithms(True)


SIZE = {"n_layer": 2, "n_embd": 64}  # --layers, --width


def gpt2(n_layer=None, n_embd=None):
    from transformers import GPT2Config, GPT2LMHeadModel

    n_layer, n_embd = n_layer or SIZE["n_layer"], n_embd or SIZE["n_embd"]
    cfg = GPT2Config(n_layer=n_layer, n_embd=n_embd, n_head=2, vocab_size=256, n_positions=64,
                     resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0, bos_token_id=0, eos_token_id=0)
    torch.manual_seed(0)
    return GPT2LMHeadModel(cfg)


TEXT = (b"ckptfs stores each checkpoint as a delta against the previous one of its series. "
        b"The quick brown fox jumps over the lazy dog. 0123456789 ")


def token_batches(n, batch=8, seq=32, seed=1):
    """Deterministic synthetic byte-level text: windows of TEXT at seeded offsets."""
    data = torch.tensor(list(TEXT * 8), dtype=torch.long)
    g = torch.Generator().manual_seed(seed)
    out = []
    for _ in range(n):
        starts = torch.randint(0, len(data) - seq, (batch,), generator=g)
        out.append(torch.stack([data[s:s + seq] for s in starts.tolist()]))
    return out


class Archiver:
    """Copies, after each save, the files that save created or rewrote."""

    def __init__(self, out, archive):
        self.out, self.archive = out, archive
        self.prev = {}
        self.saves = []
        self.save_seconds = 0.0

    def snapshot(self):
        snap = {}
        for root, dirs, files in os.walk(self.out):
            dirs[:] = [d for d in dirs if not (root == self.out and d == ".ckptfs")]
            for f in files:
                p = os.path.join(root, f)
                st = os.stat(p)
                snap[os.path.relpath(p, self.out)] = (st.st_ino, st.st_size, st.st_mtime_ns)
        return snap

    def saved(self, seconds):
        """Called right after a save (rotation included) returned."""
        self.save_seconds += seconds
        now = self.snapshot()
        changed = sorted((k for k in now if self.prev.get(k) != now[k]), key=lambda k: (now[k][2], k))
        self.prev = now
        if not changed:
            raise SystemExit("writers.py: save %d changed no file below %s" % (len(self.saves) + 1, self.out))
        idx = len(self.saves) + 1
        if self.archive:
            for rel in changed:
                dst = os.path.join(self.archive, str(idx), rel)
                os.makedirs(os.path.dirname(dst), exist_ok=True)
                shutil.copyfile(os.path.join(self.out, rel), dst)
        self.saves.append({"index": idx, "files": changed, "seconds": seconds})

    def timed(self, fn, *args, **kw):
        t = time.perf_counter()
        r = fn(*args, **kw)
        self.saved(time.perf_counter() - t)
        return r

    def finish(self, writer, started):
        if self.archive:
            with open(os.path.join(self.archive, "manifest.json"), "w") as f:
                json.dump({"writer": writer, "saves": self.saves}, f, indent=1)
        print(json.dumps({"writer": writer, "saves": len(self.saves), "save_seconds": round(self.save_seconds, 3),
                          "seconds": round(time.perf_counter() - started, 3)}))


def train_steps(model, opt, batches):
    model.train()
    for ids in batches:
        loss = model(input_ids=ids, labels=ids).loss
        loss.backward()
        opt.step()
        opt.zero_grad()
    return loss.item()


# ---- writers ----

def hf_trainer(a, arc):
    from transformers import Trainer, TrainingArguments

    seed_all()
    model = gpt2()
    batches = token_batches(a.saves * STEPS_PER_SAVE, batch=1, seed=1)

    class DS(torch.utils.data.Dataset):
        def __len__(self):
            return len(batches)

        def __getitem__(self, i):
            return {"input_ids": batches[i][0], "labels": batches[i][0]}

    class ArchivingTrainer(Trainer):
        def _save_checkpoint(self, model, trial):
            arc.timed(super()._save_checkpoint, model, trial)

    args = TrainingArguments(output_dir=a.out, max_steps=a.saves * STEPS_PER_SAVE, per_device_train_batch_size=8,
                             learning_rate=1e-3, optim="adamw_torch", save_strategy="steps",
                             save_steps=STEPS_PER_SAVE, save_total_limit=a.keep,
                             logging_steps=STEPS_PER_SAVE, report_to="none",
                             use_cpu=not (a.gpu and torch.cuda.is_available()), seed=0, data_seed=0,
                             dataloader_num_workers=0, disable_tqdm=True)
    callbacks = []
    if a.ckptfs_callback:
        # The Python API's callback (python/ckptfs): each save's figures in
        # the Trainer's log, and a line per save on stdout.
        import logging

        from ckptfs.callbacks import TrainerCallback

        handler = logging.StreamHandler(sys.stdout)
        logging.getLogger("ckptfs").addHandler(handler)
        logging.getLogger("ckptfs").setLevel(logging.INFO)
        callbacks.append(TrainerCallback())
    # transformers 5 always saves safetensors (its save_safetensors argument is gone).
    ArchivingTrainer(model=model, args=args, train_dataset=DS(), callbacks=callbacks).train()


def save_pretrained_sharded(a, arc):
    seed_all()
    model = gpt2()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    batches = token_batches(a.saves * STEPS_PER_SAVE)
    for k in range(a.saves):
        train_steps(model, opt, batches[k * STEPS_PER_SAVE:(k + 1) * STEPS_PER_SAVE])
        step = (k + 1) * STEPS_PER_SAVE
        # ~480 KB of fp32 weights: 200KB shards make 3 files.
        arc.timed(model.save_pretrained, os.path.join(a.out, "step-%d" % step), max_shard_size="200KB")


def torch_last(a, arc):
    seed_all()
    model = gpt2()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    batches = token_batches(a.saves * STEPS_PER_SAVE)

    def save(step):
        state = {"model": model.state_dict(), "optimizer": opt.state_dict(), "step": step}
        torch.save(state, os.path.join(a.out, "ckpt_%04d.pt" % step))
        torch.save(state, os.path.join(a.out, "last.pt"))

    for k in range(a.saves):
        train_steps(model, opt, batches[k * STEPS_PER_SAVE:(k + 1) * STEPS_PER_SAVE])
        arc.timed(save, (k + 1) * STEPS_PER_SAVE)


def lightning_(a, arc):
    import lightning as L
    from lightning.pytorch.callbacks import ModelCheckpoint

    seed_all()
    L.seed_everything(0, verbose=False)
    batches = token_batches(a.saves * STEPS_PER_SAVE)

    class Module(L.LightningModule):
        def __init__(self):
            super().__init__()
            self.model = gpt2()

        def training_step(self, ids, i):
            return self.model(input_ids=ids, labels=ids).loss

        def configure_optimizers(self):
            return torch.optim.AdamW(self.parameters(), lr=1e-3)

    class ArchivingCheckpoint(ModelCheckpoint):
        def on_train_batch_end(self, trainer, *args, **kw):
            if self._should_skip_saving_checkpoint(trainer) or (trainer.global_step % STEPS_PER_SAVE) != 0:
                return super().on_train_batch_end(trainer, *args, **kw)
            arc.timed(super().on_train_batch_end, trainer, *args, **kw)

    ckpt = ArchivingCheckpoint(dirpath=a.out, every_n_train_steps=STEPS_PER_SAVE, save_top_k=-1, save_last=True)
    loader = torch.utils.data.DataLoader(batches, batch_size=None, shuffle=False)
    trainer = L.Trainer(max_steps=a.saves * STEPS_PER_SAVE, accelerator="cpu", devices=1, logger=False,
                        enable_progress_bar=False, enable_model_summary=False, callbacks=[ckpt],
                        default_root_dir=a.out, deterministic=True, num_sanity_val_steps=0)
    trainer.fit(Module(), loader)


def dcp_(a, arc):
    import torch.distributed.checkpoint as dcp
    from torch.distributed.checkpoint.state_dict import get_state_dict

    seed_all()
    model = gpt2()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    batches = token_batches(a.saves * STEPS_PER_SAVE)
    for k in range(a.saves):
        train_steps(model, opt, batches[k * STEPS_PER_SAVE:(k + 1) * STEPS_PER_SAVE])
        msd, osd = get_state_dict(model, opt)
        step = (k + 1) * STEPS_PER_SAVE
        arc.timed(dcp.save, {"model": msd, "optim": osd}, checkpoint_id=os.path.join(a.out, "step-%d" % step))


def _dcp_rank(rank, world, port, a):
    global STEPS_PER_SAVE
    STEPS_PER_SAVE = a.every  # a spawned process starts from the module's defaults
    SIZE.update(n_layer=a.layers, n_embd=a.width)
    import torch.distributed as dist
    import torch.distributed.checkpoint as dcp
    from torch.distributed.checkpoint.state_dict import get_state_dict
    from torch.distributed.fsdp import fully_shard

    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    dist.init_process_group("gloo", rank=rank, world_size=world)
    try:
        seed_all()
        model = gpt2()  # same initial weights on every rank (seeded)
        for block in model.transformer.h:
            fully_shard(block)
        fully_shard(model)
        opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
        # Each rank trains on its own batches: real data parallelism.
        batches = token_batches(a.saves * STEPS_PER_SAVE, seed=1 + rank)
        arc = Archiver(a.out, a.archive) if rank == 0 else None
        for k in range(a.saves):
            train_steps(model, opt, batches[k * STEPS_PER_SAVE:(k + 1) * STEPS_PER_SAVE])
            msd, osd = get_state_dict(model, opt)
            step = (k + 1) * STEPS_PER_SAVE
            dist.barrier()
            t = time.perf_counter()
            dcp.save({"model": msd, "optim": osd}, checkpoint_id=os.path.join(a.out, "step-%d" % step))
            dist.barrier()
            if arc:
                arc.saved(time.perf_counter() - t)
            dist.barrier()
        if arc:
            arc.finish("dcp-2rank", a.started)
    finally:
        dist.destroy_process_group()


def dcp_2rank(a, arc):
    import socket

    import torch.multiprocessing as mp

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    mp.spawn(_dcp_rank, args=(2, port, a), nprocs=2, join=True)
    return "done"  # rank 0 printed the summary


def safetensors_(a, arc):
    from safetensors.torch import save_file

    seed_all()
    model = gpt2()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    batches = token_batches(a.saves * STEPS_PER_SAVE)
    for k in range(a.saves):
        train_steps(model, opt, batches[k * STEPS_PER_SAVE:(k + 1) * STEPS_PER_SAVE])
        # lm_head shares wte's storage: save_file refuses shared tensors, so save clones.
        sd = {n: t.detach().to(torch.bfloat16).clone().contiguous() for n, t in model.state_dict().items()
              if n != "lm_head.weight"}
        step = (k + 1) * STEPS_PER_SAVE
        arc.timed(save_file, sd, os.path.join(a.out, "model-step%d.safetensors" % step), metadata={"step": str(step)})


WRITERS = {
    "hf-trainer": hf_trainer,
    "save-pretrained-sharded": save_pretrained_sharded,
    "torch-last": torch_last,
    "lightning": lightning_,
    "dcp": dcp_,
    "dcp-2rank": dcp_2rank,
    "safetensors": safetensors_,
}


def main():
    global STEPS_PER_SAVE
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("writer", choices=sorted(WRITERS))
    p.add_argument("--out", required=True, help="directory the writer saves into (a mount, or a plain directory)")
    p.add_argument("--archive", help="directory that receives a copy of every save, and manifest.json")
    p.add_argument("--saves", type=int, default=3, help="consecutive checkpoints to save (at least 3)")
    p.add_argument("--every", type=int, default=STEPS_PER_SAVE, help="training steps between saves")
    p.add_argument("--layers", type=int, default=SIZE["n_layer"], help="GPT-2 layers")
    p.add_argument("--width", type=int, default=SIZE["n_embd"], help="GPT-2 width (n_embd)")
    p.add_argument("--keep", type=int, default=2, help="hf-trainer: save_total_limit")
    p.add_argument("--ckptfs-callback", action="store_true",
                   help="hf-trainer: add ckptfs.callbacks.TrainerCallback (the ckptfs package on the path)")
    p.add_argument("--gpu", action="store_true", help="hf-trainer: train on the GPU where there is one (default: the CPU)")
    a = p.parse_args()
    if a.saves < 1 or a.every < 1:
        p.error("--saves and --every must be positive")
    STEPS_PER_SAVE = a.every
    SIZE.update(n_layer=a.layers, n_embd=a.width)
    a.started = time.perf_counter()
    os.makedirs(a.out, exist_ok=True)
    if a.archive:
        os.makedirs(a.archive, exist_ok=True)
    arc = Archiver(a.out, a.archive)
    if WRITERS[a.writer](a, arc) == "done":
        return
    if len(arc.saves) != a.saves:
        raise SystemExit("writers.py %s: %d saves archived, %d asked for" % (a.writer, len(arc.saves), a.saves))
    arc.finish(a.writer, a.started)


if __name__ == "__main__":
    sys.exit(main())
