"""The configuration reference, from the settings' definitions in :mod:`rms.config`: every
field's variable, default, accepted values and description, grouped by the class that
declares it (which processes read it)."""

from __future__ import annotations

import types
import typing
from typing import Any, Literal

import annotated_types
from pydantic import SecretStr
from pydantic.fields import FieldInfo
from pydantic_settings import BaseSettings

from docs_gen.markdown import code, table
from rms.config import KafkaSettings, RetentionSettings, Settings, WorkerSettings

PREFIX = str(Settings.model_config.get("env_prefix", ""))

# the classes that declare the settings, in the order the page shows them, with who reads them
GROUPS: tuple[tuple[type[BaseSettings], str, str], ...] = (
    (WorkerSettings, "Every process",
     "Read by `rms serve`, `rms confirm-worker`, `rms recovery-worker` and the other commands "
     "that reach PostgreSQL or Kafka: connections, the delivery policy's defaults, the "
     "workers' knobs and logging."),
    (KafkaSettings, "Kafka connections",
     "How every Kafka client of RMS connects (every process reads them)."),
    (Settings, "The API (`rms serve`)",
     "The admin token, the ack-topic consumer, the request limits, the HTTP server and "
     "overload protection."),
    (RetentionSettings, "Retention (`rms retention run`)",
     "The defaults of `rms retention run` when no option overrides them."),
)

_BOUNDS: tuple[tuple[type[Any], str, str], ...] = (
    (annotated_types.Ge, "ge", "≥"), (annotated_types.Gt, "gt", ">"),
    (annotated_types.Le, "le", "≤"), (annotated_types.Lt, "lt", "<"),
)


def variable(name: str) -> str:
    """The environment variable of the setting ``name``."""
    return f"{PREFIX}{name}".upper()


def default_text(field: FieldInfo) -> str:
    """The default as it is written in the environment (``true``, ``5``, ``0.25``)."""
    value = field.default
    if value is None:
        return "(none)"
    if isinstance(value, bool):
        return code(str(value).lower())
    if isinstance(value, float):
        return code(f"{value:g}")
    return code(value)


def _choices(annotation: Any) -> list[str] | None:
    if typing.get_origin(annotation) is Literal:
        return [str(choice) for choice in typing.get_args(annotation)]
    if isinstance(annotation, types.UnionType) or typing.get_origin(annotation) is typing.Union:
        for member in typing.get_args(annotation):
            found = _choices(member)
            if found is not None:
                return found
    return None


def _kind(annotation: Any) -> str:
    members = [member for member in typing.get_args(annotation) if member is not type(None)]
    base = members[0] if isinstance(annotation, types.UnionType) and members else annotation
    if base is SecretStr:
        return "secret"
    return {bool: "`true` or `false`", int: "integer", float: "number", str: "text"}.get(
        base, str(base))


def accepted(field: FieldInfo) -> str:
    """The values the setting accepts: its choices, or its kind with its bounds."""
    choices = _choices(field.annotation)
    if choices is not None:
        return ", ".join(code(choice) for choice in choices)
    text = _kind(field.annotation)
    bounds = [f"{sign} {getattr(item, attribute):g}" for item in field.metadata
              for kind, attribute, sign in _BOUNDS if isinstance(item, kind)]
    return ", ".join([text, *bounds])


def _declared(cls: type[BaseSettings]) -> list[str]:
    """The fields ``cls`` itself declares, in their order in the source."""
    return [name for name in vars(cls).get("__annotations__", {}) if name in cls.model_fields]


def render() -> str:
    """The page."""
    declared = [name for cls, _, _ in GROUPS for name in _declared(cls)]
    missing = set(Settings.model_fields) - set(declared)
    if missing:
        raise ValueError(f"settings of no group on the page: {sorted(missing)}")
    lines = [
        "# Configuration",
        "",
        "Every setting is an environment variable with the prefix "
        f"`{PREFIX}`, read once when a process starts (`pydantic-settings`). This page is "
        "generated from the settings' definitions in `rms/config.py` (`python -m docs_gen`), "
        "so it lists every one. `rms serve --host --port --workers` set the listener "
        "([CLI reference](cli.md#rms-serve)); the policy fields (`check_after_seconds`, "
        "`max_checks`, `ack_timeout_seconds`, `max_deliveries`) can also be set per message in "
        "the prepare body. Spans are configured by the standard `OTEL_*` variables "
        "([traces](../operations/monitoring.md#traces)); the values a production deployment sets are in "
        "[the operations guide](../operations/configuration.md).",
    ]
    for cls, title, intro in GROUPS:
        lines += ["", f"## {title}", "", intro, ""]
        lines += settings_table(_declared(cls))
    return "\n".join(lines) + "\n"


def settings_table(names: list[str]) -> list[str]:
    """The table of the settings ``names``. Their descriptions link relative to a page one
    folder below docs/ (the reference's, or an operations page that shows a table)."""
    return table(["variable", "default", "accepts", "meaning"], [
        (code(variable(name)), default_text(field), accepted(field), _description(name, field))
        for name in names for field in [Settings.model_fields[name]]])


def retention_table() -> str:
    """The settings of ``rms retention run``, for the operations guide's retention page."""
    return "\n".join(settings_table(_declared(RetentionSettings)))


def kafka_security_table() -> str:
    """How RMS's Kafka clients connect (TLS and SASL), for the guide's security page."""
    names = [name for name in _declared(KafkaSettings) if name != "kafka_bootstrap_servers"]
    return "\n".join(settings_table(names))


def _description(name: str, field: FieldInfo) -> str:
    if not field.description:
        raise ValueError(f"{variable(name)} has no description in rms/config.py")
    return field.description
