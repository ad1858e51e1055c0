"""One row per message of the window: what happened to it and when. Every metric of the report
is an aggregate of these rows, so the rules below are the report's semantics.

Buckets: ``hour`` is the message's ``created_at`` truncated to the hour in UTC; its day is
that hour's UTC date.

Kind: a message with a ``prepared`` event is *prepared* (transactional); one with only a
``sent`` event is *one-shot*. A message whose creation event is missing from the history is
neither, but counts in ``messages`` and in everything its row and other events show.

Times, row first and events as the fallback (the row and its event are written by one
statement, so they agree; the fallback covers a history with a missing piece):

- confirmed at: ``messages.confirmed_at``, else the first ``confirmed`` event, else the
  ``sent`` event of a one-shot message. A message with a confirm time is *sent*.
- confirmed by / cancelled by: ``detail.by`` of the first ``confirmed`` / ``cancelled`` event
  (``producer``, ``check-back``, ``admin``); "rolled back by check-back" is a cancel by
  check-back. A message cancelled in its row but without the event counts in ``cancelled``
  only.
- first publish: the earliest ``published`` event (by time, whatever its delivery number).
- done at: ``messages.done_at``, else the first ``acked`` event. *Done* means state ``done`` or
  a done time.

Events are ordered by their ``at`` time only, never by insertion order (``id``); two confirm or
cancel events at the same instant resolve to producer, then check-back, then admin.

Stages, in whole microseconds (columns ``<stage>_us``; the report shows seconds), each null when
one of its ends is missing (so a message still in flight, or one whose history lacks a stage,
is left out of that stage's percentiles and counted in none of its ``*_count``):

- ``prepare_to_confirm``: created -> confirmed, for messages that are not one-shot;
- ``confirm_to_first_publish``: confirmed -> first ``published`` event;
- ``first_publish_to_done``: first ``published`` event -> done;
- ``prepare_to_done``: created -> done, one-shot messages included.

A delayed message (``deliver_after`` set) starts these clocks at its delivery time when that is
later: ``confirm_to_first_publish`` and the SLA from ``max(confirmed, deliver_after)``,
``prepare_to_done`` from ``max(created, deliver_after)``; its wait is not latency. Counters:
``delayed`` (messages with a ``deliver_after``) and ``scheduled`` (sent, not dead, and still
waiting for it at the report's "now").

A stage that ends before it starts counts as 0 s. RMS dates a publish recorded after its
message's ack no later than the ack, but each event carries its statement's start time, so an
ack whose statement began just before the broker's answer was recorded (and waited for it) can
still be dated a fraction of a millisecond before the ``published`` event.

Counters per message: ``checks`` and their outcomes (``checked`` events: ``committed``,
``rolled_back``, ``unknown``, and ``other`` for any other or missing outcome, so the four add
up to ``checks``), ``publishes``
(``published`` events: records the broker accepted, redeliveries and admin resends included),
``publish_failures`` (``publish-failed`` events), ``resends`` (``resent`` events). Unknown
event names are ignored. Current state, ``dead`` and ``dead_reason`` come from the row.

SLA (``with_sla``): a sent message *met* its topic's target when it was done within the target
after its confirmation (``confirm -> done <= target``, the boundary included); it *missed* it
when it was done later, or is not done and its confirmation is already older than the target
at the report's "now" (dead messages included); otherwise it is *pending* (still in flight
within the target, or done with no recorded done time). Compliance = met / (met + missed).
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from rms.domain.states import State

STAGES = (
    "prepare_to_confirm",
    "confirm_to_first_publish",
    "first_publish_to_done",
    "prepare_to_done",
)


ACTORS = ("producer", "check-back", "admin")  # detail.by of confirmed / cancelled events
CHECK_OUTCOMES = ("committed", "rolled_back", "unknown")  # detail.outcome of checked events
DETAIL_EVENTS = ("checked", "confirmed", "cancelled")  # the only events whose detail is read


def stage_column(stage: str) -> str:
    """The facts' column of a stage's latency, in whole microseconds."""
    return f"{stage}_us"


def _actor_key(event: Any, name: str) -> Any:
    """``unix_micros(at) * 4 + actor code`` of the ``name`` events (code 0: no known actor).

    The minimum is the first such event and its actor in one fixed-width number, which keeps
    the per-message aggregation a hash aggregation; events at the same instant resolve to the
    lowest code (producer, check-back, admin), deterministically."""
    from pyspark.sql import functions as F

    return F.min(F.when(event == name, F.shiftleft(F.unix_micros("at"), 2) + F.col("actor")))


def _decode_actor_key(key: str) -> tuple[Any, Any]:
    """(time, actor code: 1 + index in ``ACTORS``, 0 for none) of an ``_actor_key``; both null
    for a null key."""
    from pyspark.sql import functions as F

    return F.timestamp_micros(F.shiftright(F.col(key), 2)), F.col(key).bitwiseAND(3).cast("int")


_WS = r"[ \t\n\r]*"  # JSON whitespace
_STRING = r'"[^"\\\x00-\x1f]*"'  # a JSON string without escapes
_SCALAR = rf"(?:{_STRING}|-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?|true|false|null)"
_MEMBER = rf"{_STRING}{_WS}:{_WS}{_SCALAR}{_WS}"
# a flat JSON object (scalar members, no escapes) at the start of the text
FLAT_OBJECT = rf"^{_WS}\{{{_WS}(?:{_MEMBER}(?:,{_WS}{_MEMBER})*)?\}}"


def _code(value: Any, values: tuple[str, ...]) -> Any:
    """1 + the index of a string column's value in ``values``; 0 for another value or null."""
    from pyspark.sql import functions as F

    return F.coalesce(F.array_position(F.array(*[F.lit(v) for v in values]), value), F.lit(0))


