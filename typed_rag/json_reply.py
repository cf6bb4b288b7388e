"""Tolerant reading of the JSON a model writes: plans, rewrites, constraints, judge verdicts.

Replies are decoded under a JSON schema where the engine supports one, but
small models and schema-less backends still wrap JSON in prose or code fences,
use other key spellings (``sub-queries``) or copy placeholders from the
prompt's output format. These helpers accept all of that and raise
:class:`PlanError` (with the reason) only when no usable value is in the text,
so the caller can retry and then fall back.
"""

from __future__ import annotations

import ast
import json
import re
from collections.abc import Iterable
from typing import Any


class PlanError(ValueError):
    """The model's reply holds no usable plan; the message says why."""


_FENCE = re.compile(r"```(?:json|JSON|python)?\s*(.*?)```", re.DOTALL)
_DECODER = json.JSONDecoder()


def extract_json(text: str) -> Any:
    """The first JSON object or array in ``text``: fenced, bare, or inside prose.

    Python literals (single quotes, ``True``) are accepted as a last resort,
    since small models often write them.
    """
    if not text or not text.strip():
        raise PlanError("empty reply")
    candidates = [m.group(1) for m in _FENCE.finditer(text)] + [text]
    for chunk in candidates:
        chunk = chunk.strip()
        for start, ch in enumerate(chunk):
            if ch not in "{[":
                continue
            try:
                value, _ = _DECODER.raw_decode(chunk, start)
                return value
            except json.JSONDecodeError:
                pass
            literal = _balanced(chunk, start)
            if literal is not None:
                try:
                    value = ast.literal_eval(literal)
                except (ValueError, SyntaxError, MemoryError, RecursionError):
                    continue
                if isinstance(value, dict | list):
                    return value
    raise PlanError(f"no JSON object or array in reply: {_preview(text)}")


def _balanced(text: str, start: int) -> str | None:
    """The bracketed span starting at ``start`` (quotes respected), if it closes."""
    pairs = {"{": "}", "[": "]"}
    stack: list[str] = []
    quote: str | None = None
    escaped = False
    for i in range(start, len(text)):
        ch = text[i]
        if quote:
            if escaped:
                escaped = False
            elif ch == "\\":
                escaped = True
            elif ch == quote:
                quote = None
            continue
        if ch in "\"'":
            quote = ch
        elif ch in pairs:
            stack.append(pairs[ch])
        elif ch in "}]":
            if not stack or stack.pop() != ch:
                return None
            if not stack:
                return text[start : i + 1]
    return None


def _preview(text: str, n: int = 80) -> str:
    flat = " ".join(text.split())
    return repr(flat[:n] + ("..." if len(flat) > n else ""))


def norm_key(key: str) -> str:
    """A key reduced to its lower-case letters: ``Sub-Queries`` and ``sub_queries`` match."""
    return re.sub(r"[^a-z]", "", key.lower())


def lookup(obj: dict[str, Any], *names: str) -> Any:
    """A field by any of ``names``, ignoring case, ``-``/``_`` and spaces; None if absent."""
    wanted = {norm_key(n) for n in names}
    for key, value in obj.items():
        if isinstance(key, str) and norm_key(key) in wanted:
            return value
    return None


def only_list(obj: dict[str, Any]) -> list[Any] | None:
    """The object's one list value (the model renamed the key), else None."""
    lists = [v for v in obj.values() if isinstance(v, list)]
    return lists[0] if len(lists) == 1 else None


# Template words a weak model copies from the output format instead of planning.
_PLACEHOLDER = re.compile(
    r"^(sub[-_ ]?quer(y|ies)|quer(y|ies)|keywords?|phrase|perspectives?|opinion|topic|"
    r"string|item|\.\.\.|…)\s*\d*$",
    re.IGNORECASE,
)


def is_placeholder(text: str) -> bool:
    """Whether ``text`` is a word of the output format (``"sub-query 1"``), not content."""
    return _PLACEHOLDER.match(text) is not None


def clean_strings(items: Iterable[Any], limit: int) -> list[str]:
    """Strings stripped; empties, template placeholders (``"sub-query 1"``) and
    case-insensitive duplicates dropped; at most ``limit``."""
    out: list[str] = []
    seen: set[str] = set()
    for item in items:
        if isinstance(item, dict):  # {"query": "..."} and similar one-field wrappers
            strings = [v for v in item.values() if isinstance(v, str)]
            item = strings[0] if len(strings) == 1 else None
        if isinstance(item, int | float) and not isinstance(item, bool):
            item = str(item)
        if not isinstance(item, str):
            continue
        text = " ".join(item.split()).strip(" \"'")
        if not text or text.lower() in seen or is_placeholder(text):
            continue
        seen.add(text.lower())
        out.append(text)
        if len(out) == limit:
            break
    return out


def string_list(value: Any, what: str, minimum: int, limit: int) -> list[str]:
    """``value`` as ``minimum``..``limit`` clean strings; :class:`PlanError` when too few."""
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list):
        raise PlanError(f"{what} is missing or not a list")
    items = clean_strings(value, limit)
    if len(items) < minimum:
        raise PlanError(f"{what} has {len(items)} usable entries, need at least {minimum}")
    return items


def as_bool(value: Any) -> bool | None:
    """A JSON or spelled-out boolean (``"yes"``, ``"false"``); None when it is neither."""
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.strip().lower() in {"true", "yes", "1"}:
        return True
    if isinstance(value, str) and value.strip().lower() in {"false", "no", "0"}:
        return False
    return None


def string_list_schema(title: str, key: str, minimum: int, maximum: int) -> dict[str, Any]:
    """A plan schema of one field: ``key``, a list of ``minimum``..``maximum`` strings."""
    return {
        "title": title,
        "type": "object",
        "properties": {
            key: {
                "type": "array",
                "items": {"type": "string", "minLength": 1},
                "minItems": minimum,
                "maxItems": maximum,
            }
        },
        "required": [key],
        "additionalProperties": False,
    }


def read_string_list(text: str, names: tuple[str, ...], minimum: int, limit: int) -> list[str]:
    """The reply's list under the first of ``names`` it uses (or its only list), as
    :func:`string_list` reads it; ``names[0]`` is the field's name in errors."""
    data = extract_json(text)
    if isinstance(data, dict):
        value = lookup(data, *names)
        data = value if value is not None else only_list(data)
    return string_list(data, names[0], minimum, limit)
