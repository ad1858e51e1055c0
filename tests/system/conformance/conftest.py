"""The check-back tests' fixtures (an API with a callback server, worker settings), for the
conformance matrix of producers' servers in other languages."""

from tests.integration.checkback.conftest import (  # noqa: F401  (fixtures used here)
    producer,
    server,
    settings,
    worker_settings,
)