def detail_code(detail: Any, name: str, values: tuple[str, ...]) -> Any:
    """1 + the index in ``values`` of the string at ``$.name`` of a JSON ``detail`` (Spark's
    ``get_json_object``: the first such member of the top-level object), 0 when it is missing,
    not a string, another value, or the detail is not JSON.

    The details RMS writes are flat objects (``{"attempt": 1, "outcome": "committed"}``): for
    those a regular expression finds the first ``name`` member, with no JSON parser; anything
    else (escapes, nested values, malformed text) goes to ``get_json_object``. Both read the
    same value (``tests/integration/spark/test_detail_codes.py``); the expression costs a fraction of a
    parse."""
    from pyspark.sql import functions as F

    member = F.regexp_extract(detail, rf'"{name}"{_WS}:{_WS}(?:"([^"]*)")?', 1)
    value = F.when(detail.rlike(FLAT_OBJECT), member).otherwise(
        F.get_json_object(detail, f"$.{name}"))
    return _code(value, values)


def _parsed(events: Any) -> Any:
    """Each event's JSON detail read once, and only where it matters (``DETAIL_EVENTS``): the
    check-back outcome code of ``checked`` events (``detail_code`` of ``CHECK_OUTCOMES``), the
    actor code of ``confirmed`` / ``cancelled`` events (of ``ACTORS``)."""
    from pyspark.sql import functions as F

    event, detail = F.col("event"), F.col("detail")
    return events.select(
        "message_id", "at", "event",
        F.when(event == "checked", detail_code(detail, "outcome", CHECK_OUTCOMES))
        .alias("outcome"),
        F.when(event.isin("confirmed", "cancelled"), detail_code(detail, "by", ACTORS))
        .alias("actor"),
    )


