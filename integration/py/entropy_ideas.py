#!/usr/bin/env python3
"""Entropy bounds of the coder ideas of issue 19, measured on a real series
(the .pt files of `make series`: model + Adam/SGD state), for the table in
docs/CODECS.md. Nothing here is a codec: it prices ideas before one is built.

Every figure is bits per element / element width (a ratio to raw, like a
codec's ratio, without chunk headers or tables), per tensor role, over every
consecutive pair of the series (checkpoint k against k-1; two-reference ideas
use k-2 too, from the third checkpoint on; the first pairs then fall back to
one reference). Two figures per idea:

  o0   order-0 entropy of each byte plane of the transformed element, per
       64 Ki-element chunk (what a plane coder with one table per chunk
       pays, before grouping)
  cond conditional entropy, one table per tensor and pair (optimistic for
       a real coder by the table cost, about the same for every idea): the
       top plane given the context byte (the reference's exponent, or what
       the idea adds), each lower plane given the plane above it (so the top
       mantissa bits are conditioned on the exponent)

Transforms: sub = zigzag of the difference of the order-preserving integer
maps (planes' SUB) against a prediction; base = the element rotated so the
exponent heads the top plane (planes' baseline); groups4 = planes v2's
model: order-0 per plane within 4 groups of the reference's exponent.

    $CKPTFS_VENV/bin/python integration/py/entropy_ideas.py .cache/series/adam/ckpt-*.pt

A Trainer's optimizer.pt files (the optimizer state alone) are read too.
"""
import argparse
import json
import sys
import warnings

warnings.filterwarnings("ignore")

import numpy as np  # noqa: E402
import torch  # noqa: E402

CHUNK = 64 << 10


def bits_of(t):
    """A tensor's elements as unsigned integers, and the width in bits."""
    t = t.detach().contiguous().reshape(-1)
    if t.dtype == torch.float32:
        return t.view(torch.int32).numpy().view(np.uint32).astype(np.uint64), 32
    if t.dtype == torch.bfloat16:
        return t.view(torch.int16).numpy().view(np.uint16).astype(np.uint64), 16
    raise ValueError("dtype %s" % t.dtype)


def to_bits(x, like):
    """float64 array x rounded to the dtype of tensor like, as bits."""
    return bits_of(torch.from_numpy(np.asarray(x, dtype=np.float64)).to(like.dtype))[0]


def omap(u, w):
    """planes' m(): sign-magnitude bits onto unsigned integers in float order."""
    top = (u >> (w - 1)) & 1
    allones = (1 << w) - 1
    return np.where(top == 1, u ^ allones, u ^ (1 << (w - 1)))


def sub(u, p, w):
    d = (omap(u, w).astype(np.int64) - omap(p, w).astype(np.int64))
    d = ((d + (1 << (w - 1))) % (1 << w)) - (1 << (w - 1))  # wrap to w-bit signed
    return ((d << 1) ^ (d >> (w - 1))) & ((1 << w) - 1)


def rot(u, w):
    return ((u << 1) | (u >> (w - 1))) & ((1 << w) - 1)


def expo(u, w):
    """The 8 bits just below the sign (planes' context byte)."""
    return (u >> (w - 9)) & 0xFF


