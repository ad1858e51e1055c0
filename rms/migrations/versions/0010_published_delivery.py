"""What the broker took, in the row: ``published_delivery``, the delivery number of the
message's accepted publish, written only by the statement that records an accepted publish
(and cleared by one that records a refused one). The head-of-line rule of an ordered key reads
it (:data:`rms.domain.phase.ACCEPTED`) instead of inferring acceptance from
``delivery_count``.

A nullable column without a default: adding it rewrites nothing. The ordered messages still
unacknowledged get it from their history (the number of the ``published`` event of the
delivery they count, when there is one); no other row reads it. The previous release's code,
which neither reads nor writes it, keeps working on the new schema; an ordered publish it
records during a rolling update leaves the column NULL, so that message holds its key until
its ack deadline and is then published again by this release's sequencer: later, never
earlier than the order allows.

Revision ID: 0010
Revises: 0009
Create Date: 2026-11-27
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0010"
down_revision = "0009"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("messages", sa.Column("published_delivery", sa.Integer(), nullable=True))
    op.execute("""
        UPDATE messages m SET published_delivery = m.delivery_count
        WHERE m.ordered AND m.state = 'sent' AND m.delivery_count > m.delivery_base
          AND EXISTS (SELECT 1 FROM message_events e
                      WHERE e.message_id = m.message_id AND e.event = 'published'
                        AND e.detail ->> 'delivery' = m.delivery_count::text)
    """)


def downgrade() -> None:
    op.drop_column("messages", "published_delivery")