def _event_summary(events: Any) -> Any:
    """Per message: creation kind, first times, actors and counters from its events."""
    from pyspark.sql import functions as F

    event = F.col("event")
    outcome = F.col("outcome")

    def first_at(name: str) -> Any:
        return F.min(F.when(event == name, F.col("at")))

    def count(condition: Any) -> Any:
        return F.count(F.when(condition, True))

    return _parsed(events).groupBy("message_id").agg(
        F.bool_or(event == "prepared").alias("ev_prepared"),
        F.bool_or(event == "sent").alias("ev_sent"),
        first_at("sent").alias("ev_sent_at"),
        _actor_key(event, "confirmed").alias("ev_confirmed_key"),
        _actor_key(event, "cancelled").alias("ev_cancelled_key"),
        first_at("published").alias("first_published_at"),
        first_at("acked").alias("ev_acked_at"),
        count(event == "checked").alias("checks"),
        *[count(outcome == code).alias(f"checks_{name}")
          for code, name in enumerate(CHECK_OUTCOMES, start=1)],
        count(outcome == 0).alias("checks_other"),
        count(event == "published").alias("publishes"),
        count(event == "publish-failed").alias("publish_failures"),
        count(event == "resent").alias("resends"),
    )


def micros_between(start: Any, end: Any) -> Any:
    """``end - start`` in whole microseconds; null if either is null; 0 if ``end`` is before
    ``start``."""
    from pyspark.sql import functions as F

    micros = F.unix_micros(end) - F.unix_micros(start)
    return F.when(micros < 0, F.lit(0)).otherwise(micros)


def seconds(micros: Any) -> Any:
    """Microseconds as seconds (a double)."""
    return micros / 1_000_000


def seconds_between(start: Any, end: Any) -> Any:
    """``end - start`` in seconds; null if either is null; 0 if ``end`` is before ``start``."""
    return seconds(micros_between(start, end))


# the profile: what a message is and how it ended, packed in one integer (``profile``)
FLAGS = ("prepared", "one_shot", "sent", "cancelled", "done", "pending_send", "unacked",
         "delayed", "scheduled", "dead")  # one bit each, in this order
DEAD_REASONS = ("check-exhausted", "delivery-exhausted")  # the reasons the report counts
CODES: dict[str, tuple[str, ...]] = {  # two bits each, after the flags: 0 = none of these
    "confirmed_by": ACTORS, "cancelled_by": ACTORS, "dead_reason": DEAD_REASONS}
CODE_SHIFT = {name: len(FLAGS) + 2 * index for index, name in enumerate(CODES)}


def _profile(flags: dict[str, Any], codes: dict[str, Any]) -> Any:
    """The ``profile`` column: bit i set for ``FLAGS[i]``, each code in its two bits."""
    from pyspark.sql import functions as F

    bits = [F.when(flags[name], 1 << index).otherwise(0) for index, name in enumerate(FLAGS)]
    bits += [F.shiftleft(codes[name], CODE_SHIFT[name]) for name in CODES]
    total = bits[0]
    for bit in bits[1:]:
        total = total.bitwiseOR(bit)
    return total.cast("int")


def profile_flag(profile: Any, name: str) -> Any:
    """Whether the ``FLAGS`` entry ``name`` is set, for an Arrow array of profiles."""
    import pyarrow.compute as pc

    return pc.not_equal(pc.bit_wise_and(profile, 1 << FLAGS.index(name)), 0)


def profile_code(profile: Any, name: str) -> Any:
    """The ``CODES`` entry ``name`` (0 = none, else 1 + index), for an Arrow array of profiles."""
    import pyarrow.compute as pc

    return pc.bit_wise_and(pc.shift_right(profile, CODE_SHIFT[name]), 3)


