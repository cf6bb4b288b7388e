"""Errors in the OpenAI shape, so that every client SDK can read them.

Every failure a client sees is an :class:`APIError` turned into
``{"error": {"message", "type", "param", "code"}}`` with a matching HTTP
status; nothing else (no traceback, no framework default) reaches the wire.
:func:`from_core` is the one place where the core's exceptions become them.
"""

from __future__ import annotations

import json
from typing import Any

from fastapi.responses import JSONResponse

from typed_rag.engines.base import ContextLengthError
from typed_rag.errors import UserError
from typed_rag.request import RequestError

STATUS_CODES = {
    400: "invalid_request",
    401: "invalid_api_key",
    403: "permission_denied",
    404: "not_found",
    405: "method_not_allowed",
    409: "conflict",
    413: "request_too_large",
    415: "unsupported_media_type",
    429: "rate_limit_exceeded",
    500: "internal_error",
    503: "service_unavailable",
    504: "request_timeout",
}


class APIError(Exception):
    """A request failure with its HTTP status and OpenAI error fields."""

    def __init__(
        self,
        status: int,
        message: str,
        *,
        type: str = "invalid_request_error",
        code: str | None = None,
        param: str | None = None,
        headers: dict[str, str] | None = None,
    ) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.type = type
        # Every error has a code, so /metrics counts each under its own.
        self.code = code or STATUS_CODES.get(status, f"http_{status}")
        self.param = param
        self.headers = headers or {}

    def body(self) -> dict[str, Any]:
        """The ``{"error": {...}}`` object sent to the client."""
        return {
            "error": {
                "message": self.message,
                "type": self.type,
                "param": self.param,
                "code": self.code,
            }
        }

    def sse(self) -> str:
        """The error as one in-band server-sent event, for failures mid-stream."""
        return f"data: {json.dumps(self.body())}\n\n"

    def response(self) -> JSONResponse:
        return JSONResponse(self.body(), status_code=self.status, headers=self.headers)


def bad_request(message: str, *, param: str | None = None, code: str | None = None) -> APIError:
    return APIError(400, message, param=param, code=code)


def unauthorized(message: str) -> APIError:
    return APIError(
        401,
        message,
        type="authentication_error",
        code="invalid_api_key",
        headers={"WWW-Authenticate": "Bearer"},
    )


def overloaded(message: str, *, status: int = 429, retry_after_s: int = 1) -> APIError:
    """Back-pressure: the queue is full (429) or the server is not ready (503)."""
    code = "rate_limit_exceeded" if status == 429 else "service_unavailable"
    return APIError(
        status,
        message,
        type="rate_limit_error" if status == 429 else "service_unavailable_error",
        code=code,
        headers={"Retry-After": str(retry_after_s)},
    )


def timeout(seconds: float) -> APIError:
    return APIError(
        504,
        f"the request did not finish within the server's limit of {seconds:g} s",
        type="timeout_error",
        code="request_timeout",
    )


def internal(message: str = "internal server error; the server log has the details") -> APIError:
    return APIError(500, message, type="internal_server_error", code="internal_error")


def not_found(message: str) -> APIError:
    return APIError(404, message, code="not_found")


def method_not_allowed(message: str) -> APIError:
    return APIError(405, message, code="method_not_allowed")


def context_error(exc: ContextLengthError) -> APIError:
    """The engine found a prompt longer than its context: the request's fault, not a 503."""
    return bad_request(str(exc), param="messages", code="context_length_exceeded")


def request_error(exc: RequestError) -> APIError:
    """A bad request field as the OpenAI-shaped 400 naming it; a named thing that does not
    exist (an unknown collection) as a 404."""
    if exc.code == "not_found":
        return APIError(404, str(exc), param=exc.param, code=exc.code)
    return bad_request(str(exc), param=exc.param, code=exc.code)


def from_core(exc: BaseException) -> APIError | None:
    """The client's error for a core exception that is the request's fault; None for any
    other (a bug or a failed backend: the caller logs it and answers 500 or 503)."""
    if isinstance(exc, ContextLengthError):
        return context_error(exc)
    if isinstance(exc, RequestError):
        return request_error(exc)
    if isinstance(exc, UserError):
        return bad_request(str(exc))
    return None


def engine_failed() -> APIError:
    """The language model backend failed (an ``EngineError``, or the engine is unhealthy)."""
    return APIError(
        503,
        "the language model backend failed; the server log has the details",
        type="service_unavailable_error",
        code="engine_error",
    )
