"""Plan schemas and tolerant parsers for the plan step of each typed pipeline.

Plans are decoded under a JSON schema where the engine supports one, but small
models and schema-less backends still wrap JSON in prose or code fences, use
the paper's key spellings (``sub-queries``) or return a bare list. The parsers
accept all of that and raise :class:`PlanError` (with the reason) only when no
usable plan is in the text, so the caller can retry and then fall back.
"""

from __future__ import annotations

import ast
import json
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, TypeVar

MIN_SUB_QUERIES = 2
MAX_SUB_QUERIES = 5
MAX_KEYWORDS = 5
COMPARE_TYPES = ("differences", "similarities", "superiority")


class PlanError(ValueError):
    """The model's reply holds no usable plan; the message says why."""


# --- Plans -----------------------------------------------------------------------------


@dataclass
class ComparisonPlan:
    is_compare: bool
    compare_type: str
    keywords: list[str]

    def to_trace(self) -> dict[str, Any]:
        return {
            "is_compare": self.is_compare,
            "compare_type": self.compare_type,
            "keywords": self.keywords,
        }


@dataclass
class KeywordPlan:
    keywords: list[str]

    def to_trace(self) -> dict[str, Any]:
        return {"keywords": self.keywords}


@dataclass
class DecompositionPlan:
    sub_queries: list[str]

    def to_trace(self) -> dict[str, Any]:
        return {"sub_queries": self.sub_queries}


@dataclass
class Perspective:
    perspective: str
    query: str


@dataclass
class DebatePlan:
    topic: str
    perspectives: list[Perspective] = field(default_factory=list)

    def to_trace(self) -> dict[str, Any]:
        return {
            "debate_topic": self.topic,
            "perspectives": [
                {"perspective": p.perspective, "query": p.query} for p in self.perspectives
            ],
        }


# --- Schemas (ChatRequest.json_schema) -------------------------------------------------

_STR_LIST = {"type": "array", "items": {"type": "string", "minLength": 1}}

COMPARISON_SCHEMA: dict[str, Any] = {
    "title": "comparison_plan",
    "type": "object",
    "properties": {
        "is_compare": {"type": "boolean"},
        "compare_type": {"type": "string", "enum": list(COMPARE_TYPES)},
        "keywords_list": {**_STR_LIST, "minItems": 1, "maxItems": MAX_KEYWORDS},
    },
    "required": ["is_compare", "compare_type", "keywords_list"],
    "additionalProperties": False,
}

KEYWORD_SCHEMA: dict[str, Any] = {
    "title": "keyword_plan",
    "type": "object",
    "properties": {"keywords": {**_STR_LIST, "minItems": 1, "maxItems": MAX_KEYWORDS}},
    "required": ["keywords"],
    "additionalProperties": False,
}


def sub_query_schema(limit: int = MAX_SUB_QUERIES) -> dict[str, Any]:
    """The decomposition plan: 2 to ``limit`` sub-queries."""
    return {
        "title": "sub_query_plan",
        "type": "object",
        "properties": {
            "sub_queries": {**_STR_LIST, "minItems": MIN_SUB_QUERIES, "maxItems": limit}
        },
        "required": ["sub_queries"],
        "additionalProperties": False,
    }


SUB_QUERY_SCHEMA: dict[str, Any] = sub_query_schema()


def core_sub_question_schema(limit: int) -> dict[str, Any]:
    return {
        "title": "core_sub_questions",
        "type": "object",
        "properties": {"sub_questions": {**_STR_LIST, "minItems": 1, "maxItems": limit}},
        "required": ["sub_questions"],
        "additionalProperties": False,
    }


def debate_schema(limit: int = MAX_SUB_QUERIES) -> dict[str, Any]:
    """The debate plan: a topic and 2 to ``limit`` perspectives, one sub-query each."""
    return {
        "title": "debate_plan",
        "type": "object",
        "properties": {
            "debate_topic": {"type": "string", "minLength": 1},
            "dist_opinion": {**_STR_LIST, "minItems": MIN_SUB_QUERIES, "maxItems": limit},
            "sub_queries": {
                "type": "object",
                # Free keys (one per perspective); the 2-5 bound is checked by the parser,
                # since not every grammar backend supports min/maxProperties.
                "additionalProperties": {"type": "string", "minLength": 1},
            },
        },
        "required": ["debate_topic", "dist_opinion", "sub_queries"],
        "additionalProperties": False,
    }


DEBATE_SCHEMA: dict[str, Any] = debate_schema()


# --- Extracting JSON from model text ---------------------------------------------------

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


def _norm_key(key: str) -> str:
    return re.sub(r"[^a-z]", "", key.lower())


def _get(obj: dict[str, Any], *names: str) -> Any:
    """A field by any of ``names``, ignoring case, ``-``/``_`` and spaces."""
    wanted = {_norm_key(n) for n in names}
    for key, value in obj.items():
        if isinstance(key, str) and _norm_key(key) in wanted:
            return value
    return None


def _only_list(obj: dict[str, Any]) -> list[Any] | None:
    lists = [v for v in obj.values() if isinstance(v, list)]
    return lists[0] if len(lists) == 1 else None


# Template words a weak model copies from the output format instead of planning.
_PLACEHOLDER = re.compile(
    r"^(sub[-_ ]?quer(y|ies)|quer(y|ies)|keywords?|phrase|perspectives?|opinion|topic|"
    r"string|item|\.\.\.|…)\s*\d*$",
    re.IGNORECASE,
)


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
        if not text or text.lower() in seen or _PLACEHOLDER.match(text):
            continue
        seen.add(text.lower())
        out.append(text)
        if len(out) == limit:
            break
    return out


