"""The transactional ids of one process: ``<prefix>.<instance>.<role>.<n>`` (design section 4,
"Transactions").

An id must stay the same when its process restarts (the new producer then fences the dead
one's, and the broker aborts the Kafka transaction it left open) and must differ between any
two live processes (two producers with one id fence each other). ``RMS_INSTANCE_NAME`` gives
the instance a stable name; without it, the instance is the host name with the lowest slot
number of this host and role that no live process holds: an exclusive ``flock`` on
``<slot dir>/<role>-<slot>.lock``, which the operating system releases when the process dies,
so a restarted process takes the slot its dead predecessor held.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import socket
from dataclasses import dataclass
from pathlib import Path
from typing import IO

_MAX_SLOTS = 1024


@dataclass
class InstanceSlot:
    """A slot held by this process until :meth:`release` (or its death)."""

    number: int
    handle: IO[bytes] | None = None

    def release(self) -> None:
        if self.handle is not None:
            with contextlib.suppress(OSError):
                fcntl.flock(self.handle, fcntl.LOCK_UN)
            self.handle.close()
            self.handle = None


def take_slot(directory: Path, role: str) -> InstanceSlot:
    """The lowest free slot of ``role`` on this host, locked until released."""
    directory.mkdir(parents=True, exist_ok=True)
    for number in range(_MAX_SLOTS):
        handle = (directory / f"{role}-{number}.lock").open("ab")
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            handle.close()
            continue
        handle.truncate(0)
        handle.write(f"{os.getpid()}\n".encode())
        handle.flush()
        return InstanceSlot(number, handle)
    raise RuntimeError(f"no free instance slot for {role!r} under {directory}")


@dataclass
class TransactionalIds:
    """The ids of one process's transactional producers, and the slot that makes them its."""

    ids: tuple[str, ...]
    slot: InstanceSlot | None

    def release(self) -> None:
        if self.slot is not None:
            self.slot.release()


def transactional_ids(prefix: str, instance_name: str | None, slot_dir: str, role: str,
                      count: int) -> TransactionalIds:
    """``count`` ids for ``role``; takes a slot of this host when no instance name is given."""
    slot = None
    if instance_name is None:
        slot = take_slot(Path(slot_dir), role)
        instance_name = f"{socket.gethostname()}-{slot.number}"
    return TransactionalIds(tuple(f"{prefix}.{instance_name}.{role}.{n}" for n in range(count)),
                            slot)
