"""The SDK's HTTP sends: a request whose connection closes before any byte of the answer is
sent once more at once.

A server closes an idle keep-alive connection when its own idle timeout passes; a request
written onto it at that moment meets a closed socket, and the server never read it. Sending it
again on a new connection is safe for every RMS call, which is idempotent by id (a repeated
prepare answers 200 with the stored message), and needs no backoff: nothing is overloaded.
"""

from __future__ import annotations

from typing import Any

import httpx

from rms_client.version import USER_AGENT

_NO_ANSWER = "without sending a response"
_HTTPX_AGENT = "python-httpx/"  # httpx's own default: replaced by the SDK's


def dropped_before_answer(error: httpx.TransportError) -> bool:
    """The connection closed (or was reset) before the answer began."""
    if isinstance(error, httpx.RemoteProtocolError):
        return _NO_ANSWER in str(error)
    return isinstance(error, httpx.ReadError | httpx.WriteError)


async def send(client: httpx.AsyncClient, method: str, url: str, **options: Any
               ) -> httpx.Response:
    """``client.request``, sent a second time when the first meets a dropped connection. It
    carries the SDK's ``User-Agent`` unless the caller's client or headers name their own."""
    if client.headers.get("user-agent", "").startswith(_HTTPX_AGENT):
        headers = httpx.Headers({"user-agent": USER_AGENT})
        headers.update(options.get("headers") or {})
        options["headers"] = headers
    try:
        return await client.request(method, url, **options)
    except httpx.TransportError as error:
        if not dropped_before_answer(error):
            raise
    return await client.request(method, url, **options)
