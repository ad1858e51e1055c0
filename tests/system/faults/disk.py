"""A size-limited file system (tmpfs, mounted as root) for a server's data directory, and a
way to fill it to the last byte and free it again: the full-disk faults."""

from __future__ import annotations

import errno
import os
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

CHUNK = 1 << 20
FILLER = ".rms-disk-filler"


def cannot_mount() -> str | None:
    """Why this machine cannot mount a tmpfs (None: it can)."""
    if os.geteuid() != 0:
        return "mounting a size-limited tmpfs needs root"
    if shutil.which("mount") is None or shutil.which("umount") is None:
        return "mount/umount are not installed"
    return None


@dataclass
class SizedDisk:
    """A tmpfs of ``megabytes`` on ``path`` (created empty)."""

    path: Path
    megabytes: int
    mounted: bool = False

    @property
    def filler(self) -> Path:
        return self.path / FILLER

    def mount(self) -> None:
        self.path.mkdir(parents=True, exist_ok=True)
        subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={self.megabytes}m,mode=0700",
                        "tmpfs", str(self.path)], check=True, capture_output=True, timeout=30)
        self.mounted = True

    def unmount(self) -> None:
        """Unmount (lazily if a process still holds a file there, so a failed test never
        leaves the mount behind)."""
        if not self.mounted:
            return
        result = subprocess.run(["umount", str(self.path)], capture_output=True, timeout=30,
                                check=False)
        if result.returncode != 0:
            subprocess.run(["umount", "-l", str(self.path)], check=True, capture_output=True,
                           timeout=30)
        self.mounted = False

    def fill(self) -> int:
        """Write a filler file until the file system has no byte left; its size."""
        written = 0
        block = b"\0" * CHUNK
        with self.filler.open("ab", buffering=0) as sink:
            for size in (CHUNK, 4096, 1):
                try:
                    while True:
                        written += sink.write(block[:size]) or 0
                except OSError as exc:
                    if exc.errno != errno.ENOSPC:
                        raise
        return written

    def free(self) -> None:
        self.filler.unlink(missing_ok=True)

    def available(self) -> int:
        stat = os.statvfs(self.path)
        return stat.f_bavail * stat.f_frsize
