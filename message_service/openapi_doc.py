"""The served OpenAPI document, made to say what the API really sends: every error response is
an RFC 9457 problem document (``application/problem+json``, schema ``Problem``), including
FastAPI's built-in 422, which our handler answers as a problem document too
(message_service/problems.py)."""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI

from message_service.problems import MEDIA_TYPE
from message_service.schemas import Problem

PROBLEM_REF = {"$ref": "#/components/schemas/Problem"}
_METHODS = {"get", "put", "post", "delete", "patch", "head", "options"}


def install(app: FastAPI) -> None:
    """Post-process ``app.openapi()`` once (FastAPI caches the result)."""
    generate = app.openapi

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is not None:
            return app.openapi_schema
        document = generate()
        problems_as_problem_json(document)
        return document

    app.openapi = openapi  # type: ignore[method-assign]


def problems_as_problem_json(document: dict[str, Any]) -> None:
    schemas = document.setdefault("components", {}).setdefault("schemas", {})
    schemas.setdefault("Problem", Problem.model_json_schema(
        ref_template="#/components/schemas/{model}"))
    for item in document.get("paths", {}).values():
        for method, operation in item.items():
            if method in _METHODS:
                _fix_responses(operation.get("responses", {}))


def _fix_responses(responses: dict[str, Any]) -> None:
    for code, response in responses.items():
        if not _is_error(code):
            continue
        content = response.setdefault("content", {})
        content.pop("application/json", None)
        content[MEDIA_TYPE] = {"schema": PROBLEM_REF}


def _is_error(code: str) -> bool:
    return code == "default" or (code[:1] in {"4", "5"})
