"""Initial schema: apps, messages, message_events.

Revision ID: 0001
Revises:
Create Date: 2026-11-22
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None

_TS = sa.DateTime(timezone=True)


def _apps() -> None:
    op.create_table(
        "apps",
        sa.Column("name", sa.Text(), primary_key=True),
        sa.Column("api_key_hash", sa.Text(), nullable=False, unique=True),
        sa.Column("signing_secret", sa.Text(), nullable=False),
        sa.Column("previous_signing_secret", sa.Text(), nullable=True),
        sa.Column("produce_topics", postgresql.ARRAY(sa.Text()), nullable=False,
                  server_default="{}"),
        sa.Column("consume_topics", postgresql.ARRAY(sa.Text()), nullable=False,
                  server_default="{}"),
        sa.Column("check_url_prefixes", postgresql.ARRAY(sa.Text()), nullable=False,
                  server_default="{}"),
        sa.Column("default_check_url", sa.Text(), nullable=True),
        sa.Column("created_at", _TS, nullable=False, server_default=sa.func.now()),
        sa.Column("key_rotated_at", _TS, nullable=True),
    )


def _messages() -> None:
    op.create_table(
        "messages",
        sa.Column("message_id", sa.Text(), primary_key=True),
        sa.Column("app", sa.Text(), sa.ForeignKey("apps.name"), nullable=False),
        sa.Column("topic", sa.Text(), nullable=False),
        sa.Column("key", sa.Text(), nullable=True),
        sa.Column("payload", postgresql.JSONB(), nullable=False),
        sa.Column("headers", postgresql.JSONB(), nullable=False,
                  server_default=sa.text("'{}'::jsonb")),
        sa.Column("check_url", sa.Text(), nullable=True),
        sa.Column("state", sa.Text(), nullable=False),
        sa.Column("dead", sa.Boolean(), nullable=False, server_default=sa.text("false")),
        sa.Column("dead_reason", sa.Text(), nullable=True),
        sa.Column("check_count", sa.Integer(), nullable=False, server_default=sa.text("0")),
        sa.Column("delivery_count", sa.Integer(), nullable=False, server_default=sa.text("0")),
        sa.Column("delivery_base", sa.Integer(), nullable=False, server_default=sa.text("0")),
        sa.Column("check_after_seconds", sa.Float(), nullable=False),
        sa.Column("max_checks", sa.Integer(), nullable=False),
        sa.Column("ack_timeout_seconds", sa.Float(), nullable=False),
        sa.Column("max_deliveries", sa.Integer(), nullable=False),
        sa.Column("created_at", _TS, nullable=False, server_default=sa.func.now()),
        sa.Column("confirmed_at", _TS, nullable=True),
        sa.Column("done_at", _TS, nullable=True),
        sa.Column("deleted_at", _TS, nullable=True),
        sa.Column("next_check_at", _TS, nullable=True),
        sa.Column("next_delivery_at", _TS, nullable=True),
        sa.Column("claim_token", sa.Text(), nullable=True),
        sa.CheckConstraint("state IN ('pending-send', 'sent', 'done', 'deleted')",
                           name="messages_state_check"),
        sa.CheckConstraint(
            "dead_reason IS NULL OR dead_reason IN ('check-exhausted', 'delivery-exhausted')",
            name="messages_dead_reason_check",
        ),
    )
    op.create_index("messages_due_checks", "messages", ["next_check_at"],
                    postgresql_where=sa.text("state = 'pending-send' AND NOT dead"))
    op.create_index("messages_due_deliveries", "messages", ["next_delivery_at"],
                    postgresql_where=sa.text("state = 'sent' AND NOT dead"))
    op.create_index("messages_dead", "messages", ["app", "topic"],
                    postgresql_where=sa.text("dead"))
    op.create_index("messages_created", "messages", ["created_at", "message_id"])
    op.create_index("messages_app_state", "messages", ["app", "state"])
    # the message table churns (every message is updated 2-3 times): vacuum it eagerly
    op.execute(
        "ALTER TABLE messages SET (autovacuum_vacuum_scale_factor = 0.02, "
        "autovacuum_analyze_scale_factor = 0.02, fillfactor = 80)"
    )


def _events() -> None:
    op.create_table(
        "message_events",
        sa.Column("id", sa.BigInteger(), sa.Identity(always=False), primary_key=True),
        sa.Column("message_id", sa.Text(), nullable=False),
        sa.Column("at", _TS, nullable=False, server_default=sa.func.now()),
        sa.Column("event", sa.Text(), nullable=False),
        sa.Column("actor", sa.Text(), nullable=False),
        sa.Column("detail", postgresql.JSONB(), nullable=False,
                  server_default=sa.text("'{}'::jsonb")),
    )
    op.create_index("message_events_message", "message_events", ["message_id", "id"])
    op.create_index("message_events_at", "message_events", ["at"])


def upgrade() -> None:
    _apps()
    _messages()
    _events()


def downgrade() -> None:
    op.drop_table("message_events")
    op.drop_table("messages")
    op.drop_table("apps")
