"""A consumer's own delivery budget per message: ``messages.exhausted``.

A consumer app with its own ``max_deliveries`` is owed at most that many deliveries of a
message (design section 7): the redelivery claim that finds it spent, while the consumer still
owes its ack, writes its name here (and a ``dead`` event naming it), and the message's later
records no longer await it. NULL: no consumer's own budget is spent. A nullable column without
a default: adding it rewrites nothing.

Revision ID: 0015
Revises: 0014
Create Date: 2026-12-03
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects.postgresql import ARRAY

revision = "0015"
down_revision = "0014"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("messages", sa.Column("exhausted", ARRAY(sa.Text()), nullable=True))


def downgrade() -> None:
    op.drop_column("messages", "exhausted")
