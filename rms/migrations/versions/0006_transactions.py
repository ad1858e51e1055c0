"""Transactions of several messages: the ``transactions`` table (one check-back per
transaction) and each message's place in its transaction.

Existing messages belong to no transaction (``transaction_id`` NULL) and keep working as
before.

Revision ID: 0006
Revises: 0005
Create Date: 2026-11-25
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects.postgresql import ARRAY

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "transactions",
        sa.Column("transaction_id", sa.Text(), primary_key=True),
        sa.Column("app", sa.Text(), sa.ForeignKey("apps.name"), nullable=False),
        sa.Column("check_url", sa.Text(), nullable=False),
        sa.Column("message_ids", ARRAY(sa.Text()), nullable=False),
        sa.Column("state", sa.Text(), nullable=False),
        sa.Column("dead", sa.Boolean(), nullable=False, server_default=sa.text("false")),
        sa.Column("dead_reason", sa.Text(), nullable=True),
        sa.Column("check_count", sa.Integer(), nullable=False, server_default=sa.text("0")),
        sa.Column("check_after_seconds", sa.Float(), nullable=False),
        sa.Column("max_checks", sa.Integer(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False,
                  server_default=sa.func.now()),
        sa.Column("confirmed_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("cancelled_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("next_check_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("claim_token", sa.Text(), nullable=True),
        sa.CheckConstraint("state IN ('pending', 'confirmed', 'cancelled')",
                           name="transactions_state_check"),
        sa.CheckConstraint("dead_reason IS NULL OR dead_reason = 'check-exhausted'",
                           name="transactions_dead_reason_check"),
    )
    op.create_index("transactions_due_checks", "transactions", ["next_check_at"],
                    postgresql_where=sa.text("state = 'pending' AND NOT dead"))
    op.create_index("transactions_app_state", "transactions", ["app", "state"])
    op.add_column("messages", sa.Column("transaction_id", sa.Text(), nullable=True))
    op.add_column("messages", sa.Column("transaction_position", sa.Integer(), nullable=True))
    op.create_index("messages_transaction", "messages",
                    ["transaction_id", "transaction_position"],
                    postgresql_where=sa.text("transaction_id IS NOT NULL"))


def downgrade() -> None:
    op.drop_index("messages_transaction", table_name="messages")
    op.drop_column("messages", "transaction_position")
    op.drop_column("messages", "transaction_id")
    op.drop_index("transactions_app_state", table_name="transactions")
    op.drop_index("transactions_due_checks", table_name="transactions")
    op.drop_table("transactions")
