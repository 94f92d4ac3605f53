"""HTTP mechanics of the API that are not routes: bearer auth, request metrics, 405 with a true Allow.

- ``BearerAuth``: every mutating endpoint depends on it. The token is compared in constant time
  and never logged or echoed; without a configured token no mutation is accepted (401), so an API
  started without one is read-only rather than open.
- ``RequestMetrics``: counts and times every request by route template (never the raw path).
- ``MethodNotAllowed``: a path the API serves, asked with a method it does not document (HEAD,
  OPTIONS, ...), answers 405 with ``Allow`` listing exactly the documented methods of that path.
"""

from __future__ import annotations

import hmac
import os
import re
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Annotated, Any

from fastapi import Depends, HTTPException
from fastapi.routing import APIRoute
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from starlette.routing import BaseRoute
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from inferslice.errors import ConfigError
from inferslice.service.metrics import ApiMetrics

TOKEN_ENV = "INFERSLICE_API_TOKEN"

_bearer = HTTPBearer(auto_error=False, description="the API token (`--token-file FILE` or env INFERSLICE_API_TOKEN)")


def load_token(token_file: str | Path | None, env: dict[str, str] | None = None) -> str | None:
    """The API token: ``--token-file`` wins over ``INFERSLICE_API_TOKEN``; None when neither is set."""
    if token_file is not None:
        try:
            token = Path(token_file).read_text().strip()
        except OSError as err:
            raise ConfigError(f"cannot read the token file: {err.strerror}", "--token-file") from None
        if not token:
            raise ConfigError("the token file is empty", "--token-file")
        return token
    value = (os.environ if env is None else env).get(TOKEN_ENV, "").strip()
    return value or None


UNAUTHORIZED: dict[int | str, dict[str, Any]] = {
    401: {
        "description": "missing or wrong bearer token",
        "content": {"application/json": {"schema": {"type": "object", "properties": {"detail": {"type": "string"}}}}},
    }
}


class BearerAuth:
    """A FastAPI dependency: the request must carry ``Authorization: Bearer <token>``."""

    def __init__(self, token: str | None) -> None:
        self._token = token.encode() if token else None

    def __call__(self, credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(_bearer)]) -> None:
        if self._token is None:
            raise HTTPException(401, "mutations are disabled: the API was started without a token", {"WWW-Authenticate": "Bearer"})
        if credentials is None or not hmac.compare_digest(credentials.credentials.encode(), self._token):
            raise HTTPException(401, "missing or wrong bearer token", {"WWW-Authenticate": "Bearer"})


class RequestMetrics:
    """Pure ASGI middleware (cheaper than ``BaseHTTPMiddleware``): count and time every HTTP request."""

    def __init__(self, app: ASGIApp, metrics: ApiMetrics) -> None:
        self.app = app
        self.metrics = metrics

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        start = time.perf_counter()
        status = 500  # an exception before the response starts is a server error

        async def send_wrapper(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = int(message["status"])
            await send(message)

        try:
            await self.app(scope, receive, send_wrapper)
        finally:
            # The route template, never the raw path: slice names must not explode label cardinality.
            route = getattr(scope.get("route"), "path", "unmatched")
            self.metrics.requests.labels(scope["method"], route, str(status)).inc()
            self.metrics.duration.labels(scope["method"], route).observe(time.perf_counter() - start)


def documented_methods(routes: Iterable[BaseRoute]) -> list[tuple[re.Pattern[str], frozenset[str]]]:
    """Per documented path, the methods the OpenAPI document lists for it (routes of one path merged)."""
    by_path: dict[str, tuple[re.Pattern[str], set[str]]] = {}
    for route in routes:
        if isinstance(route, APIRoute) and route.include_in_schema:
            entry = by_path.setdefault(route.path, (route.path_regex, set()))
            entry[1].update(route.methods or ())
    return [(regex, frozenset(methods)) for regex, methods in by_path.values()]


class MethodNotAllowed:
    """405 + ``Allow`` for a documented path asked with an undocumented method (Starlette's own 405
    lists only the first matching route's methods, and it answers HEAD for every GET route)."""

    def __init__(self, app: ASGIApp, routes: list[BaseRoute]) -> None:
        self.app = app
        self.routes = routes
        self._table: list[tuple[re.Pattern[str], frozenset[str]]] | None = None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            if self._table is None:  # routes are all added by the time the first request comes
                self._table = documented_methods(self.routes)
            path, method = scope["path"], scope["method"]
            allowed = {m for regex, methods in self._table if regex.match(path) for m in methods}
            if allowed and method not in allowed:
                body = b'{"detail":"Method Not Allowed"}'
                headers = [
                    (b"allow", ", ".join(sorted(allowed)).encode()),
                    (b"content-type", b"application/json"),
                    (b"content-length", str(len(body)).encode()),
                ]
                await send({"type": "http.response.start", "status": 405, "headers": headers})
                await send({"type": "http.response.body", "body": body if method != "HEAD" else b""})
                return
        await self.app(scope, receive, send)
