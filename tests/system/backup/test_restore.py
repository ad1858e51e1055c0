"""A restore from backup, drilled as the operations guide describes it: RMS on a PostgreSQL
with WAL archiving, a base backup (``pg_basebackup``), load, a named restore point, more load
(acks, new prepares, an app created), then the primary lost and a point-in-time restore into
a new server, ``rms migrate`` and RMS started on it. Each test checks one consequence the
guide lists; the drill runs once for the module."""

from __future__ import annotations

import asyncio
import uuid

import pytest

from rms.devstack.embedded import EmbeddedPostgres
from rms.devstack.kafka_broker import EmbeddedKafka
from rms_client.consumer import AckResult, Outcome
from tests.system.backup.drill import Drill, run_drill

pytestmark = [pytest.mark.slow, pytest.mark.timeout(420)]


@pytest.fixture(scope="module")
def drill(tmp_path_factory: pytest.TempPathFactory, kafka: EmbeddedKafka,
          postgres: EmbeddedPostgres) -> Drill:
    inbox = f"inbox_{uuid.uuid4().hex[:12]}"
    postgres.create_database(inbox)  # the consumer's own database: not restored
    done = asyncio.run(run_drill(tmp_path_factory.mktemp("restore"),
                                 kafka.bootstrap_servers, postgres.url(inbox)))
    print(f"restore drill: PostgreSQL restored and promoted {done.postgres_seconds:.1f}s, RMS "
          f"answering {done.recovery_seconds:.1f}s after the primary was lost")
    return done


def test_messages_acknowledged_before_the_point_stay_done(drill: Drill) -> None:
    assert {drill.states[i] for i in drill.acked_before} == {"done"}, drill.states
    assert {drill.final[i] for i in drill.acked_before} == {"done"}, drill.final
    assert not any(drill.redelivered[f"{i} {Outcome.DUPLICATE}"] for i in drill.acked_before)


def test_messages_acknowledged_after_the_point_are_sent_again_and_republished(
        drill: Drill) -> None:
    assert {drill.states[i] for i in drill.acked_after} == {"sent"}, drill.states
    assert all(drill.redelivered[f"{i} {Outcome.DUPLICATE}"] for i in drill.acked_after), \
        drill.redelivered
    assert {drill.final[i] for i in drill.acked_after} == {"done"}, drill.final


def test_messages_confirmed_after_the_point_are_pending_send_again_until_confirmed_again(
        drill: Drill) -> None:
    assert {drill.states[i] for i in drill.confirmed_after} == {"pending-send"}, drill.states
    assert set(drill.reconfirmed.values()) == {200}, drill.reconfirmed
    assert all(drill.redelivered[f"{i} {Outcome.DUPLICATE}"] for i in drill.confirmed_after)
    assert {drill.final[i] for i in drill.confirmed_after} == {"done"}, drill.final


def test_records_published_after_the_point_still_reach_consumers_whose_acks_answer_404(
        drill: Drill) -> None:
    """Kafka is not rolled back: what was published after the point is read after the
    restore, of messages RMS no longer knows."""
    assert {drill.states[i] for i in drill.published_after} == {"404"}, drill.states
    assert all(drill.redelivered[f"{i} {Outcome.PROCESSED}"] for i in drill.published_after)
    assert all(drill.acks[f"{i} {AckResult.REFUSED} 404"] for i in drill.published_after), \
        drill.acks


def test_the_consumers_inbox_keeps_each_effect_once(drill: Drill) -> None:
    every = (drill.acked_before + drill.acked_after + drill.confirmed_after
             + drill.published_after)
    assert {drill.handled[i] for i in every} == {1}, drill.handled
    assert set(drill.handled) == set(every), drill.handled


def test_messages_prepared_after_the_point_answer_404_to_their_producers(drill: Drill) -> None:
    assert set(drill.get_after.values()) == {404}, drill.get_after
    assert set(drill.confirm_after.values()) == {404}, drill.confirm_after


def test_apps_created_after_the_point_are_gone(drill: Drill) -> None:
    assert drill.late_app not in drill.apps, drill.apps
    assert drill.late_key_status == 401, drill.late_key_status
    assert any(name.startswith("points-") for name in drill.apps), drill.apps


def test_keys_rotated_after_the_point_are_back_to_the_previous_key(drill: Drill) -> None:
    assert drill.rotated_key_status == 401, drill.rotated_key_status
    assert "401" not in drill.states.values(), drill.states  # the previous key answers


def test_the_restore_is_timed(drill: Drill) -> None:
    assert 0 < drill.postgres_seconds <= drill.recovery_seconds < 180, drill
