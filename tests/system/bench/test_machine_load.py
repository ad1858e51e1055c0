"""The benchmark tells a quiet machine from a busy one: CPU spent by processes outside the
benchmark's groups during a window is measured and flags the run.

The machine's busy time is this test's own (this process and its children), so whatever else
the machine runs meanwhile (other test workers) cannot move the figures; the spinner spins for
CPU time, not wall time, so a loaded machine only makes it take longer."""

from __future__ import annotations

import resource
import subprocess
import sys
import time

import pytest

from bench import procs
from bench.procs import MachineLoad, Sampler

SPIN = ("import time\nend = time.process_time() + {seconds}\n"
        "while time.process_time() < end: pass\n")
SPIN_SECONDS = 1.5


@pytest.fixture(autouse=True)
def own_machine(monkeypatch: pytest.MonkeyPatch) -> None:
    def busy() -> float:
        mine = resource.getrusage(resource.RUSAGE_SELF)
        children = resource.getrusage(resource.RUSAGE_CHILDREN)
        return mine.ru_utime + mine.ru_stime + children.ru_utime + children.ru_stime

    monkeypatch.setattr(procs, "_machine_busy_seconds", busy)


def _window_with_spinner(sampler: Sampler, *, in_group: bool
                         ) -> tuple[MachineLoad, float, float]:
    """The machine's load over a window in which a child spins; the spinner's CPU as the
    group measured it, and the window's wall time."""
    sampler.open_window()
    opened = time.time()
    spinner = subprocess.Popen([sys.executable, "-c", SPIN.format(seconds=SPIN_SECONDS)])
    if in_group:
        sampler.add("spinner", spinner.pid)
    while spinner.poll() is None:
        sampler.sample()
        time.sleep(0.05)
    usage = sampler.close_window()
    wall = time.time() - opened
    sampler.remove("spinner")
    assert sampler.machine is not None
    spun = usage["spinner"].cpu_seconds if "spinner" in usage else 0.0
    return sampler.machine, spun, wall


def test_cpu_outside_the_benchmark_marks_the_run_busy() -> None:
    machine, _, wall = _window_with_spinner(Sampler(), in_group=False)

    assert machine.other_cores * wall >= SPIN_SECONDS * 0.8  # the spinner's CPU is other
    assert machine.busy
    assert machine.as_dict()["busy"] is True
    assert machine.load_max >= machine.load_open


def test_cpu_of_a_benchmark_group_is_not_counted_as_other() -> None:
    """``other`` is the machine's busy CPU minus the groups' own: the spinner's CPU seconds
    are the group's, so only this process's own sampling remains."""
    machine, spinner_cpu, wall = _window_with_spinner(Sampler(), in_group=True)

    assert spinner_cpu >= SPIN_SECONDS * 0.8
    assert machine.other_cores * wall <= 0.5  # counted as other, it would add the spin
