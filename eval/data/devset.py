"""Development questions that do not spend Wiki-NFQA (issue 64's protocol): ``eval devset``.

Every method option so far was chosen on Wiki-NFQA questions, so its typed subset no longer
tells whether a change generalises. The development set is written instead from corpus
passages by the local model, in the graded format of ``eval run --data``
(:mod:`eval.data.graded`):

- passages are sampled with a seed from the Wikipedia collection, one per article, never
  from an article that BM25 ranks in the top 20 for any Wiki-NFQA question (so no dev
  question is about what a Wiki-NFQA question asks about);
- each passage gets one question of a non-factoid type, the types taken in turn, so the set
  is balanced by type and each question routes by its ``type``;
- its references are graded by how they were made, not by a judge: 3 a complete answer
  written from the passage, 2 a one-sentence answer from the passage (right but partial),
  1 a short reply written without the passage (asked to stay vague; the model's own view,
  often generic, sometimes wrong), 0 the grade-3 answer of another question of the same
  batch (off topic).

References written by the model that also answers favour answers in its own style (the
same self-preference the 1.5B judge has); the set is for comparing two variants of the
method, both answered by that model, not for comparing against other systems.

Over a document collection (``eval devset --collection NAME``, issue 77's faithfulness set)
the passages are pages of documentation (:data:`DOCUMENTATION`: how-to, why, comparison,
should-I and how-does-it-work questions), and questions written from a collection the
answers are *not* searched in (``--unanswerable-from``) are marked ``"answerable": false``:
the collection cannot answer them, and an answer should say so.
"""

from __future__ import annotations

import random
import re
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from typed_rag.engines.base import ChatRequest, ChatResult
from typed_rag.retrieval.store import PassageStore

TYPES = ("REASON", "INSTRUCTION", "COMPARISON", "EVIDENCE-BASED", "EXPERIENCE", "DEBATE")
QUESTION_ASKS = {
    "REASON": "a question starting with 'Why' about a cause or reason the passage explains",
    "INSTRUCTION": "a question starting with 'How can' or 'How do' that asks for the way or "
    "the steps to do something the passage describes",
    "COMPARISON": "a question asking how two things the passage names differ or compare",
    "EVIDENCE-BASED": "a question asking what something the passage describes is, or how it "
    "works (not a yes/no question, not asking for one name, number or date)",
    "EXPERIENCE": "a question asking for advice or a recommendation that a person interested "
    "in the passage's subject could ask (for example 'What should I know before ...?')",
    "DEBATE": "a question about the passage's subject on which reasonable people disagree "
    "(for example 'Is ... a good idea?' or 'Should ...?')",
}
QUESTION_PROMPT = (
    "Here is a passage from {what} titled {title!r}.\n\n{text}\n\n"
    "Write {ask}. A reader who has not seen the passage must understand it, so name the "
    "subject instead of saying 'the passage' or 'the text'. Reply with the question only."
)
FULL_PROMPT = (
    "Passage ({title}):\n{text}\n\nQuestion: {question}\n\n"
    "Answer the question in 3 to 5 sentences, completely and accurately, using the passage: "
    "cover each part of the question and explain it. Do not mention the passage."
)
PARTIAL_PROMPT = (
    "Passage ({title}):\n{text}\n\nQuestion: {question}\n\n"
    "Answer the question in one short sentence using the passage, giving only its main point. "
    "Do not mention the passage."
)
VAGUE_PROMPT = (
    "Question: {question}\n\nReply in one or two sentences that stay on the question's topic "
    "but give no specific facts, names, numbers or reasons."
)
# Questions that point at text the reader has not seen: "the passage", "the given code
# snippet", "the above example", "this section".
_NOT_STANDALONE = re.compile(
    r"\b(?:(?:the|this) (?:passage|excerpt|snippet|code snippet)|this text"
    r"|the (?:given|above|following|provided) \w+"
    r"|this (?:article|document|section|code|example))\b",
    re.IGNORECASE,
)
_LABEL = re.compile(r"^\s*(question|answer|reply)\s*:\s*", re.IGNORECASE)

Generate = Callable[[list[ChatRequest]], Awaitable[list[ChatResult]]]


@dataclass(frozen=True)
class Corpus:
    """What the sampled passages are, as the question prompt names them, and what is asked."""

    what: str
    types: tuple[str, ...]
    asks: Mapping[str, str]


WIKIPEDIA = Corpus("an encyclopedia article", TYPES, QUESTION_ASKS)
DOCUMENTATION = Corpus(
    "a page of software documentation",
    ("INSTRUCTION", "REASON", "COMPARISON", "DEBATE", "EVIDENCE-BASED"),
    {
        **QUESTION_ASKS,
        "COMPARISON": "a question asking how two commands, options, functions or approaches "
        "the passage names differ or compare",
        "DEBATE": "a question asking whether a user should use, choose or avoid something the "
        "passage discusses (for example 'Should I use ... or ...?')",
    },
)


