"""The in-flight ``publishing`` events by message: ``message_events_publishing``.

The statement that records publish outcomes completes each delivery's ``publishing`` event
where it stands (design section 4): it finds the event by message among the few still in
flight. A partial index holds only those, so the lookup stays an index probe however large
the history grows (without it the planner joins a batch of outcomes to the whole table).

Revision ID: 0016
Revises: 0015
Create Date: 2026-12-03
"""

from __future__ import annotations

from alembic import op

revision = "0016"
down_revision = "0015"
branch_labels = None
depends_on = None


def upgrade() -> None:
    # concurrently: a large history is indexed while RMS keeps writing it (no table lock)
    with op.get_context().autocommit_block():
        op.execute("CREATE INDEX CONCURRENTLY IF NOT EXISTS message_events_publishing "
                   "ON message_events (message_id) WHERE event = 'publishing'")


def downgrade() -> None:
    with op.get_context().autocommit_block():
        op.execute("DROP INDEX CONCURRENTLY IF EXISTS message_events_publishing")
