#!/usr/bin/env python3
"""Builds the ckptfs wheel: the ckptfs package of this folder and a static
ckptfs program (CGO_ENABLED=0) as ckptfs/bin/ckptfs, for one machine type.

    build_wheel.py --binary bin/ckptfs --arch x86_64 --out dist

The version is the program's own (`ckptfs version`, PEP 440); give
--version where the program cannot run here (another machine type). The
wheel is py3-none-manylinux_2_17_<arch>: the program needs no C library, so
any Linux with FUSE takes it. pip install puts `ckptfs` on PATH (a launcher
that execs the program) and makes `python -m ckptfs` and `import ckptfs`
work. Only the standard library is used, and the same inputs give the same
bytes (fixed timestamps, sorted entries).
"""
from __future__ import annotations

import argparse
import base64
import hashlib
import os
import re
import subprocess
import sys
import zipfile

HERE = os.path.dirname(os.path.abspath(__file__))
PACKAGE = "ckptfs"
ARCHES = ("x86_64", "aarch64")
# Fixed, so that a rebuild of the same inputs gives the same wheel.
EPOCH = (1980, 1, 1, 0, 0, 0)
PEP440 = re.compile(r"^\d+(\.\d+)*(\+[a-z0-9]+(\.[a-z0-9]+)*)?$")

SUMMARY = "A checkpoint filesystem that stores training checkpoints as float deltas"
DESCRIPTION = """\
ckptfs is a FUSE filesystem for the directory a training saves its
checkpoints into. It stores each checkpoint as a delta against the previous
one, on a simulated SSD that counts the writes and erases it was spared, and
serves the exact bytes back. This wheel carries the ckptfs program (static,
Linux) and a small Python API:

    import ckptfs
    with ckptfs.mount("out") as m:
        ...                       # save checkpoints into out/
        print(m.stats()["written_volume_ratio"])

ckptfs.callbacks has a Hugging Face TrainerCallback and a Lightning Callback
that log the saving of every checkpoint through the trainer's own logging.
"""


def program_version(binary: str) -> str:
    out = subprocess.run([binary, "version"], capture_output=True, text=True, check=True).stdout.split()
    if len(out) != 2 or out[0] != "ckptfs":
        raise SystemExit("build_wheel: %s version printed %r" % (binary, " ".join(out)))
    return out[1]


def record_hash(data: bytes) -> str:
    digest = hashlib.sha256(data).digest()
    return "sha256=" + base64.urlsafe_b64encode(digest).rstrip(b"=").decode()


def package_files() -> list:
    """(path in the wheel, path here) of the Python package, sorted."""
    src = os.path.join(HERE, PACKAGE)
    out = []
    for name in sorted(os.listdir(src)):
        if name.endswith(".py") or name == "py.typed":
            out.append(("%s/%s" % (PACKAGE, name), os.path.join(src, name)))
    return out


def build(binary: str, arch: str, version: str, out_dir: str) -> str:
    if arch not in ARCHES:
        raise SystemExit("build_wheel: --arch %s: want one of %s" % (arch, ", ".join(ARCHES)))
    if not PEP440.match(version):
        raise SystemExit("build_wheel: version %r is not a PEP 440 version" % version)
    tag = "py3-none-manylinux_2_17_%s.manylinux2014_%s" % (arch, arch)
    dist_info = "%s-%s.dist-info" % (PACKAGE, version)
    entries = []  # (name, bytes, executable)
    for name, path in package_files():
        with open(path, "rb") as f:
            entries.append((name, f.read(), False))
    with open(binary, "rb") as f:
        entries.append(("%s/bin/ckptfs" % PACKAGE, f.read(), True))
    metadata = "\n".join([
        "Metadata-Version: 2.1",
        "Name: %s" % PACKAGE,
        "Version: %s" % version,
        "Summary: %s" % SUMMARY,
        "Home-page: https://github.com/ckptfs/ckptfs",
        "Requires-Python: >=3.8",
        "Classifier: Operating System :: POSIX :: Linux",
        "Classifier: Programming Language :: Python :: 3",
        "Classifier: Topic :: System :: Filesystems",
        "Description-Content-Type: text/plain",
        "",
        DESCRIPTION,
    ])
    wheel = "\n".join(["Wheel-Version: 1.0", "Generator: ckptfs build_wheel.py", "Root-Is-Purelib: false",
                       "Tag: %s" % tag, ""])
    entry_points = "[console_scripts]\nckptfs = ckptfs.__main__:main\n"
    entries += [
        ("%s/METADATA" % dist_info, metadata.encode(), False),
        ("%s/WHEEL" % dist_info, wheel.encode(), False),
        ("%s/entry_points.txt" % dist_info, entry_points.encode(), False),
        ("%s/top_level.txt" % dist_info, (PACKAGE + "\n").encode(), False),
    ]
    record = "".join("%s,%s,%d\n" % (name, record_hash(data), len(data)) for name, data, _ in entries)
    record += "%s/RECORD,,\n" % dist_info
    entries.append(("%s/RECORD" % dist_info, record.encode(), False))

    os.makedirs(out_dir, exist_ok=True)
    path = os.path.join(out_dir, "%s-%s-%s.whl" % (PACKAGE, version, tag))
    tmp = path + ".tmp"
    with zipfile.ZipFile(tmp, "w", zipfile.ZIP_DEFLATED) as z:
        for name, data, executable in entries:
            info = zipfile.ZipInfo(name, EPOCH)
            info.compress_type = zipfile.ZIP_DEFLATED
            info.external_attr = ((0o755 if executable else 0o644) | 0o100000) << 16
            z.writestr(info, data)
    os.replace(tmp, path)
    return path


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--binary", required=True, help="the static ckptfs program for --arch")
    p.add_argument("--arch", default="x86_64", choices=ARCHES)
    p.add_argument("--version", help="default: what the program's `ckptfs version` prints")
    p.add_argument("--out", default="dist")
    a = p.parse_args()
    version = a.version or program_version(a.binary)
    print(build(a.binary, a.arch, version, a.out))


if __name__ == "__main__":
    sys.exit(main())
