"""``rms serve``'s protocol (:mod:`message_service.http_protocol`) subclasses uvicorn's private
``HttpToolsProtocol`` and overrides its methods; the admission gate and the read deadlines live
in those overrides. A uvicorn whose overridden methods read differently may no longer call them
as the overrides expect, so the server's requirement bounds uvicorn above, and this test pins the
source and signature of every overridden method as reviewed: a new uvicorn that changes one of
them fails here, before a release can silently lose the gate or the deadlines."""

from __future__ import annotations

import hashlib
import inspect
import re
import tomllib
from pathlib import Path

import uvicorn
from packaging.requirements import Requirement
from packaging.version import Version
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

from message_service.http_protocol import DeadlineProtocol

ROOT = Path(__file__).resolve().parents[2]
# the first 16 hex digits of the SHA-256 of each overridden method's source in the uvicorn
# the overrides were reviewed against (0.54.0), and its signature
REVIEWED_UVICORN = "0.54.0"
REVIEWED = {
    "__init__": ("4f08999410347141", "(self, config: 'Config', server_state: 'ServerState', "
                 "app_state: 'dict[str, Any]', _loop: 'asyncio.AbstractEventLoop | None' = None)"
                 " -> 'None'"),
    "_start_asgi_task": ("9c08c2571ae9b038",
                         "(self, cycle: 'RequestResponseCycle', app: 'ASGI3Application') -> 'None'"),
    "connection_lost": ("c91a4c9bf2e29c55", "(self, exc: 'Exception | None') -> 'None'"),
    "connection_made": ("6efb565ff3d36b91", "(self, transport: 'asyncio.Transport') -> 'None'"),
    "data_received": ("010a7ae59a5d3b1a", "(self, data: 'bytes') -> 'None'"),
    "on_headers_complete": ("1ea8589acfad92d8", "(self) -> 'None'"),
    "on_message_complete": ("1fbad42dc31fc01f", "(self) -> 'None'"),
    "on_response_complete": ("64e254f28e389e76", "(self) -> 'None'"),
}


def _overridden() -> list[str]:
    return sorted(name for name, value in vars(DeadlineProtocol).items()
                  if callable(value) and hasattr(HttpToolsProtocol, name))


def test_every_overridden_uvicorn_method_is_the_one_reviewed() -> None:
    assert _overridden() == sorted(REVIEWED), "an override of uvicorn's protocol was not reviewed"
    for name, (digest, signature) in REVIEWED.items():
        method = getattr(HttpToolsProtocol, name)
        found = hashlib.sha256(inspect.getsource(method).encode()).hexdigest()[:16]
        assert (found, str(inspect.signature(method))) == (digest, signature), (
            f"uvicorn {uvicorn.__version__} changed HttpToolsProtocol.{name} (reviewed against "
            f"{REVIEWED_UVICORN}): review message_service/http_protocol.py, then REVIEWED")


def test_the_server_requires_a_uvicorn_below_the_next_minor_release() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    (line,) = [line for line in project["dependencies"] if re.match(r"uvicorn\b", line)]
    requirement = Requirement(line)
    reviewed = Version(REVIEWED_UVICORN)
    following = Version(f"{reviewed.major}.{reviewed.minor + 1}.0")
    assert requirement.specifier.contains(reviewed)
    assert not requirement.specifier.contains(following), line
    upper = [spec for spec in requirement.specifier if spec.operator in {"<", "<="}]
    assert upper and all(Version(spec.version) <= following for spec in upper), line
