"""Regenerates testdata/golden: a few small real files and expect.json, for
the tests that run without Python and as fuzz seeds.

usage: /usr/bin/python3 testdata/make_golden.py   (from encode/detect)
"""
import json
import os
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
KEEP = {
    'torch': ['ckpt-1.pt', 'legacy-1.pt'],
    'numpy': ['a-f32.npy', 'a-rec.npy', 'stored.npz', 'stream.npz', 'compressed.npz'],
    'safetensors': ['gaps.safetensors'],
    'caffe': ['snap_iter_100.caffemodel', 'v1_iter_100.caffemodel', 'snap_iter_100.solverstate'],
}


def main():
    golden = os.path.join(HERE, 'golden')
    os.makedirs(golden, exist_ok=True)
    files = []
    with tempfile.TemporaryDirectory() as tmp:
        for kind, keep in KEEP.items():
            args = [sys.executable, os.path.join(HERE, 'gen_%s.py' % kind), tmp]
            if kind == 'torch':
                args.append('--small')
            subprocess.run(args, check=True, cwd=HERE)
            exp = json.load(open(os.path.join(tmp, 'expect-%s.json' % kind)))
            for f in exp['files']:
                if f['name'] in keep:
                    shutil.copy(os.path.join(tmp, f['name']), golden)
                    files.append(f)
    with open(os.path.join(golden, 'expect.json'), 'w') as f:
        json.dump({'files': files}, f, indent=1, sort_keys=True)


if __name__ == '__main__':
    main()
