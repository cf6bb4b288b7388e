"""Set building: which questions, which subtopics, and the conditioned question.

Wiki-NFQA questions (non-factoid types first, spread over subsets and types)
get 3-4 subtopics from an LLM under a JSON schema; our code then picks, from a
seed, one subtopic to include and a different one to exclude, and writes the
conditioned question from fixed templates. The LLM never writes the
instruction, so every item is phrased the same way and the set can be rebuilt
exactly.
"""

from __future__ import annotations

import json
import random
import re
from collections import Counter, defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from eval.answer_coverage.parse import BAD_SHAPE, NO_JSON
from eval.constraints.topics import as_sentence, content_words, topics_overlap
from eval.data.labels import UNLABELLED, QuestionLabel, type_of
from eval.data.wikinfqa import SUBSETS, WikiNFQARecord
from eval.judging.resample import Parsed, generate_until_parsed
from typed_rag.engines.base import ChatRequest, Engine
from typed_rag.errors import UserError
from typed_rag.json_reply import extract_json
from typed_rag.types import QuestionType

# Parse failure reasons of set building (besides NO_JSON and BAD_SHAPE).
TOO_FEW = "too-few-subtopics"
OVERLAPPING = "overlapping-subtopics"

MIN_SUBTOPICS = 3
MAX_SUBTOPICS = 4
MAX_SUBTOPIC_WORDS = 10
MAX_SUBTOPIC_CHARS = 90
SUBTOPIC_MAX_TOKENS = 200
# Set building asks for at most this many candidates per wanted item, so a
# model that keeps failing costs a bounded number of calls.
CANDIDATE_FACTOR = 2
# Types that are not non-factoid questions: used only when nothing else is left.
FACTOID_LIKE = frozenset({QuestionType.FACTOID.value, QuestionType.NOT_A_QUESTION.value})

# Our own phrasings of "include X, exclude Y". Each carries an instruction cue
# (leave out / skip / only / do not) so the ``cue`` arm's detector is asked.
TEMPLATES: dict[str, str] = {
    "leave-out": "{q} Leave out {ex}; I mainly want {inc}.",
    "cover-skip": "{q} Please cover {inc}, but skip {ex}.",
    "focus-not": "{q} Focus on {inc} and do not go into {ex}.",
    "only-ignore": "{q} I only care about {inc}, so ignore {ex}.",
}

SYSTEM_PROMPT = (
    "You help build and grade evaluation data for a question-answering system. Reply in JSON only."
)


def compose_question(question: str, include: str, exclude: str, template: str) -> str:
    """The conditioned question for one template name of :data:`TEMPLATES`."""
    try:
        pattern = TEMPLATES[template]
    except KeyError:
        raise UserError(
            f"unknown constraint template {template!r}; expected one of: {', '.join(TEMPLATES)}"
        ) from None
    return pattern.format(q=as_sentence(question), inc=include, ex=exclude)


SUBTOPICS_SCHEMA: dict[str, Any] = {
    "title": "constraint_subtopics",
    "type": "object",
    "properties": {
        "subtopics": {
            "type": "array",
            "items": {"type": "string"},
            "minItems": MIN_SUBTOPICS,
            "maxItems": MAX_SUBTOPICS,
        }
    },
    "required": ["subtopics"],
}


def subtopics_messages(question: str) -> list[dict[str, str]]:
    user = (
        f"List {MIN_SUBTOPICS} or {MAX_SUBTOPICS} distinct subtopics that a thorough answer to "
        "the question below could discuss, each in a paragraph of its own: aspects such as "
        "background, causes, history, examples or consequences, never candidate answers to the "
        "question. Each subtopic is a short noun phrase (2 to 8 words) that makes sense on its "
        "own, because it will be used in an instruction such as 'skip <subtopic>'. The "
        "subtopics must not overlap with each other and none may just restate the whole "
        'question. Reply with one JSON object: {"subtopics": ["...", "..."]}.'
        f"\n\nQuestion: {as_sentence(question)}"
    )
    return [{"role": "system", "content": SYSTEM_PROMPT}, {"role": "user", "content": user}]


def _clean_topic(value: str) -> str:
    text = " ".join(value.split()).strip(" \t-*•\"'")
    text = re.sub(r"^\d+[.)]\s*", "", text)  # "1. history" -> "history"
    return text.rstrip(".;:,!?").strip()


def _sentence_case(topic: str, question: str) -> str:
    """ "Climate change" -> "climate change" (it goes mid-sentence), but a word capitalised in
    the question ("Mexico ...") or a run of capitalised words ("Roman Empire") is kept."""
    words = topic.split()
    first = words[0]
    if not (first[:1].isupper() and first[1:].islower()):
        return topic
    if len(words) > 1 and words[1][:1].isupper():
        return topic
    if re.search(rf"\b{re.escape(first)}\b", question):
        return topic
    return first.lower() + topic[len(first) :]


