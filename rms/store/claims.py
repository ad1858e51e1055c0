"""The parts every claim statement is built from: the check-back claim of messages
(:mod:`rms.store.checkback`) and of transactions (:mod:`rms.store.transactions`), the
redelivery claim (:mod:`rms.store.redelivery`) and the ordering claim (:mod:`rms.store.ordering`)
are peers, each assembled here from the same pieces.

A claim locks the rows it chose exactly once (:func:`locked`), then in the same statement gives
the rows with attempts left their claim transition and the spent ones their exhausted transition
(:func:`claim_or_exhaust`), both rendered from their transition table's rows. A worker that dies
leaves its claims to expire under their lease: they are simply due again.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import (
    CTE,
    ColumnElement,
    Select,
    Table,
    and_,
    bindparam,
    false,
    func,
    insert,
    literal,
    not_,
    or_,
    select,
    union_all,
    update,
)

from rms.domain import phase
from rms.domain import transaction_transitions as ledger
from rms.domain import transitions as table
from rms.domain.models import Message
from rms.domain.states import DeadReason, Event
from rms.store.phase import condition
from rms.store.rows import message_from
from rms.store.schema import message_events, messages, transactions
from rms.store.subscriptions.terms import every_owing_spent, owing, spent_for
from rms.store.transitions import Changes, append_publishing, core_values, event_of, with_event

# a message whose check-back is due
MESSAGES_CHECK_DUE = and_(messages.c.state == table.CLAIM_CHECK.source.value,
                          not_(messages.c.dead), messages.c.next_check_at <= func.now())
# a transaction whose check-back is due: what its claim takes, and what the lag measures
TRANSACTIONS_CHECK_DUE = and_(transactions.c.state == ledger.CLAIM_CHECK.source.value,
                              not_(transactions.c.dead),
                              transactions.c.next_check_at <= func.now())


def locked(chosen: Select[Any], name: str, of: Table | None = None) -> CTE:
    """The rows a statement will change, chosen and locked exactly once (``FOR UPDATE SKIP
    LOCKED``, of ``of`` when the selection joins several tables).

    ``UPDATE ... WHERE id IN (SELECT ... LIMIT n FOR UPDATE SKIP LOCKED)`` is not safe: the
    planner may run the sub-select once per outer row, and rows this very statement already
    updated are then skipped as locked, so the "window" moves and more than ``n`` rows change.
    A ``MATERIALIZED`` CTE is evaluated once.
    """
    return (chosen.with_for_update(skip_locked=True, of=of).cte(name)
            .prefix_with("MATERIALIZED"))


def claim_or_exhaust(due: CTE, target: Table, key: str, claim: Changes, exhaust: Changes,
                     given: Mapping[str, Any]) -> tuple[CTE, CTE]:
    """The two halves of a claim over the locked rows ``due`` (their ``key`` and a boolean
    ``spent``): the rows with attempts left get ``claim`` (its :class:`Given` values from
    ``given``), the spent ones ``exhaust``. Returns the CTEs ``claimed`` and ``exhausted``,
    each returning the whole changed rows of ``target``."""
    chosen = target.c[key] == due.c[key]
    claimed = (update(target).where(chosen, not_(due.c.spent))
               .values(**core_values(claim, given, target))
               .returning(*target.c).cte("claimed"))
    exhausted = (update(target).where(chosen, due.c.spent)
                 .values(**core_values(exhaust, target=target))
                 .returning(*target.c).cte("exhausted"))
    return claimed, exhausted


def check_claim(target: Table, key: str, due: ColumnElement[bool], claim: Changes, exhaust: Changes
                ) -> tuple[CTE, CTE]:
    """The check-back claim of messages or of transactions (``target``, keyed by ``key``): lock
    a batch of rows ``due`` for their check-back, oldest due first (bound ``limit``); give those
    with a call left ``claim`` (bound ``lease`` and ``token``), and the spent ones
    ``exhaust``. Returns the CTEs ``claimed`` and ``exhausted``."""
    chosen = locked(
        select(target.c[key], (target.c.check_count >= target.c.max_checks).label("spent"))
        .where(due).order_by(target.c.next_check_at).limit(bindparam("limit")), "due")
    return claim_or_exhaust(chosen, target, key, claim, exhaust,
                            {"lease": bindparam("lease"), "token": bindparam("token")})


# ---- delivery claims: the redelivery round and the ordering run -------------------------------

@dataclass(frozen=True, slots=True)
class Round:
    """One claim round: messages flagged dead and messages claimed for publishing."""

    dead: list[Message]
    claimed: list[Message]

    @classmethod
    def of(cls, rows: Sequence[Any]) -> Round:
        """The rows of :func:`delivery_claim`, told apart by ``flagged_dead``."""
        found = [(row["flagged_dead"], message_from(row)) for row in rows]
        return cls(dead=[message for dead, message in found if dead],
                   claimed=[message for dead, message in found if not dead])


def budget_columns() -> tuple[ColumnElement[Any], ...]:
    """What a delivery claim selects of each due message beside its id: ``spent`` (its
    delivery budget is spent, or every subscriber that owes it an ack spent its own: it is
    flagged dead), ``exhausted_now`` (the subscribers owing an ack whose own budget is spent,
    :func:`rms.store.subscriptions.terms.spent_for`) and ``exhausted_before`` (those already
    recorded)."""
    return (or_(condition(phase.BUDGET_SPENT), every_owing_spent(messages)).label("spent"),
            spent_for(messages).label("exhausted_now"),
            messages.c.exhausted.label("exhausted_before"))


def delivery_claim(chosen: Select[Any], token: str, lease_seconds: float, actor: str) -> Any:
    """Lock the due messages ``chosen`` selects (``message_id`` and ``spent``); flag the spent
    ones dead (:data:`rms.domain.transitions.DELIVERY_EXHAUSTED`, with a ``dead`` event) and
    reserve the next delivery of the others under a lease
    (:data:`rms.domain.transitions.CLAIM_DELIVERY`, the token bound as ``round_token``).
    Returns the changed rows with ``flagged_dead`` telling the two apart."""
    due = locked(chosen, "due")
    claimed, dead = claim_or_exhaust(
        due, messages, "message_id", table.CLAIM_DELIVERY, table.DELIVERY_EXHAUSTED,
        {"token": bindparam("round_token", token), "lease": literal(lease_seconds),
         "exhausted": due.c.exhausted_now})

    def detail(rows: CTE) -> ColumnElement[Any]:
        return func.jsonb_build_object(
            "reason", DeadReason.DELIVERY_EXHAUSTED.value,
            "deliveries", rows.c.delivery_count - rows.c.delivery_base,
            "consumers", func.to_jsonb(owing(rows)))

    flagged = with_event(dead, event_of(table.DELIVERY_EXHAUSTED), actor, detail).add_columns(
        literal(True).label("flagged_dead"))
    reserved = (select(claimed, literal(False).label("flagged_dead"))
                .add_cte(_consumers_exhausted(claimed, due, actor))
                .add_cte(append_publishing(claimed, literal(actor))))
    return union_all(flagged, reserved)


def _consumers_exhausted(claimed: CTE, due: CTE, actor: str) -> CTE:
    """A ``dead`` event for each consumer whose own budget this claim found spent (the
    message goes on for the others): it names the consumer and its deliveries."""
    name = func.unnest(claimed.c.exhausted).column_valued("consumer")
    newly = (select(claimed.c.message_id, literal(Event.DEAD.value), literal(actor),
                    func.jsonb_build_object(
                        "consumer", name, "reason", DeadReason.DELIVERY_EXHAUSTED.value,
                        "deliveries", claimed.c.delivery_count - 1 - claimed.c.delivery_base))
             .select_from(claimed).join(due, due.c.message_id == claimed.c.message_id)
             .where(not_(func.coalesce(name == func.any(due.c.exhausted_before), false()))))
    return (insert(message_events)
            .from_select(["message_id", "event", "actor", "detail"], newly)
            .cte("consumers_exhausted"))
