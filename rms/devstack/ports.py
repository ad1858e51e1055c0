"""Free loopback ports that no other process of this machine is handed at the same time.

The OS picks a port nobody listens on (``bind(0)``), but between that and the moment the caller
listens on it another caller may be handed the same one: a second pick in the same process (a
port just closed is free again), or a parallel test worker, ``rms dev`` or benchmark picking
at the same moment. So every port handed out is claimed: remembered by the process, and
claimed machine-wide by a file created exclusively under the temporary folder
(``rms-ports/<port>``), which keeps it from everyone else for :data:`CLAIM_SECONDS`. Ports
are plenty (about 28,000 ephemeral ones); a claim is never released early, it only ages.
"""

from __future__ import annotations

import contextlib
import os
import socket
import tempfile
import time
from pathlib import Path

CLAIMS = Path(tempfile.gettempdir()) / "rms-ports"
CLAIM_SECONDS = 900.0
_PICKS = 200  # picks before giving up (each collision costs one)
_handed_out: set[int] = set()


class NoFreePort(RuntimeError):
    """No port could be claimed."""


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port nobody listens on right now, and that nobody else is handed for a while."""
    for _ in range(_PICKS):
        port = _pick(host)
        if port not in _handed_out and claim(port):
            _handed_out.add(port)
            return port
    raise NoFreePort(f"no free port on {host} after {_PICKS} picks")


def claim(port: int, now: float | None = None) -> bool:
    """Claim ``port`` machine-wide; False while someone else's claim of it is younger than
    :data:`CLAIM_SECONDS`."""
    CLAIMS.mkdir(parents=True, exist_ok=True)
    path = CLAIMS / str(port)
    moment = time.time() if now is None else now
    for _ in range(2):
        try:
            os.close(os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o666))
        except FileExistsError:
            with contextlib.suppress(FileNotFoundError):
                if moment - path.stat().st_mtime < CLAIM_SECONDS:
                    return False
                path.unlink()  # an old claim: take it over
            continue
        os.utime(path, (moment, moment))
        return True
    return False


def _pick(host: str) -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])
