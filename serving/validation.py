"""From the raw HTTP request to a validated :class:`ChatCompletionRequest`, or an OpenAI error.

The chat route reads its body through :func:`checked_json_route`: the API key first, then
the body's size and nesting depth before it is decoded; FastAPI validates the decoded
JSON against the request model, and a validation failure becomes (:func:`from_validation`)
a 400 that names the field at fault.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from fastapi import Request
from fastapi.responses import Response
from fastapi.routing import APIRoute
from starlette.requests import ClientDisconnect

from serving import errors
from serving.bodies import check_output_schema, check_unicode, decode_json
from serving.errors import APIError
from serving.protocol import FIELD_POLICY, ChatCompletionRequest
from typed_rag.config import ServerSettings
from typed_rag.pipelines import MODES

_ROLE_TAGS = frozenset({"user", "system", "developer", "assistant", "tool"})
_FORMAT_TAGS = frozenset({"text", "json_object", "json_schema"})
_TYPE_LABELS = frozenset({"str", "int", "float", "bool", "dict", "list", "none"})


def _param(loc: tuple[Any, ...]) -> str | None:
    """The field's dotted path, without pydantic's union labels (message role, member type)."""
    out: list[str] = []
    for i, part in enumerate(loc):
        prev = loc[i - 1] if i else None
        if isinstance(part, int):
            out.append(str(part))
        elif isinstance(prev, int) and out[:1] == ["messages"] and part in _ROLE_TAGS:
            continue
        elif prev == "response_format" and part in _FORMAT_TAGS:
            continue
        elif "[" in part or "-" in part or part in _TYPE_LABELS:
            continue
        else:
            out.append(part)
    return ".".join(out) or None


def from_validation(problems: Sequence[dict[str, Any]]) -> APIError:
    """The most telling of FastAPI's validation problems (a union's "wrong type" errors
    come last), naming its field (its ``loc`` without the leading ``body``)."""
    first = sorted(problems, key=lambda e: str(e.get("type", "")).endswith("_type"))[0]
    param = _param(tuple(first.get("loc", ()))[1:])
    kind = first.get("type")
    msg = first.get("msg", "invalid value")
    if param == "messages" and kind == "missing":
        return errors.bad_request("'messages' is required", param="messages")
    if param == "messages" and kind == "too_short":
        return errors.bad_request("'messages' must not be empty", param="messages")
    if kind == "string_pattern_mismatch":
        msg = "must not be empty or blank"
    top = (param or "").split(".")[0]
    policy = FIELD_POLICY.get(top)
    if policy is not None and policy[0] == "rejected":
        param = top
        msg += f" ({param} is not supported: {policy[1]})"
        return errors.bad_request(
            f"invalid '{param}': {msg}", param=param, code="unsupported_parameter"
        )
    return errors.bad_request(f"invalid '{param}': {msg}", param=param, code="invalid_value")


def check_model(req: ChatCompletionRequest) -> None:
    """400 for a model (mode) this server does not offer, or a ``response_format`` schema
    that cannot be turned into a decoding grammar."""
    if req.model not in MODES:
        raise errors.bad_request(
            f"unknown model {req.model!r}; this server offers: {', '.join(MODES)}",
            param="model",
            code="model_not_found",
        )
    check_output_schema(req.output_schema())


def checked_json_route(
    server: ServerSettings, require_key: Callable[[Request], Awaitable[None]]
) -> type[APIRoute]:
    """A route class whose body FastAPI gets decoded by :func:`read_json`, after the key.

    FastAPI reads a body with ``request.body()`` and ``request.json()``, which return
    what the request holds already (the pattern of FastAPI's "custom Request and
    APIRoute class"); so it validates the JSON decoded here, within the limits.
    """

    class CheckedJSONRoute(APIRoute):
        def get_route_handler(self) -> Callable[[Request], Awaitable[Response]]:
            handle = super().get_route_handler()

            async def checked(request: Request) -> Response:
                await require_key(request)  # before the body, as for every guarded route
                request._json = await read_json(request, server)
                return await handle(request)

            return checked

    return CheckedJSONRoute


async def read_json(raw: Request, server: ServerSettings) -> dict[str, Any]:
    """The body as a JSON object, or an :class:`APIError` (400/413) naming what is wrong.

    The body's size and nesting depth are checked before it is decoded, and
    strings must be valid Unicode (no unpaired surrogates), so no body can
    reach the decoder's recursion limit or the tokenizer's encoding.
    """
    content_type = raw.headers.get("content-type", "")
    if content_type.split(";")[0].strip().lower() != "application/json":
        raise errors.bad_request(
            f"expected Content-Type: application/json, got {content_type or 'none'!r}",
            code="invalid_content_type",
        )
    data = decode_json(await read_body(raw, server.max_body_bytes), server.max_json_depth)
    if not isinstance(data, dict):
        raise errors.bad_request("request body must be a JSON object", code="invalid_json")
    check_unicode(data)
    return data


async def read_body(raw: Request, limit: int) -> bytes:
    """The body, refusing (413) anything over ``server.max_body_bytes`` before holding it."""
    too_large = APIError(
        413,
        f"request body exceeds {limit} bytes (server.max_body_bytes)",
        code="request_too_large",
    )
    declared = raw.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > limit:
        raise too_large
    chunks: list[bytes] = []
    size = 0
    try:
        async for part in raw.stream():
            size += len(part)
            if size > limit:
                raise too_large
            chunks.append(part)
    except ClientDisconnect:
        raise errors.bad_request(
            "the client disconnected before sending the whole body", code="incomplete_body"
        ) from None
    raw._body = b"".join(chunks)  # what request.body() returns from now on
    return raw._body
