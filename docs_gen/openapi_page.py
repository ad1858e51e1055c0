"""The HTTP API reference, from the OpenAPI document ``rms serve`` serves at ``/openapi.json``
(``create_app(settings).openapi()``): every operation with its parameters, body and answers,
and every schema with its fields."""

from __future__ import annotations

import re
from typing import Any

from docs_gen.markdown import cell, code, table
from message_service.app import create_app
from rms.config import Settings

_METHODS = ("get", "put", "post", "patch", "delete")
_REF = "#/components/schemas/"
_BOUNDS = (("minimum", "≥"), ("exclusiveMinimum", ">"), ("maximum", "≤"),
           ("exclusiveMaximum", "<"), ("minLength", "length ≥"), ("maxLength", "length ≤"),
           ("minItems", "items ≥"), ("maxItems", "items ≤"))


def document() -> dict[str, Any]:
    """The document the service serves with its default settings."""
    return create_app(Settings(dev_mode=True)).openapi()


def operation_anchor(method: str, path: str) -> str:
    """The heading id of an operation (``POST /v1/messages/{message_id}/ack`` →
    ``post-v1-messages-message_id-ack``)."""
    return "-".join([method.lower(), *re.findall(r"[A-Za-z0-9_]+", path)])


def schema_anchor(name: str) -> str:
    return f"schema-{name.lower()}"


def type_text(schema: dict[str, Any]) -> str:
    """A schema as a short phrase: ``string``, ``array of [EventOut](#schema-eventout)``,
    ``integer or null``."""
    if "$ref" in schema:
        name = str(schema["$ref"]).removeprefix(_REF)
        return f"[{name}](#{schema_anchor(name)})"
    for combiner in ("anyOf", "oneOf", "allOf"):
        if combiner in schema:
            return " or ".join(type_text(member) for member in schema[combiner])
    if "enum" in schema:
        return "one of " + ", ".join(code(value) for value in schema["enum"])
    if "const" in schema:
        return code(schema["const"])
    kind = schema.get("type")
    if kind == "array":
        return "array of " + type_text(schema.get("items", {}))
    if kind == "object" and isinstance(schema.get("additionalProperties"), dict):
        return "object of " + type_text(schema["additionalProperties"])
    if kind is None:
        return "any JSON value"
    text = str(kind) + (f" ({schema['format']})" if "format" in schema else "")
    return text + _bounds(schema)


def _bounds(schema: dict[str, Any]) -> str:
    found = [f"{sign} {schema[key]:g}" for key, sign in _BOUNDS if key in schema]
    if "pattern" in schema:
        found.append("matching " + code(schema["pattern"]))
    return f", {', '.join(found)}" if found else ""


def _operations(doc: dict[str, Any]) -> list[tuple[str, str, str, dict[str, Any]]]:
    """(tag, method, path, operation), the tags in their first appearance's order."""
    found = [(str((operation.get("tags") or ["other"])[0]), method, path, operation)
             for path, item in doc["paths"].items()
             for method, operation in item.items() if method in _METHODS]
    tags = list(dict.fromkeys(tag for tag, *_ in found))
    return sorted(found, key=lambda entry: tags.index(entry[0]))


def _parameters(operation: dict[str, Any]) -> list[str]:
    parameters = operation.get("parameters", [])
    if not parameters:
        return []
    return ["**Parameters**", "", *table(["name", "in", "type", "required", "meaning"], [
        (code(parameter["name"]), parameter["in"], type_text(parameter.get("schema", {})),
         "yes" if parameter.get("required") else "no",
         parameter.get("description") or parameter.get("schema", {}).get("description", ""))
        for parameter in parameters]), ""]


def _body(operation: dict[str, Any]) -> list[str]:
    body = operation.get("requestBody")
    if not body:
        return []
    rows = [(code(media), type_text(content.get("schema", {})))
            for media, content in body.get("content", {}).items()]
    return ["**Request body**" + ("" if body.get("required") else " (optional)"), "",
            *table(["media type", "schema"], rows), ""]


def _responses(operation: dict[str, Any]) -> list[str]:
    rows = []
    for status, response in sorted(operation.get("responses", {}).items()):
        content = response.get("content", {})
        schemas = ", ".join(f"{type_text(media_content.get('schema', {}))} ({code(media)})"
                            for media, media_content in content.items()
                            if media_content.get("schema"))
        rows.append((code(status), response.get("description", ""), schemas))
    return ["**Responses**", "", *table(["status", "meaning", "body"], rows), ""]


def _operation(method: str, path: str, operation: dict[str, Any]) -> list[str]:
    lines = [f"### `{method.upper()} {path}` {{#{operation_anchor(method, path)}}}", ""]
    if operation.get("description"):
        lines += [str(operation["description"]).strip(), ""]
    return lines + _parameters(operation) + _body(operation) + _responses(operation)


def _schema(name: str, schema: dict[str, Any]) -> list[str]:
    lines = [f"### `{name}` {{#{schema_anchor(name)}}}", ""]
    if schema.get("description"):
        lines += [cell(schema["description"]), ""]
    properties = schema.get("properties")
    if not properties:
        return [*lines, f"Type: {type_text(schema)}.", ""]
    required = set(schema.get("required", []))
    lines += table(["field", "type", "required", "meaning"], [
        (code(field), type_text(value), "yes" if field in required else "no",
         value.get("description", "")) for field, value in properties.items()])
    if schema.get("additionalProperties") is False:
        lines += ["", "Other fields are refused (422)."]
    return [*lines, ""]


def render() -> str:
    """The page."""
    doc = document()
    info = doc["info"]
    operations = _operations(doc)
    lines = [
        "# HTTP API",
        "",
        f"{info['title']} {info['version']}: {info.get('summary', '')}. This page is generated "
        "from the OpenAPI document `rms serve` serves at `/openapi.json` (browsable at `/docs`) "
        "by `python -m docs_gen`, so it lists every operation. Producer and consumer endpoints "
        "take an app's API key, `/v1/admin/...` the admin token, both as "
        "`Authorization: Bearer ...`; every error is an RFC 9457 problem document "
        "([`Problem`](#schema-problem)). What each state change means is the "
        "[product contract](../design.md).",
        "",
    ]
    lines += table(["operation", "what it does"], [
        (f"[`{method.upper()} {path}`](#{operation_anchor(method, path)})",
         operation.get("summary", "")) for _, method, path, operation in operations])
    current = None
    for tag, method, path, operation in operations:
        if tag != current:
            lines += ["", f"## {tag.capitalize()}", ""]
            current = tag
        lines += _operation(method, path, operation)
    lines += ["", "## Schemas", ""]
    for name, schema in doc.get("components", {}).get("schemas", {}).items():
        lines += _schema(name, schema)
    return "\n".join(lines).rstrip("\n") + "\n"
