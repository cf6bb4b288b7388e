"""Checks a request body must pass before and right after it is decoded.

Python's JSON decoder recurses once per nesting level (a deep body raises
``RecursionError``), refuses huge integers with a bare ``ValueError``, and
accepts ``"\\ud800"`` (an unpaired surrogate that no tokenizer can encode), and
``NaN``, ``Infinity`` or ``1e400`` (numbers JSON does not have, or that overflow to
infinity), which would otherwise fail range checks with a misleading message.
Each of these is a 400 naming the problem here, before the request model or
the engine sees the body.
"""

from __future__ import annotations

import json
import math
import re
from typing import Any

from serving import errors

# JSON strings (escapes included), blanked out before brackets are counted.
_STRING = re.compile(rb'"(?:[^"\\]|\\.)*"', re.DOTALL)
_BRACKET = re.compile(rb"[\[\]{}]")


class NonFiniteNumber(ValueError):
    """A NaN, an infinity, or a number too large for a float, in a request body."""


def _non_finite(text: str) -> float:
    raise NonFiniteNumber(text)


def _finite_float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise NonFiniteNumber(text)
    return value


def json_depth(body: bytes) -> int:
    """The deepest nesting of arrays/objects in ``body``, without decoding it."""
    depth = peak = 0
    for match in _BRACKET.finditer(_STRING.sub(b'""', body)):
        if match.group() in (b"[", b"{"):
            depth += 1
            peak = max(peak, depth)
        else:
            depth -= 1
    return peak


def decode_json(body: bytes, max_depth: int) -> Any:
    """The decoded body; a 400 in the OpenAI shape for anything the decoder cannot take."""
    depth = json_depth(body)
    if depth > max_depth:
        raise errors.bad_request(
            f"request body nests arrays/objects {depth} levels deep; "
            f"this server accepts at most {max_depth} (server.max_json_depth)",
            code="invalid_json",
        )
    try:
        return json.loads(body, parse_constant=_non_finite, parse_float=_finite_float)
    except NonFiniteNumber as exc:
        raise errors.bad_request(
            f"request body has the number {exc}, which is not finite; JSON numbers must be "
            "finite (no NaN, Infinity or values beyond 1.8e308)",
            code="invalid_json",
        ) from None
    except UnicodeDecodeError as exc:
        raise errors.bad_request(
            f"request body is not valid UTF-8: {exc}", code="invalid_json"
        ) from None
    except json.JSONDecodeError as exc:
        raise errors.bad_request(
            f"request body is not valid JSON: {exc}", code="invalid_json"
        ) from None
    except (ValueError, RecursionError) as exc:  # e.g. an integer of more than 4300 digits
        raise errors.bad_request(
            f"request body could not be decoded: {exc}", code="invalid_json"
        ) from None


def _bad_text(text: str) -> int | None:
    """Index of the first unpaired surrogate in ``text`` (None when it is valid Unicode)."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        return exc.start
    return None


def check_unicode(value: Any, path: str = "") -> None:
    """400 naming the first field (or key) whose text holds an unpaired surrogate."""
    if isinstance(value, str):
        at = _bad_text(value)
        if at is not None:
            where = path or "request body"
            raise errors.bad_request(
                f"'{where}' is not valid Unicode: unpaired surrogate "
                f"{value[at]!r} at character {at}",
                param=path or None,
                code="invalid_unicode",
            )
    elif isinstance(value, dict):
        for key, item in value.items():
            child = f"{path}.{key}" if path else str(key)
            check_unicode(key, path or "request body")
            check_unicode(item, child)
    elif isinstance(value, list):
        for i, item in enumerate(value):
            check_unicode(item, f"{path}.{i}")


def check_output_schema(schema: dict[str, Any] | None) -> None:
    """400 when ``response_format``'s schema cannot be turned into a decoding grammar."""
    if schema is None:
        return
    try:
        import llama_cpp.llama_grammar  # noqa: F401 - heavy; absent: the engine in use checks it

        from typed_rag.engines.grammar import gbnf_of_schema
    except ImportError:
        return
    try:
        gbnf_of_schema(json.dumps(schema))
    except Exception as exc:  # noqa: BLE001 - any converter failure is the schema's fault
        raise errors.bad_request(
            f"response_format.json_schema.schema cannot be used for decoding: {exc}",
            param="response_format.json_schema.schema",
            code="invalid_value",
        ) from None
