#!/usr/bin/env python3
"""A small real training that checkpoints like real trainers do.

Layouts (--layout):
  flat       OUT/ckpt-<step>.pt with {'model', 'optimizer', 'step'}
  hf         OUT/checkpoint-<step>/ with pytorch_model.bin, optimizer.pt,
             scheduler.pt and trainer_state.json, like the Hugging Face
             Trainer; with --keep K the oldest directories are removed with
             shutil.rmtree
  lightning  OUT/epoch=0-step=<step>.ckpt written atomically: a temp file,
             fsync, os.replace, like PyTorch Lightning

Every save is also written to --mirror (a plain directory) with the same
name, so a test can compare the two byte for byte. Batches come from a fixed data
set in epochs and depend only on the step, so a run resumed (--resume) from a checkpoint
continues exactly as an uninterrupted run would: it prints "step N loss L"
for every step.
"""
import argparse
import json
import os
import re
import shutil
import sys

import torch


class Data:
    """A fixed data set (a teacher network labels Gaussian inputs, 5% of
    labels flipped) seen in epochs. The batch of a step depends only on the
    step, so a resumed run sees exactly the batches an uninterrupted one
    would."""

    def __init__(self, in_dim, teacher, samples=8192, batch=64):
        g = torch.Generator().manual_seed(7)
        self.x = torch.randn(samples, in_dim, generator=g)
        with torch.no_grad():
            self.y = teacher(self.x).argmax(1)
        flip = torch.rand(samples, generator=g) < 0.05
        self.y[flip] = torch.randint(0, 10, (int(flip.sum()),), generator=g)
        self.batch = batch
        self.per_epoch = samples // batch

    def at(self, step):
        epoch, i = divmod(step - 1, self.per_epoch)
        perm = torch.randperm(len(self.x), generator=torch.Generator().manual_seed(epoch))
        idx = perm[i * self.batch:(i + 1) * self.batch]
        return self.x[idx], self.y[idx]


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", required=True)
    p.add_argument("--mirror", help="plain directory that receives the same saves")
    p.add_argument("--layout", choices=["flat", "hf", "lightning"], default="flat")
    p.add_argument("--steps", type=int, default=60, help="train until this step")
    p.add_argument("--every", type=int, default=20)
    p.add_argument("--keep", type=int, default=0, help="hf: keep only the newest K checkpoint directories")
    p.add_argument("--optimizer", choices=["sgd", "adam", "adamw"], default="adam")
    p.add_argument("--save-dtype", choices=["fp32", "bf16", "fp16"], default="fp32")
    p.add_argument("--model-only", action="store_true")
    p.add_argument("--width", type=int, default=256)
    p.add_argument("--resume", action="store_true", help="continue from the newest checkpoint in --out")
    a = p.parse_args()

    torch.manual_seed(0)
    torch.set_num_threads(1)
    in_dim = 64
    teacher = torch.nn.Sequential(torch.nn.Linear(in_dim, 32), torch.nn.Tanh(), torch.nn.Linear(32, 10))
    model = torch.nn.Sequential(torch.nn.Linear(in_dim, a.width), torch.nn.ReLU(),
                                torch.nn.Linear(a.width, a.width), torch.nn.ReLU(), torch.nn.Linear(a.width, 10))
    opt = {"sgd": lambda ps: torch.optim.SGD(ps, lr=0.05, momentum=0.9),
           "adam": lambda ps: torch.optim.Adam(ps, lr=1e-3),
           "adamw": lambda ps: torch.optim.AdamW(ps, lr=1e-3)}[a.optimizer](model.parameters())
    sched = torch.optim.lr_scheduler.StepLR(opt, step_size=512, gamma=0.5)
    dtype = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}[a.save_dtype]
    os.makedirs(a.out, exist_ok=True)
    if a.mirror:
        os.makedirs(a.mirror, exist_ok=True)

    start = 0
    if a.resume:
        start = resume(a, model, opt, sched)
        print("resumed at step %d" % start, file=sys.stderr)

    loss_fn = torch.nn.CrossEntropyLoss()
    data = Data(in_dim, teacher)
    for step in range(start + 1, a.steps + 1):
        x, y = data.at(step)
        opt.zero_grad()
        loss = loss_fn(model(x), y)
        loss.backward()
        opt.step()
        sched.step()
        print("step %d loss %.6f" % (step, loss.item()), flush=True)
        if step % a.every == 0:
            save(a, step, float(loss), model, opt, sched, dtype)


