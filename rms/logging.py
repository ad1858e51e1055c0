"""Structured logging (structlog), configured once where a process starts.

One format per process: JSON lines when ``RMS_LOG_JSON`` (the default), else readable lines.
Every library that logs through the standard ``logging`` module (uvicorn, aiokafka,
APScheduler, SQLAlchemy, ...) goes through the same renderer, with its logger's name."""

from __future__ import annotations

import logging
import sys

import structlog

QUIET = ("aiokafka", "kafka", "apscheduler")  # their INFO lines are noise at RMS's scale


def configure(level: str = "INFO", json: bool = True) -> None:
    renderer: structlog.types.Processor = (
        structlog.processors.JSONRenderer() if json else structlog.dev.ConsoleRenderer(colors=False)
    )
    stamp = structlog.processors.TimeStamper(fmt="iso", utc=True)
    structlog.configure(
        processors=[
            structlog.contextvars.merge_contextvars,
            structlog.processors.add_log_level,
            stamp,
            structlog.processors.format_exc_info,
            renderer,
        ],
        wrapper_class=structlog.make_filtering_bound_logger(logging.getLevelName(level.upper())),
        logger_factory=structlog.PrintLoggerFactory(sys.stderr),
        cache_logger_on_first_use=True,
    )
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(structlog.stdlib.ProcessorFormatter(
        foreign_pre_chain=[structlog.stdlib.add_logger_name, structlog.stdlib.add_log_level,
                           stamp],
        processors=[structlog.stdlib.ProcessorFormatter.remove_processors_meta,
                    structlog.processors.format_exc_info, renderer],
    ))
    root = logging.getLogger()
    root.handlers = [handler]
    root.setLevel(level.upper())
    for name in QUIET:
        logging.getLogger(name).setLevel(logging.WARNING)
    for name in ("uvicorn", "uvicorn.error", "uvicorn.access"):  # into the root handler
        logging.getLogger(name).handlers = []
        logging.getLogger(name).propagate = True
