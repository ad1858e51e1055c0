"""What the broker said about a message's last publish, in its row: ``publish_failure``, the
reason its last publish was not accepted (NULL once one is). A nullable column without a
default: adding it rewrites nothing, and the previous release's code, which neither reads nor
writes it, keeps working on the new schema (its accepted publishes leave a failure written by
this release's code in place until this release's code records an accepted one). Stored
messages start with NULL: a message waiting for its retry says so from its next outcome on.

Revision ID: 0009
Revises: 0008
Create Date: 2026-11-27
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0009"
down_revision = "0008"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("messages", sa.Column("publish_failure", sa.Text(), nullable=True))


def downgrade() -> None:
    op.drop_column("messages", "publish_failure")
