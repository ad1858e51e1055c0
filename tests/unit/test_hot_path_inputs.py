"""The fast request path (:mod:`message_service.hot_paths`) takes from a request exactly what
the prepare, confirm and cancel routes declare: their path, path parameters, headers, body
model and the dependencies whose work it does itself. A parameter added to one of those routes
fails here until the fast path reads it too."""

from __future__ import annotations

from typing import Annotated, Any

import pytest
from fastapi import APIRouter, Header
from fastapi.dependencies.models import Dependant
from fastapi.routing import APIRoute

from message_service.api.messages import router
from message_service.hot_paths import _TRACE_HEADERS, INPUTS, Inputs, _transition
from message_service.schemas import PrepareRequest
from rms_client.trace import TraceContext


def _flat(dependant: Dependant, found: dict[str, set[str]]) -> dict[str, set[str]]:
    """Every parameter of the route and of its dependencies, by kind."""
    for kind in ("path_params", "query_params", "header_params", "cookie_params"):
        found.setdefault(kind, set()).update(p.alias for p in getattr(dependant, kind))
    for sub in dependant.dependencies:
        if sub.call is not None:
            found.setdefault("dependencies", set()).add(sub.call.__name__)
        _flat(sub, found)
    return found


def declared(route: APIRoute) -> Inputs:
    """What ``route`` declares, in the fast path's terms (a query or cookie parameter, or a
    second body parameter, is something the fast path never reads: it makes them differ)."""
    found = _flat(route.dependant, {})
    bodies = [p.field_info.annotation for p in route.dependant.body_params]
    unread = found["query_params"] | found["cookie_params"]
    return Inputs(
        route.path_format, frozenset(found["path_params"] | unread),
        frozenset(found["header_params"]),
        bodies[0] if len(bodies) == 1 else (None if not bodies else Any),  # type: ignore[arg-type]
        frozenset(found.get("dependencies", set())))


def _routes() -> dict[str, APIRoute]:
    return {route.name: route for route in router.routes
            if isinstance(route, APIRoute) and route.name in INPUTS}


@pytest.mark.parametrize("name", sorted(INPUTS))
def test_the_fast_path_reads_what_the_route_declares(name: str) -> None:
    assert declared(_routes()[name]) == INPUTS[name]


@pytest.mark.parametrize("name", ["confirm", "cancel"])
def test_the_fast_path_takes_the_declared_paths(name: str) -> None:
    assert _transition(INPUTS[name].path.format(message_id="order-1")) == ("order-1", name)


def test_the_trace_headers_read_are_the_declared_ones() -> None:
    assert {h.decode() for h in _TRACE_HEADERS} == INPUTS["prepare"].headers


def test_a_parameter_the_fast_path_does_not_read_is_seen() -> None:
    """The comparison sees a new parameter: a header, a query parameter, another body."""
    probe = APIRouter(prefix="/v1/messages")

    @probe.post("/{message_id}/confirm")
    async def confirm(message_id: str, reason: str | None = None) -> None: ...

    @probe.post("")
    async def prepare(body: PrepareRequest,
                      idempotency_key: Annotated[str | None, Header()] = None) -> TraceContext:
        raise NotImplementedError

    routes = {r.name: r for r in probe.routes if isinstance(r, APIRoute)}
    assert declared(routes["confirm"]).path_params == {"message_id", "reason"}
    assert declared(routes["confirm"]) != INPUTS["confirm"]
    assert "idempotency-key" in declared(routes["prepare"]).headers
    assert declared(routes["prepare"]) != INPUTS["prepare"]
