"""Which ``consume_topics`` an app's ``consume_regex`` was computed from: ``consume_regex_of``.

The regex is derived in Python (:func:`rms.domain.topics.consume_regex`) and written by the
statement that writes the topics. A process of an earlier release writes the topics alone: an
app it creates has no regex, and one whose topics it changes keeps the regex of its old topics.
The statements that read a regex trust it only while ``consume_regex_of`` equals
``consume_topics``, and every process of this release repairs the apps for which it does not
(at start and then every few seconds: :meth:`rms.store.apps.AppStore.repair_consume_regexes`),
so an app written by an earlier process is a consumer of its topics again within seconds, and
is never one of topics it no longer has.

A nullable column without a default: adding it rewrites nothing. Every app's regex was
computed from its topics by migration 0011 or by this release's code, so it is marked as such.

Revision ID: 0012
Revises: 0011
Create Date: 2026-12-01
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision = "0012"
down_revision = "0011"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("apps", sa.Column("consume_regex_of", postgresql.ARRAY(sa.Text()), nullable=True))
    op.execute("UPDATE apps SET consume_regex_of = consume_topics WHERE consume_regex IS NOT NULL "
               "OR cardinality(consume_topics) = 0")


def downgrade() -> None:
    op.drop_column("apps", "consume_regex_of")
