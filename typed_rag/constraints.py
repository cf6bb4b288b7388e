"""Coverage-conditioned questions: "explain X, but skip Y; I only want Z" (beyond the paper).

After QTREE/QPlanner (Jeong et al.), a question may carry an instruction to
include or exclude subtopics. Left in the question text, that instruction
pollutes retrieval (BM25 matches "recent trends" in "skip recent trends") and
the planners ignore it. Here an LLM call under a JSON schema splits the
question into its core and the two lists; then

- retrieval and planning use the core question;
- every plan is told the constraints, and its output is enforced: a sub-query,
  keyword or perspective that names an excluded subtopic is dropped, and an
  included subtopic that no sub-query covers gets one of its own;
- the final generation is told them in a section of its prompt.

Whether a subtopic is "named" is decided lexically (its content words, after
light stemming), which is cheap, deterministic and testable; the evaluation
judges compliance of the answer with an LLM instead.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from typed_rag import plan_examples
from typed_rag.json_reply import PlanError, clean_strings, extract_json, lookup
from typed_rag.messages import ANALYST_SYSTEM, Messages

MAX_TOPICS = 4

# Words that introduce an include/exclude instruction; "cue" mode asks the LLM
# only when one of them is present.
_CUE = re.compile(
    r"\b(skip|skipping|leave out|leaving out|omit|omitting|exclude|excluding|except|ignore|"
    r"ignoring|without|don'?t|do not|not interested|no need|only|just|focus|focusing|mainly|"
    r"mostly|especially|particularly|include|including|cover|covering|make sure|concentrate|"
    r"rather than|instead of|apart from|other than|besides)\b",
    re.IGNORECASE,
)

# Keys in the order the measured runs decoded them (llama.cpp sorted them until the
# key-order fix); the core question first is not measured.
CONSTRAINT_SCHEMA: dict[str, Any] = {
    "title": "coverage_constraints",
    "type": "object",
    "properties": {
        "exclude": {"type": "array", "items": {"type": "string"}, "maxItems": MAX_TOPICS},
        "include": {"type": "array", "items": {"type": "string"}, "maxItems": MAX_TOPICS},
        "question": {"type": "string", "minLength": 1},
    },
    "required": ["question", "include", "exclude"],
    "additionalProperties": False,
}
# The detector finds no constraint in the example (what the fake engine replays).
plan_examples.register(
    CONSTRAINT_SCHEMA["title"], json.dumps({"question": "", "include": [], "exclude": []})
)


@dataclass
class Constraints:
    """The core question and the subtopics the asker wants covered or left out."""

    question: str
    include: list[str] = field(default_factory=list)
    exclude: list[str] = field(default_factory=list)

    @property
    def empty(self) -> bool:
        return not self.include and not self.exclude

    def to_trace(self) -> dict[str, Any]:
        return {"question": self.question, "include": self.include, "exclude": self.exclude}


def has_cue(question: str) -> bool:
    """True when the question has words that usually introduce an include/exclude instruction."""
    return _CUE.search(question) is not None


def detection_messages(question: str) -> Messages:
    """Ask for the core question and the subtopics to include and to exclude."""
    user = (
        "Act as a query analyst. A question may come with an instruction about what the "
        "answer should cover, such as asking to skip a subtopic or to focus on one.\n"
        "1. Write the question alone, without that instruction.\n"
        "2. List the subtopics the asker explicitly wants covered (include).\n"
        "3. List the subtopics the asker explicitly wants left out (exclude).\n"
        "Use short noun phrases taken from the question. Leave a list empty when the asker "
        "said nothing of that kind; do not invent subtopics.\n\n"
        "### Output format\n"
        '{"question": "...", "include": ["subtopic", ...], "exclude": ["subtopic", ...]}\n\n'
        "### Example\n"
        'Question: "Explain generative AI, but skip the recent trends, I only want its '
        'history."\n'
        'Output: {"question": "Explain generative AI.", "include": ["history of generative '
        'AI"], "exclude": ["recent trends"]}\n\n'
        f"### Question\n{question}\n\n"
        "### Output\n"
    )
    return [{"role": "system", "content": ANALYST_SYSTEM}, {"role": "user", "content": user}]


def parse_constraints(text: str, original: str) -> Constraints:
    """The detector's JSON as :class:`Constraints`; :class:`PlanError` when it has no usable shape.

    A subtopic listed both ways is dropped from both (the asker's intent is
    unclear), and a missing core question falls back to the original text.
    """
    data = extract_json(text)
    if not isinstance(data, dict):
        raise PlanError("constraint output is not an object")
    lists: dict[str, list[str]] = {}
    for name in ("include", "exclude"):
        value = lookup(data, name, f"{name}d", f"{name}_topics", f"{name}_subtopics")
        if value is None:
            value = []
        if isinstance(value, str):
            value = [value]
        if not isinstance(value, list):
            raise PlanError(f"{name} is not a list")
        lists[name] = clean_strings(value, MAX_TOPICS)
    both = {t.lower() for t in lists["include"]} & {t.lower() for t in lists["exclude"]}
    include = [t for t in lists["include"] if t.lower() not in both]
    exclude = [t for t in lists["exclude"] if t.lower() not in both]
    core = lookup(data, "question", "core_question", "query")
    core = " ".join(core.split()) if isinstance(core, str) else ""
    return Constraints(core or original, include, exclude)


# --- Lexical matching ------------------------------------------------------------------

_STOP = frozenset(
    "a an the of in on at to for from by with and or its it's it their this that these those "
    "about into over under how what why which who is are was were be been being do does did "
    "any some all more most".split()
)
_WORD = re.compile(r"[a-z0-9]+")


def _stem(word: str) -> str:
    for suffix in ("ies", "es", "s", "ing", "ed", "al", "ly"):
        if len(word) > len(suffix) + 3 and word.endswith(suffix):
            return word[: -len(suffix)]
    return word


def content_words(text: str) -> set[str]:
    return {_stem(w) for w in _WORD.findall(text.lower()) if w not in _STOP}


def mentions(text: str, topic: str) -> bool:
    """Whether ``text`` names ``topic``: every content word of a short topic, or two
    thirds of a longer one's, appear in it."""
    want = content_words(topic)
    if not want:
        return False
    have = content_words(text)
    hits = len(want & have)
    return hits == len(want) if len(want) <= 2 else hits * 3 >= len(want) * 2


