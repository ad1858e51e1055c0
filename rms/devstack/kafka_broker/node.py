"""One Apache Kafka process in KRaft mode: a combined broker and controller on loopback ports."""

from __future__ import annotations

import base64
import os
import shutil
import signal
import subprocess
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from rms.devstack.embedded import free_port
from rms.devstack.kafka_broker.install import java_binary, kafka_classpath

_LOG4J = """\
status = error
appender.out.type = Console
appender.out.name = out
appender.out.layout.type = PatternLayout
appender.out.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = {level}
rootLogger.appenderRef.out.ref = out
logger.kafka.name = kafka
logger.kafka.level = warn
logger.apache.name = org.apache.kafka
logger.apache.level = warn
logger.state.name = state.change.logger
logger.state.level = warn
"""


# Extra options of the broker JVMs that the devstack starts (rms dev, the tests, the fault
# suite, the benchmark), split on spaces. The test suite sets ``-XX:TieredStopAtLevel=1``:
# with the C1 compiler alone a broker is ready in half the time on less than half the CPU
# (measured: 8.6 CPU seconds to ready with both compilers, 3.5 with C1), which pays on a
# suite that starts dozens of brokers; the benchmark leaves it unset, so its broker runs
# fully compiled code.
JVM_OPTIONS_VARIABLE = "RMS_DEV_KAFKA_JVM_OPTIONS"
# the storage tool runs for a second: compiling it fully would cost more than it saves
_TOOL_OPTIONS = ("-XX:TieredStopAtLevel=1",)


def new_cluster_id() -> str:
    """Kafka's cluster id format: a random UUID, URL-safe base64 without padding."""
    return base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")


@dataclass
class KafkaNode:
    """A KRaft node. Clients connect to ``port`` (advertised as ``advertised_port``, which a fault
    proxy may own) with ``client_protocol``, and to the ``extra_listeners`` (name: security
    protocol) on ``extra_ports``; brokers replicate over ``internal_port`` and the quorum talks
    on ``controller_port``, both in plaintext on loopback."""

    node_id: int
    data_dir: Path
    port: int = field(default_factory=free_port)
    internal_port: int = field(default_factory=free_port)
    controller_port: int = field(default_factory=free_port)
    advertised_port: int | None = None
    heap_mb: int = 256
    process: subprocess.Popen[bytes] | None = None
    # run in the child before the JVM starts (``rms dev`` ties it to its own life with it)
    preexec_fn: Callable[[], None] | None = None
    client_protocol: str = "PLAINTEXT"
    extra_listeners: dict[str, str] = field(default_factory=dict)
    extra_ports: dict[str, int] = field(default_factory=dict)
    # more arguments of ``kafka-storage format`` (e.g. ``--add-scram`` for SCRAM users)
    format_args: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        for name in self.extra_listeners:
            self.extra_ports.setdefault(name, free_port())

    @property
    def log_dir(self) -> Path:
        return self.data_dir / "log"

    @property
    def log_path(self) -> Path:
        return self.data_dir / "kafka.log"

    @property
    def voter(self) -> str:
        return f"{self.node_id}@127.0.0.1:{self.controller_port}"

    def properties(self, voters: str, broker_settings: dict[str, str]) -> dict[str, str]:
        advertised = self.advertised_port or self.port
        extra = "".join(f",{name}://127.0.0.1:{self.extra_ports[name]}" for name in self.extra_listeners)
        protocols = "".join(f",{name}:{protocol}" for name, protocol in self.extra_listeners.items())
        return {
            "process.roles": "broker,controller",
            "node.id": str(self.node_id),
            "controller.quorum.voters": voters,
            "listeners": (f"CLIENT://127.0.0.1:{self.port},INTERNAL://127.0.0.1:{self.internal_port},"
                          f"CONTROLLER://127.0.0.1:{self.controller_port}{extra}"),
            "advertised.listeners": (f"CLIENT://127.0.0.1:{advertised},"
                                     f"INTERNAL://127.0.0.1:{self.internal_port}{extra}"),
            "listener.security.protocol.map": (f"CLIENT:{self.client_protocol},INTERNAL:PLAINTEXT,"
                                               f"CONTROLLER:PLAINTEXT{protocols}"),
            "controller.listener.names": "CONTROLLER",
            "inter.broker.listener.name": "INTERNAL",
            "log.dirs": str(self.log_dir),
            **broker_settings,
        }

    def write_config(self, voters: str, broker_settings: dict[str, str]) -> Path:
        self.data_dir.mkdir(parents=True, exist_ok=True)
        config = self.data_dir / "server.properties"
        lines = [f"{key}={value}" for key, value in self.properties(voters, broker_settings).items()]
        config.write_text("\n".join(lines) + "\n")
        (self.data_dir / "log4j2.properties").write_text(_LOG4J.format(level="info"))
        return config

    def format(self, cluster_id: str, config: Path) -> subprocess.Popen[str] | None:
        """Starts formatting the log directory (:meth:`formatted` waits for it); a formatted
        directory keeps its data across restarts and is left alone."""
        if (self.log_dir / "meta.properties").exists():
            return None
        return subprocess.Popen(
            [*self._java(64, _TOOL_OPTIONS), "kafka.tools.StorageTool", "format",
             "--ignore-formatted",
             f"--cluster-id={cluster_id}", f"--config={config}",  # an id may start with "-"
             *self.format_args],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=self.data_dir,
        )

    def formatted(self, formatting: subprocess.Popen[str] | None) -> None:
        if formatting is None:
            return
        _, errors = formatting.communicate(timeout=120)
        if formatting.returncode != 0:
            raise RuntimeError(f"formatting Kafka node {self.node_id} failed: {errors[-2000:]}")

    def launch(self, config: Path) -> None:
        with open(self.log_path, "ab") as output:
            self.process = subprocess.Popen(
                [*self._java(self.heap_mb, _broker_options()), "kafka.Kafka", str(config)],
                stdin=subprocess.DEVNULL, stdout=output, stderr=subprocess.STDOUT,
                cwd=self.data_dir, start_new_session=True, preexec_fn=self.preexec_fn,
            )

    def running(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def signal(self, signum: signal.Signals) -> None:
        if self.running():
            assert self.process is not None
            os.kill(self.process.pid, signum)

    def stop(self, timeout: float) -> None:
        """A controlled shutdown (SIGTERM), else a kill after ``timeout`` seconds."""
        if not self.running():
            return
        assert self.process is not None
        self.signal(signal.SIGCONT)
        self.process.terminate()
        try:
            self.process.wait(timeout)
        except subprocess.TimeoutExpired:
            self.kill()

    def kill(self) -> None:
        if self.running():
            assert self.process is not None
            self.process.kill()
            self.process.wait(10)

    def wipe(self) -> None:
        """The node's whole log directory is gone (a lost disk)."""
        shutil.rmtree(self.log_dir, ignore_errors=True)

    def log_tail(self, lines: int = 30) -> str:
        if not self.log_path.exists():
            return ""
        return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])

    def _java(self, heap_mb: int, options: tuple[str, ...]) -> list[str]:
        return [java_binary(), *options, f"-Xms{heap_mb}m", f"-Xmx{heap_mb}m", "-XX:+UseSerialGC",
                "-XX:+ExitOnOutOfMemoryError", "-XX:-UsePerfData", "-Djava.awt.headless=true",
                f"-Dlog4j2.configurationFile={self.data_dir / 'log4j2.properties'}",
                "-cp", kafka_classpath()]


def _broker_options() -> tuple[str, ...]:
    return tuple(os.environ.get(JVM_OPTIONS_VARIABLE, "").split())