def cast(obj, dtype):
    if isinstance(obj, torch.Tensor):
        return obj.to(dtype) if obj.is_floating_point() and dtype != torch.float32 else obj
    if isinstance(obj, dict):
        return type(obj)((k, cast(v, dtype)) for k, v in obj.items())
    return obj


def save(a, step, loss, model, opt, sched, dtype):
    dirs = [a.out] + ([a.mirror] if a.mirror else [])
    msd = cast(model.state_dict(), dtype)
    if a.layout == "flat":
        state = {"model": msd, "step": step}
        if not a.model_only:
            state["optimizer"] = opt.state_dict()
            state["scheduler"] = sched.state_dict()
        for d in dirs:
            torch.save(state, os.path.join(d, "ckpt-%06d.pt" % step))
    elif a.layout == "hf":
        for d in dirs:
            cd = os.path.join(d, "checkpoint-%d" % step)
            os.makedirs(cd, exist_ok=True)
            torch.save(msd, os.path.join(cd, "pytorch_model.bin"))
            if not a.model_only:
                torch.save(opt.state_dict(), os.path.join(cd, "optimizer.pt"))
                torch.save(sched.state_dict(), os.path.join(cd, "scheduler.pt"))
            with open(os.path.join(cd, "trainer_state.json"), "w") as f:
                json.dump({"global_step": step, "loss": loss, "best_metric": None}, f, indent=2)
            if a.keep:
                ckpts = sorted((int(m.group(1)), n) for n in os.listdir(d)
                               for m in [re.fullmatch(r"checkpoint-(\d+)", n)] if m)
                for _, n in ckpts[:-a.keep]:
                    shutil.rmtree(os.path.join(d, n))
    else:
        state = {"state_dict": msd, "global_step": step, "epoch": 0}
        if not a.model_only:
            state["optimizer_states"] = [opt.state_dict()]
            state["lr_schedulers"] = [sched.state_dict()]
        name = "epoch=0-step=%d.ckpt" % step
        for d in dirs:
            tmp = os.path.join(d, name + ".tmp")
            with open(tmp, "wb") as f:
                torch.save(state, f)
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, os.path.join(d, name))


def resume(a, model, opt, sched):
    steps = []
    for n in os.listdir(a.out):
        m = re.fullmatch(r"ckpt-(\d+)\.pt|checkpoint-(\d+)|epoch=0-step=(\d+)\.ckpt", n)
        if m:
            steps.append((int(next(g for g in m.groups() if g)), n))
    step, name = max(steps)
    path = os.path.join(a.out, name)
    if a.layout == "flat":
        s = torch.load(path)
        model.load_state_dict(cast(s["model"], torch.float32))
        opt.load_state_dict(s["optimizer"])
        sched.load_state_dict(s["scheduler"])
    elif a.layout == "hf":
        model.load_state_dict(cast(torch.load(os.path.join(path, "pytorch_model.bin")), torch.float32))
        opt.load_state_dict(torch.load(os.path.join(path, "optimizer.pt")))
        sched.load_state_dict(torch.load(os.path.join(path, "scheduler.pt")))
    else:
        s = torch.load(path)
        model.load_state_dict(cast(s["state_dict"], torch.float32))
        opt.load_state_dict(s["optimizer_states"][0])
        sched.load_state_dict(s["lr_schedulers"][0])
    return step


if __name__ == "__main__":
    main()
