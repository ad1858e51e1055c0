"""Apache Kafka clusters on loopback ports: one combined node for ``rms dev`` and the tests, or N
nodes (each a broker and a controller voter) for the fault suite."""

from __future__ import annotations

import signal
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from rms.devstack.kafka_broker.install import KafkaUnavailable
from rms.devstack.kafka_broker.node import KafkaNode, new_cluster_id
from rms.devstack.kafka_broker.ready import partition_leader, run_coroutine, wait_for_brokers


def broker_settings(size: int, *, auto_create_topics: bool = True) -> dict[str, str]:
    """Settings for a small loopback cluster: replication as deploy/ sets it (RF 3,
    ``min.insync.replicas`` 2) where there are enough nodes, and no start-up delays."""
    replicas, in_sync = str(min(3, size)), str(min(2, size))
    return {
        "num.partitions": "1",
        "default.replication.factor": replicas,
        "min.insync.replicas": in_sync,
        "offsets.topic.replication.factor": replicas,
        "offsets.topic.num.partitions": "4",
        "transaction.state.log.replication.factor": replicas,
        "transaction.state.log.min.isr": in_sync,
        "transaction.state.log.num.partitions": "4",
        "share.coordinator.state.topic.replication.factor": replicas,
        "share.coordinator.state.topic.min.isr": in_sync,
        "group.initial.rebalance.delay.ms": "0",
        "auto.create.topics.enable": "true" if auto_create_topics else "false",
        "num.network.threads": "2",
        "num.io.threads": "2",
        "background.threads": "2",
        "log.cleaner.threads": "1",
    }


