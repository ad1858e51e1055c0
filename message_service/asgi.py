"""ASGI entry point for ``uvicorn message_service.asgi:app`` (settings from the environment).
Each worker process of ``rms serve --workers N`` imports it, which also sets that process's
request read deadlines and settles its heap (:mod:`message_service.heap`)."""

from message_service import heap
from message_service.app import create_app
from message_service.http_protocol import configure_deadlines
from rms.config import Settings

settings = Settings()
configure_deadlines(settings.http_head_timeout_seconds, settings.http_body_timeout_seconds)
app = create_app(settings)
heap.settle()
