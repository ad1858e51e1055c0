"""Several consumers per message (design section 3): ``messages.subscribers``, the apps that
consumed the message's topic when it was confirmed, and ``messages.acks``, who acknowledged
it, when and how; ``apps.consume_regex``, the app's ``consume_topics`` as one anchored POSIX
regular expression, so that the confirming statement itself can read the subscribers from
``apps``.

Nullable columns without a default: adding them rewrites neither table. Every message stored
before this migration keeps ``subscribers`` NULL, which is the single-ack rule: a ``sent``
message is finished by its first ack, as was promised when it was confirmed. The previous
release's code, which neither reads nor writes these columns, keeps working on the new schema
during a rolling update; a message it confirms gets no subscribers (the single-ack rule) and an
app it creates no ``consume_regex`` (it subscribes to nothing until its topics are set again).
Existing apps get their ``consume_regex`` here.

A trigger keeps the one rule the previous release cannot know: a message with subscribers
becomes ``done`` only when every subscriber's ack is in ``acks``. The previous release's ack
statement sets ``done`` without writing ``acks``; during a rolling update that statement fails
with SQLSTATE 57P03 (cannot serve now), which every release answers with 503 and
``Retry-After``, so the consumer retries and a new process records its ack. The trigger's
condition is evaluated only on an update that makes a row ``done``.

Revision ID: 0011
Revises: 0010
Create Date: 2026-11-28
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

from rms.domain.topics import consume_regex

revision = "0011"
down_revision = "0010"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("messages", sa.Column("subscribers", postgresql.ARRAY(sa.Text()), nullable=True))
    op.add_column("messages", sa.Column("acks", postgresql.JSONB(), nullable=True))
    op.add_column("apps", sa.Column("consume_regex", sa.Text(), nullable=True))
    bind = op.get_bind()
    for name, topics in bind.execute(sa.text("SELECT name, consume_topics FROM apps")).all():
        bind.execute(sa.text("UPDATE apps SET consume_regex = :regex WHERE name = :name"),
                     {"regex": consume_regex(topics), "name": name})
    for statement in DONE_NEEDS_EVERY_ACK:
        op.execute(statement)


DONE_NEEDS_EVERY_ACK = ("""
CREATE FUNCTION rms_done_needs_every_ack() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  RAISE EXCEPTION 'message % has subscribers that have not acked: this process cannot finish it',
    NEW.message_id USING ERRCODE = '57P03', HINT = 'retry on a process of the current release';
END $$
""", """
CREATE TRIGGER messages_done_needs_every_ack BEFORE UPDATE ON messages FOR EACH ROW
WHEN (NEW.state = 'done' AND OLD.state <> 'done' AND NEW.subscribers IS NOT NULL
      AND NOT (coalesce(NEW.acks, '{}'::jsonb) ?& NEW.subscribers))
EXECUTE FUNCTION rms_done_needs_every_ack()
""")


def downgrade() -> None:
    op.execute("DROP TRIGGER IF EXISTS messages_done_needs_every_ack ON messages")
    op.execute("DROP FUNCTION IF EXISTS rms_done_needs_every_ack()")
    op.drop_column("apps", "consume_regex")
    op.drop_column("messages", "acks")
    op.drop_column("messages", "subscribers")
