"""Signing-secret rotation overlap: when the previous secret stops signing check-backs.

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-22
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None


def upgrade() -> None:
    # NULL with a previous secret set (rotations made before this column): no deadline, as
    # before; every new rotation sets one
    op.add_column("apps", sa.Column("previous_signing_secret_expires_at",
                                    sa.DateTime(timezone=True), nullable=True))


def downgrade() -> None:
    op.drop_column("apps", "previous_signing_secret_expires_at")
