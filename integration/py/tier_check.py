#!/usr/bin/env python3
"""Write and check checkpoint series for ckptfs's archive tier test.

  tier_check.py write DIR N   N torch.save (.pt) and safetensors files of a
                              drifting model into DIR, and DIR/expect.pt with
                              the exact tensors of each
  tier_check.py write DIR N HOLD SECONDS
                              the same, keeping file HOLD (ckpt-HOLD.pt) open
                              from its save until the tier has made
                              model-00.safetensors lossy (at most SECONDS after
                              the last save) and a second more: then it must
                              still read exact, and be marked so (a mount's
                              --tier never re-codes an open file)
  tier_check.py check DIR     every file loads with torch.load or safe_open;
                              each tensor equals its exact value or its
                              bfloat16 rounding, one or the other for a whole
                              file, as user.ckptfs.fidelity says; every zip
                              passes zipfile's CRC check. Prints the lossy
                              files, one per line (with their fidelity after
                              the name where it is not bf16: bf16+m4 rounds
                              the optimizer's exp_avg to 4 mantissa bits).
"""
import os
import sys
import time
import zipfile

import torch
from safetensors.torch import load_file, save_file


def write(d, n, hold=-1, seconds=0.0):
    torch.manual_seed(5)
    held = None
    w = {"layer.%d.weight" % i: torch.randn(300, 257) * 0.05 for i in range(4)}
    w["layer.0.bias"] = torch.randn(257)
    expect = {}
    for i in range(n):
        for k in w:
            w[k] += torch.randn_like(w[k]) * 1e-4
        state = {"model": {k: v.clone() for k, v in w.items()}, "step": i,
                 "optimizer": {"exp_avg": w["layer.1.weight"] * 0.1, "lr": 1e-3}}
        torch.save(state, os.path.join(d, "ckpt-%02d.pt" % i))
        save_file({k: v.contiguous() for k, v in w.items()}, os.path.join(d, "model-%02d.safetensors" % i))
        expect[i] = {k: v.clone() for k, v in w.items()}
        if i == hold:
            held = open(os.path.join(d, "ckpt-%02d.pt" % i), "rb")
    torch.save(expect, os.path.join(d, "..", "expect.pt"))
    if held is None:
        return
    # A pass has run while the file is open once the other series' oldest
    # file is tiered; then one more interval's worth.
    other = os.path.join(d, "model-00.safetensors")
    deadline = time.time() + seconds
    while os.getxattr(other, "user.ckptfs.fidelity").decode() != "bf16":
        if time.time() > deadline:
            sys.exit("model-00.safetensors not tiered %gs after the last save" % seconds)
        time.sleep(0.1)
    time.sleep(1)
    name = os.path.basename(held.name)
    fidelity = os.getxattr(held.name, "user.ckptfs.fidelity").decode()
    got = torch.load(held)
    if fidelity != "exact" or not all(same(got["model"][k], expect[hold][k]) for k in expect[hold]):
        sys.exit("%s, open: fidelity %s, tensors exact: %s" % (
            name, fidelity, all(same(got["model"][k], expect[hold][k]) for k in expect[hold])))
    held.close()


def same(a, b):
    return a.dtype == b.dtype and a.shape == b.shape and torch.equal(a, b)


def bf16(t):
    return t.to(torch.bfloat16).to(torch.float32)


def m4(t):
    """float32 rounded to 4 mantissa bits, ties to even (finite normal values)."""
    u = t.contiguous().view(torch.int32)
    mask = (1 << 19) - 1
    u = (u + (mask >> 1) + ((u >> 19) & 1)) & ~mask
    return u.view(torch.float32)


def check(d):
    expect = torch.load(os.path.join(d, "..", "expect.pt"))
    lossy = []
    for name in sorted(os.listdir(d)):
        p = os.path.join(d, name)
        i = int(name.split("-")[1].split(".")[0])
        want = expect[i]
        if name.endswith(".pt"):
            with zipfile.ZipFile(p) as z:
                bad = z.testzip()
                if bad is not None:
                    sys.exit("%s: zip member %s fails its CRC" % (name, bad))
            got = torch.load(p)
            tensors = dict(got["model"])
            tensors["optimizer.exp_avg"] = got["optimizer"]["exp_avg"]
            want = dict(want)
            want["optimizer.exp_avg"] = want["layer.1.weight"] * 0.1
            if got["step"] != i or got["optimizer"]["lr"] != 1e-3:
                sys.exit("%s: non-tensor values changed" % name)
        else:
            tensors = load_file(p)
        fidelity = os.getxattr(p, "user.ckptfs.fidelity").decode()
        exact = all(same(tensors[k], want[k]) for k in want)
        rounded = all(same(tensors[k], bf16(want[k])) for k in want)
        # bf16+m4: the optimizer's moments (here exp_avg) at 4 mantissa bits.
        by_role = all(same(tensors[k], (m4 if k.endswith("exp_avg") else bf16)(want[k])) for k in want)
        if fidelity == "exact" and not exact:
            sys.exit("%s: marked exact, tensors differ" % name)
        if fidelity == "bf16" and not rounded:
            sys.exit("%s: marked bf16, tensors are not the bfloat16 rounding" % name)
        if fidelity == "bf16+m4" and not by_role:
            sys.exit("%s: marked bf16+m4, tensors are not bf16 weights and m4 moments" % name)
        if fidelity not in ("exact", "bf16", "bf16+m4"):
            sys.exit("%s: fidelity %r" % (name, fidelity))
        if fidelity != "exact":
            lossy.append(name + ("" if fidelity == "bf16" else " " + fidelity))
    print("\n".join(lossy))


if __name__ == "__main__":
    if sys.argv[1] == "write" and len(sys.argv) > 4:
        write(sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), float(sys.argv[5]))
    elif sys.argv[1] == "write":
        write(sys.argv[2], int(sys.argv[3]))
    else:
        check(sys.argv[2])
