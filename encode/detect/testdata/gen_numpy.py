"""Writes .npy and .npz files into OUTDIR and OUTDIR/expect-numpy.json with
the tensor ranges each must be labelled with.

usage: gen_numpy.py OUTDIR
"""
import io
import os
import struct
import sys
import zipfile

import numpy as np

from common import Expect, tensor, zip_members


def label_dtype(a):
    """The dtype the detector labels an array's data with."""
    d = a.dtype
    little = d.byteorder in '<=|'
    if little and d.kind == 'f' and d.itemsize in (2, 4, 8):
        return {2: 'float16', 4: 'float32', 8: 'float64'}[d.itemsize]
    if little and d.kind == 'c' and d.itemsize in (8, 16):
        return {8: 'float32', 16: 'float64'}[d.itemsize]
    return 'bytes'


def npy_header_len(raw, off):
    """Length of the .npy prelude and header starting at raw[off]."""
    assert raw[off:off + 6] == b'\x93NUMPY'
    if raw[off + 6] == 1:
        n, = struct.unpack_from('<H', raw, off + 8)
        return 10 + n
    n, = struct.unpack_from('<I', raw, off + 8)
    return 12 + n


def arrays(rng):
    return {
        'f32': rng.standard_normal((5, 7)).astype('<f4'),
        'f16': rng.standard_normal(33).astype('<f2'),
        'f64': rng.standard_normal((2, 3, 4)),
        'i64': np.arange(17, dtype='<i8'),
        'c64': (rng.standard_normal(6) + 1j).astype('<c8'),
        'bool': np.array([True, False, True]),
        'be32': rng.standard_normal(8).astype('>f4'),
        'fortran': np.asfortranarray(rng.standard_normal((4, 3)).astype('<f4')),
        'scalar': np.float32(2.5) * np.ones((), dtype='<f4'),
        'empty': np.zeros((0, 3), dtype='<f4'),
        'rec': np.zeros(3, dtype=[('a', '<f4'), ('b', '<i2')]),
    }


class Unseekable(io.RawIOBase):
    """A write-only stream: zipfile must use data descriptors on it."""

    def __init__(self, f):
        self.f = f

    def writable(self):
        return True

    def write(self, b):
        return self.f.write(b)


def main():
    out = sys.argv[1]
    rng = np.random.default_rng(7)
    arrs = arrays(rng)
    exp = Expect()
    for name, a in arrs.items():
        fn = 'a-%s.npy' % name
        path = os.path.join(out, fn)
        np.save(path, a)
        raw = open(path, 'rb').read()
        h = npy_header_len(raw, 0)
        exp.add(fn, 'npy', [tensor('npy', label_dtype(a), h, a.nbytes)])
        assert h + a.nbytes == len(raw)
    # A version 2.0 header (4-byte length field).
    fn = 'a-v2.npy'
    with open(os.path.join(out, fn), 'wb') as f:
        np.lib.format.write_array(f, arrs['f32'], version=(2, 0))
    exp.add(fn, 'npy', [tensor('npy', 'float32', 12 + struct.unpack_from(
        '<I', open(os.path.join(out, fn), 'rb').read(), 8)[0], arrs['f32'].nbytes)])

    plain = {k: v for k, v in arrs.items()}
    for fn, save in (('stored.npz', np.savez), ('compressed.npz', np.savez_compressed)):
        path = os.path.join(out, fn)
        save(path, **plain)
        exp.add(fn, 'npz', expect_npz(path, plain))
    # Stored members written to a stream that cannot seek: sizes come only in
    # data descriptors after each member.
    fn = 'stream.npz'
    path = os.path.join(out, fn)
    with open(path, 'wb') as f:
        with zipfile.ZipFile(Unseekable(f), 'w', zipfile.ZIP_STORED) as z:
            for k, v in plain.items():
                with z.open(k + '.npy', 'w', force_zip64=(k == 'f64')) as m:
                    np.lib.format.write_array(m, v)
    exp.add(fn, 'npz', expect_npz(path, plain))
    exp.write(os.path.join(out, 'expect-numpy.json'))


def expect_npz(path, arrs):
    raw = open(path, 'rb').read()
    ts = []
    for info, off in zip_members(path):
        if info.compress_type != zipfile.ZIP_STORED:
            continue
        a = arrs[info.filename[:-4]]
        h = npy_header_len(raw, off)
        length = a.nbytes
        ts.append(tensor(info.filename, label_dtype(a), off + h, length))
    return ts


if __name__ == '__main__':
    main()
