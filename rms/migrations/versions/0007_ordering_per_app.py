"""Ordering keys per app: a key is ``(app, topic, key)``, so no app holds another's keys.

``ordering_keys`` rows are leases, alive only while a worker works on a key: the upgrade
ends every lease (a worker still holding one claims nothing more under it, since each claim
re-checks its lease) and the next sequencer round leases the keys again, per app. The index
of a key's queue leads with the app. Stored messages keep their confirm order.

Revision ID: 0007
Revises: 0006
Create Date: 2026-11-26
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.execute("DELETE FROM ordering_keys")
    op.drop_constraint("ordering_keys_pkey", "ordering_keys", type_="primary")
    op.add_column("ordering_keys", sa.Column("app", sa.Text(), nullable=False))
    op.create_primary_key("ordering_keys_pkey", "ordering_keys", ["app", "topic", "key"])
    op.drop_index("messages_ordered_keys", table_name="messages")
    op.create_index("messages_ordered_keys", "messages", ["app", "topic", "key", "confirm_seq"],
                    postgresql_where=sa.text("ordered AND state = 'sent'"))


def downgrade() -> None:
    op.drop_index("messages_ordered_keys", table_name="messages")
    op.create_index("messages_ordered_keys", "messages", ["topic", "key", "confirm_seq"],
                    postgresql_where=sa.text("ordered AND state = 'sent'"))
    op.execute("DELETE FROM ordering_keys")
    op.drop_constraint("ordering_keys_pkey", "ordering_keys", type_="primary")
    op.drop_column("ordering_keys", "app")
    op.create_primary_key("ordering_keys_pkey", "ordering_keys", ["topic", "key"])
