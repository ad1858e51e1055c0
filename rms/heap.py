"""The heap of a long-running RMS process."""

from __future__ import annotations

import gc


def settle_heap() -> None:
    """Call once a process is ready to work: everything alive then (modules, the application,
    its routes and models, pools, caches warmed at start) lives as long as the process, so it is
    moved out of the collector's reach (``gc.freeze``). A full collection then walks only what
    was allocated since, which keeps its pause (otherwise tens of milliseconds for an ``rms
    serve`` heap, about once a second under load, with every request of the process waiting)
    to a few milliseconds."""
    gc.collect()
    gc.freeze()
