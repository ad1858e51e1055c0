"""A consumer app's own delivery settings: ``apps.max_deliveries`` and
``apps.ack_timeout_seconds``.

The statement that confirms a message gives it the settings its subscribers are owed (design
section 7): for each subscriber its app's own setting, or the message's when the app has none
(NULL), and the largest of them. Nullable columns without a default: adding them rewrites
nothing, and every existing app keeps following the messages' settings.

Revision ID: 0014
Revises: 0013
Create Date: 2026-12-02
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0014"
down_revision = "0013"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("apps", sa.Column("max_deliveries", sa.Integer(), nullable=True))
    op.add_column("apps", sa.Column("ack_timeout_seconds", sa.Float(), nullable=True))
    op.create_check_constraint("apps_max_deliveries_range", "apps",
                               "max_deliveries BETWEEN 1 AND 1000")
    op.create_check_constraint("apps_ack_timeout_seconds_range", "apps",
                               "ack_timeout_seconds > 0 AND ack_timeout_seconds <= 604800")


def downgrade() -> None:
    op.drop_column("apps", "ack_timeout_seconds")
    op.drop_column("apps", "max_deliveries")
