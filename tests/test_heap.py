"""A ready RMS process moves its start-up heap out of the collector's reach."""

from __future__ import annotations

import gc

from rms.heap import settle_heap


def test_settling_the_heap_freezes_what_is_alive() -> None:
    gc.unfreeze()
    assert gc.get_freeze_count() == 0
    try:
        settle_heap()
        assert gc.get_freeze_count() > 1000  # modules, classes, functions of this process
    finally:
        gc.unfreeze()
