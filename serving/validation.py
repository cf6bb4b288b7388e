"""From the raw HTTP request to a validated :class:`ChatCompletionRequest`, or an OpenAI error.

The body's size and nesting depth are checked before it is decoded; a validation
failure becomes a 400 that names the field at fault.
"""

from __future__ import annotations

from typing import Any

from fastapi import Request
from pydantic import ValidationError
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


def from_validation(exc: ValidationError) -> APIError:
    """The most telling problem (a union's "wrong type" errors come last), naming its field."""
    problems = sorted(exc.errors(), key=lambda e: str(e.get("type", "")).endswith("_type"))
    first = problems[0]
    param = _param(tuple(first.get("loc", ())))
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


async def parse_request(raw: Request, server: ServerSettings) -> ChatCompletionRequest:
    """The validated request, or an :class:`APIError` (400/413) naming what is wrong.

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
    body = await read_body(raw, server.max_body_bytes)
    data = decode_json(body, server.max_json_depth)
    if not isinstance(data, dict):
        raise errors.bad_request("request body must be a JSON object", code="invalid_json")
    check_unicode(data)
    try:
        req = ChatCompletionRequest.model_validate(data)
    except ValidationError as exc:
        raise from_validation(exc) from None
    if req.model not in MODES:
        raise errors.bad_request(
            f"unknown model {req.model!r}; this server offers: {', '.join(MODES)}",
            param="model",
            code="model_not_found",
        )
    check_output_schema(req.output_schema())
    return req


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
    return b"".join(chunks)
