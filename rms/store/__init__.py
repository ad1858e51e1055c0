"""PostgreSQL access shared by the API and the workers: one home for every SQL statement.

Two forms of SQL, each written one way. Statements built with SQLAlchemy Core, compiled once to
a :class:`~rms.store.raw.RawStatement` where a hot path runs them on the asyncpg connection;
and the constant text of the group-committed statements (messages: :mod:`rms.store.coalesced`;
transactions, one statement per change: :mod:`rms.store.transaction_sql`; retention's deletes:
:mod:`rms.store.retention_sql`), generated from the transition tables
(:mod:`rms.store.transitions`), the delivery phase (:mod:`rms.store.phase`) and the one batch
form (:mod:`rms.store.batch`). No ``text()`` with ``:name`` binds, no hand-written ``$n``
strings outside those generators, and state values always come from
:mod:`rms.domain.states` (or the transaction states), never string literals.

The rendered text of every fixed statement is checked in under ``rms/store/sql/`` and compared
by a test; after changing a statement, write the files again with ``python -m
rms.store.golden`` (:mod:`rms.store.golden`).

The vocabulary stays inside: callers use the stores' methods, which take rows of the domain's
transition tables where a choice is needed; the rendered statements, the schema and the claim
parts are the store's own (an import-linter contract keeps every module outside the store off
them, and a test fails on live-table writes written elsewhere). Every claim (check-back of
messages and of transactions, redelivery, ordering) is built from the same parts in
:mod:`rms.store.claims`.
"""
