"""What the redelivery worker's passes did, in one record for every scale: one ordered key
of the sequencer, a tick of the sequencer, a tick of the worker (tests and logs read it)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass
class Report:
    """Counts of one pass. ``keys``: ordered keys looked at; ``held``: (one key) its line is
    held behind a message; ``ordered``: (a worker's tick) what its sequencer did."""

    rounds: int = 0
    claimed: int = 0
    keys: int = 0
    published: int = 0
    failed: int = 0
    dead: int = 0
    held: bool = False
    ordered: Report | None = None

    def add(self, other: Report) -> None:
        """Count ``other`` in (its sequencer's part too)."""
        self.rounds += other.rounds
        self.claimed += other.claimed
        self.keys += other.keys
        self.published += other.published
        self.failed += other.failed
        self.dead += other.dead
        self.held = self.held or other.held
        if other.ordered is not None:
            if self.ordered is None:
                self.ordered = Report()
            self.ordered.add(other.ordered)
