"""RFC 9457 problem documents for every error, and no stack trace ever reaches a client."""

from __future__ import annotations

from typing import Any

import asyncpg
import orjson
import structlog
from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import Response
from sqlalchemy.exc import DBAPIError, InterfaceError
from sqlalchemy.exc import TimeoutError as PoolTimeout
from starlette.exceptions import HTTPException

from rms.domain.errors import IllegalTransition, PartOfTransaction, RateLimited, RmsError

log = structlog.get_logger(__name__)
PROBLEM_TYPE_BASE = "https://rms.dev/problems/"
MEDIA_TYPE = "application/problem+json"
DATA_EXCEPTION_CLASS = "22"  # SQLSTATE class 22: data exception (caused by a value)


def problem(status: int, title: str, detail: str, slug: str, **extra: Any) -> Response:
    body = {"type": PROBLEM_TYPE_BASE + slug, "title": title, "status": status,
            "detail": detail} | {k: v for k, v in extra.items() if v is not None}
    headers = {}
    if "retry_after" in extra:
        headers["Retry-After"] = str(extra["retry_after"])
    return Response(orjson.dumps(body), status_code=status, media_type=MEDIA_TYPE,
                    headers=headers)


def _rms_error(_: Request, exc: Exception) -> Response:
    assert isinstance(exc, RmsError)
    extra: dict[str, Any] = {}
    if isinstance(exc, IllegalTransition):
        extra["current_state"] = exc.current_state
    if isinstance(exc, PartOfTransaction):
        extra["transaction_id"] = exc.transaction_id
    if isinstance(exc, RateLimited):
        extra["retry_after"] = exc.retry_after_seconds
        extra.update(exc.extra)
    return problem(exc.status, exc.title, exc.detail, exc.slug, **extra)


def _validation(_: Request, exc: Exception) -> Response:
    assert isinstance(exc, RequestValidationError)
    errors = [
        {"loc": list(error.get("loc", ())), "msg": _message(error), "type": error.get("type")}
        for error in exc.errors()
    ]
    first = errors[0] if errors else {"loc": [], "msg": "invalid request"}
    where = ".".join(str(part) for part in first["loc"][1:]) or "body"
    detail = f"{where}: {first['msg']}" + (f" (and {len(errors) - 1} more)" if len(errors) > 1
                                            else "")
    return problem(422, "Validation failed", detail, "validation", errors=errors)


def _message(error: Any) -> str:
    """Pydantic's message; for a body that is not strict JSON, what the parser refused."""
    if error.get("type") == "json_invalid" and (why := (error.get("ctx") or {}).get("error")):
        return f"invalid JSON: {why}"
    return str(error.get("msg", ""))


def _http(_: Request, exc: Exception) -> Response:
    assert isinstance(exc, HTTPException)
    if exc.status_code == 400:  # FastAPI could not decode the body (e.g. not UTF-8): the
        # contract's status for a malformed body is 422, as for any other invalid JSON
        return problem(422, "Validation failed", f"body: {exc.detail}", "validation")
    title = {404: "Not found", 405: "Method not allowed"}.get(exc.status_code, "HTTP error")
    return problem(exc.status_code, title, str(exc.detail), f"http-{exc.status_code}")


def _unavailable(request: Request, exc: Exception) -> Response:
    log.warning("request.dependency_unavailable", path=request.url.path, error=type(exc).__name__)
    return problem(503, "Service unavailable",
                   "the database is unavailable or overloaded; retry shortly", "unavailable",
                   retry_after=1)


def _database_full(request: Request, exc: Exception) -> Response:
    log.warning("request.database_full", path=request.url.path, error=str(exc)[:300])
    return problem(503, "Database full", "PostgreSQL has no disk space left to write; nothing "
                   "of this request was stored; retry later", "database-full",
                   retry_after=DATABASE_FULL_RETRY_SECONDS)


def _unexpected(request: Request, exc: Exception) -> Response:
    log.exception("request.unexpected_error", path=request.url.path, exc_info=exc)
    return problem(500, "Internal error", "an unexpected error occurred; it has been logged",
                   "internal")


# SQLSTATEs that say the database is unreachable, not that the request was wrong: class 08
# (connection exception) and 57P01-57P03 (terminated by an administrator, crash shutdown,
# cannot connect now: PostgreSQL restarting). The fault suite (tests/system/faults) saw 57P03 answered
# as 500 while PostgreSQL restarted.
_UNAVAILABLE_SQLSTATES = ("08", "57P01", "57P02", "57P03")
# SQLSTATE 53100 disk_full: the statement rolled back, the request can be retried once an
# operator frees space (the WAL filling up stops the server instead: class 08 then)
DISK_FULL = "53100"
INSUFFICIENT_RESOURCES_CLASS = "53"  # out of memory, too many connections, disk full
DATABASE_FULL_RETRY_SECONDS = 30


def _sqlstate(exc: DBAPIError) -> str:
    code = getattr(exc.orig, "sqlstate", None) or getattr(exc.orig, "pgcode", None)
    return code if isinstance(code, str) else ""


def _database_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, DBAPIError)
    sqlstate = _sqlstate(exc)
    if exc.connection_invalidated or isinstance(exc, InterfaceError) or sqlstate.startswith(
            _UNAVAILABLE_SQLSTATES):
        return _unavailable(request, exc)
    return _by_sqlstate(request, exc, sqlstate)


def _driver_error(request: Request, exc: Exception) -> Response:
    """asyncpg's own errors (the request path's coalesced statements run on the driver
    connection): a lost or refused connection is 503, the rest as for SQLAlchemy's."""
    if isinstance(exc, asyncpg.InterfaceError | asyncpg.InternalClientError
                  | asyncpg.PostgresConnectionError
                  | asyncpg.exceptions.OperatorInterventionError):
        return _unavailable(request, exc)
    return _by_sqlstate(request, exc, str(getattr(exc, "sqlstate", None) or ""))


def _by_sqlstate(request: Request, exc: Exception, sqlstate: str) -> Response:
    """A refused statement, judged by its SQLSTATE: the database full or short of resources is
    503 (retry), a value it cannot store 422, the rest a defect (500)."""
    if sqlstate == DISK_FULL:
        return _database_full(request, exc)
    if sqlstate.startswith(INSUFFICIENT_RESOURCES_CLASS):
        return _unavailable(request, exc)
    if sqlstate.startswith(DATA_EXCEPTION_CLASS):
        # a value PostgreSQL cannot take, e.g. a NUL character in a string or \u0000 in
        # JSON: bad input, never a 500
        log.info("request.unstorable_value", path=request.url.path, sqlstate=sqlstate)
        return problem(422, "Validation failed", "the request holds a value the message "
                       "store cannot keep (for example a NUL character in a string)",
                       "validation")
    return _unexpected(request, exc)


def install(app: FastAPI) -> None:
    app.add_exception_handler(RmsError, _rms_error)
    app.add_exception_handler(RequestValidationError, _validation)
    app.add_exception_handler(HTTPException, _http)
    app.add_exception_handler(PoolTimeout, _unavailable)
    app.add_exception_handler(ConnectionError, _unavailable)
    app.add_exception_handler(OSError, _unavailable)
    app.add_exception_handler(DBAPIError, _database_error)
    app.add_exception_handler(asyncpg.PostgresError, _driver_error)
    app.add_exception_handler(asyncpg.InterfaceError, _driver_error)
    app.add_exception_handler(asyncpg.InternalClientError, _driver_error)
    app.add_exception_handler(Exception, _unexpected)
