"""When each consumer app last had an ack recorded: ``apps.last_ack_at``.

The statement that records acks sets it for every consumer whose ack it recorded (database
clock), so the stats, the dashboard and ``rms_consumer_seconds_since_ack`` can show a consumer
app that owes messages and has stopped acknowledging (nothing running for it). NULL: no ack of
that app has been recorded since the column exists; its registration time stands in.

A nullable column without a default: adding it rewrites nothing.

Revision ID: 0013
Revises: 0012
Create Date: 2026-12-02
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0013"
down_revision = "0012"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("apps", sa.Column("last_ack_at", sa.DateTime(timezone=True), nullable=True))


def downgrade() -> None:
    op.drop_column("apps", "last_ack_at")