def named_in(text: str, topics: Sequence[str]) -> list[str]:
    return [t for t in topics if mentions(text, t)]


@dataclass
class Enforced:
    """A list of plan items after the constraints: kept, dropped and added items."""

    items: list[str]
    dropped: list[str] = field(default_factory=list)
    added: list[str] = field(default_factory=list)


def enforce(items: Sequence[str], c: Constraints, add_missing: bool = True) -> Enforced:
    """Drop items naming an excluded subtopic; add one per included subtopic none covers.

    An added item is the core question narrowed to the subtopic, which works
    as a search query. If every item would be dropped the core question is
    kept, so a plan never ends up empty.
    """
    kept = [q for q in items if not named_in(q, c.exclude)]
    dropped = [q for q in items if q not in kept]
    added: list[str] = []
    if add_missing:
        for topic in c.include:
            if not any(mentions(q, topic) for q in kept + added):
                added.append(f"{topic}: {c.question}")
    if not kept and not added:
        added.append(c.question)
    return Enforced(kept + added, dropped, added)


def instruction_note(c: Constraints) -> str:
    """The section that tells a planner or the generator what the asker wants covered."""
    lines = ["### The asker's coverage instructions"]
    if c.include:
        lines.append("Make sure to cover: " + "; ".join(c.include) + ".")
    if c.exclude:
        lines.append(
            "Leave out completely (do not discuss or mention): " + "; ".join(c.exclude) + "."
        )
    return "\n".join(lines)


def with_instructions(messages: Messages, c: Constraints | None) -> Messages:
    """``messages`` with the instruction section put before the prompt's closing heading.

    The prompts end with ``### Output`` or ``### Answer`` for the model to
    continue; the section goes just before that so it is read last.
    """
    if c is None or c.empty:
        return messages
    out = [dict(m) for m in messages]
    user = out[-1]
    content = user["content"]
    cut = content.rfind("### ")
    note = instruction_note(c) + "\n\n"
    user["content"] = content[:cut] + note + content[cut:] if cut >= 0 else content + "\n\n" + note
    return out
