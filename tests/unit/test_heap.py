"""A ready RMS process moves its start-up heap out of the collector's reach and widens the
young generation."""

from __future__ import annotations

import gc

from rms.heap import YOUNG_THRESHOLD, settle_heap


def test_settling_the_heap_freezes_what_is_alive_and_widens_the_young_generation() -> None:
    thresholds = gc.get_threshold()
    gc.unfreeze()
    assert gc.get_freeze_count() == 0
    try:
        settle_heap()
        assert gc.get_freeze_count() > 1000  # modules, classes, functions of this process
        assert gc.get_threshold()[0] == YOUNG_THRESHOLD
    finally:
        gc.unfreeze()
        gc.set_threshold(*thresholds)
