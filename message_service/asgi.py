"""ASGI entry point for ``uvicorn message_service.asgi:app`` (settings from the environment)."""

from message_service.app import create_app
from rms.config import Settings

app = create_app(Settings())
