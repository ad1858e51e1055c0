"""The producer's check-back endpoint for the check-back path: answers every call
``{"status": "committed"}`` at once (signatures are not verified: the producer's cost is not
what the bench measures). Its own process: ``python -m bench.callback PORT``."""

from __future__ import annotations

import sys
from collections.abc import Awaitable, Callable
from typing import Any

ANSWER = b'{"status":"committed"}'


async def committed(scope: dict[str, Any], receive: Callable[[], Awaitable[dict[str, Any]]],
                    send: Callable[[dict[str, Any]], Awaitable[None]]) -> None:
    if scope["type"] != "http":
        return
    more = True
    while more:
        more = bool((await receive()).get("more_body"))
    await send({"type": "http.response.start", "status": 200,
                "headers": [(b"content-type", b"application/json"),
                            (b"content-length", str(len(ANSWER)).encode())]})
    await send({"type": "http.response.body", "body": ANSWER})


def main(argv: list[str]) -> int:
    import uvicorn

    uvicorn.run(committed, host="127.0.0.1", port=int(argv[0]), log_level="warning",
                access_log=False, loop="uvloop", http="httptools", lifespan="off", ws="none",
                backlog=4096)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
