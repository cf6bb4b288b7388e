"""The API key check, one dependency that every guarded router shares."""

from __future__ import annotations

import hmac
from collections.abc import Awaitable, Callable

from fastapi import Request

from serving import errors
from typed_rag.config import ServerSettings


def key_guard(server: ServerSettings) -> Callable[[Request], Awaitable[None]]:
    """A dependency that lets a request through when ``server.api_key`` is unset or the
    request sends it as a Bearer key; a 401 if not."""

    async def require_key(request: Request) -> None:
        expected = server.api_key
        if not expected:
            return
        header = request.headers.get("authorization", "")
        scheme, _, key = header.partition(" ")
        if not header:
            raise errors.unauthorized("missing API key: send it as 'Authorization: Bearer <key>'")
        if scheme.lower() != "bearer" or not hmac.compare_digest(
            key.strip().encode(), expected.encode()
        ):
            raise errors.unauthorized("invalid API key")

    return require_key
