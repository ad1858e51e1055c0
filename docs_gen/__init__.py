"""The documentation site's generated pages: the HTTP API reference from the OpenAPI document
the service serves, the CLI reference from the commands' own parsers, the configuration
reference from the settings' definitions, and the state machine's picture from the transition
table. Each is written by ``python -m docs_gen`` and checked in; ``python -m docs_gen --check``
(run by ``make docs`` and by the tests) fails when one is stale, so none can drift from the
code it describes.
"""
