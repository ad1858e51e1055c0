"""Children of ``rms dev`` never outlive it.

- Every child is started in its own session (process group) with Linux's parent-death signal
  set (:func:`tied_to_parent`), so it gets SIGTERM the moment ``rms dev`` dies, even by
  ``kill -9``.
- PostgreSQL is a daemon (``pg_ctl`` detaches it), and a child's own children (uvicorn
  workers, the JVM's) do not inherit the parent-death signal. So ``rms dev`` also starts a
  watchdog (``python -m rms.devstack.reaper``): it polls for its parent, and when the parent is gone it
  stops every process group recorded in the pid file and the PostgreSQL of the data folder.
- One ``rms dev`` per data folder (:class:`RunLock`): the lock is held by ``rms dev`` and by
  its watchdog (which inherits it), so a second run on the same folder is refused while the
  first lives, and waits while a killed run's watchdog is still cleaning up; it never stops
  or reuses what another live run started.
- The next ``rms dev`` on the same folder stops whatever a run left behind
  (:func:`stop_leftovers`) before it binds any port.
"""

from __future__ import annotations

import argparse
import contextlib
import ctypes
import fcntl
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

_PR_SET_PDEATHSIG = 1
GRACE_SECONDS = 8.0
CLEAN_UP_WAIT_SECONDS = 40.0  # a killed run's watchdog: groups' grace + PostgreSQL's stop


class FolderInUse(RuntimeError):
    """Another ``rms dev`` (or a killed one's clean-up) holds the data folder."""


class RunLock:
    """An exclusive ``flock`` on ``<data dir>/dev.lock`` naming the ``rms dev`` that holds it.
    The kernel releases it when the last process holding it (``rms dev`` or its watchdog) ends,
    however it ends."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.fd: int | None = None

    def acquire(self, wait: float = CLEAN_UP_WAIT_SECONDS) -> None:
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        deadline = time.monotonic() + wait
        while not _try_lock(fd):
            holder = _holder(fd)
            if holder is not None and _exists(holder):
                os.close(fd)
                raise FolderInUse(f"rms dev is already running on {self.path.parent} (pid "
                                  f"{holder}); stop it first, or use another --data-dir")
            if time.monotonic() >= deadline:
                os.close(fd)
                raise FolderInUse(f"the clean-up of an earlier rms dev on {self.path.parent} "
                                  f"is still running after {wait:.0f} s; see its watchdog.log")
            time.sleep(0.2)
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        self.fd = fd


def _try_lock(fd: int) -> bool:
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return False
    return True


def _holder(fd: int) -> int | None:
    text = os.pread(fd, 32, 0).decode(errors="replace").strip()
    return int(text) if text.isdigit() else None


def _exists(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


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


def die_with_parent() -> None:
    """This process gets SIGTERM when its parent dies (Linux; elsewhere nothing), as the
    children of :func:`tied_to_parent` do: a harness started by a shell or a test that is killed
    stops what it started through its own SIGTERM handler."""
    if sys.platform.startswith("linux"):
        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)
    if os.getppid() == 1:  # the parent is gone already
        os.kill(os.getpid(), signal.SIGTERM)


class Stopped(KeyboardInterrupt):
    """A signal asked a harness to stop (SIGINT, SIGTERM, SIGHUP). A ``KeyboardInterrupt``:
    asyncio lets only that and ``SystemExit`` out of a callback (any other exception raised
    while a plain callback runs, a protocol's or a ``call_soon``'s, is logged and the loop goes
    on), so a signal that lands in a callback still ends ``asyncio.run``, which cancels every
    task and so runs the harness's clean-up."""


STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


def stop_on_signals() -> None:
    """Turn the stop signals into :class:`Stopped` in the main thread, so that the harness's
    ``finally`` stops what it started; a second signal is ignored, so it cannot cut that
    clean-up short."""
    def on_signal(signum: int, _frame: object) -> None:
        for each in STOP_SIGNALS:
            signal.signal(each, signal.SIG_IGN)
        raise Stopped(signal.Signals(signum).name)

    for signum in STOP_SIGNALS:
        signal.signal(signum, on_signal)


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
                   log: Path, lock: RunLock) -> subprocess.Popen[bytes]:
    """The watchdog inherits the run lock, so the folder stays locked until it has cleaned up."""
    argv = [sys.executable, "-m", "rms.devstack.reaper", "--parent", str(os.getpid()),
            "--pid-file", str(pid_file.path), "--pg-ctl", pg_ctl, "--pg-data", str(pg_data)]
    if user:
        argv += ["--pg-user", user]
    with log.open("ab") as sink:
        return subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=sink,
                                stderr=subprocess.STDOUT, start_new_session=True,
                                pass_fds=() if lock.fd is None else (lock.fd,))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m rms.devstack.reaper")
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
