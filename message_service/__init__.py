"""The message service: the REST API (prepare / confirm / cancel / ack / admin)."""
