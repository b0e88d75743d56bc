"""Where the ckptfs program is, and its version."""
from __future__ import annotations

import functools
import os
import shutil
import subprocess

_HERE = os.path.dirname(os.path.abspath(__file__))


def binary() -> str:
    """The ckptfs program: $CKPTFS_BINARY, else the one this wheel carries,
    else the one on PATH. Raises FileNotFoundError when there is none."""
    env = os.environ.get("CKPTFS_BINARY")
    if env:
        if not os.access(env, os.X_OK):
            raise FileNotFoundError("CKPTFS_BINARY=%s is not an executable file" % env)
        return env
    bundled = os.path.join(_HERE, "bin", "ckptfs")
    if os.access(bundled, os.X_OK):
        return bundled
    found = shutil.which("ckptfs")
    if found:
        return found
    raise FileNotFoundError("no ckptfs program: install the ckptfs wheel, put ckptfs on PATH, or set CKPTFS_BINARY")


@functools.lru_cache(maxsize=None)
def version() -> str:
    """The version of the ckptfs program (ckptfs version), e.g. 0.1.0."""
    out = subprocess.run([binary(), "version"], capture_output=True, text=True, check=True).stdout
    return out.split()[-1]