def message_facts(messages: Any, events: Any, now: datetime) -> Any:
    """The facts: ``app``, ``topic``, ``hour``, ``profile`` (``FLAGS`` and ``CODES``), the
    per-message counters, the stage latencies (µs) and the two SLA clocks (``with_sla``)."""
    from pyspark.sql import functions as F

    joined = messages.join(_event_summary(events), "message_id", "left")
    col = F.col
    ev_confirmed_at, confirmed_by = _decode_actor_key("ev_confirmed_key")
    ev_cancelled_at, cancelled_by = _decode_actor_key("ev_cancelled_key")
    ev_flag = {name: F.coalesce(col(name), F.lit(False)) for name in ("ev_prepared", "ev_sent")}
    confirmed_at = F.coalesce(col("confirmed_at"), ev_confirmed_at, col("ev_sent_at"))
    # a delayed message's clock starts at its delivery time (greatest skips a null)
    sla_start = F.greatest(confirmed_at, col("deliver_after"))
    done_at = F.coalesce(col("done_at"), col("ev_acked_at"))
    one_shot = ev_flag["ev_sent"] & ~ev_flag["ev_prepared"]
    dead = F.coalesce(col("dead"), F.lit(False))
    cancelled = ((col("state") == State.DELETED.value) | col("deleted_at").isNotNull()
                 | ev_cancelled_at.isNotNull())
    flags = {
        "prepared": ev_flag["ev_prepared"],
        "one_shot": one_shot,
        "sent": confirmed_at.isNotNull(),
        "cancelled": cancelled,
        "done": (col("state") == State.DONE.value) | done_at.isNotNull(),
        "pending_send": (col("state") == State.PENDING_SEND.value) & ~dead,
        "unacked": (col("state") == State.SENT.value) & ~dead,
        "delayed": col("deliver_after").isNotNull(),
        "scheduled": (col("state") == State.SENT.value) & ~dead & (col("deliver_after") > F.lit(now)),
        "dead": dead,
    }
    codes = {
        "confirmed_by": F.coalesce(confirmed_by, F.lit(0)),
        "cancelled_by": F.when(cancelled, F.coalesce(cancelled_by, F.lit(0))).otherwise(0),
        "dead_reason": F.when(dead, _code(col("dead_reason"), DEAD_REASONS)).otherwise(0),
    }
    counters = ("checks", "checks_committed", "checks_rolled_back", "checks_unknown",
                "checks_other", "publishes", "publish_failures", "resends")
    return joined.select(
        "app", "topic",
        F.date_trunc("hour", col("created_at")).alias("hour"),
        _profile(flags, codes).alias("profile"),
        *[F.coalesce(col(name).cast("int"), F.lit(0)).alias(name) for name in counters],
        F.when(~one_shot, micros_between(col("created_at"), confirmed_at))
        .alias(stage_column("prepare_to_confirm")),
        micros_between(sla_start, col("first_published_at"))
        .alias(stage_column("confirm_to_first_publish")),
        micros_between(col("first_published_at"), done_at)
        .alias(stage_column("first_publish_to_done")),
        micros_between(F.greatest(col("created_at"), col("deliver_after")), done_at)
        .alias(stage_column("prepare_to_done")),
        seconds_between(sla_start, done_at).alias("confirm_to_done"),
        seconds_between(sla_start, F.lit(now)).alias("confirmed_age"),
    )


def topic_target(targets: dict[str, float]) -> Any:
    """The SLA target (seconds, a double) of each row's ``topic``; null for a topic not in
    ``targets``."""
    from pyspark.sql import functions as F

    if not targets:
        return F.lit(None).cast("double")
    pairs = [F.lit(value) for item in sorted(targets.items()) for value in item]
    return F.try_element_at(F.create_map(*pairs), F.col("topic")).cast("double")


def with_sla(facts: Any, targets: dict[str, float]) -> Any:
    """Adds ``sla_target_seconds`` (by topic) and the ``sla_met`` / ``sla_missed`` flags."""
    from pyspark.sql import functions as F

    col = F.col
    with_target = facts.withColumn("sla_target_seconds", topic_target(targets))
    target_col = col("sla_target_seconds")
    sent, done = (col("profile").bitwiseAND(1 << FLAGS.index(name)) != 0
                  for name in ("sent", "done"))
    met = sent & (col("confirm_to_done") <= target_col)
    missed = sent & (
        (col("confirm_to_done") > target_col)
        | (~done & (col("confirmed_age") > target_col))
    )
    return with_target.select(
        "*",
        F.coalesce(met, F.lit(False)).alias("sla_met"),
        F.coalesce(missed, F.lit(False)).alias("sla_missed"),
    )
