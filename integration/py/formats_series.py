#!/usr/bin/env python3
"""Write a training-like series of Caffe, NumPy and safetensors checkpoints.

usage: formats_series.py OUT MIRROR ROUNDS CAFFE_PROTO

For each round r, weights drift as in training (small SGD-like steps), and
OUT and MIRROR both receive, written the way each tool writes them:
  snapshot_iter_<it>.caffemodel   NetParameter serialised by python3-protobuf
  snapshot_iter_<it>.solverstate  SolverState with momentum history blobs
  weights-<r>.npy                 np.save of one array
  optim-<r>.npz                   np.savez of several arrays (zipfile)
  model-<r>.safetensors           written by this script from the published format
  log.jsonl / notes.txt           plain text appended/rewritten beside them
"""
import json
import os
import struct
import subprocess
import sys
import tempfile

import numpy as np


def load_pb(proto):
    out = tempfile.mkdtemp()
    subprocess.run(["protoc", "--python_out=" + out, "-I", os.path.dirname(proto), proto], check=True)
    sys.path.insert(0, out)
    import caffe_pb2
    return caffe_pb2


def safetensors_bytes(tensors):
    """The safetensors format: 8-byte little-endian header length, a JSON
    header of dtype/shape/data_offsets per tensor, then the data."""
    header, blobs, off = {}, [], 0
    for name, a in tensors.items():
        b = a.astype("<f4").tobytes()
        header[name] = {"dtype": "F32", "shape": list(a.shape), "data_offsets": [off, off + len(b)]}
        blobs.append(b)
        off += len(b)
    header["__metadata__"] = {"format": "pt"}
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * (-len(h) % 8)
    return struct.pack("<Q", len(h)) + h + b"".join(blobs)


def main():
    out, mirror, rounds, proto = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
    pb = load_pb(proto)
    rng = np.random.default_rng(7)
    shapes = {"conv1": (32, 3, 5, 5), "conv2": (64, 32, 5, 5), "ip1": (256, 1024), "ip2": (10, 256)}
    w = {k: (rng.standard_normal(s) * 0.05).astype(np.float32) for k, s in shapes.items()}
    b = {k: np.zeros(s[0], np.float32) for k, s in shapes.items()}
    mom = {k: np.zeros_like(v) for k, v in w.items()}
    for d in (out, mirror):
        os.makedirs(d, exist_ok=True)
    for r in range(rounds):
        for k in w:  # a few SGD-with-momentum steps
            for _ in range(5):
                g = (0.01 * w[k] + rng.standard_normal(w[k].shape) * 1e-3).astype(np.float32)
                mom[k] = (0.9 * mom[k] + g).astype(np.float32)
                w[k] = (w[k] - 0.01 * mom[k]).astype(np.float32)
        it = (r + 1) * 1000
        net = pb.NetParameter(name="caffenet-like")
        for k in shapes:
            layer = net.layer.add(name=k, type="Convolution" if k.startswith("conv") else "InnerProduct")
            for arr in (w[k], b[k]):
                blob = layer.blobs.add()
                blob.shape.dim.extend(arr.shape)
                blob.data.extend(arr.ravel().tolist())
        state = pb.SolverState(iter=it, learned_net="snapshot_iter_%d.caffemodel" % it, current_step=0)
        for k in shapes:
            h = state.history.add()
            h.shape.dim.extend(mom[k].shape)
            h.data.extend(mom[k].ravel().tolist())
        files = {
            "snapshot_iter_%d.caffemodel" % it: net.SerializeToString(),
            "snapshot_iter_%d.solverstate" % it: state.SerializeToString(),
            "model-%d.safetensors" % r: safetensors_bytes({k + ".weight": w[k] for k in w}),
        }
        for d in (out, mirror):
            for name, data in files.items():
                with open(os.path.join(d, name), "wb") as f:
                    f.write(data)
            np.save(os.path.join(d, "weights-%d.npy" % r), w["ip1"])
            np.savez(os.path.join(d, "optim-%d.npz" % r), **mom)
            with open(os.path.join(d, "log.jsonl"), "a") as f:
                f.write(json.dumps({"round": r, "iter": it, "norm": float(np.linalg.norm(w["ip1"]))}) + "\n")
            with open(os.path.join(d, "notes.txt"), "w") as f:
                f.write("last round %d\n" % r)


if __name__ == "__main__":
    main()
