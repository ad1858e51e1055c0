"""The garbage collector of a long-running RMS process (``rms serve``, the workers), set once
the process is ready to work.

Everything built at start (the application with its routes and models, the pools, the Kafka
clients, the imported modules) lives as long as the process, yet every full collection would
walk it again: :func:`gc.freeze` moves it out of the collector's sight. Without that, a full
collection of an ``rms serve`` heap paused the event loop for tens of milliseconds about once a
second under load, and every request in the process waited for it. Each request allocates a few
thousand short-lived containers, almost all freed by reference counting; a young generation of
:data:`YOUNG_THRESHOLD` objects (Python's default is 700) collects them a few times a second
under load instead of several times per request."""

from __future__ import annotations

import gc

YOUNG_THRESHOLD = 20_000


def settle_heap() -> None:
    """Freeze what exists now and widen the young generation (once the process is ready)."""
    gc.collect()
    gc.freeze()
    _, middle, old = gc.get_threshold()
    gc.set_threshold(YOUNG_THRESHOLD, middle, old)
