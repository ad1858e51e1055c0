"""Stage latencies of the load paths, from the load generator's transactions, the consumer's
receipts and the database's ``done_at``, all on this machine's clock (epoch seconds):

* ``prepare``  = end of the prepare (or one-shot send, or batch prepare) response minus the
  transaction's start; in the open loop the start is the *scheduled* start (queueing in the
  client counts);
* ``confirm``  = end of the confirm (or batch confirm) response minus the end of prepare;
* ``record``   = the consumer's receive time of delivery 1 minus the end of the confirm
  response (for one-shot: of the send response). The record can arrive before the producer
  has read the response, so small negative values are possible and kept;
* ``done``     = ``done_at`` (the database's ``now()`` in the acknowledging transaction) minus
  the receive time of the delivery that was acknowledged (the last one received).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from bench.history import Receipts
from bench.verify import CONFIRMED, Stored

STAGES = ("prepare", "confirm", "record", "done")


@dataclass
class StageSamples:
    prepare: list[float] = field(default_factory=list)
    confirm: list[float] = field(default_factory=list)
    record: list[float] = field(default_factory=list)
    done: list[float] = field(default_factory=list)

    def as_dict(self) -> dict[str, list[float]]:
        return {name: getattr(self, name) for name in STAGES}


def _message_stages(samples: StageSamples, responded: float, receipts: list[tuple[int, float]],
                    stored: Stored | None) -> None:
    if not receipts:
        return
    samples.record.append(min(t for d, t in receipts if d == min(d for d, _ in receipts))
                          - responded)
    if stored is not None and stored.done_at is not None:
        samples.done.append(stored.done_at - max(t for _, t in receipts))


def load_stages(transactions: list[list[Any]], ids_of: Callable[[int], list[str]],
                receipts: Receipts, stored: Mapping[str, Stored]) -> StageSamples:
    """``transactions`` as the load generator wrote them: ``[n, outcome, t0, t1, t2]``."""
    samples = StageSamples()
    for n, outcome, t0, t1, t2 in transactions:
        if outcome != CONFIRMED:
            continue
        samples.prepare.append(t1 - t0)
        if t2 is not None:
            samples.confirm.append(t2 - t1)
        responded = t2 if t2 is not None else t1
        for message_id in ids_of(n):
            _message_stages(samples, responded, receipts.get(message_id, []),
                            stored.get(message_id))
    return samples
