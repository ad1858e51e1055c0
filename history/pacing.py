"""How ``rms retention run`` yields to the request path: a duty cycle, batches bounded in rows
and in time, and a back-off when the database slows down. Pure logic, no clock: the run
reports each batch's rows and duration and sleeps for what :meth:`Pacer.after_batch` says.

* **Duty cycle.** After a batch that took ``d`` seconds the run rests ``d * (1 - duty) /
  duty``, so it works at most ``duty`` of the wall time whatever the machine's speed: a batch
  slowed by a busy database is followed by a longer rest.
* **Bounded batches.** A batch holds at most ``max_rows`` messages and aims at
  ``batch_seconds``: the first holds ``START_ROWS``; a batch slower than that shrinks the next
  one in proportion (never below ``MIN_ROWS``), a batch under half of it lets the next one grow
  by half, up to ``max_rows``.
  Short delete transactions hold their locks and their share of WAL and I/O briefly.
* **Back-off.** The fastest cost per message seen in the run stands for a quiet database; a
  batch costing more than ``BUSY_FACTOR`` times that per message means the database is busy
  (lock waits, I/O, other work), and the rest is stretched by the same ratio, up to
  ``MAX_STRETCH`` times.

``duty = 1`` with no ``pause_seconds`` removes as fast as the database allows.
"""

from __future__ import annotations

from dataclasses import dataclass

MIN_ROWS = 100
START_ROWS = 1000  # the first batch, before any is timed
BUSY_FACTOR = 2.0
MAX_STRETCH = 8.0
SECONDS_PER_DAY = 86_400


@dataclass(frozen=True)
class Pace:
    """The settings: ``RMS_RETENTION_DUTY_CYCLE``, ``RMS_RETENTION_BATCH_SECONDS``,
    ``RMS_RETENTION_BATCH_SIZE`` (``max_rows``) and ``RMS_RETENTION_PAUSE_SECONDS`` (a fixed
    rest added after every batch)."""

    duty: float = 0.25
    batch_seconds: float | None = 0.25  # None: every batch holds ``max_rows``
    max_rows: int = 5000
    pause_seconds: float = 0.0

    def __post_init__(self) -> None:
        if not 0 < self.duty <= 1:
            raise ValueError(f"the duty cycle must be in (0, 1], not {self.duty}")
        if self.batch_seconds is not None and not self.batch_seconds > 0:
            raise ValueError(f"the batch time must be > 0 seconds, not {self.batch_seconds}")
        if self.max_rows < 1 or self.pause_seconds < 0:
            raise ValueError("the batch size must be >= 1 and the pause >= 0")

    @classmethod
    def unpaced(cls, rows: int) -> Pace:
        """Fixed batches of ``rows``, one after the other with no rest: as fast as the
        database allows."""
        return cls(duty=1.0, batch_seconds=None, max_rows=rows)

    def capacity_per_day(self, messages_per_busy_second: float) -> float:
        """Messages a day this pace removes when, while working, the database removes
        ``messages_per_busy_second``."""
        return messages_per_busy_second * self.duty * SECONDS_PER_DAY


class Pacer:
    """One run's pacing state: the next batch's size, and the rest after each batch."""

    def __init__(self, pace: Pace) -> None:
        self.pace = pace
        self.rows = pace.max_rows if pace.batch_seconds is None else min(pace.max_rows,
                                                                          START_ROWS)
        self._quiet_cost: float | None = None  # fastest seconds per message seen

    def after_batch(self, rows: int, seconds: float) -> float:
        """Records a batch of ``rows`` messages that took ``seconds``; the rest before the
        next one (seconds). Also sets :attr:`rows` for the next batch."""
        seconds = max(seconds, 0.0)
        self.rows = self._next_rows(seconds)
        rest = seconds * (1 - self.pace.duty) / self.pace.duty
        return rest * self._stretch(rows, seconds) + self.pace.pause_seconds

    def _next_rows(self, seconds: float) -> int:
        target = self.pace.batch_seconds
        if target is None:
            return self.rows
        if seconds > target:
            scaled = int(self.rows * target / seconds)
        elif seconds < target / 2:
            scaled = int(self.rows * 1.5) + 1
        else:
            scaled = self.rows
        return max(min(MIN_ROWS, self.pace.max_rows), min(self.pace.max_rows, scaled))

    def _stretch(self, rows: int, seconds: float) -> float:
        """How much longer than the duty cycle's rest to wait: 1 on a quiet database."""
        if rows <= 0:
            return 1.0
        cost = seconds / rows
        if self._quiet_cost is None or cost < self._quiet_cost:
            self._quiet_cost = cost
            return 1.0
        ratio = cost / self._quiet_cost if self._quiet_cost > 0 else 1.0
        return min(ratio, MAX_STRETCH) if ratio > BUSY_FACTOR else 1.0