@dataclass(frozen=True)
class Source:
    """A sampled corpus passage and the question type it is written for."""

    passage_id: str
    title: str
    text: str
    type: str
    answerable: bool = True  # False: written from passages the answers are not searched in


def sample_sources(
    store: PassageStore,
    n: int,
    seed: int,
    excluded_titles: set[str],
    min_words: int = 80,
    types: Sequence[str] = TYPES,
) -> list[Source]:
    """``n`` passages in a seeded order, one per article, none from ``excluded_titles``;
    the i-th gets type ``types[i % len(types)]``."""
    order = list(range(len(store)))
    random.Random(seed).shuffle(order)
    picked: list[Source] = []
    titles: set[str] = set()
    for doc in order:
        pid, title, text = store.get(doc)
        if title in titles or title in excluded_titles or len(text.split()) < min_words:
            continue
        titles.add(title)
        picked.append(Source(pid, title, text, types[len(picked) % len(types)]))
        if len(picked) == n:
            break
    return picked


def record_id(source: Source) -> str:
    """The id of the question written from ``source`` (one place, for writing and resuming)."""
    return f"dev-{source.passage_id}"


def _request(prompt: str) -> ChatRequest:
    return ChatRequest(
        messages=[{"role": "user", "content": prompt}], temperature=0.0, max_tokens=200, seed=42
    )


def clean_question(text: str) -> str | None:
    """The first line of a reply as a question, or None where it is not a stand-alone one."""
    lines = [line.strip() for line in text.strip().splitlines() if line.strip()]
    question = _LABEL.sub("", lines[0]).strip(" \"'*") if lines else ""
    if not question.endswith("?") or _NOT_STANDALONE.search(question):
        return None
    return question


def clean_reference(text: str) -> str:
    """A reference reply without a leading 'Answer:' label."""
    return _LABEL.sub("", text.strip()).strip()


async def write_batch(
    generate: Generate, sources: Sequence[Source], corpus: Corpus = WIKIPEDIA
) -> list[dict[str, Any]]:
    """Graded records for one batch of sources (those whose question came out usable).

    The batch is the unit of resumption and of the grade-0 references: each record's
    grade-0 reference is the next record's grade-3 answer, so a batch needs two records. A
    question from a source the answers are not searched in gets no references (one engine
    call instead of two rounds): what it measures is whether the answer declines.
    """
    asked = await generate(
        [
            _request(
                QUESTION_PROMPT.format(
                    what=corpus.what, title=s.title, text=s.text, ask=corpus.asks[s.type]
                )
            )
            for s in sources
        ]
    )
    kept = [(s, q) for s, r in zip(sources, asked, strict=True) if (q := clean_question(r.text))]
    # a question the collection cannot answer is measured by its decline, not ranked
    outside = [_record(s, q, []) for s, q in kept if not s.answerable]
    kept = [(s, q) for s, q in kept if s.answerable]
    if len(kept) < 2:
        return outside
    prompts = []
    for s, q in kept:
        shown = {"title": s.title, "text": s.text, "question": q}
        prompts += [
            FULL_PROMPT.format(**shown),
            PARTIAL_PROMPT.format(**shown),
            VAGUE_PROMPT.format(question=q),
        ]
    replies = [clean_reference(r.text) for r in await generate([_request(p) for p in prompts])]
    records = []
    for i, (s, q) in enumerate(kept):
        full, partial, vague = replies[3 * i : 3 * i + 3]
        other = replies[3 * ((i + 1) % len(kept))]
        grades = [
            {"grade": g, "text": t}
            for g, t in zip((3, 2, 1, 0), (full, partial, vague, other), strict=True)
        ]
        records.append(_record(s, q, grades))
    return [r for r in records if all(ref["text"] for ref in r["references"])] + outside


def _record(source: Source, question: str, references: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "id": record_id(source),
        "question": question,
        "subset": "dev",
        "type": source.type,
        "passage_id": source.passage_id,
        "title": source.title,
        **({"references": references} if references else {}),
        **({} if source.answerable else {"answerable": False}),
    }


def batches(sources: Sequence[Source], size: int, done: Iterable[str]) -> list[list[Source]]:
    """The batches of ``size`` sources (in order) that hold no source already written."""
    written = set(done)
    out = []
    for start in range(0, len(sources), size):
        batch = list(sources[start : start + size])
        if not any(record_id(s) in written for s in batch):
            out.append(batch)
    return out
