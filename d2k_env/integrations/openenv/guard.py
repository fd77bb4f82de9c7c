"""Who may open sessions on the OpenEnv server, and how many: an ASGI middleware around the app.

openenv-core's app holds at most ``max_concurrent_envs`` sessions, and it made them for anyone: 8
unauthenticated ``POST /mcp`` calls of ``openenv/session/create`` took every slot, and such a
session lives until it is closed by id, so every WebSocket client was refused for as long as the
server ran. :class:`SessionGuard`:

- with a ``token``, answers a request without ``Authorization: Bearer <token>`` with 401 (a
  WebSocket: closed before it is accepted), ``/health`` excepted;
- refuses ``openenv/session/create`` over HTTP (403): a session of this server is its WebSocket,
  which ends with the connection (the env has no MCP tools, so an HTTP MCP session serves nothing);
- with ``per_client``, refuses a client (by address) a WebSocket beyond that many open at once;
- lets a WebSocket's close find its client gone: openenv-core closes every session's WebSocket when
  it ends, also after the client has closed it, and the ASGI server raised (uvicorn's
  ``ClientDisconnected``, an ``OSError`` as ASGI specifies) for each normal disconnect, logged as a
  65-line traceback. Only that close is quiet; any other failure is logged as before.

Idle sessions end after openenv-core's ``session_timeout`` (see :func:`.server.make_app`).
"""

from __future__ import annotations

import hmac
import json
import logging
from collections import Counter
from typing import Any, Callable

OPEN_PATHS = ("/health",)  # answered without the token: a load balancer's probe
log = logging.getLogger(__name__)


class SessionGuard:
    """The ASGI app ``app`` behind the checks of the module docstring."""

    def __init__(self, app: Callable, token: str | None = None, per_client: int | None = None):
        if per_client is not None and per_client < 1:
            raise ValueError(f"per_client must be at least 1, not {per_client}")
        self.app, self.token, self.per_client = app, token or None, per_client
        self._open: Counter[str] = Counter()  # open WebSockets by client address

    async def __call__(self, scope: dict, receive: Callable, send: Callable) -> None:
        if scope["type"] not in ("http", "websocket"):
            return await self.app(scope, receive, send)
        if self.token and scope["path"] not in OPEN_PATHS and not self._authorised(scope):
            return await _refuse(scope, send, 401, "a bearer token is required: Authorization: Bearer <token>")
        if scope["type"] == "http":
            if scope["path"] == "/mcp" and scope["method"] == "POST":
                body, receive = await _read_body(receive)
                if _creates_session(body):
                    return await _refuse(scope, send, 403, "sessions are WebSockets here: open /ws (an HTTP MCP "
                                                          "session would hold a slot until closed by id)")
            return await self.app(scope, receive, send)
        client = (scope.get("client") or ("unknown", 0))[0]
        if self.per_client is not None and self._open[client] >= self.per_client:
            return await _refuse(scope, send, 429, f"this client has {self.per_client} sessions open, its limit")
        self._open[client] += 1
        try:
            await self.app(scope, receive, _closing_quietly(send))
        finally:
            self._open[client] -= 1
            if not self._open[client]:
                del self._open[client]

    def _authorised(self, scope: dict) -> bool:
        headers = dict(scope.get("headers") or [])
        given = headers.get(b"authorization", b"").decode("latin-1")
        return hmac.compare_digest(given.encode(), f"Bearer {self.token}".encode())


def _closing_quietly(send: Callable) -> Callable:
    """``send``, where a WebSocket close that finds the connection closed already is done: the ASGI
    server's OSError says there is nobody left to tell. Every other message, and any other error of
    a close, goes through as it was."""

    async def sending(message: dict) -> None:
        if message["type"] != "websocket.close":
            return await send(message)
        try:
            await send(message)
        except OSError as exc:
            log.debug("the WebSocket was closed by its client already (%s)", type(exc).__name__)

    return sending


async def _read_body(receive: Callable) -> tuple[bytes, Callable]:
    """The request's body, and a ``receive`` that gives it to the app again."""
    chunks, more = [], True
    while more:
        message = await receive()
        if message["type"] != "http.request":
            break
        chunks.append(message.get("body", b""))
        more = message.get("more_body", False)
    body, sent = b"".join(chunks), False

    async def replay() -> dict[str, Any]:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()

    return body, replay


def _creates_session(body: bytes) -> bool:
    try:
        request = json.loads(body)
    except (ValueError, UnicodeDecodeError):
        return False  # the app answers a malformed request itself
    return isinstance(request, dict) and request.get("method") == "openenv/session/create"


async def _refuse(scope: dict, send: Callable, status: int, message: str) -> None:
    """An HTTP request answered with ``status`` and a JSON message; a WebSocket closed before it is
    accepted (the client sees the handshake refused with 403; the close code is 4000 + status)."""
    if scope["type"] == "websocket":
        await send({"type": "websocket.close", "code": 4000 + status, "reason": message[:120]})
        return
    body = json.dumps({"error": {401: "Unauthorized", 403: "Forbidden", 429: "TooManySessions"}[status],
                       "message": message}).encode()
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]})
    await send({"type": "http.response.body", "body": body})
