"""ckptfs from Python: mount a checkpoint store, read its report, and see how
each file is stored.

    import ckptfs

    with ckptfs.mount("runs/out") as m:      # mounts; unmounts on exit
        train(output_dir=m.path)             # any writer saves into it
        print(m.stats()["written_volume_ratio"])

    ckptfs.file_info("runs/out/checkpoint-10/model.safetensors")

The mount is the ckptfs program this package carries (or, outside a wheel,
the one on PATH or in $CKPTFS_BINARY); this module starts it and reads what
it serves, and imports nothing heavy: no torch, no transformers. The training
callbacks are in ckptfs.callbacks.
"""
from __future__ import annotations

import json
import os
import stat
import subprocess
from types import TracebackType
from typing import Any, Dict, Optional, Type, Union

from ckptfs._binary import binary, version

__all__ = [
    "CkptfsError",
    "FuseUnavailableError",
    "Mount",
    "MountError",
    "MountPointError",
    "NotOnCkptfsError",
    "StoreError",
    "binary",
    "file_info",
    "mount",
    "mount_root",
    "version",
]

PathLike = Union[str, "os.PathLike[str]"]

# The exit statuses of `ckptfs mount` (cmd/ckptfs/exitcode.go).
_EXIT_NO_FUSE = 3
_EXIT_MOUNT_POINT = 4
_EXIT_STORE = 5

_INFO_PREFIX = "user.ckptfs."
# The user.ckptfs.* attributes of a file (fs/node_xattr.go). listxattr does
# not list them, so that copying tools leave them behind: they are read by
# name.
_INFO_NAMES = (
    "stored_bytes",
    "codec",
    "reference",
    "chain_depth",
    "version",
    "family",
    "format",
    "ingest",
    "ref_reason",
    "ref_path",
    "pages",
    "fidelity",
)
# The attributes that are numbers; the others are strings.
_INFO_INTS = ("stored_bytes", "reference", "chain_depth", "version")


class CkptfsError(Exception):
    """Base of the errors this package raises."""


class MountError(CkptfsError):
    """ckptfs mount failed. reason is what the program said; returncode its
    exit status."""

    def __init__(self, reason: str, returncode: int = 1) -> None:
        super().__init__(reason)
        self.reason = reason
        self.returncode = returncode


class FuseUnavailableError(MountError):
    """FUSE cannot be used here: no /dev/fuse (the module is not loaded, or a
    container was started without the device), or it may not be opened."""


class MountPointError(MountError):
    """The mount point is missing, not a directory, or busy (something is
    mounted there already)."""


class StoreError(MountError):
    """The store was refused: another daemon holds it, another user owns it,
    others may write to it, or it lies inside the mount point."""


class NotOnCkptfsError(CkptfsError, ValueError):
    """The path is not a regular file on a ckptfs mount."""


_ERRORS: Dict[int, Type[MountError]] = {
    _EXIT_NO_FUSE: FuseUnavailableError,
    _EXIT_MOUNT_POINT: MountPointError,
    _EXIT_STORE: StoreError,
}


def _flag(name: str, value: Any) -> Optional[str]:
    flag = "--" + name.replace("_", "-")
    if value is None:
        return None
    if value is True:
        return flag
    if value is False:
        return flag + "=false"
    return "%s=%s" % (flag, value)


class Mount:
    """A mounted ckptfs store; a context manager that unmounts on exit.

    path is the mount point (absolute); store the store directory.
    """

    def __init__(self, path: str, store: str, program: str) -> None:
        self.path = path
        self.store = store
        self._program = program
        self._mounted = True

    def __enter__(self) -> "Mount":
        return self

    def __exit__(self, exc_type: Optional[Type[BaseException]], exc: Optional[BaseException],
                 tb: Optional[TracebackType]) -> None:
        if self._mounted:
            self.unmount()

    def __repr__(self) -> str:
        state = "mounted" if self._mounted else "unmounted"
        return "<ckptfs.Mount %s (store %s), %s>" % (self.path, self.store, state)

    @property
    def mounted(self) -> bool:
        return self._mounted

    def stats(self) -> Dict[str, Any]:
        """The live report (.ckptfs/stats.json): logical and stored bytes,
        written_volume_ratio, erase_ratio, the devices, every file."""
        if not self._mounted:
            raise CkptfsError("%s is no longer mounted" % self.path)
        return read_stats(self.path)

    def unmount(self, timeout: float = 600) -> None:
        """Unmounts, once every file written has been committed to the store
        (ckptfs umount waits for the daemon to close it)."""
        if not self._mounted:
            return
        r = subprocess.run([self._program, "umount", self.path], capture_output=True, text=True, timeout=timeout)
        if r.returncode != 0:
            raise CkptfsError("ckptfs umount %s: %s" % (self.path, (r.stderr or r.stdout).strip()))
        self._mounted = False


