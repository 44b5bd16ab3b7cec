"""Which version of a file a path names now, without reading it."""

from __future__ import annotations

import os

# Device, inode, size and modification time, through links: kubelet swaps a mounted Secret by
# relinking, and an editor may write a file in place, and either changes one of these.
FileIdentity = tuple[int, int, int, int]


def file_identity(path: str | os.PathLike[str]) -> FileIdentity:
    """Raises OSError when the path cannot be stat'ed."""
    status = os.stat(path)
    return (status.st_dev, status.st_ino, status.st_size, status.st_mtime_ns)
