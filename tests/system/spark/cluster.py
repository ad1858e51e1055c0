"""A Spark standalone cluster on this machine, from the pyspark wheel: one master and N
workers (``bin/spark-class org.apache.spark.deploy.master.Master`` / ``...worker.Worker``),
on free ports, each in its own process group tied to this process (parent-death signal), and
stopped with everything it started (the workers' executors are in their process groups)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
import urllib.request
from contextlib import suppress
from dataclasses import dataclass, field
from pathlib import Path
from subprocess import DEVNULL, Popen
from typing import Any

import pyspark

from rms.devstack.embedded import free_port
from rms.devstack.reaper import stop_groups, tied_to_parent

SPARK_HOME = Path(pyspark.__file__).resolve().parent
DAEMON_ENV = {"SPARK_HOME": str(SPARK_HOME), "SPARK_LOCAL_IP": "127.0.0.1",
              "SPARK_DAEMON_MEMORY": "256m"}


@dataclass
class StandaloneCluster:
    work: Path
    workers: int = 2
    worker_memory: str = "1g"
    port: int = field(default_factory=free_port)
    ui_port: int = field(default_factory=free_port)
    processes: list[Popen[bytes]] = field(default_factory=list)

    @property
    def url(self) -> str:
        return f"spark://127.0.0.1:{self.port}"

    def _start(self, name: str, *arguments: str) -> None:
        log = (self.work / f"{name}.log").open("wb")
        self.processes.append(Popen(
            [str(SPARK_HOME / "bin" / "spark-class"), *arguments], stdin=DEVNULL, stdout=log,
            stderr=log, env={**os.environ, **DAEMON_ENV}, cwd=self.work,
            start_new_session=True, preexec_fn=tied_to_parent()))

    def start(self, timeout: float = 90.0) -> None:
        self.work.mkdir(parents=True, exist_ok=True)
        self._start("master", "org.apache.spark.deploy.master.Master", "--host", "127.0.0.1",
                    "--port", str(self.port), "--webui-port", str(self.ui_port))
        for index in range(self.workers):
            self._start(f"worker-{index}", "org.apache.spark.deploy.worker.Worker", self.url,
                        "--host", "127.0.0.1", "--cores", "1", "--memory", self.worker_memory,
                        "--webui-port", "0", "--work-dir", str(self.work / f"worker-{index}"))
        deadline = time.monotonic() + timeout
        while self.alive_workers() < self.workers:
            dead = [p.args for p in self.processes if p.poll() is not None]
            if dead or time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(f"the cluster did not start (logs in {self.work}): {dead}")
            time.sleep(0.5)

    def state(self) -> dict[str, Any]:
        """The master's view (its web UI's JSON): workers, applications."""
        url = f"http://127.0.0.1:{self.ui_port}/json/"
        with urllib.request.urlopen(url, timeout=2) as response:
            state: dict[str, Any] = json.load(response)
        return state

    def alive_workers(self) -> int:
        with suppress(OSError, ValueError):
            return int(self.state().get("aliveworkers", 0))
        return 0

    def stop(self, grace: float = 15.0) -> None:
        """SIGTERM to every process group, then SIGKILL to what is left after ``grace``
        seconds (the daemons are reaped as they end, so an ended one is not waited for)."""
        for process in self.processes:
            with suppress(ProcessLookupError, PermissionError):
                os.killpg(process.pid, signal.SIGTERM)
        deadline = time.monotonic() + grace
        for process in self.processes:
            with suppress(subprocess.TimeoutExpired):
                process.wait(timeout=max(0.0, deadline - time.monotonic()))
        stop_groups([p.pid for p in self.processes], grace=max(0.0, deadline - time.monotonic()))
        for process in self.processes:
            process.wait()

    def leftovers(self) -> list[int]:
        """Processes still in one of the cluster's process groups."""
        groups = {p.pid for p in self.processes}
        found = []
        for entry in Path("/proc").iterdir():
            if entry.name.isdigit():
                with suppress(OSError):
                    if os.getpgid(int(entry.name)) in groups:
                        found.append(int(entry.name))
        return found
