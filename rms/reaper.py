"""Children of ``rms dev`` never outlive it.

- Every child is started in its own session (process group) with Linux's parent-death signal
  set (:func:`tied_to_parent`), so it gets SIGTERM the moment ``rms dev`` dies, even by
  ``kill -9``.
- PostgreSQL is a daemon (``pg_ctl`` detaches it), and a child's own children (uvicorn
  workers, the JVM's) do not inherit the parent-death signal. So ``rms dev`` also starts a
  watchdog (``python -m rms.reaper``): it polls for its parent, and when the parent is gone it
  stops every process group recorded in the pid file and the PostgreSQL of the data folder.
- The next ``rms dev`` on the same folder stops whatever a run left behind
  (:func:`stop_leftovers`) before it binds any port.
"""

from __future__ import annotations

import argparse
import contextlib
import ctypes
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

_PR_SET_PDEATHSIG = 1
GRACE_SECONDS = 8.0


def tied_to_parent() -> Callable[[], None]:
    """A ``preexec_fn`` for a child of this process: the child gets SIGTERM when this process
    dies (Linux; elsewhere nothing), also if it died between the fork and the child's
    ``prctl`` (then the child was re-parented already and ends itself). Only for children
    started from the main thread: Linux sends the signal when the creating *thread* ends."""
    parent = os.getpid()

    def preexec() -> None:
        if sys.platform.startswith("linux"):
            libc = ctypes.CDLL(None, use_errno=True)
            libc.prctl(_PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)
        if os.getppid() != parent:
            os.kill(os.getpid(), signal.SIGTERM)

    return preexec



class PidFile:
    """Process groups started by one ``rms dev`` run, one pid a line."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def record(self, pid: int) -> None:
        with self.path.open("a") as out:
            out.write(f"{pid}\n")

    def pids(self) -> list[int]:
        if not self.path.exists():
            return []
        return [int(line) for line in self.path.read_text().split() if line.isdigit()]

    def clear(self) -> None:
        self.path.unlink(missing_ok=True)


def stop_groups(pids: list[int], grace: float = GRACE_SECONDS) -> None:
    """SIGTERM to each process group (resumed first, in case it was stopped), SIGKILL to what
    is left after ``grace`` seconds."""
    alive = [pid for pid in pids if _signal_group(pid, signal.SIGCONT)]
    for pid in alive:
        _signal_group(pid, signal.SIGTERM)
    deadline = time.monotonic() + grace
    while alive and time.monotonic() < deadline:
        time.sleep(0.1)
        alive = [pid for pid in alive if _signal_group(pid, 0)]
    for pid in alive:
        _signal_group(pid, signal.SIGKILL)


def _signal_group(pgid: int, signum: int) -> bool:
    """Signal process group ``pgid``; False when it no longer exists."""
    try:
        os.killpg(pgid, signum)
    except ProcessLookupError:
        return False
    except PermissionError:  # a recycled id that is not ours: leave it alone
        return False
    return True


def stop_postgres(pg_ctl: str, data_dir: Path, user: str | None) -> None:
    if (data_dir / "postmaster.pid").exists():
        with contextlib.suppress(OSError, subprocess.SubprocessError):
            subprocess.run([pg_ctl, "-D", str(data_dir), "-m", "fast", "-w", "-t", "20", "stop"],
                           user=user, capture_output=True, check=False, timeout=30, cwd="/")


def stop_leftovers(pid_file: PidFile) -> None:
    """What an earlier run on the same folder left running (its watchdog was killed too)."""
    stop_groups(pid_file.pids())
    pid_file.clear()


def start_watchdog(pid_file: PidFile, pg_ctl: str, pg_data: Path, user: str | None,
                   log: Path) -> subprocess.Popen[bytes]:
    argv = [sys.executable, "-m", "rms.reaper", "--parent", str(os.getpid()),
            "--pid-file", str(pid_file.path), "--pg-ctl", pg_ctl, "--pg-data", str(pg_data)]
    if user:
        argv += ["--pg-user", user]
    with log.open("ab") as sink:
        return subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=sink,
                                stderr=subprocess.STDOUT, start_new_session=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m rms.reaper")
    parser.add_argument("--parent", type=int, required=True)
    parser.add_argument("--pid-file", type=Path, required=True)
    parser.add_argument("--pg-ctl", required=True)
    parser.add_argument("--pg-data", type=Path, required=True)
    parser.add_argument("--pg-user", default=None)
    args = parser.parse_args(argv)
    signal.signal(signal.SIGHUP, signal.SIG_IGN)  # outlives a closed terminal, by design
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # and the Ctrl-C meant for rms dev
    while _alive(args.parent):
        time.sleep(0.5)
    stop_groups(PidFile(args.pid_file).pids())
    stop_postgres(args.pg_ctl, args.pg_data, args.pg_user)
    PidFile(args.pid_file).clear()
    return 0


def _alive(pid: int) -> bool:
    if os.getppid() != pid:  # re-parented: the parent is gone
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


if __name__ == "__main__":
    sys.exit(main())
