"""Acks of many items go in rounds of distinct message ids (an UPDATE changes a row once per
statement), in the items' order, every item in exactly one round."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from rms.store.subscriptions.acks import AckItem, rounds


@given(st.lists(st.tuples(st.sampled_from("abc"), st.sampled_from(["p", "q"])), max_size=12))
def test_every_item_goes_once_in_a_round_of_distinct_ids(pairs: list[tuple[str, str]]) -> None:
    items = [AckItem(message_id, consumer, "http") for message_id, consumer in pairs]
    found = rounds(items)
    assert sorted(i for level in found for i in level) == list(range(len(items)))
    for level in found:
        assert len({items[i].message_id for i in level}) == len(level) and level == sorted(level)
    for message_id in "abc":  # an id's items go in their order, one round each
        levels = [n for n, level in enumerate(found) for i in level
                  if items[i].message_id == message_id]
        assert levels == list(range(len(levels)))


def test_one_round_when_every_id_is_distinct() -> None:
    items = [AckItem(m, "p", "http") for m in ("a", "b", "c")]
    assert rounds(items) == [[0, 1, 2]]