@dataclass
class KafkaCluster:
    """``size`` KRaft nodes under ``base_dir``; data survives a node's restart."""

    base_dir: Path
    size: int = 3
    heap_mb: int = 256
    auto_create_topics: bool = True
    extra_settings: dict[str, str] = field(default_factory=dict)
    # the clients' listener's security protocol; with TLS or SASL the cluster is watched for
    # readiness over the plaintext internal listener
    client_protocol: str = "PLAINTEXT"
    extra_listeners: dict[str, str] = field(default_factory=dict)  # name: security protocol
    format_args: list[str] = field(default_factory=list)  # e.g. --add-scram for SCRAM users
    nodes: list[KafkaNode] = field(default_factory=list)
    cluster_id: str = field(default_factory=new_cluster_id)
    started_in: float = 0.0

    def __post_init__(self) -> None:
        if not self.nodes:
            self.nodes = [KafkaNode(i, self.base_dir / f"node{i}", heap_mb=self.heap_mb,
                                    client_protocol=self.client_protocol,
                                    extra_listeners=dict(self.extra_listeners),
                                    format_args=list(self.format_args))
                          for i in range(1, self.size + 1)]

    @property
    def bootstrap_servers(self) -> str:
        return ",".join(f"127.0.0.1:{node.advertised_port or node.port}" for node in self.nodes)

    @property
    def voters(self) -> str:
        return ",".join(node.voter for node in self.nodes)

    def settings(self) -> dict[str, str]:
        return {**broker_settings(self.size, auto_create_topics=self.auto_create_topics),
                **self.extra_settings}

    def start(self, timeout: float = 90.0) -> None:
        """Starts every node; returns once a metadata request lists all of them."""
        began = time.monotonic()
        try:
            formatting = [node.format(self.cluster_id, node.write_config(self.voters, self.settings()))
                          for node in self.nodes]  # one JVM each, in parallel
            for node, started in zip(self.nodes, formatting, strict=True):
                node.formatted(started)
            for node in self.nodes:
                node.launch(node.data_dir / "server.properties")
            self.wait_ready(timeout)
        except KafkaUnavailable:
            raise
        except Exception as exc:
            self.kill()
            raise KafkaUnavailable(f"Apache Kafka did not start: {exc}\n{self._log_tails()}") from exc
        self.started_in = time.monotonic() - began

    @property
    def direct_servers(self) -> str:
        """Every node's own client port, bypassing any proxy in front of an advertised one."""
        return ",".join(f"127.0.0.1:{node.port}" for node in self.nodes)

    def listener_servers(self, name: str) -> str:
        """Every node's port of the extra listener ``name``."""
        return ",".join(f"127.0.0.1:{node.extra_ports[name]}" for node in self.nodes)

    def wait_ready(self, timeout: float = 60.0, nodes: list[KafkaNode] | None = None) -> float:
        expected = {node.node_id for node in (nodes or self.nodes)}
        servers = self.direct_servers
        if self.client_protocol != "PLAINTEXT":
            servers = ",".join(f"127.0.0.1:{node.internal_port}" for node in self.nodes)
        return wait_for_brokers(servers, expected, timeout, self._dead_node)

    def stop(self, timeout: float = 15.0) -> None:
        for node in self.nodes:
            node.signal(signal.SIGCONT)
            node.signal(signal.SIGTERM)
        deadline = time.monotonic() + timeout
        for node in self.nodes:
            node.stop(max(0.1, deadline - time.monotonic()))

    def kill(self) -> None:
        for node in self.nodes:
            node.kill()

    # Faults, by node id (1-based, as Kafka numbers them).
    def node(self, node_id: int) -> KafkaNode:
        return self.nodes[node_id - 1]

    def kill_node(self, node_id: int) -> None:
        self.node(node_id).kill()

    def stop_node(self, node_id: int, timeout: float = 30.0) -> None:
        self.node(node_id).stop(timeout)

    def pause_node(self, node_id: int) -> None:
        self.node(node_id).signal(signal.SIGSTOP)

    def resume_node(self, node_id: int) -> None:
        self.node(node_id).signal(signal.SIGCONT)

    def restart_node(self, node_id: int, timeout: float = 60.0, *, wipe: bool = False) -> None:
        """Starts a stopped or killed node again on its ports, with its data unless ``wipe``."""
        node = self.node(node_id)
        node.kill()
        if wipe:
            node.wipe()
            if self.size == 1:
                self.cluster_id = new_cluster_id()
            config = node.write_config(self.voters, self.settings())
            node.formatted(node.format(self.cluster_id, config))
        node.launch(node.data_dir / "server.properties")
        self.wait_ready(timeout, [node])

    def leader(self, topic: str, partition: int = 0) -> int | None:
        return run_coroutine(lambda: partition_leader(self.direct_servers, topic, partition))

    def heal(self, timeout: float = 60.0) -> list[int]:
        """Every node resumed and running (a dead one restarted with its data); returns the ids
        of the nodes that had to be started again."""
        restarted = []
        for node in self.nodes:
            node.signal(signal.SIGCONT)
            if not node.running():
                self.restart_node(node.node_id, timeout)
                restarted.append(node.node_id)
        return restarted

    def _dead_node(self) -> str | None:
        for node in self.nodes:
            if node.process is not None and node.process.poll() is not None:
                return f"Kafka node {node.node_id} exited with {node.process.returncode}"
        return None

    def _log_tails(self) -> str:
        return "\n".join(f"--- node {n.node_id} ({n.log_path}):\n{n.log_tail()}" for n in self.nodes)


class EmbeddedKafka(KafkaCluster):
    """One combined broker and controller with a small heap, for ``rms dev`` and the tests.

    Without ``data_dir`` the broker keeps its log in a temporary folder removed on ``stop``."""

    def __init__(self, data_dir: Path | None = None, *, heap_mb: int = 384,
                 auto_create_topics: bool = True, extra_settings: dict[str, str] | None = None,
                 client_protocol: str = "PLAINTEXT", extra_listeners: dict[str, str] | None = None,
                 format_args: list[str] | None = None) -> None:
        self._temporary = data_dir is None
        base = Path(tempfile.mkdtemp(prefix="rms-kafka-")) if data_dir is None else data_dir
        super().__init__(base, size=1, heap_mb=heap_mb, auto_create_topics=auto_create_topics,
                         extra_settings=extra_settings or {}, client_protocol=client_protocol,
                         extra_listeners=extra_listeners or {}, format_args=format_args or [])

    @property
    def port(self) -> int:
        return self.nodes[0].port

    @property
    def log_path(self) -> Path:
        return self.nodes[0].log_path

    @property
    def process(self) -> object:
        return self.nodes[0].process

    def restart_empty(self, timeout: float = 60.0) -> None:
        """The broker comes back on the same port having lost its whole log."""
        self.restart_node(1, timeout, wipe=True)

    def stop(self, timeout: float = 15.0) -> None:
        super().stop(timeout)
        if self._temporary:
            import shutil

            shutil.rmtree(self.base_dir, ignore_errors=True)
