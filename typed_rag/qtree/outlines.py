"""Candidate outlines: connected sets of QTREE nodes (Jeong et al., sec. 3.4.1).

An outline is a few sub-queries taken from the tree that keep its structure:
every node must be reachable from every other through parent-child links or
through siblings (nodes that share a parent), so "a viewpoint and two of its
details" is an outline and "two details from unrelated branches" is not. The
paper fixes the size at four and, when a parsed outline is larger, drops its
deepest leaves; both are done here, deterministically.

The LLM parses several outlines in one reply (sequential generation gave
more diverse candidates than sampling, the paper's appendix B). All follow
the *rule* (include or leave out the background node); only the first is
asked to follow the coverage instruction as well, so the judge sees a spread
of quality.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

from typed_rag.qtree.tree import QTree, TreeError, extract_json, node_sort_key, parent_of

Intent = Literal["include", "exclude"]
OUTLINE_SIZE = 4
N_CANDIDATES = 3


def outline_schema(
    n: int = N_CANDIDATES, size: int = OUTLINE_SIZE, node_ids: Sequence[str] | None = None
) -> dict[str, Any]:
    """``{"outlines": [[node id, ...], ...]}``: ``n`` lists of ``size`` ids (longer ones are trimmed).

    With the tree's ``node_ids`` an id must be one of them (an enum); otherwise any
    dotted number. The pattern spells digits as ``[0-9]``: llama.cpp's schema-to-grammar
    converter rejects ``\\d`` ("unknown escape"), which made every outline request fail.
    """
    item: dict[str, Any] = (
        {"type": "string", "enum": list(node_ids)}
        if node_ids
        else {"type": "string", "pattern": r"^[0-9]+([.][0-9]+)*$"}
    )
    ids = {"type": "array", "items": item}
    return {
        "title": "qtree_outlines",
        "type": "object",
        "properties": {
            "outlines": {
                "type": "array",
                "items": {**ids, "minItems": size, "maxItems": size + 2},
                "minItems": n,
                "maxItems": n,
            }
        },
        "required": ["outlines"],
        "additionalProperties": False,
    }


def _neighbours(a: str, b: str) -> bool:
    """Parent and child, or siblings: the links an outline may use."""
    return parent_of(a) == b or parent_of(b) == a or parent_of(a) == parent_of(b)


def is_connected(ids: Sequence[str]) -> bool:
    """Whether the nodes form one piece through parent-child and sibling links."""
    if not ids:
        return False
    todo, seen = [ids[0]], {ids[0]}
    while todo:
        here = todo.pop()
        for other in ids:
            if other not in seen and _neighbours(here, other):
                seen.add(other)
                todo.append(other)
    return len(seen) == len(set(ids))


def trim(ids: Sequence[str], size: int = OUTLINE_SIZE) -> list[str]:
    """Drop the deepest leaf (last in pre-order among the deepest) until ``size`` remain,
    never disconnecting the outline; fewer than ``size`` nodes are returned as they are."""
    out = sorted(dict.fromkeys(ids), key=node_sort_key)
    while len(out) > size:
        leaves = [n for n in out if not any(parent_of(m) == n for m in out)]
        leaves.sort(key=lambda n: (n.count("."), node_sort_key(n)), reverse=True)
        for leaf in leaves:
            rest = [n for n in out if n != leaf]
            if is_connected(rest):
                out = rest
                break
        else:
            break
    return out


def follows_rule(ids: Sequence[str], background: str, intent: Intent) -> bool:
    """Include: the background node is in. Exclude: neither it nor anything below it is."""
    if intent == "include":
        return background in ids
    return not any(n == background or n.startswith(background + ".") for n in ids)


@dataclass(frozen=True)
class Outline:
    """Node ids in pre-order; ``queries(tree)`` gives their sub-queries."""

    ids: tuple[str, ...]

    def queries(self, tree: QTree) -> list[str]:
        return [tree.text(n) for n in self.ids]


def check_outline(
    raw: Any,
    tree: QTree,
    background: str | None = None,
    intent: Intent | None = None,
    size: int = OUTLINE_SIZE,
) -> Outline:
    """One parsed outline after the paper's quality checks; :class:`TreeError` says what failed.

    Ids may come as "1.2" or "1.2. text" (the number is what counts).
    """
    if not isinstance(raw, list):
        raise TreeError("an outline is not a list")
    ids: list[str] = []
    for item in raw:
        head = str(item).strip().split()[0].rstrip(".") if str(item).strip() else ""
        if head not in tree:
            raise TreeError(f"outline names an unknown node {item!r}")
        ids.append(head)
    if len(set(ids)) != len(ids):
        raise TreeError("outline repeats a node")
    if len(ids) < size:
        raise TreeError(f"outline has {len(ids)} nodes, wants {size}")
    if not is_connected(ids):
        raise TreeError("outline is not connected in the tree")
    ids = trim(ids, size)
    if len(ids) != size:
        raise TreeError("outline cannot be trimmed to size while connected")
    if background is not None and intent is not None and not follows_rule(ids, background, intent):
        raise TreeError(f"outline does not {intent} node {background}")
    return Outline(tuple(ids))


def parse_outlines(
    text: str,
    tree: QTree,
    background: str | None,
    intent: Intent | None,
    n: int = N_CANDIDATES,
    size: int = OUTLINE_SIZE,
) -> list[Outline]:
    """``n`` distinct valid outlines from the parser's reply, or :class:`TreeError`."""
    data = extract_json(text)
    raw = data.get("outlines") if isinstance(data, dict) else data
    if not isinstance(raw, list) or len(raw) < n:
        raise TreeError(f"reply has fewer than {n} outlines")
    out = [check_outline(r, tree, background, intent, size) for r in raw[:n]]
    if len({o.ids for o in out}) != len(out):
        raise TreeError("two outlines are the same")
    return out
