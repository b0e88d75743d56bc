#!/usr/bin/env python3
"""Train a small real model and save a series of checkpoints with plain torch.save.

Used by ckptfs's tests, benchmarks and demo to get realistic, consecutive
checkpoints without any download: the data set is synthetic (a fixed random
"teacher" network labels Gaussian inputs, 5% of labels flipped), the training
is real (autograd, a real optimizer, epochs over the data set, a cosine
learning-rate schedule, real weight drift between checkpoints).
--data stream --schedule constant gives a harsher series: fresh examples every
step at a constant learning rate, so weights and optimizer state keep moving.

Each checkpoint is OUT/ckpt-<step>.pt holding {'model', 'optimizer', 'step',
'loss'}. With --raw, every checkpoint also gets:
  ckpt-<step>.fp32.raw  all float32 tensors (model, then optimizer state) in a
                        fixed order, little-endian, concatenated
  ckpt-<step>.bf16.raw  the model weights cast to bfloat16, concatenated
so codec benchmarks can read plain arrays without parsing torch files.
"""
import argparse
import os
import sys

import torch


def build_model(kind, width, in_dim, classes):
    if kind == "mlp":
        return torch.nn.Sequential(
            torch.nn.Linear(in_dim, width), torch.nn.ReLU(),
            torch.nn.Linear(width, width), torch.nn.ReLU(),
            torch.nn.Linear(width, width), torch.nn.ReLU(),
            torch.nn.Linear(width, classes))
    if kind == "cnn":
        c = max(8, width // 16)
        return torch.nn.Sequential(
            torch.nn.Unflatten(1, (1, 16, in_dim // 16)),
            torch.nn.Conv2d(1, c, 3, padding=1), torch.nn.ReLU(),
            torch.nn.Conv2d(c, 2 * c, 3, padding=1), torch.nn.ReLU(),
            torch.nn.BatchNorm2d(2 * c),
            torch.nn.Flatten(),
            torch.nn.Linear(2 * c * in_dim, width), torch.nn.ReLU(),
            torch.nn.Linear(width, classes))
    raise ValueError(kind)


def build_optimizer(kind, params, lr):
    if kind == "adam":
        return torch.optim.Adam(params, lr=lr)
    if kind == "adamw":
        return torch.optim.AdamW(params, lr=lr, weight_decay=0.01)
    if kind == "sgd":
        return torch.optim.SGD(params, lr=lr * 10, momentum=0.9)
    raise ValueError(kind)


def cast_state(state, dtype):
    if isinstance(state, torch.Tensor):
        return state.to(dtype) if state.is_floating_point() else state
    if isinstance(state, dict):
        return type(state)((k, cast_state(v, dtype)) for k, v in state.items())
    return state


def float_tensors(obj):
    """All floating tensors of a nested state, in a deterministic order."""
    if isinstance(obj, torch.Tensor):
        if obj.is_floating_point():
            yield obj
    elif isinstance(obj, dict):
        for k in sorted(obj, key=str):
            yield from float_tensors(obj[k])
    elif isinstance(obj, (list, tuple)):
        for v in obj:
            yield from float_tensors(v)


def write_raw(path, tensors, dtype):
    with open(path, "wb") as f:
        for t in tensors:
            t = t.detach().to(dtype).contiguous()
            # bfloat16 has no numpy view: reinterpret as int16 bytes.
            view = t.view(torch.int16) if dtype == torch.bfloat16 else t
            f.write(view.numpy().tobytes())


def main():
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", required=True, help="directory for the checkpoints")
    p.add_argument("--checkpoints", type=int, default=10)
    p.add_argument("--steps", type=int, default=50, help="training steps between checkpoints")
    p.add_argument("--model", choices=["mlp", "cnn"], default="mlp")
    p.add_argument("--width", type=int, default=512, help="hidden width (sets the model size)")
    p.add_argument("--optimizer", choices=["adam", "adamw", "sgd"], default="adam")
    p.add_argument("--lr", type=float, default=1e-3)
    p.add_argument("--save-dtype", choices=["fp32", "bf16", "fp16"], default="fp32",
                   help="dtype of the saved tensors (training always runs in fp32)")
    p.add_argument("--no-optimizer", action="store_true", help="save the model only")
    p.add_argument("--raw", action="store_true", help="also write .fp32.raw/.bf16.raw arrays")
    p.add_argument("--data", choices=["fixed", "stream"], default="fixed",
                   help="fixed: a data set of --samples examples seen once per epoch (a real training); "
                        "stream: fresh random examples every step (harsher: gradients never settle)")
    p.add_argument("--samples", type=int, default=8192, help="size of the fixed data set")
    p.add_argument("--schedule", choices=["cosine", "constant"], default="cosine",
                   help="learning-rate schedule over the whole run (cosine decays to 1%% of --lr)")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--threads", type=int, default=2)
    a = p.parse_args()

    torch.manual_seed(a.seed)
    torch.set_num_threads(a.threads)
    os.makedirs(a.out, exist_ok=True)
    in_dim, classes, batch = 256, 10, 64
    teacher = torch.nn.Sequential(torch.nn.Linear(in_dim, 64), torch.nn.Tanh(), torch.nn.Linear(64, classes))
    model = build_model(a.model, a.width, in_dim, classes)
    opt = build_optimizer(a.optimizer, model.parameters(), a.lr)
    total = a.checkpoints * a.steps
    sched = None
    if a.schedule == "cosine":
        sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=total, eta_min=opt.param_groups[0]["lr"] * 0.01)
    data_x = data_y = None
    if a.data == "fixed":
        g = torch.Generator().manual_seed(a.seed)
        data_x = torch.randn(a.samples, in_dim, generator=g)
        with torch.no_grad():
            data_y = teacher(data_x).argmax(1)
        # Label noise, as real data has: the loss never reaches zero.
        flip = torch.rand(a.samples, generator=g) < 0.05
        data_y[flip] = torch.randint(0, classes, (int(flip.sum()),), generator=g)
    order = []
    loss_fn = torch.nn.CrossEntropyLoss()
    save_dtype = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}[a.save_dtype]

    step = 0
    for _ in range(a.checkpoints):
        for _ in range(a.steps):
            if data_x is None:
                x = torch.randn(batch, in_dim)
                with torch.no_grad():
                    y = teacher(x).argmax(1)
            else:
                if len(order) < batch:  # a new epoch: reshuffle
                    order = torch.randperm(a.samples).tolist()
                idx, order = order[:batch], order[batch:]
                x, y = data_x[idx], data_y[idx]
            opt.zero_grad()
            loss = loss_fn(model(x), y)
            loss.backward()
            opt.step()
            if sched is not None:
                sched.step()
            step += 1
        state = {"model": model.state_dict(), "step": step, "loss": float(loss)}
        if not a.no_optimizer:
            state["optimizer"] = opt.state_dict()
        if save_dtype != torch.float32:
            state = cast_state(state, save_dtype)
        base = os.path.join(a.out, "ckpt-%06d" % step)
        torch.save(state, base + ".pt")
        if a.raw:
            full = {"model": model.state_dict(), "optimizer": opt.state_dict()}
            write_raw(base + ".fp32.raw", float_tensors(full), torch.float32)
            write_raw(base + ".bf16.raw", float_tensors(model.state_dict()), torch.bfloat16)
        print("step %d loss %.4f -> %s.pt" % (step, float(loss), base), file=sys.stderr)


if __name__ == "__main__":
    main()