def _string_list(value: Any, what: str, minimum: int, limit: int) -> list[str]:
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list):
        raise PlanError(f"{what} is missing or not a list")
    items = clean_strings(value, limit)
    if len(items) < minimum:
        raise PlanError(f"{what} has {len(items)} usable entries, need at least {minimum}")
    return items


def _as_bool(value: Any) -> bool | None:
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.strip().lower() in {"true", "yes", "1"}:
        return True
    if isinstance(value, str) and value.strip().lower() in {"false", "no", "0"}:
        return False
    return None


def _compare_type(value: Any) -> str | None:
    if not isinstance(value, str):
        return None
    word = value.strip().lower()
    for name in COMPARE_TYPES:
        if word == name or word.startswith(name[:7]):  # "difference", "similarity", "superior"
            return name
    return None


# --- Parsers ---------------------------------------------------------------------------


def parse_comparison(text: str) -> ComparisonPlan:
    data = extract_json(text)
    if isinstance(data, list):  # bare keyword list: the model skipped the other fields
        return ComparisonPlan(
            True, "differences", _string_list(data, "keywords_list", 1, MAX_KEYWORDS)
        )
    if not isinstance(data, dict):
        raise PlanError("comparison plan is not an object")
    is_compare = _as_bool(_get(data, "is_compare", "compare"))
    raw_type = _get(data, "compare_type", "comparison_type", "type")
    keywords_raw = _get(data, "keywords_list", "keywords", "items")
    if is_compare is None:
        if keywords_raw is None:
            raise PlanError("comparison plan has no is_compare and no keywords_list")
        is_compare = True
    if not is_compare:
        return ComparisonPlan(False, _compare_type(raw_type) or "", [])
    compare_type = _compare_type(raw_type)
    if compare_type is None:
        if raw_type not in (None, ""):
            raise PlanError(f"unknown compare_type {raw_type!r}")
        compare_type = "differences"
    return ComparisonPlan(
        True, compare_type, _string_list(keywords_raw, "keywords_list", 1, MAX_KEYWORDS)
    )


def parse_keywords(text: str) -> KeywordPlan:
    data = extract_json(text)
    if isinstance(data, dict):
        value = _get(data, "keywords", "keyword", "keywords_list")
        data = value if value is not None else _only_list(data)
    return KeywordPlan(_string_list(data, "keywords", 1, MAX_KEYWORDS))


def parse_sub_queries(text: str, limit: int = MAX_SUB_QUERIES) -> DecompositionPlan:
    """2 to ``limit`` sub-queries; extra ones are cut (the first are kept)."""
    data = extract_json(text)
    if isinstance(data, dict):
        value = _get(data, "sub_queries", "subqueries", "queries", "multiple_sub_queries")
        data = value if value is not None else _only_list(data)
    return DecompositionPlan(_string_list(data, "sub_queries", MIN_SUB_QUERIES, limit))


def parse_core_sub_questions(text: str, limit: int = MAX_SUB_QUERIES) -> DecompositionPlan:
    """1 to ``limit`` core sub-questions (any of the sub-query key spellings)."""
    data = extract_json(text)
    if isinstance(data, dict):
        value = _get(data, "sub_questions", "subquestions", "core", "sub_queries", "questions")
        data = value if value is not None else _only_list(data)
    return DecompositionPlan(_string_list(data, "sub_questions", 1, limit))


def parse_debate(text: str, limit: int = MAX_SUB_QUERIES) -> DebatePlan:
    """Topic and 2 to ``limit`` perspectives with their sub-queries."""
    data = extract_json(text)
    if not isinstance(data, dict):
        raise PlanError("debate plan is not an object")
    topic = _get(data, "debate_topic", "topic")
    topic = " ".join(topic.split()) if isinstance(topic, str) else ""
    opinions_raw = _get(data, "dist_opinion", "opinions", "perspectives")
    opinions = (
        clean_strings(opinions_raw, MAX_SUB_QUERIES * 2) if isinstance(opinions_raw, list) else []
    )
    queries = _get(data, "sub_queries", "subqueries", "queries")

    pairs: list[tuple[str, str]] = []
    if isinstance(queries, dict):
        by_key = {_norm_key(str(k)): v for k, v in queries.items()}
        items = list(queries.items())
        if opinions:
            for i, op in enumerate(opinions):
                q = queries.get(op, by_key.get(_norm_key(op)))
                if q is None and len(items) == len(opinions):
                    q = items[i][1]  # keys renamed by the model; match by position
                pairs.append((op, q if isinstance(q, str) else ""))
        else:
            pairs = [(str(k), v if isinstance(v, str) else "") for k, v in items]
    elif isinstance(queries, list):
        for i, item in enumerate(queries):
            if isinstance(item, dict):
                op = _get(item, "opinion", "perspective", "view")
                q = _get(item, "query", "sub_query")
                if not isinstance(op, str):
                    op = opinions[i] if i < len(opinions) else ""
                pairs.append((op, q if isinstance(q, str) else ""))
            elif isinstance(item, str) and i < len(opinions):
                pairs.append((opinions[i], item))
    else:
        raise PlanError("debate plan has no sub_queries")

    perspectives: list[Perspective] = []
    seen: set[str] = set()
    for op, q in pairs:
        op, q = " ".join(op.split()), " ".join(q.split())
        if not op or not q or q.lower() in seen or _PLACEHOLDER.match(q):
            continue
        seen.add(q.lower())
        perspectives.append(Perspective(op, q))
    perspectives = perspectives[:limit]
    if len(perspectives) < MIN_SUB_QUERIES:
        raise PlanError(
            f"debate plan has {len(perspectives)} usable perspectives with sub-queries, "
            f"need at least {MIN_SUB_QUERIES}"
        )
    return DebatePlan(topic, perspectives)


P = TypeVar("P")
Parser = Callable[[str], P]