def parse_subtopics(text: str, question: str = "") -> Parsed[list[str]]:
    """``{"subtopics": [...]}`` (or a bare list): 3-4 distinct, short, usable noun phrases.

    Empty, overlong, duplicate (case-insensitive) entries and restatements of
    the question are dropped; fewer than three usable ones is a failure.
    """
    try:
        obj = extract_json(text)
    except ValueError:
        return Parsed(None, NO_JSON)
    if isinstance(obj, dict):
        obj = obj.get("subtopics")
    if not isinstance(obj, list) or not all(isinstance(x, str) for x in obj):
        return Parsed(None, BAD_SHAPE)
    q_words = set(content_words(question))
    out: list[str] = []
    for raw in obj:
        topic = _clean_topic(raw)
        words = content_words(topic)
        if words:
            topic = _sentence_case(topic, question)
        if not words or len(topic.split()) > MAX_SUBTOPIC_WORDS or len(topic) > MAX_SUBTOPIC_CHARS:
            continue
        if q_words and set(words) >= q_words:  # the whole question again
            continue
        if any(topic.lower() == o.lower() for o in out):
            continue
        out.append(topic)
    if len(out) < MIN_SUBTOPICS:
        return Parsed(None, TOO_FEW)
    return Parsed(out[:MAX_SUBTOPICS])


@dataclass
class ConstraintItem:
    """One coverage-conditioned question of the set (one JSON line)."""

    question_id: str
    subset: str
    type: str
    question: str
    include: list[str]
    exclude: list[str]
    conditioned_question: str
    template: str
    subtopics: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, obj: Mapping[str, Any], where: str = "") -> ConstraintItem:
        """Validate one line of a set file; errors name ``where`` (file:line) and the field."""
        if not isinstance(obj, Mapping):
            raise UserError(f"{where}: not a JSON object")
        for key in ("question_id", "question", "conditioned_question"):
            if not isinstance(obj.get(key), str) or not obj[key].strip():
                raise UserError(f"{where}: field {key!r} must be a non-empty string")
        lists: dict[str, list[str]] = {}
        for key in ("include", "exclude"):
            value = obj.get(key)
            if isinstance(value, str):
                value = [value]
            if (
                not isinstance(value, list)
                or not value
                or not all(isinstance(v, str) and v.strip() for v in value)
            ):
                raise UserError(f"{where}: field {key!r} must be a non-empty list of strings")
            lists[key] = [v.strip() for v in value]
        return cls(
            question_id=obj["question_id"],
            subset=str(obj.get("subset", "")),
            type=str(obj.get("type") or UNLABELLED),
            question=obj["question"],
            include=lists["include"],
            exclude=lists["exclude"],
            conditioned_question=obj["conditioned_question"],
            template=str(obj.get("template", "")),
            subtopics=[str(s) for s in obj.get("subtopics") or []],
        )


def _interleave(
    records: Sequence[WikiNFQARecord], labels: Mapping[str, QuestionLabel], rng: random.Random
) -> list[WikiNFQARecord]:
    """Round-robin over subsets; in each turn the type used least so far (seeded tie order)."""
    cells: dict[str, dict[str, list[WikiNFQARecord]]] = defaultdict(lambda: defaultdict(list))
    for rec in records:
        cells[rec.subset][type_of(labels, rec.question_id)].append(rec)
    for types in cells.values():
        for recs in types.values():
            rng.shuffle(recs)
    all_types = sorted({t for types in cells.values() for t in types})
    rng.shuffle(all_types)
    tie = {t: i for i, t in enumerate(all_types)}
    used: Counter[str] = Counter()
    order = [s for s in SUBSETS if s in cells] + sorted(set(cells) - set(SUBSETS))
    out: list[WikiNFQARecord] = []
    while any(recs for types in cells.values() for recs in types.values()):
        for subset in order:
            open_types = [t for t, recs in cells[subset].items() if recs]
            if not open_types:
                continue
            t = min(open_types, key=lambda t: (used[t], tie[t]))
            out.append(cells[subset][t].pop())
            used[t] += 1
    return out


def candidate_order(
    records: Sequence[WikiNFQARecord], labels: Mapping[str, QuestionLabel], seed: int
) -> list[WikiNFQARecord]:
    """Every question in the order the set takes them: non-factoid types first, spread over
    subsets and types; factoid-like ones (by stored label) only after all the others."""
    rng = random.Random(seed)
    preferred = [r for r in records if type_of(labels, r.question_id) not in FACTOID_LIKE]
    rest = [r for r in records if type_of(labels, r.question_id) in FACTOID_LIKE]
    return _interleave(preferred, labels, rng) + _interleave(rest, labels, rng)


