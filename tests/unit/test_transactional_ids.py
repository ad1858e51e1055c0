"""The transactional ids of a process (rms.kafka.transactional_ids): live processes never share
one, a restarted process takes the slot its dead predecessor held."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path

from rms.kafka.transactional_ids import take_slot, transactional_ids


def test_a_named_instance_has_stable_ids_and_takes_no_slot(tmp_path: Path) -> None:
    ids = transactional_ids("rms", "pod-3", str(tmp_path), "api", 2)
    assert ids.ids == ("rms.pod-3.api.0", "rms.pod-3.api.1")
    assert ids.slot is None
    assert not tmp_path.exists() or not list(tmp_path.iterdir())


def test_live_holders_get_different_slots_and_a_released_slot_is_taken_again(
        tmp_path: Path) -> None:
    first = transactional_ids("rms", None, str(tmp_path), "api", 1)
    second = transactional_ids("rms", None, str(tmp_path), "api", 1)
    worker = transactional_ids("rms", None, str(tmp_path), "confirm-worker", 1)
    assert first.ids != second.ids
    assert first.ids[0].endswith("-0.api.0") and second.ids[0].endswith("-1.api.0")
    assert worker.ids[0].endswith("-0.confirm-worker.0")  # roles count their slots apart
    first.release()
    again = transactional_ids("rms", None, str(tmp_path), "api", 1)
    assert again.ids == first.ids
    for held in (second, worker, again):
        held.release()


def test_a_killed_holder_leaves_its_slot_to_its_successor(tmp_path: Path) -> None:
    holder = subprocess.Popen(
        [sys.executable, "-c",
         "import sys, time; from pathlib import Path; "
         "from rms.kafka.transactional_ids import take_slot; "
         f"s = take_slot(Path({str(tmp_path)!r}), 'api'); print(s.number, flush=True); "
         "time.sleep(60)"], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout is not None
        assert holder.stdout.readline().strip() == "0"
        other = take_slot(tmp_path, "api")
        assert other.number == 1  # slot 0 is held by a live process
        other.release()
        holder.send_signal(signal.SIGKILL)
        holder.wait(10)
        deadline = time.monotonic() + 5
        while (slot := take_slot(tmp_path, "api")).number != 0:
            slot.release()
            assert time.monotonic() < deadline
        slot.release()
    finally:
        holder.kill()
        holder.wait(10)
