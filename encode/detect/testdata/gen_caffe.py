"""Writes Caffe .caffemodel and .solverstate bytes, built with python3-protobuf
from caffe.proto (compiled with protoc into OUTDIR), into OUTDIR and
OUTDIR/expect-caffe.json.

usage: gen_caffe.py OUTDIR
"""
import os
import random
import struct
import subprocess
import sys

from common import Expect, tensor

HERE = os.path.dirname(os.path.abspath(__file__))


def load_pb(out):
    subprocess.run(['protoc', '--python_out=' + out, '-I', HERE,
                    os.path.join(HERE, 'caffe.proto')], check=True)
    sys.path.insert(0, out)
    import caffe_pb2
    return caffe_pb2


class Builder:
    """Fills blobs with random values and remembers where they must appear."""

    def __init__(self, seed):
        self.rng = random.Random(seed)
        self.want = []  # (key, dtype, packed bytes)

    def floats(self, n):
        return [struct.unpack('<f', struct.pack('<f', self.rng.uniform(-1, 1)))[0] for _ in range(n)]

    def blob(self, b, key, n, diff=False, double=False):
        b.shape.dim.extend([n])
        if double:
            v = [self.rng.uniform(-1, 1) for _ in range(n)]
            b.double_data.extend(v)
            self.want.append((key + '/double_data', 'float64', struct.pack('<%dd' % n, *v)))
            return
        v = self.floats(n)
        b.data.extend(v)
        self.want.append((key + '/data', 'float32', struct.pack('<%df' % n, *v)))
        if diff:
            d = self.floats(n)
            b.diff.extend(d)
            self.want.append((key + '/diff', 'float32', struct.pack('<%df' % n, *d)))

    def expect(self, raw):
        ts = []
        for key, dt, packed in self.want:
            off = raw.find(packed)
            assert off >= 0 and raw.find(packed, off + 1) < 0, key
            ts.append(tensor(key, dt, off, len(packed)))
        return ts


def net(pb, seed):
    b = Builder(seed)
    n = pb.NetParameter(name='lenet')
    n.input.append('data')
    n.input_dim.extend([1, 1, 8, 8])
    conv = n.layer.add(name='conv1', type='Convolution', bottom=['data'], top=['conv1'])
    conv.convolution_param.num_output = 4
    conv.convolution_param.kernel_size.append(3)
    conv.param.add(lr_mult=1)
    b.blob(conv.blobs.add(), 'conv1/0', 36)
    b.blob(conv.blobs.add(), 'conv1/1', 4)
    n.layer.add(name='relu1', type='ReLU', bottom=['conv1'], top=['conv1'])
    ip = n.layer.add(name='ip1', type='InnerProduct', bottom=['conv1'], top=['ip1'])
    ip.inner_product_param.num_output = 10
    b.blob(ip.blobs.add(), 'ip1/0', 1000, diff=True)
    b.blob(ip.blobs.add(), 'ip1/1', 10, double=True)
    # Two layers with one name: the second gets a distinct key.
    b.blob(n.layer.add(name='dup', type='Scale').blobs.add(), 'dup/0', 5)
    b.blob(n.layer.add(name='dup', type='Scale').blobs.add(), 'dup#1/0', 6)
    # A blob with no data at all labels nothing.
    n.layer.add(name='emptyblob', type='Scale').blobs.add()
    return n, b


def v1net(pb, seed):
    b = Builder(seed)
    n = pb.NetParameter(name='v1net')
    conv = n.layers.add(name='conv1', type=pb.V1LayerParameter.CONVOLUTION, bottom=['data'], top=['conv1'])
    conv.blobs_lr.extend([1, 2])
    b.blob(conv.blobs.add(), 'conv1/0', 27)
    b.blob(conv.blobs.add(), 'conv1/1', 3)
    ip = n.layers.add(name='fc', type=pb.V1LayerParameter.INNER_PRODUCT)
    b.blob(ip.blobs.add(), 'fc/0', 64)
    return n, b


def solver(pb, seed, it):
    b = Builder(seed)
    s = pb.SolverState(iter=it, learned_net='snap_iter_%d.caffemodel' % it, current_step=1)
    for i, size in enumerate((36, 4, 1000, 10)):
        b.blob(s.history.add(), 'history/%d' % i, size)
    return s, b


def main():
    out = sys.argv[1]
    pb = load_pb(out)
    exp = Expect()
    for it in (100, 200):
        for name, (msg, b) in (('snap_iter_%d.caffemodel' % it, net(pb, it)),
                               ('v1_iter_%d.caffemodel' % it, v1net(pb, it)),
                               ('snap_iter_%d.solverstate' % it, solver(pb, it, it))):
            raw = msg.SerializeToString()
            open(os.path.join(out, name), 'wb').write(raw)
            exp.add(name, 'caffe', b.expect(raw))
    exp.write(os.path.join(out, 'expect-caffe.json'))


if __name__ == '__main__':
    main()