def make_item(
    rec: WikiNFQARecord, subtopics: Sequence[str], seed: int, type_: str = UNLABELLED
) -> ConstraintItem | None:
    """Pick include/exclude and a template from a seed of (``seed``, question id).

    The pair is drawn among subtopics that do not overlap each other, so the
    instruction never asks to both cover and skip the same thing; None when no
    such pair exists.
    """
    rng = random.Random(f"{seed}:{rec.question_id}")
    pairs = [(a, b) for a in subtopics for b in subtopics if a != b and not topics_overlap(a, b)]
    if not pairs:
        return None
    include, exclude = rng.choice(pairs)
    template = rng.choice(sorted(TEMPLATES))
    return ConstraintItem(
        question_id=rec.question_id,
        subset=rec.subset,
        type=type_,
        question=rec.question,
        include=[include],
        exclude=[exclude],
        conditioned_question=compose_question(rec.question, include, exclude, template),
        template=template,
        subtopics=list(subtopics),
    )


@dataclass
class SetBuild:
    """What set building produced: the items, and every question it had to skip (and why)."""

    items: list[ConstraintItem] = field(default_factory=list)
    skipped: list[dict[str, Any]] = field(default_factory=list)
    asked: int = 0  # questions sent to the LLM
    prompt_tokens: int = 0
    completion_tokens: int = 0


async def build_constraint_set(
    engine: Engine,
    records: Sequence[WikiNFQARecord],
    n: int,
    *,
    labels: Mapping[str, QuestionLabel] | None = None,
    seed: int = 42,
    llm_seed: int = 42,
    max_resamples: int = 3,
    temperature: float = 0.8,
    top_p: float = 0.95,
    max_tokens: int = SUBTOPIC_MAX_TOKENS,
) -> SetBuild:
    """``n`` conditioned questions; a question whose subtopics never parse is skipped and the
    next candidate asked instead, up to ``CANDIDATE_FACTOR * n`` questions in all."""
    if n < 1:
        raise UserError(f"--n must be at least 1, got {n}")
    labels = labels or {}
    queue = candidate_order(records, labels, seed)[: CANDIDATE_FACTOR * n]
    out = SetBuild()
    while queue and len(out.items) < n:
        take, queue = queue[: n - len(out.items)], queue[n - len(out.items) :]
        requests = [
            ChatRequest(
                messages=subtopics_messages(r.question),
                temperature=temperature,
                top_p=top_p,
                max_tokens=max_tokens,
                seed=llm_seed,
                json_schema=SUBTOPICS_SCHEMA,
            )
            for r in take
        ]
        outcomes = await generate_until_parsed(
            engine,
            requests,
            lambda i, text, take=take: parse_subtopics(text, take[i].question),
            max_resamples,
            llm_seed,
        )
        out.asked += len(take)
        for rec, o in zip(take, outcomes, strict=True):
            out.prompt_tokens += o.prompt_tokens
            out.completion_tokens += o.completion_tokens
            item = (
                make_item(rec, o.value, seed, type_of(labels, rec.question_id))
                if o.ok and o.value
                else None
            )
            if item is None:
                out.skipped.append(
                    {
                        "question_id": rec.question_id,
                        "subset": rec.subset,
                        "question": rec.question,
                        "status": o.status if not o.ok else OVERLAPPING,
                        "attempts": o.attempts,
                        "outputs": o.outputs,
                    }
                )
            else:
                out.items.append(item)
    return out


def write_set(path: Path, items: Sequence[ConstraintItem]) -> Path:
    """Write the set as JSON lines, atomically (a half-written set is never left behind)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(
        "".join(json.dumps(it.to_dict(), ensure_ascii=False) + "\n" for it in items),
        encoding="utf-8",
    )
    tmp.replace(path)
    return path


def load_set(path: Path) -> list[ConstraintItem]:
    """Read and validate a set file; errors name the file, line and field."""
    path = Path(path)
    if not path.is_file():
        raise UserError(f"constraint set not found: {path}")
    items: list[ConstraintItem] = []
    seen: dict[str, int] = {}
    with path.open(encoding="utf-8") as f:
        for lineno, line in enumerate(f, start=1):
            if not line.strip():
                continue
            where = f"{path}:{lineno}"
            try:
                obj = json.loads(line)
            except json.JSONDecodeError as exc:
                raise UserError(f"{where}: not valid JSON ({exc.msg})") from None
            item = ConstraintItem.from_dict(obj, where)
            if item.question_id in seen:
                raise UserError(
                    f"{where}: duplicate question_id {item.question_id!r} "
                    f"(first on line {seen[item.question_id]})"
                )
            seen[item.question_id] = lineno
            items.append(item)
    if not items:
        raise UserError(f"constraint set {path} has no items")
    return items
