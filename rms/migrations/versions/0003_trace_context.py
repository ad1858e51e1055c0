"""W3C trace context of a message: the traceparent and tracestate it carries.

Revision ID: 0003
Revises: 0002
Create Date: 2026-11-25
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None


def upgrade() -> None:
    # nullable, no default: existing messages carry no trace context and keep working as before
    op.add_column("messages", sa.Column("traceparent", sa.Text(), nullable=True))
    op.add_column("messages", sa.Column("tracestate", sa.Text(), nullable=True))


def downgrade() -> None:
    op.drop_column("messages", "tracestate")
    op.drop_column("messages", "traceparent")
