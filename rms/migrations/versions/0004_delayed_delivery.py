"""Delayed delivery: the time before which a confirmed message is not published.

Revision ID: 0004
Revises: 0003
Create Date: 2026-11-25
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None


def upgrade() -> None:
    # NULL for every existing message: no delay, published at confirm as before
    op.add_column("messages", sa.Column("deliver_after", sa.DateTime(timezone=True),
                                        nullable=True))


def downgrade() -> None:
    op.drop_column("messages", "deliver_after")
