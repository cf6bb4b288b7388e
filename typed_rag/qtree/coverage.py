"""Coverage instructions from one background sub-query and one intent (Jeong et al., sec. 3.3.3).

A user who asks to include or leave out a subtopic knows that subtopic
exists; so the instruction is written about one node of the question's own
tree (the *background* sub-query) and one intent, include or exclude. The
node and the intent are drawn from a seed per question, so a rebuild picks
the same ones; the LLM only words the request (several variants in one
call), and the conditioned question is the question followed by one of them.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Any, get_args

from typed_rag.qtree.outlines import Intent
from typed_rag.qtree.tree import QTree, TreeError, extract_json

N_INSTRUCTIONS = 5
MAX_INSTRUCTION_CHARS = 400
INTENTS: tuple[str, ...] = get_args(Intent)


def instruction_schema(n: int = N_INSTRUCTIONS) -> dict[str, Any]:
    return {
        "title": "coverage_instructions",
        "type": "object",
        "properties": {
            "instructions": {
                "type": "array",
                "items": {"type": "string", "minLength": 1, "maxLength": MAX_INSTRUCTION_CHARS},
                "minItems": n,
                "maxItems": n,
            }
        },
        "required": ["instructions"],
        "additionalProperties": False,
    }


def parse_instructions(text: str, n: int = N_INSTRUCTIONS) -> list[str]:
    """Distinct non-empty instructions (``&&``-separated text is accepted too); at least one."""
    try:
        data = extract_json(text)
        items = data.get("instructions") if isinstance(data, dict) else data
    except TreeError:
        items = text.split("&&") if "&&" in text else None
    if not isinstance(items, list):
        raise TreeError("no list of instructions")
    out = [" ".join(s.split())[:MAX_INSTRUCTION_CHARS] for s in items if isinstance(s, str)]
    out = list(dict.fromkeys(s for s in out if s))
    if not out:
        raise TreeError("no instruction")
    return out[:n]


@dataclass(frozen=True)
class Background:
    """The node the instruction is about and whether the asker wants it in or out."""

    node: str
    intent: Intent


def draw_background(tree: QTree, seed: int, question_id: str) -> Background:
    """A node and an intent, uniformly and reproducibly per (seed, question)."""
    rng = random.Random(f"{seed}\t{question_id}")
    node = rng.choice(list(tree.nodes))
    intent: Intent = rng.choice(INTENTS)  # type: ignore[assignment]
    return Background(node, intent)


def conditioned_question(question: str, instruction: str) -> str:
    """The C2 query: the base question followed by the coverage instruction."""
    q = question.strip()
    if q and q[-1] not in ".?!":
        q += "?"
    return f"{q} {instruction.strip()}"
