"""Writes torch.save checkpoints (zip and legacy formats) into OUTDIR and
OUTDIR/expect-torch.json with the tensor ranges each must be labelled with.

usage: gen_torch.py OUTDIR [--small]
"""
import io
import os
import pickle
import struct
import sys

import torch

from common import DTYPES, Expect, tensor, zip_members


class Net(torch.nn.Module):
    def __init__(self, width):
        super().__init__()
        self.conv = torch.nn.Conv2d(3, 4, 3)
        self.bn = torch.nn.BatchNorm2d(4)  # num_batches_tracked is int64
        self.fc = torch.nn.Linear(width, 10)
        self.head = torch.nn.Linear(10, 2, bias=False)

    def forward(self, x):
        x = self.bn(self.conv(x)).flatten(1)
        return self.head(torch.relu(self.fc(x)))


def checkpoint(model, opt, step):
    base = torch.arange(12, dtype=torch.float32) * step
    return {
        'step': step,
        'model': model.state_dict(),
        'optimizer': opt.state_dict(),
        'half': {k: v.half() for k, v in model.state_dict().items() if v.is_floating_point()},
        'bf16': {'fc.weight': model.fc.weight.detach().bfloat16()},
        'nested': {'a': {'b': [torch.linspace(0, 1, 7, dtype=torch.float64) * step]}},
        'ints': torch.arange(9, dtype=torch.int64) + step,
        'mask': torch.tensor([True, False, True]),
        'shared': base,
        'view': base[2:8].view(2, 3),  # same storage as 'shared'
        'empty': torch.zeros(0),
    }


class PidUnpickler(pickle.Unpickler):
    """Records the storages named by persistent ids, in order of appearance."""

    def __init__(self, f):
        super().__init__(f)
        self.storages = {}

    def persistent_load(self, pid):
        _, stype, key, _, numel = pid[:5]
        name = stype.__name__ if isinstance(stype, type) else str(stype)
        self.storages.setdefault(key, (name, numel))
        return None

    def find_class(self, mod, name):
        if mod == 'torch' and name.endswith('Storage'):
            return type(name, (), {})
        if mod.startswith('torch'):
            return lambda *a, **k: None
        return super().find_class(mod, name)


def expect_zip(path):
    tensors = []
    infos = list(zip_members(path))
    pkl = [i for i, _ in infos if i.filename.endswith('/data.pkl')][0]
    import zipfile
    with zipfile.ZipFile(path) as z:
        u = PidUnpickler(io.BytesIO(z.read(pkl.filename)))
        u.load()
    for info, off in infos:
        prefix, _, rest = info.filename.partition('/')
        if not rest.startswith('data/'):
            continue
        stype, numel = u.storages[rest[5:]]
        dtype, width = DTYPES[stype]
        assert numel * width == info.file_size, (info.filename, numel, width, info.file_size)
        tensors.append(tensor(rest, dtype, off, info.file_size))
    return tensors


def expect_legacy(path):
    f = open(path, 'rb')
    for _ in range(3):
        pickle.load(f)
    u = PidUnpickler(f)
    u.load()
    order = {k: i for i, k in enumerate(u.storages)}
    keys = pickle.load(f)
    tensors = []
    for k in keys:
        n, = struct.unpack('<q', f.read(8))
        stype, _ = u.storages[k]
        dtype, width = DTYPES[stype]
        tensors.append(tensor('data/%d' % order[k], dtype, f.tell(), n * width))
        f.seek(n * width, 1)
    assert f.read() == b''
    return tensors


def main():
    out = sys.argv[1]
    small = '--small' in sys.argv
    torch.manual_seed(1)
    width = 4 * 2 * 2 if small else 4 * 14 * 14
    side = 4 if small else 16
    model = Net(width)
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    exp = Expect()
    for step in (1, 2):
        x = torch.randn(2, 3, side, side)
        opt.zero_grad()
        model(x).sum().backward()
        opt.step()
        ck = checkpoint(model, opt, step)
        # different file names give different archive prefixes (ckpt-1/, ckpt-2/)
        name = 'ckpt-%d.pt' % step
        torch.save(ck, os.path.join(out, name))
        exp.add(name, 'torch-zip', expect_zip(os.path.join(out, name)))
        name = 'legacy-%d.pt' % step
        torch.save(ck, os.path.join(out, name), _use_new_zipfile_serialization=False)
        exp.add(name, 'torch-legacy', expect_legacy(os.path.join(out, name)))
    exp.write(os.path.join(out, 'expect-torch.json'))


if __name__ == '__main__':
    main()
