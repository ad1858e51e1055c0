"""CPU seconds and peak RSS per process group (``rms serve`` with all its uvicorn workers, all
PostgreSQL processes, Kafka, workers, load generator, consumer, ...), sampled with psutil by a
background thread.

A group is a set of root pids plus all their descendants (``bench``, the orchestrator, is
its own pid only: every other process is its descendant). CPU of a window = for every process
seen in it, its last sampled CPU time minus its CPU time when the window opened (0 for a
process created during the window). The group's RSS at one sample is the sum of each
process's private resident memory (RSS minus shared) plus the largest shared part once, so
PostgreSQL's shared buffers are not counted once per backend; the peak is the largest sample
in the window. ``series`` keeps ``(time, rss MB)`` of chosen groups for
the soak.
"""

from __future__ import annotations

import contextlib
import os
import threading
import time
from collections import defaultdict
from dataclasses import dataclass, field

import psutil

MB = 1024 * 1024


@dataclass
class Usage:
    cpu_seconds: float
    peak_rss_mb: float


def _tree(pid: int, *, descendants: bool = True) -> list[psutil.Process]:
    try:
        root = psutil.Process(pid)
    except psutil.Error:
        return []
    try:
        return [root, *root.children(recursive=True)] if descendants else [root]
    except psutil.Error:  # a child vanished while listing: the root alone this time
        return [root]


def _cpu(process: psutil.Process) -> float:
    times = process.cpu_times()
    return float(times.user + times.system)


BUSY_OTHER_CORES = 0.15  # more CPU than this used outside the benchmark makes a run "busy"


def _machine_busy_seconds() -> float:
    """CPU seconds all cores spent on anything but idling since boot."""
    times = psutil.cpu_times()
    return float(sum(times) - times.idle - getattr(times, "iowait", 0.0))


@dataclass(frozen=True)
class MachineLoad:
    """What else ran during a window: CPU of processes outside every sampled group (cores on
    average) and the 1-minute load average at open, its maximum and at close."""

    other_cores: float
    load_open: float
    load_max: float
    load_close: float

    @property
    def busy(self) -> bool:
        return self.other_cores > BUSY_OTHER_CORES

    def as_dict(self) -> dict[str, float | bool]:
        return {"other_cores": self.other_cores, "load_1min_open": self.load_open,
                "load_1min_max": self.load_max, "load_1min_close": self.load_close,
                "busy": self.busy}


@dataclass
class Window:
    opened: float
    machine_busy: float = field(default_factory=lambda: _machine_busy_seconds())
    load_open: float = field(default_factory=lambda: os.getloadavg()[0])
    load_max: float = 0.0
    first: dict[int, float] = field(default_factory=dict)
    last: dict[int, tuple[str, float]] = field(default_factory=dict)
    peak: dict[str, float] = field(default_factory=lambda: defaultdict(float))

    def usage(self) -> dict[str, Usage]:
        cpu: dict[str, float] = defaultdict(float)
        for pid, (group, seconds) in self.last.items():
            cpu[group] += seconds - self.first.get(pid, 0.0)
        return {g: Usage(round(cpu[g], 3), round(self.peak[g], 1))
                for g in self.peak if self.peak[g] > 0}


class Sampler:
    def __init__(self, interval: float = 0.5) -> None:
        self.interval = interval
        self.groups: dict[str, set[int]] = defaultdict(set)
        self.solo: set[str] = set()  # groups measured without their descendants
        self.series: dict[str, list[tuple[float, float]]] = defaultdict(list)
        self.record_series: set[str] = set()
        self._window: Window | None = None
        self.machine: MachineLoad | None = None  # of the last closed window
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="bench-sampler", daemon=True)

    def add(self, group: str, pid: int, *, descendants: bool = True) -> None:
        with self._lock:
            self.groups[group].add(pid)
            if not descendants:
                self.solo.add(group)

    def remove(self, group: str) -> None:
        with self._lock:
            self.groups.pop(group, None)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(5)

    def open_window(self) -> None:
        window = Window(time.time())
        with self._lock:
            self._window = window
        self.sample()

    def close_window(self) -> dict[str, Usage]:
        self.sample()
        with self._lock:
            window, self._window = self._window, None
        if window is None:
            return {}
        usage = window.usage()
        wall = max(time.time() - window.opened, 1e-6)
        other = _machine_busy_seconds() - window.machine_busy - sum(u.cpu_seconds for u in usage.values())
        self.machine = MachineLoad(round(max(other, 0.0) / wall, 3), round(window.load_open, 2),
                                   round(max(window.load_max, window.load_open), 2),
                                   round(os.getloadavg()[0], 2))
        return usage

    def _loop(self) -> None:
        while not self._stop.wait(self.interval):
            self.sample()

    def sample(self) -> None:
        with self._lock:
            groups = {name: set(pids) for name, pids in self.groups.items()}
            solo = set(self.solo)
            window = self._window
        now = time.time()
        if window is not None:
            window.load_max = max(window.load_max, os.getloadavg()[0])
        for name, pids in groups.items():
            private, shared = 0.0, 0.0
            for pid in pids:
                for process in _tree(pid, descendants=name not in solo):
                    mine, common = self._observe(window, name, process)
                    private, shared = private + mine, max(shared, common)
            rss = private + shared
            if window is not None:
                window.peak[name] = max(window.peak[name], rss / MB)
            if name in self.record_series:
                self.series[name].append((now, rss / MB))

    @staticmethod
    def _observe(window: Window | None, group: str, process: psutil.Process
                 ) -> tuple[float, float]:
        """Record the process's CPU time; returns its (private, shared) resident bytes."""
        with contextlib.suppress(psutil.Error):
            with process.oneshot():
                cpu, memory = _cpu(process), process.memory_info()
                created = process.create_time()
            if window is not None:
                if process.pid not in window.first:
                    window.first[process.pid] = 0.0 if created >= window.opened else cpu
                window.last[process.pid] = (group, cpu)
            shared = float(getattr(memory, "shared", 0))
            return float(memory.rss) - shared, shared
        return 0.0, 0.0
