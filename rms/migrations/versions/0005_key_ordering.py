"""Per-key ordering: apps name their ordered topics; an ordered message gets a confirm sequence
number when it is confirmed, and the recovery workers' sequencer leases one key at a time.

Existing rows keep working: apps get no ordered topics and every stored message is unordered
(``ordered`` false, no sequence number), so nothing already stored changes how it is delivered.

Revision ID: 0005
Revises: 0004
Create Date: 2026-11-25
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("apps", sa.Column("ordered_topics", postgresql.ARRAY(sa.Text()),
                                    nullable=False, server_default="{}"))
    op.execute("CREATE SEQUENCE messages_confirm_seq")
    op.add_column("messages", sa.Column("ordered", sa.Boolean(), nullable=False,
                                        server_default=sa.text("false")))
    op.add_column("messages", sa.Column("confirm_seq", sa.BigInteger(), nullable=True))
    op.create_index("messages_ordered_keys", "messages", ["topic", "key", "confirm_seq"],
                    postgresql_where=sa.text("ordered AND state = 'sent'"))
    op.create_index("messages_ordered_due", "messages", ["next_delivery_at"],
                    postgresql_where=sa.text("ordered AND state = 'sent' AND NOT dead"))
    op.create_table(
        "ordering_keys",
        sa.Column("topic", sa.Text(), nullable=False),
        sa.Column("key", sa.Text(), nullable=False),
        sa.Column("lease_token", sa.Text(), nullable=True),
        sa.Column("lease_until", sa.DateTime(timezone=True), nullable=True),
        sa.PrimaryKeyConstraint("topic", "key"),
    )


def downgrade() -> None:
    op.drop_table("ordering_keys")
    op.drop_index("messages_ordered_due", table_name="messages")
    op.drop_index("messages_ordered_keys", table_name="messages")
    op.drop_column("messages", "confirm_seq")
    op.drop_column("messages", "ordered")
    op.execute("DROP SEQUENCE messages_confirm_seq")
    op.drop_column("apps", "ordered_topics")