def planes(v, w):
    return [((v >> (8 * j)) & 0xFF).astype(np.int64) for j in range(w // 8)]


def h0_chunks(x):
    bits = 0.0
    for s in range(0, len(x), CHUNK):
        c = np.bincount(x[s:s + CHUNK], minlength=256)
        c = c[c > 0]
        n = c.sum()
        bits += float((c * np.log2(n / c)).sum())
    return bits


def hcond(x, ctx, nctx):
    c = np.bincount(ctx * 256 + x, minlength=nctx * 256).reshape(nctx, 256).astype(np.float64)
    nc = c.sum(1, keepdims=True)
    with np.errstate(divide="ignore", invalid="ignore"):
        t = np.where(c > 0, c * np.log2(nc / c), 0.0)
    return float(t.sum())


class Acc:
    """Per (role, idea): elements, order-0 bits and conditional bits."""

    def __init__(self):
        self.n = {}
        self.w = {}
        self.o0 = {}
        self.cond = {}

    def add(self, role, idea, v, w, ctx, nctx=256, groups=None):
        k = (role, idea)
        ps = planes(v, w)
        self.n[k] = self.n.get(k, 0) + len(v)
        self.w[k] = w
        if groups is not None:  # planes v2: order-0 within the groups, per chunk
            o0 = sum(h0_chunks(p[groups == g]) for p in ps for g in np.unique(groups))
        else:
            o0 = sum(h0_chunks(p) for p in ps)
        self.o0[k] = self.o0.get(k, 0.0) + o0
        top = len(ps) - 1
        cond = hcond(ps[top], ctx.astype(np.int64), nctx)
        for j in range(top):
            cond += hcond(ps[j], ps[j + 1], 256)
        self.cond[k] = self.cond.get(k, 0.0) + cond

    def result(self):
        out = {}
        for k in self.n:
            raw = self.n[k] * self.w[k]
            out.setdefault(k[0], {})[k[1]] = {"o0": self.o0[k] / raw, "cond": self.cond[k] / raw, "elements": self.n[k]}
        return out


def groups4(e):
    """4 groups of equal count by the reference's exponent (planes v2's DP
    chooses its thresholds; equal counts are close to it)."""
    q = np.quantile(e, [0.25, 0.5, 0.75])
    return np.searchsorted(q, e, side="right")


def load(path):
    ck = torch.load(path, weights_only=False, map_location="cpu")
    if "state" in ck and "param_groups" in ck:  # an optimizer.pt alone (Hugging Face Trainer)
        return {"model": {}, "optimizer": ck}
    return ck


def roles(ck):
    """(role, key, tensor) of a checkpoint: model weights, then optimizer state."""
    model = ck["model"] if "model" in ck else ck
    opt = ck.get("optimizer", {})
    names = list(model.keys())
    out = [("weights", n, model[n]) for n in names]
    for i, st in sorted(opt.get("state", {}).items()):
        for key in ("exp_avg", "exp_avg_sq", "momentum_buffer"):
            if key in st:
                out.append((key, "%s[%d]" % (key, i), st[key]))
    return out


def opt_of(ck, i):
    st = ck["optimizer"]["state"][i]
    return st.get("exp_avg"), st.get("exp_avg_sq"), float(st["step"]) if "step" in st else None


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("files", nargs="+")
    a = p.parse_args()
    cks = [load(f) for f in a.files]
    acc = Acc()
    group = cks[0].get("optimizer", {}).get("param_groups", [{}])[0]
    beta1, beta2 = group.get("betas", (0.9, 0.999))
    eps = group.get("eps", 1e-8)
    sign_set = 0
    for k in range(1, len(cks)):
        cur, prev = roles(cks[k]), roles(cks[k - 1])
        prev2 = roles(cks[k - 2]) if k >= 2 else None
        adam = "optimizer" in cks[k] and "exp_avg" in cks[k]["optimizer"]["state"].get(0, {})
        steps = None
        if adam:
            steps = float(cks[k]["optimizer"]["state"][0]["step"]) - float(cks[k - 1]["optimizer"]["state"][0]["step"])
        widx = 0
        for (role, key, t), (_, _, r) in zip(cur, prev):
            u, w = bits_of(t)
            ru, _ = bits_of(r)
            e = expo(ru, w)
            g = groups4(e)
            acc.add(role, "base", rot(u, w), w, e)
            acc.add(role, "sub", sub(u, ru, w), w, e)
            acc.add(role, "sub groups4", sub(u, ru, w), w, e, groups=g)
            acc.add(role, "base groups4", rot(u, w), w, e, groups=g)
            acc.add(role, "base, no ref", rot(u, w), w, np.zeros(len(u), np.int64), nctx=1)
            if prev2 is None:
                acc.add(role, "sub, 2 refs per chunk", sub(u, ru, w), w, e)
            else:
                # Two references, per 64 Ki chunk the better (order-0) of the
                # last version and the extrapolation 2r1 - r2 (in the
                # order-preserving integers: geometric for positive values).
                r2u, _ = bits_of(prev2[[x[1] for x in prev2].index(key)][2])
                m1, m2 = omap(ru, w).astype(np.int64), omap(r2u, w).astype(np.int64)
                ex = np.clip(2 * m1 - m2, 0, (1 << w) - 1)
                inv = np.where(ex >= (1 << (w - 1)), ex ^ (1 << (w - 1)), ex ^ ((1 << w) - 1))
                s1, s2 = sub(u, ru, w), sub(u, inv.astype(np.uint64), w)
                best = s1.copy()
                for s in range(0, len(u), CHUNK):
                    b1 = sum(h0_chunks(pl) for pl in planes(s1[s:s + CHUNK], w))
                    b2 = sum(h0_chunks(pl) for pl in planes(s2[s:s + CHUNK], w))
                    if b2 < b1:
                        best[s:s + CHUNK] = s2[s:s + CHUNK]
                acc.add(role, "sub, 2 refs per chunk", best, w, e)
            if role == "exp_avg_sq":
                sign_set += int(((u >> (w - 1)) & 1).sum())
                decay = beta2 ** steps
                pred = to_bits(r.double().numpy().reshape(-1) * decay, t)
                acc.add(role, "sub vs beta2^N * ref", sub(u, pred, w), w, expo(pred, w))
                acc.add(role, "sub vs beta2^N * ref groups4", sub(u, pred, w), w, expo(pred, w), groups=groups4(expo(pred, w)))
                # The same without knowing beta2 or the steps: one factor per
                # 64 Ki chunk, the median of u/r (what a codec can estimate).
                rf, uf = r.double().numpy().reshape(-1), t.double().numpy().reshape(-1)
                sc = np.empty_like(rf)
                for s0 in range(0, len(rf), CHUNK):
                    rr, ux = rf[s0:s0 + CHUNK], uf[s0:s0 + CHUNK]
                    ok = rr > 0
                    f = float(np.median(ux[ok] / rr[ok])) if ok.any() else 1.0
                    sc[s0:s0 + CHUNK] = rr * np.float32(f)
                pred = to_bits(sc, t)
                acc.add(role, "sub vs median(u/r) * ref groups4", sub(u, pred, w), w, expo(pred, w), groups=groups4(expo(pred, w)))
            if role == "exp_avg":
                # exp_avg's magnitude from this checkpoint's exp_avg_sq
                # (|m| <~ sqrt(v)): the top plane given its own ref exponent
                # and the half exponent of v, relative, 16 levels.
                i = int(key.split("[")[1].rstrip("]"))
                v = cks[k]["optimizer"]["state"][i]["exp_avg_sq"]
                vu, _ = bits_of(v)
                hv = np.clip((expo(vu, w).astype(np.int64) + 127) // 2 - expo(ru, w).astype(np.int64) + 8, 0, 15)
                acc.add(role, "base, top|ref exp+v exp", rot(u, w), w, e * 16 + hv, nctx=4096)
                hv2 = (expo(vu, w).astype(np.int64) + 127) // 2
                acc.add(role, "base, top|v exp (no ref)", rot(u, w), w, np.clip(hv2, 0, 255))
                acc.add(role, "base groups4 by v exp", rot(u, w), w, e, groups=groups4(hv2))
            if role == "weights" and adam:
                # The weight change from the optimizer state of this
                # checkpoint: dw ~ -c * m / (sqrt(v) + eps), c fitted per
                # tensor (one float to store).
                m, v, _ = opt_of(cks[k], widx)
                if m is not None:
                    upd = (m.double() / (v.double().sqrt() + eps)).numpy().reshape(-1)
                    dw = (t.double() - r.double()).numpy().reshape(-1)
                    c = -float(np.dot(dw, upd) / max(np.dot(upd, upd), 1e-300))
                    pred = to_bits(r.double().numpy().reshape(-1) - c * upd, t)
                    acc.add(role, "sub vs ref - c*m/sqrt(v)", sub(u, pred, w), w, e)
                widx += 1
    res = {"files": a.files, "beta1": beta1, "beta2": beta2, "exp_avg_sq_sign_bits_set": sign_set, "roles": acc.result()}
    json.dump(res, sys.stdout, indent=1)
    print()


if __name__ == "__main__":
    main()