def mount(path: PathLike, store: Optional[PathLike] = None, *, create: bool = True, timeout: float = 120,
          **options: Any) -> Mount:
    """Mounts a ckptfs store on path (a directory, made with its parents
    unless create is False) and returns the Mount, which unmounts on leaving
    a with block.

    store is the store directory (default: ckptfs's own, under
    ~/.local/share/ckptfs/stores/, found again at the next mount of the same
    path). Other keyword arguments are `ckptfs mount` flags: codec="zstd" is
    --codec=zstd, cache_mib=256 is --cache-mib=256, sync_close=False is
    --sync-close=false, a True value the bare flag (no_passthrough=True).

    Raises FuseUnavailableError, MountPointError or StoreError for those
    refusals, MountError for any other failure, each with the program's
    reason; FileNotFoundError when no ckptfs program is found.
    """
    program = binary()
    mp = os.path.abspath(os.fspath(path))
    if create and not os.path.lexists(mp):
        os.makedirs(mp)
    args = [program, "mount"]
    if store is not None:
        args.append("--store=" + os.path.abspath(os.fspath(store)))
    for name, value in sorted(options.items()):
        f = _flag(name, value)
        if f is not None:
            args.append(f)
    args.append(mp)
    r = subprocess.run(args, capture_output=True, text=True, timeout=timeout)
    if r.returncode != 0:
        reason = (r.stderr or r.stdout).strip()
        if reason.startswith("ckptfs: "):
            reason = reason[len("ckptfs: "):]
        raise _ERRORS.get(r.returncode, MountError)(reason or "ckptfs mount exited %d" % r.returncode, r.returncode)
    try:
        st = read_stats(mp)
    except OSError as e:
        subprocess.run([program, "umount", mp], capture_output=True)
        raise MountError("mounted %s, but its report cannot be read: %s" % (mp, e)) from e
    return Mount(mp, st.get("store") or "", program)


def read_stats(mount_point: PathLike) -> Dict[str, Any]:
    """The live report of the ckptfs mount at mount_point."""
    with open(os.path.join(os.fspath(mount_point), ".ckptfs", "stats.json")) as f:
        report: Dict[str, Any] = json.load(f)
    return report


def mount_root(path: PathLike) -> Optional[str]:
    """The mount point of the ckptfs mount that holds path, or None."""
    p = os.path.abspath(os.fspath(path))
    while True:
        if os.path.isfile(os.path.join(p, ".ckptfs", "stats.json")):
            return p
        parent = os.path.dirname(p)
        if parent == p:
            return None
        p = parent


def file_info(path: PathLike) -> Dict[str, Union[int, str]]:
    """How a file on a ckptfs mount is stored: its user.ckptfs.* attributes
    without the prefix (stored_bytes, codec, reference, chain_depth, version,
    family, format, ingest, ref_reason, ref_path, pages, fidelity: "exact", or
    the lossy scheme an archive tier applied), the numbers as int.
    Waits for the file's commit if it was just written."""
    p = os.fspath(path)
    st = os.stat(p)
    if not stat.S_ISREG(st.st_mode):
        raise NotOnCkptfsError("%s is not a regular file" % p)
    info: Dict[str, Union[int, str]] = {}
    for key in _INFO_NAMES:
        try:
            value = os.getxattr(p, _INFO_PREFIX + key).decode()
        except OSError as e:
            if not info and key == _INFO_NAMES[0]:
                raise NotOnCkptfsError(
                    "%s is not on a ckptfs mount (no %s%s: %s)" % (p, _INFO_PREFIX, key, e.strerror)
                ) from e
            continue  # gone meanwhile (the file was replaced)
        info[key] = int(value) if key in _INFO_INTS and value.isdigit() else value
    return info
