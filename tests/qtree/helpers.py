"""A scripted QTREE world for the fake engine: trees, instructions and outlines by schema title."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import Any

from typed_rag.engines.base import ChatRequest, ChoiceRequest


def tree_dict(topic: str = "tea", width: int = 3, depth: int = 3) -> dict[str, Any]:
    """A valid tree in the schema's shape, with distinct questions that name their node."""

    def level(prefix: str, d: int) -> list[Any]:
        out: list[Any] = []
        for i in range(1, width + 1):
            node = f"{prefix}.{i}" if prefix else str(i)
            text = f"What about {topic} aspect {node}?"
            out.append(text if d == depth else {"question": text, "children": level(node, d + 1)})
        return out

    return {"subqueries": level("", 1)}


OUTLINES = {
    "outlines": [
        ["1", "1.1", "1.1.1", "1.1.2"],
        ["2", "2.1", "2.2", "2.3"],
        ["3", "3.1", "3.1.1", "3.1.2"],
    ]
}
INSTRUCTIONS = {"instructions": [f"Please tell me about part {i}." for i in range(5)]}


def qtree_responder(
    tree: Mapping[str, Any] | str | None = None,
    instructions: Mapping[str, Any] | str | None = None,
    outlines: Mapping[str, Any] | str | Callable[[ChatRequest], str] | None = None,
) -> Callable[[ChatRequest], str]:
    """Replies by schema title; strings are sent as they are (for malformed replies)."""

    def as_text(value: Any, default: Any, req: ChatRequest) -> str:
        if callable(value):
            return str(value(req))
        value = default if value is None else value
        return value if isinstance(value, str) else json.dumps(value)

    def respond(req: ChatRequest) -> str:
        title = (req.json_schema or {}).get("title")
        if title == "qtree":
            question = req.messages[-1]["content"].rsplit("Question:", 1)[-1].strip()
            return as_text(tree, tree_dict(question.split()[0] if question else "tea"), req)
        if title == "coverage_instructions":
            return as_text(instructions, INSTRUCTIONS, req)
        if title == "qtree_outlines":
            return as_text(outlines, OUTLINES, req)
        return "An answer [1]."

    return respond


def score_by_first_query(req: ChoiceRequest) -> dict[str, float]:
    """Judge: outline starting with aspect 1 scores 5, aspect 2 scores 3, else 1."""
    text = req.messages[-1]["content"]
    queries = text.split("Queries:\n", 1)[1]
    first = queries.splitlines()[0]
    if first.endswith("aspect 1?"):
        return {"5": 0.9, "4": 0.1}
    if first.endswith("aspect 2?"):
        return {"3": 0.8, "2": 0.2}
    return {"1": 1.0}


def _neighbours(a: str, b: str) -> bool:
    pa, pb = a.rpartition(".")[0], b.rpartition(".")[0]
    return pa == b or pb == a or pa == pb


def connected_sets(
    ids: list[str], size: int, must: str | None, banned: str | None, n: int
) -> list[list[str]]:
    """``n`` connected ``size``-sets of ``ids`` that contain ``must`` and avoid ``banned``'s branch."""
    allowed = [i for i in ids if not (banned and (i == banned or i.startswith(banned + ".")))]
    level = [(s,) for s in ([must] if must else allowed)]
    for _ in range(size - 1):
        grown: dict[frozenset[str], tuple[str, ...]] = {}
        for group in level:
            for cand in allowed:
                if cand not in group and any(_neighbours(cand, g) for g in group):
                    grown.setdefault(frozenset((*group, cand)), (*group, cand))
        level = list(grown.values())
    # spread the picks over the candidates so they differ more than in one node
    step = max(1, len(level) // n)
    return [list(g) for g in level[::step][:n]]


def rule_following_outlines(req: ChatRequest) -> str:
    """Three valid outlines for the rule stated in the outline prompt."""
    import re

    user = req.messages[-1]["content"]
    ids = re.findall(r"^\s*(\d+(?:\.\d+)*)\. ", user.split("Tree:\n", 1)[1].split("\n\n")[0], re.M)
    m = re.search(
        r"it (must contain|must not contain \(nor anything below\)) node ([\d.]+)\.", user
    )
    must = m.group(2) if m and m.group(1) == "must contain" else None
    banned = m.group(2) if m and must is None else None
    return json.dumps({"outlines": connected_sets(ids, 4, must, banned, 3)})


def hashed_score(req: ChoiceRequest) -> dict[str, float]:
    """A deterministic judge: the score depends only on the outline's queries."""
    import hashlib

    queries = req.messages[-1]["content"].split("Queries:\n", 1)[1].split("\n\n")[0]
    score = int(hashlib.md5(queries.encode()).hexdigest(), 16) % 5 + 1
    return {str(score): 0.7, str(6 - score if score != 3 else 4): 0.3}
