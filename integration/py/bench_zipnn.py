#!/usr/bin/env python3
"""ZipNN on a checkpoint series, file by file: the peer benchrun's zipnn
section sets beside ckptfs's codecs.

Each file is compressed on its own (base) and, when the previous version of
the same file (same path with the digits masked) has the same length, as
ZipNN's delta of the two (delta_compressed_type="byte": XOR of the two files,
then ZipNN), with --threads threads each. Every output is decompressed and
checked byte for byte. Prints JSON: per mode and thread count, plain and
compressed bytes, compress and decompress CPU time (process_time) and wall
time (perf_counter), best of --reps.

ZipNN 0.5.4 reorders the bytes of its input in place, even of an immutable
bytes object, so each call gets a fresh copy (made outside the timing) and
the output is checked against an untouched original.
"""
import argparse
import importlib.metadata
import json
import re
import sys
import time
import warnings

warnings.filterwarnings("ignore")

import zipnn  # noqa: E402


def timed(f, *args, **kw):
    w0, c0 = time.perf_counter(), time.process_time()
    out = f(*args, **kw)
    return out, time.process_time() - c0, time.perf_counter() - w0


def family(path):
    return re.sub(r"\d+", "N", path)


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--dtype", default="float32", help="ZipNN bytearray_dtype: float32, bfloat16, float16")
    p.add_argument("--threads", default="1,2", help="comma-separated thread counts")
    p.add_argument("--reps", type=int, default=1, help="timed repetitions (best is kept)")
    p.add_argument("files", nargs="+", help="the series in save order")
    a = p.parse_args()
    res = {"zipnn_version": importlib.metadata.version("zipnn"), "dtype": a.dtype, "runs": []}
    for th in [int(t) for t in a.threads.split(",")]:
        for mode in ("base", "delta"):
            res["runs"].append(run(a, th, mode))
    json.dump(res, sys.stdout, indent=1)
    print()


def run(a, threads, mode):
    r = {"mode": mode, "threads": threads, "plain": 0, "compressed": 0, "files": 0, "delta_files": 0,
         "comp_cpu": 0.0, "comp_wall": 0.0, "decomp_cpu": 0.0, "decomp_wall": 0.0}
    prev = {}
    for path in a.files:
        with open(path, "rb") as f:
            data = f.read()
        ref = prev.get(family(path))
        prev[family(path)] = data
        delta = mode == "delta" and ref is not None and len(ref) == len(data)
        kw = {"delta_compressed_type": "byte"} if delta else {}
        z = zipnn.ZipNN(input_format="byte", bytearray_dtype=a.dtype, threads=threads, **kw)
        best = None
        for _ in range(a.reps):
            src = bytearray(data)
            extra = {"delta_second_data": bytes(ref)} if delta else {}
            comp, cc, cw = timed(z.compress, src, **extra)
            comp = bytes(comp)
            out, dc, dw = timed(z.decompress, comp, **extra)
            if bytes(out) != data:
                sys.exit("bench_zipnn: %s (%s, %d threads) does not round-trip" % (path, mode, threads))
            if best is None or cc + dc < best[1] + best[3]:
                best = (len(comp), cc, cw, dc, dw)
        r["files"] += 1
        r["delta_files"] += int(delta)
        r["plain"] += len(data)
        r["compressed"] += best[0]
        r["comp_cpu"] += best[1]
        r["comp_wall"] += best[2]
        r["decomp_cpu"] += best[3]
        r["decomp_wall"] += best[4]
    return r


if __name__ == "__main__":
    main()
