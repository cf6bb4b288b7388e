"""Development questions that do not spend Wiki-NFQA (issue 64's protocol): ``eval devset``.

Every method option so far was chosen on Wiki-NFQA questions, so its typed subset no longer
tells whether a change generalises. The development set is written instead from corpus
passages by the local model, in the graded format of ``eval run --data``
(:mod:`eval.data.graded`):

- passages are sampled with a seed from the Wikipedia collection, one per article, never
  from an article that BM25 ranks in the top 20 for any Wiki-NFQA question (so no dev
  question is about what a Wiki-NFQA question asks about);
- each passage gets one question of a non-factoid type, the types taken in turn, so the set
  is balanced by type and each question routes by its ``type``; with a classifier to
  confirm it (``confirm``, the fine-tuned one over Wikipedia), a question the classifier
  does not give that type (confidently) is asked again, sampled with a new seed, and its
  passage is dropped after :data:`ATTEMPTS` tries, so a "DEBATE" question is one the
  server would route as DEBATE;
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

from typed_rag.classifier.base import TypePrediction
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
# The classifier's predictions for some questions (unsure ones marked not confident).
Confirm = Callable[[Sequence[str]], list[TypePrediction]]
# Tries per passage while the classifier disagrees with the type asked for: the first at
# temperature 0, the others sampled with a new seed each (the same prompt at temperature 0
# would write the same question again).
ATTEMPTS = 3
RETRY_TEMPERATURE = 0.8


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


def _request(prompt: str, attempt: int = 0) -> ChatRequest:
    return ChatRequest(
        messages=[{"role": "user", "content": prompt}],
        temperature=RETRY_TEMPERATURE if attempt else 0.0,
        max_tokens=200,
        seed=42 + attempt,
    )


def type_check(prediction: TypePrediction, asked: str, attempt: int) -> dict[str, Any] | None:
    """The record's ``type_check`` where the classifier confidently gives the type asked
    for, else None."""
    if prediction.type.value != asked or not prediction.confident:
        return None
    return {"predicted": asked, "probability": round(prediction.top_probability, 3),
            "attempt": attempt}  # fmt: skip


async def ask_questions(
    generate: Generate,
    sources: Sequence[Source],
    corpus: Corpus = WIKIPEDIA,
    confirm: Confirm | None = None,
) -> list[tuple[Source, str, dict[str, Any] | None]]:
    """Each source's stand-alone question (in source order), with its ``type_check`` where
    ``confirm`` is given; a source whose question is not stand-alone or not confirmed is
    asked again, up to :data:`ATTEMPTS` times, and left out after that."""
    found: dict[int, tuple[str, dict[str, Any] | None]] = {}
    pending = list(range(len(sources)))
    for attempt in range(ATTEMPTS if confirm else 1):
        if not pending:
            break
        replies = await generate(
            [_request(_question_prompt(sources[i], corpus), attempt) for i in pending]
        )
        asked = [
            (i, q) for i, r in zip(pending, replies, strict=True) if (q := clean_question(r.text))
        ]
        checks = confirm([q for _, q in asked]) if confirm and asked else []
        for n, (i, question) in enumerate(asked):
            check = type_check(checks[n], sources[i].type, attempt) if confirm else None
            if check is not None or not confirm:
                found[i] = (question, check)
        pending = [i for i in pending if i not in found]
    return [(sources[i], *found[i]) for i in sorted(found)]


def _question_prompt(source: Source, corpus: Corpus) -> str:
    return QUESTION_PROMPT.format(
        what=corpus.what, title=source.title, text=source.text, ask=corpus.asks[source.type]
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
    generate: Generate,
    sources: Sequence[Source],
    corpus: Corpus = WIKIPEDIA,
    confirm: Confirm | None = None,
) -> list[dict[str, Any]]:
    """Graded records for one batch of sources (those whose question came out usable).

    The batch is the unit of resumption and of the grade-0 references: each record's
    grade-0 reference is the next record's grade-3 answer, so a batch needs two records. A
    question from a source the answers are not searched in gets no references (one engine
    call instead of two rounds): what it measures is whether the answer declines.
    """
    kept = await ask_questions(generate, sources, corpus, confirm)
    # a question the collection cannot answer is measured by its decline, not ranked
    outside = [_record(s, q, [], c) for s, q, c in kept if not s.answerable]
    kept = [k for k in kept if k[0].answerable]
    if len(kept) < 2:
        return outside
    prompts = []
    for s, q, _ in kept:
        shown = {"title": s.title, "text": s.text, "question": q}
        prompts += [
            FULL_PROMPT.format(**shown),
            PARTIAL_PROMPT.format(**shown),
            VAGUE_PROMPT.format(question=q),
        ]
    replies = [clean_reference(r.text) for r in await generate([_request(p) for p in prompts])]
    records = []
    for i, (s, q, check) in enumerate(kept):
        full, partial, vague = replies[3 * i : 3 * i + 3]
        other = replies[3 * ((i + 1) % len(kept))]
        grades = [
            {"grade": g, "text": t}
            for g, t in zip((3, 2, 1, 0), (full, partial, vague, other), strict=True)
        ]
        records.append(_record(s, q, grades, check))
    return [r for r in records if all(ref["text"] for ref in r["references"])] + outside


def _record(
    source: Source,
    question: str,
    references: list[dict[str, Any]],
    check: dict[str, Any] | None = None,
) -> dict[str, Any]:
    return {
        "id": record_id(source),
        "question": question,
        "subset": "dev",
        "type": source.type,
        "passage_id": source.passage_id,
        "title": source.title,
        **({"references": references} if references else {}),
        **({} if source.answerable else {"answerable": False}),
        **({"type_check": check} if check else {}),
    }


def recheck(
    records: Sequence[dict[str, Any]], confirm: Confirm
) -> tuple[list[dict[str, Any]], list[str]]:
    """Records written before types were confirmed, checked now: those the classifier
    confirms (with their ``type_check``, attempt 0) and the ids of those it does not, whose
    passages are then asked again."""
    unchecked = [r for r in records if "type_check" not in r]
    checks = confirm([r["question"] for r in unchecked]) if unchecked else []
    verdicts = {
        str(r["id"]): type_check(p, r["type"], 0) for r, p in zip(unchecked, checks, strict=True)
    }
    kept, dropped = [], []
    for r in records:
        rid = str(r["id"])
        if rid not in verdicts:
            kept.append(r)
        elif (check := verdicts[rid]) is not None:
            kept.append({**r, "type_check": check})
        else:
            dropped.append(rid)
    return kept, dropped


def batches(sources: Sequence[Source], size: int, done: Iterable[str]) -> list[list[Source]]:
    """The sources (in order) whose id is not in ``done`` (written, or tried and dropped),
    in batches of ``size``."""
    skip = set(done)
    todo = [s for s in sources if record_id(s) not in skip]
    return [todo[start : start + size] for start in range(0, len(todo), size)]
