"""The **atomic-publish** invariant (design section 4, "Transactions"): the members a confirm
published together (one Kafka transaction) are read by the suite's ``read_committed`` consumer
all of them or none of them, never a strict prefix. A pure function, proved by
``tests/unit/test_fault_checker_features.py``.

Which members were one atomic publish is read from the history the broker's answers wrote:
a member's first ``published`` event records the actor that published it and the delivery
number. Those whose first accepted publish was recorded by the confirming actor (a producer,
an operator or a check-back worker, never the recovery worker, which publishes members one at
a time) went out in the confirm's one Kafka transaction with the same delivery number; the
consumer must then have read that delivery of each of them, or of none of them.
"""

from __future__ import annotations

from collections.abc import Iterator

from tests.system.faults.history import COMMITTED, Final, History, Violation

KIND = "atomic-publish"
RECOVERY_ACTOR = "recovery-worker:"


def check_atomic_publish(history: History, final: Final) -> Iterator[Violation]:
    if history.log_lost:
        return  # the records themselves are gone
    first: dict[str, tuple[str, object]] = {}
    for event in final.events:
        if event.event == "published" and event.message_id not in first:
            first[event.message_id] = (event.actor, event.detail.get("delivery"))
    read = {(r.message_id, r.delivery) for r in history.consumed}
    for transaction, members in sorted(history.transactions.items()):
        if history.truth.get(transaction) != COMMITTED:
            continue
        together = [(m, first[m][1]) for m in members
                    if m in first and not first[m][0].startswith(RECOVERY_ACTOR)]
        if len(together) < 2:
            continue
        seen = [member for member, delivery in together if (member, delivery) in read]
        if seen and len(seen) < len(together):
            missing = [member for member, _ in together if member not in seen]
            yield Violation(KIND, missing[0],
                            f"transaction {transaction}: read {seen} of its atomic publish, "
                            f"never {missing}")
