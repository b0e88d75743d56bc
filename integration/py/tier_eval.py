#!/usr/bin/env python3
"""What an archive tier's lossy schemes do to a training (issue 51).

Reads a series written by train_series.py (--model mlp, --data fixed: the
data set is rebuilt from --seed as the training built it) and, for each
checkpoint, evaluates the model on that data set with its weights exact and
as a tier would keep them (bf16: rounded to the nearest bfloat16; q8: 8-bit
uniform quantization with a scale per 64 Ki-element chunk, as Check-QZP).
Then it resumes the training from one checkpoint for --resume-steps steps
twice, from the exact state and from the tiered state (weights bf16, Adam's
exp_avg q8, exp_avg_sq quantized on its square root), on the same batches,
and reports both losses, with an exact resume on other batches for scale.

  python tier_eval.py --series .cache/series/adam --json out.json

With --tiered DIR (the same checkpoints read back from a store that `ckptfs
repack --lossy` tiered, through a mount) it measures the files the store
keeps instead: per tensor role, the largest relative error of each lossy
file's tensors against the exact ones; each checkpoint's loss and accuracy
from both; and the training resumed from the tiered file's whole state
against the exact one, on the same batches.

  python tier_eval.py --series plain/run --tiered mnt/run
"""
import argparse
import glob
import json
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import train_series  # noqa: E402

CHUNK = 64 << 10
NORMAL_MIN = 1.1754943508222875e-38  # float32's smallest normal value


def bf16(t):
    return t.to(torch.bfloat16).to(torch.float32)


def q8(t):
    flat = t.reshape(-1).clone()
    for off in range(0, flat.numel(), CHUNK):
        c = flat[off:off + CHUNK]
        m = c.abs().max()
        if m > 0:
            s = m / 127
            c.copy_(torch.round(c / s).clamp(-127, 127) * s)
    return flat.reshape(t.shape)


def q8sqrt(t):
    flat = t.reshape(-1).clamp(min=0).sqrt()
    for off in range(0, flat.numel(), CHUNK):
        c = flat[off:off + CHUNK]
        m = c.max()
        if m > 0:
            s = m / 255
            c.copy_(torch.round(c / s).clamp(0, 255) * s)
    return (flat * flat).reshape(t.shape)


def data_set(seed, samples, in_dim=256, classes=10):
    torch.manual_seed(seed)
    teacher = torch.nn.Sequential(torch.nn.Linear(in_dim, 64), torch.nn.Tanh(), torch.nn.Linear(64, classes))
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(samples, in_dim, generator=g)
    with torch.no_grad():
        y = teacher(x).argmax(1)
    flip = torch.rand(samples, generator=g) < 0.05
    y[flip] = torch.randint(0, classes, (int(flip.sum()),), generator=g)
    return x, y


def evaluate(model, x, y):
    with torch.no_grad():
        out = model(x)
        loss = torch.nn.functional.cross_entropy(out, y).item()
        acc = (out.argmax(1) == y).float().mean().item()
    return loss, acc


def load(path, width):
    state = torch.load(path, weights_only=False)
    model = train_series.build_model("mlp", width, 256, 10)
    model.load_state_dict(state["model"])
    return state, model


def tiered_weights(model, fn):
    with torch.no_grad():
        for p in model.parameters():
            p.copy_(fn(p))
    return model


def resume(state, width, x, y, steps, tier, seed):
    model = train_series.build_model("mlp", width, 256, 10)
    model.load_state_dict(state["model"])
    opt = torch.optim.Adam(model.parameters())
    opt.load_state_dict(state["optimizer"])
    if tier:
        tiered_weights(model, bf16)
        for st in opt.state.values():
            st["exp_avg"].copy_(q8(st["exp_avg"]))
            st["exp_avg_sq"].copy_(q8sqrt(st["exp_avg_sq"]))
    g = torch.Generator().manual_seed(seed)
    for _ in range(steps):
        idx = torch.randint(0, x.shape[0], (64,), generator=g)
        opt.zero_grad()
        loss = torch.nn.functional.cross_entropy(model(x[idx]), y[idx])
        loss.backward()
        opt.step()
    return evaluate(model, x, y)


def roles(state):
    """The float tensors of a train_series checkpoint by role."""
    out = {"weights": list(state["model"].values()), "exp_avg": [], "exp_avg_sq": []}
    for st in state["optimizer"]["state"].values():
        out["exp_avg"].append(st["exp_avg"])
        out["exp_avg_sq"].append(st["exp_avg_sq"])
    return out


