"""Writes safetensors files (with a small writer of ours following the
published format: 8-byte little-endian header size, JSON header, data) into
OUTDIR and OUTDIR/expect-safetensors.json.

usage: gen_safetensors.py OUTDIR
"""
import json
import os
import struct
import sys

import numpy as np

from common import Expect, tensor

LABEL = {'F32': 'float32', 'F16': 'float16', 'BF16': 'bfloat16', 'F64': 'float64'}


def write(path, tensors, gap=0, trailing=b'', metadata=None, align=8):
    """tensors: list of (name, dtype, shape, bytes), laid out in list order,
    gap unused bytes between consecutive tensors. Returns expected ranges."""
    header, data, at = {}, b'', 0
    for name, dt, shape, raw in tensors:
        if data:
            data += b'\xee' * gap
            at += gap
        header[name] = {'dtype': dt, 'shape': shape, 'data_offsets': [at, at + len(raw)]}
        data += raw
        at += len(raw)
    if metadata is not None:
        header['__metadata__'] = metadata
    # reversed key order: the detector must order tensors by offset, not by key
    h = json.dumps(dict(reversed(list(header.items())))).encode()
    h += b' ' * (-len(h) % align)
    with open(path, 'wb') as f:
        f.write(struct.pack('<Q', len(h)) + h + data + trailing)
    base = 8 + len(h)
    return [tensor(n, LABEL.get(dt, 'bytes'), base + header[n]['data_offsets'][0], len(raw))
            for n, dt, _, raw in tensors]


def main():
    out = sys.argv[1]
    rng = np.random.default_rng(3)
    f32 = rng.standard_normal((8, 16)).astype('<f4')
    ts = [
        ('model.embed.weight', 'F32', [8, 16], f32.tobytes()),
        ('model.norm.weight', 'F16', [16], rng.standard_normal(16).astype('<f2').tobytes()),
        ('model.bf16', 'BF16', [5, 3], (f32[:5, :3].view('<u4') >> 16).astype('<u2').tobytes()),
        ('model.f64', 'F64', [3], rng.standard_normal(3).tobytes()),
        ('step', 'I64', [], struct.pack('<q', 1234)),
        ('mask', 'BOOL', [4], bytes([1, 0, 0, 1])),
        ('empty', 'F32', [0, 4], b''),
        ('model.head.weight', 'F32', [4, 4], rng.standard_normal((4, 4)).astype('<f4').tobytes()),
    ]
    exp = Expect()
    exp.add('model.safetensors', 'safetensors',
            write(os.path.join(out, 'model.safetensors'), ts, metadata={'format': 'pt'}))
    exp.add('gaps.safetensors', 'safetensors',
            write(os.path.join(out, 'gaps.safetensors'), ts, gap=13, trailing=b'trailing bytes'))
    exp.add('unaligned.safetensors', 'safetensors',
            write(os.path.join(out, 'unaligned.safetensors'), ts[:3], align=1))
    exp.write(os.path.join(out, 'expect-safetensors.json'))


if __name__ == '__main__':
    main()
