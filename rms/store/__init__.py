"""PostgreSQL access shared by the API and the workers: one home for every SQL statement.

One way to write SQL here: every statement is built with SQLAlchemy Core. Where a hot path
needs it, a Core statement is compiled once to a :class:`~rms.store.raw.RawStatement` and run
on the asyncpg connection: the one fast path. The coalesced request-path statements
(:mod:`rms.store.coalesced`) are constant text, generated from the transition tables
(:mod:`rms.store.transitions`) and the one batch form (:mod:`rms.store.batch`). No ``text()``
with ``:name`` binds, no hand-written ``$n`` strings outside that generator, and state values
always come from :mod:`rms.domain.states` (or the transaction states), never string literals.

The vocabulary stays inside: callers use the stores' methods, which take rows of the domain's
transition tables where a choice is needed; the rendered statements, the schema and the claim
parts are the store's own (an import-linter contract keeps the use cases off them). Every
claim (check-back of messages and of transactions, redelivery, ordering) is built from the same
parts in :mod:`rms.store.claims`.
"""
