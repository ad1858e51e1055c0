"""What operators see: what retention did, for Prometheus (one ``retention_status`` row that
every ``rms retention run`` updates: last run, last success and failure, totals of runs,
failures and messages removed and archived; the API's ``/metrics`` exports it), and the index
of the admin listing of transactions (oldest first, a keyset cursor). Nothing existing
changes; the row appears with the first run.

Revision ID: 0008
Revises: 0007
Create Date: 2026-11-26
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0008"
down_revision = "0007"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "retention_status",
        sa.Column("id", sa.Integer(), primary_key=True, autoincrement=False,
                  server_default=sa.text("1")),
        sa.Column("last_run_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("last_success_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("last_failure_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("runs_total", sa.BigInteger(), nullable=False, server_default=sa.text("0")),
        sa.Column("failures_total", sa.BigInteger(), nullable=False,
                  server_default=sa.text("0")),
        sa.Column("messages_removed_total", sa.BigInteger(), nullable=False,
                  server_default=sa.text("0")),
        sa.Column("messages_archived_total", sa.BigInteger(), nullable=False,
                  server_default=sa.text("0")),
        sa.Column("events_removed_total", sa.BigInteger(), nullable=False,
                  server_default=sa.text("0")),
        sa.CheckConstraint("id = 1", name="retention_status_one_row"),
    )
    op.create_index("transactions_created", "transactions", ["created_at", "transaction_id"])


def downgrade() -> None:
    op.drop_index("transactions_created", table_name="transactions")
    op.drop_table("retention_status")
