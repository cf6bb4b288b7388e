"""Two-turn conversations from Wiki-NFQA questions, and how well follow-ups are made standalone.

The set is built deterministically: a Wiki-NFQA question of the form "what
is the <head> of <subject>?" opens the conversation (answered by its first
reference answer), then a follow-up asks about the subject through a
pronoun ("Why is it important?"). The intended standalone question puts the
subject back ("Why is the Katha Upanishad important?").

A rewrite is judged *resolved* when it names the subject (every content word
of it) and keeps the follow-up's intent (its key words): a lexical judge,
cheap and repeatable, that does not reward fluent but wrong rewrites.
"""

from __future__ import annotations

import json
import logging
import math
import re
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from difflib import SequenceMatcher
from pathlib import Path
from typing import Any

from typed_rag.conversation import Turn

log = logging.getLogger(__name__)

# (follow-up, intended standalone with {s}, intent words the rewrite must keep)
FOLLOW_UPS: tuple[tuple[str, str, tuple[str, ...]], ...] = (
    ("Why is it important?", "Why is {s} important?", ("important",)),
    ("What is its history?", "What is the history of {s}?", ("history",)),
    ("How has it changed over time?", "How has {s} changed over time?", ("changed", "time")),
    (
        "What are the main criticisms of it?",
        "What are the main criticisms of {s}?",
        ("criticisms",),
    ),
    ("Where does it come from?", "Where does {s} come from?", ("come",)),
    (
        "What are its advantages and disadvantages?",
        "What are the advantages and disadvantages of {s}?",
        ("advantages", "disadvantages"),
    ),
)

_PATTERN = re.compile(
    r"^(?:what|which) (?:is|are|was|were) (?:the |a |an )?(?P<head>[a-z]+(?: [a-z]+)?) "
    r"(?:of|in) (?P<subject>[a-z][a-z' -]*?)\s*\??$",
    re.IGNORECASE,
)
_ARTICLE = re.compile(r"^(?:the|a|an) ", re.IGNORECASE)
STOP = frozenset(
    "a an the of in on for to and or is are was were be it its this that what which why how "
    "does do did has have with by from about".split()
)
VERBS = frozenset("called used made known mean means named said".split())
ANSWER_CHARS = 300


@dataclass(frozen=True)
class Conversation:
    """One two-turn conversation and the standalone question its follow-up intends."""

    id: str
    source_id: str
    subject: str
    turns: list[dict[str, str]]  # user, assistant, user (the follow-up)
    intended: str
    intent: list[str]

    def history(self) -> list[Turn]:
        return [Turn(t["role"], t["content"]) for t in self.turns[:-1]]

    @property
    def follow_up(self) -> str:
        return self.turns[-1]["content"]


def subject_of(question: str) -> str | None:
    """The subject of a "what is the X of <subject>" question (1-4 words), else None.

    The article is kept ("the baptist church"), so the intended question reads well.
    """
    match = _PATTERN.match(question.strip())
    if match is None:
        return None
    if any(w.endswith("est") for w in match.group("head").lower().split()):
        return None  # "the smallest country in the world": "it" is the answer, not the world
    subject = match.group("subject").strip(" '-")
    words = _ARTICLE.sub("", subject).split()
    if not 1 <= len(words) <= 4 or words[0].lower() in STOP or words[-1].lower() in STOP:
        return None
    if any(w.lower() in VERBS for w in words):
        return None  # "the liquid in a coconut called": not a noun phrase
    last = words[-1].lower()
    if last.endswith("s") and not last.endswith(("ss", "us", "is")):
        return None  # plural: "it" would not refer to it
    return subject


def interleave(records: Sequence[Any]) -> list[Any]:
    """Records taken one subset at a time, round robin (file order within a subset)."""
    by_subset: dict[str, list[Any]] = {}
    for record in records:
        by_subset.setdefault(record.subset, []).append(record)
    queues = [list(rows) for rows in by_subset.values()]
    out = []
    while any(queues):
        for rows in queues:
            if rows:
                out.append(rows.pop(0))
    return out


def build_conversations(records: Sequence[Any], n: int) -> list[Conversation]:
    """The first ``n`` records with a subject (subsets in turn), follow-up templates in turn."""
    out: list[Conversation] = []
    for record in interleave(records):
        subject = subject_of(record.question)
        if subject is None:
            continue
        follow_up, intended, intent = FOLLOW_UPS[len(out) % len(FOLLOW_UPS)]
        answer = " ".join(record.answers[0].split()) if record.answers else ""
        if len(answer) > ANSWER_CHARS:
            answer = answer[:ANSWER_CHARS].rsplit(" ", 1)[0] + " ..."
        question = record.question.strip()
        if not question.endswith("?"):
            question += "?"
        out.append(
            Conversation(
                id=f"conv-{len(out) + 1:03d}",
                source_id=record.question_id,
                subject=subject,
                turns=[
                    {"role": "user", "content": question[0].upper() + question[1:]},
                    {"role": "assistant", "content": answer},
                    {"role": "user", "content": follow_up},
                ],
                intended=_capitalised(intended.format(s=subject)),
                intent=list(intent),
            )
        )
        if len(out) >= n:
            break
    return out


