"""ASGI entry point for ``uvicorn message_service.asgi:app`` (settings from the environment).
Each worker process of ``rms serve --workers N`` imports it, which also sets that process's
request read deadlines, its connection cap and its concurrency gate."""

from message_service.app import create_app
from message_service.http_protocol import (
    configure_admission,
    configure_connections,
    configure_deadlines,
)
from rms.config import Settings

settings = Settings()
configure_deadlines(settings.http_head_timeout_seconds, settings.http_body_timeout_seconds)
configure_connections(settings.http_limit_concurrency, settings.http_health_reserve,
                      settings.http_unauthenticated_keep_alive_seconds)
app = create_app(settings)
configure_admission(app.state.admission)