def compare_tiered(a, x, y, paths):
    """The stored tier against the exact files (see --tiered)."""
    rows, worst = [], {}
    print("%-18s %-9s %-22s %-22s %s" % ("checkpoint", "fidelity", "exact loss/acc", "as stored", "max relative error per role"))
    lossy_idx = []
    for i, path in enumerate(paths):
        name = os.path.basename(path)
        tpath = os.path.join(a.tiered, name)
        fidelity = os.getxattr(tpath, "user.ckptfs.fidelity").decode()
        exact_state, exact_model = load(path, a.width)
        tier_state, tier_model = load(tpath, a.width)
        errs = {}
        for role, ts in roles(tier_state).items():
            es = roles(exact_state)[role]
            rel, sub_abs, subs = 0.0, 0.0, 0
            for te, ee in zip(ts, es):
                # Relative error among normal values; absolute among
                # subnormals (moments whose gradient stopped), as the
                # tier's bound is stated.
                normal = ee.abs() >= NORMAL_MIN
                if normal.any():
                    rel = max(rel, ((te[normal] - ee[normal]).abs() / ee[normal].abs()).max().item())
                if (~normal).any():
                    sub_abs = max(sub_abs, (te[~normal] - ee[~normal]).abs().max().item())
                    subs += int(((ee != 0) & ~normal).sum())
            errs[role] = rel
            errs[role + " subnormal abs"] = sub_abs
            if fidelity != "exact":
                worst[role] = max(worst.get(role, 0.0), rel)
                worst[role + " subnormal abs"] = max(worst.get(role + " subnormal abs", 0.0), sub_abs)
                worst[role + " subnormals"] = max(worst.get(role + " subnormals", 0), subs)
        ex, ti = evaluate(exact_model, x, y), evaluate(tier_model, x, y)
        rows.append({"checkpoint": name, "fidelity": fidelity, "exact": ex, "stored": ti, "max_rel_err": errs})
        if fidelity != "exact":
            lossy_idx.append(i)
        print("%-18s %-9s %.4f / %.4f        %.4f / %.4f        %s" % (name, fidelity, *ex, *ti,
              " ".join("%s %.2e" % kv for kv in errs.items() if "subnormal" not in kv[0])))
    out = {"rows": rows, "max_rel_err_lossy": worst}
    if lossy_idx:
        i = lossy_idx[len(lossy_idx) // 2]
        es = torch.load(paths[i], weights_only=False)
        ts = torch.load(os.path.join(a.tiered, os.path.basename(paths[i])), weights_only=False)
        r_exact = resume(es, a.width, x, y, a.resume_steps, False, a.seed + 7)
        r_tier = resume(ts, a.width, x, y, a.resume_steps, False, a.seed + 7)
        r_other = resume(es, a.width, x, y, a.resume_steps, False, a.seed + 8)
        print("resumed from %s (lossy as stored) for %d steps: exact %.4f / %.4f, stored %.4f / %.4f, exact on other batches %.4f / %.4f"
              % (os.path.basename(paths[i]), a.resume_steps, *r_exact, *r_tier, *r_other))
        out["resume"] = {"from": os.path.basename(paths[i]), "steps": a.resume_steps, "exact": r_exact,
                         "stored": r_tier, "exact_other_batches": r_other}
    print("largest error of the lossy files, per role (relative among normal values; absolute, and count, of "
          "nonzero subnormals): " + ", ".join("%s %.3g" % kv for kv in worst.items()))
    return out


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--series", required=True)
    p.add_argument("--width", type=int, default=512)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--samples", type=int, default=8192)
    p.add_argument("--resume-from", type=int, default=4, help="index of the checkpoint resumed")
    p.add_argument("--resume-steps", type=int, default=256)
    p.add_argument("--json")
    p.add_argument("--tiered", help="the same checkpoints as a tiered store keeps them (a mount's directory)")
    a = p.parse_args()
    torch.set_num_threads(2)
    x, y = data_set(a.seed, a.samples)
    paths = sorted(glob.glob(os.path.join(a.series, "ckpt-*.pt")))
    if not paths:
        sys.exit("no ckpt-*.pt in %s" % a.series)
    if a.tiered:
        out = compare_tiered(a, x, y, paths)
        if a.json:
            with open(a.json, "w") as f:
                json.dump(out, f, indent=1)
        return
    rows = []
    print("%-18s %-22s %-22s %-22s" % ("checkpoint", "exact loss/acc", "bf16 weights", "q8 weights"))
    for path in paths:
        state, model = load(path, a.width)
        exact = evaluate(model, x, y)
        b = evaluate(tiered_weights(load(path, a.width)[1], bf16), x, y)
        q = evaluate(tiered_weights(load(path, a.width)[1], q8), x, y)
        rows.append({"checkpoint": os.path.basename(path), "exact": exact, "bf16": b, "q8": q})
        print("%-18s %.4f / %.4f        %.4f / %.4f        %.4f / %.4f" % (os.path.basename(path), *exact, *b, *q))
    state = torch.load(paths[a.resume_from], weights_only=False)
    r_exact = resume(state, a.width, x, y, a.resume_steps, False, a.seed + 7)
    r_tier = resume(state, a.width, x, y, a.resume_steps, True, a.seed + 7)
    # The same exact resume on other batches: how far two exact runs differ.
    r_other = resume(state, a.width, x, y, a.resume_steps, False, a.seed + 8)
    print("resumed from %s for %d steps: exact %.4f / %.4f, tiered %.4f / %.4f, exact on other batches %.4f / %.4f (loss / accuracy)"
          % (os.path.basename(paths[a.resume_from]), a.resume_steps, *r_exact, *r_tier, *r_other))
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"rows": rows, "resume": {"from": os.path.basename(paths[a.resume_from]),
                       "steps": a.resume_steps, "exact": r_exact, "tiered": r_tier,
                       "exact_other_batches": r_other}}, f, indent=1)


if __name__ == "__main__":
    main()