def _capitalised(text: str) -> str:
    return text[0].upper() + text[1:]


def write_conversations(path: Path, conversations: Sequence[Conversation]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w") as f:
        for conv in conversations:
            f.write(json.dumps(asdict(conv), ensure_ascii=False) + "\n")


def read_conversations(path: Path) -> list[Conversation]:
    return [Conversation(**json.loads(line)) for line in path.read_text().splitlines() if line]


def _words(text: str) -> set[str]:
    out = set()
    for word in re.findall(r"[a-z0-9']+", text.lower()):
        word = word.strip("'")
        if word.endswith("'s"):
            word = word[:-2]
        if word and word not in STOP:
            out.add(word[:-1] if word.endswith("s") and len(word) > 3 else word)
    return out


def _has(word: str, words: set[str]) -> bool:
    """``word`` or a spelling variant of it (defence/defense: one edit in 5+ letters)."""
    if word in words:
        return True
    return len(word) >= 5 and any(
        abs(len(w) - len(word)) <= 1 and SequenceMatcher(None, w, word).ratio() >= 0.85
        for w in words
    )


def resolved(rewrite: str, conv: Conversation, *, lenient: bool = False) -> bool:
    """The rewrite names the subject (every content word; ``lenient``: its last one,
    e.g. "colcannon" for "the Irish dish colcannon") and keeps the intent words."""
    got = _words(rewrite)
    subject = [w for w in re.findall(r"[a-z0-9']+", conv.subject.lower()) if w not in STOP]
    named = _words(subject[-1]) if lenient and subject else _words(conv.subject)
    needed = named | _words(" ".join(conv.intent))
    return all(_has(w, got) for w in needed)


def wilson(k: int, n: int, z: float = 1.96) -> tuple[float, float]:
    """95% Wilson interval of a share ``k/n``."""
    if n == 0:
        return 0.0, 0.0
    p = k / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return max(0.0, centre - half), min(1.0, centre + half)


async def evaluate(
    rag: Any,
    conversations: Sequence[Conversation],
    on_row: Callable[[dict[str, Any]], None] | None = None,
) -> dict[str, Any]:
    """Rewrite each follow-up with ``rag`` and judge it; returns the summary and the rows.

    ``on_row(report so far)`` is called after each conversation (a slow CPU run
    can be stopped and still leaves its rows).
    """
    rows: list[dict[str, Any]] = []
    for i, conv in enumerate(conversations, 1):
        t0 = time.perf_counter()
        info = await rag.rewrite(conv.follow_up, conv.history())
        rewrite = info.get("question", conv.follow_up)
        rows.append(
            {
                "id": conv.id,
                "follow_up": conv.follow_up,
                "intended": conv.intended,
                "rewrite": rewrite,
                "rewritten": bool(info.get("rewritten")),
                "skipped": info.get("skipped"),
                "resolved": resolved(rewrite, conv),
                "resolved_lenient": resolved(rewrite, conv, lenient=True),
                "latency_s": round(time.perf_counter() - t0, 3),
            }
        )
        log.info(
            "conversation %d/%d %s: %r -> %r (%s)",
            i,
            len(conversations),
            conv.id,
            conv.follow_up,
            rewrite,
            "resolved" if rows[-1]["resolved"] else "not resolved",
        )
        if on_row is not None:
            on_row(summarise(rows))
    return summarise(rows)


def summarise(rows: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """The share of resolved rewrites (with its 95% interval) and the rows."""
    rows = list(rows)
    n = len(rows)
    k = sum(r["resolved"] for r in rows)
    lenient = sum(r.get("resolved_lenient", r["resolved"]) for r in rows)
    low, high = wilson(k, n)
    latencies = sorted(r["latency_s"] for r in rows)
    summary = {
        "n": n,
        "resolved": k,
        "resolved_share": round(k / n, 4) if n else 0.0,
        "resolved_ci95": [round(low, 4), round(high, 4)],
        "resolved_lenient": lenient,
        "resolved_lenient_share": round(lenient / n, 4) if n else 0.0,
        "rewritten": sum(r["rewritten"] for r in rows),
        "skipped": sum(r["skipped"] is not None for r in rows),
        "median_latency_s": latencies[n // 2] if n else 0.0,
        "judge": "lexical: the rewrite names every content word of the subject and keeps "
        "the follow-up's intent words",
    }
    return {"summary": summary, "rows": rows}
