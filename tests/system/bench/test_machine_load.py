"""The benchmark tells a quiet machine from a busy one: CPU spent by processes outside the
benchmark's groups during a window is measured and flags the run."""

from __future__ import annotations

import subprocess
import sys
import time

from bench.procs import MachineLoad, Sampler

SPIN = "import time\nend = time.time() + {seconds}\nwhile time.time() < end: pass\n"


def _window_with_spinner(sampler: Sampler, *, in_group: bool) -> tuple[MachineLoad, float]:
    sampler.open_window()
    spinner = subprocess.Popen([sys.executable, "-c", SPIN.format(seconds=1.5)])
    if in_group:
        sampler.add("spinner", spinner.pid)
    while spinner.poll() is None:
        sampler.sample()
        time.sleep(0.1)
    usage = sampler.close_window()
    sampler.remove("spinner")
    assert sampler.machine is not None
    return sampler.machine, usage["spinner"].cpu_seconds if "spinner" in usage else 0.0


def test_cpu_outside_the_benchmark_marks_the_run_busy() -> None:
    machine, _ = _window_with_spinner(Sampler(), in_group=False)

    assert machine.other_cores >= 0.6  # one core spun for the whole window
    assert machine.busy
    assert machine.as_dict()["busy"] is True
    assert machine.load_max >= machine.load_open


def test_cpu_of_a_benchmark_group_is_not_counted_as_other() -> None:
    """``other`` is the machine's busy CPU minus the groups' own: the spinner's 1.5 CPU seconds
    are the group's, so at most the rest of the machine's noise remains."""
    sampler = Sampler()
    sampler.open_window()
    time.sleep(1.5)
    sampler.close_window()
    assert sampler.machine is not None
    noise = sampler.machine.other_cores  # whatever else this machine runs right now

    machine, spinner_cpu = _window_with_spinner(sampler, in_group=True)

    assert spinner_cpu >= 1.0
    assert machine.other_cores <= noise + 0.4  # counted as other, it would add about 1 core
