"""Coverage-conditioned questions: do answers honour "cover X, but skip Y"? (issue 8, part 3)

A question plus an instruction to include one subtopic and leave out another
(as in Jeong et al.'s QTREE/QPlanner) tests whether the system carries a
user's scope into its plans and answer. This module measures it, in three
steps that each keep what they did on disk:

1. set building: Wiki-NFQA questions (non-factoid types first, spread over
   subsets and types) get 3-4 subtopics from an LLM under a JSON schema; our
   code then picks, from a seed, one subtopic to include and a different one
   to exclude, and writes the conditioned question from fixed templates. The
   LLM never writes the instruction, so every item is phrased the same way
   and the set can be rebuilt exactly;
2. answering: per arm (``constraints.mode`` off / cue / always), Typed-RAG
   answers every conditioned question; answers go to ``answers.jsonl`` keyed
   by (arm, question_id) with the full trace, including what the feature
   detected;
3. judging: a judge LLM (the scorer engine) says, per include topic, whether
   the answer covers it, and per exclude topic, whether it discusses it.
   Verdicts that never parse are counted, never guessed.

The report gives per arm: include-covered rate, exclude-avoided rate, the
share of answers that satisfy every constraint ("both ok"), each with a
bootstrap 95% CI, the paired difference to the first arm, how often the
feature detected the set's constraints, and latency and tokens per answer.
"""

from __future__ import annotations

import hashlib
import json
import logging
import random
import re
import sys
import time
from collections import Counter, defaultdict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Protocol

from tqdm import tqdm

from eval.coverage import extract_json
from eval.labels import REPORT_TYPE_ORDER, UNLABELLED, QuestionLabel, type_of
from eval.metrics import estimate
from eval.resample import Outcome, Parsed, generate_until_parsed
from eval.runner import EvalAborted, error_row
from eval.store import JsonlStore, read_jsonl
from eval.wikinfqa import SUBSETS, WikiNFQARecord
from typed_rag.config import Settings
from typed_rag.engines.base import ChatRequest, Engine
from typed_rag.errors import UserError
from typed_rag.types import QuestionType

log = logging.getLogger(__name__)

ARMS: tuple[str, ...] = ("off", "cue", "always")
ANSWERS = "answers.jsonl"
JUDGEMENTS = "judgements.jsonl"
ERRORS = "errors.jsonl"
SET_COPY = "set.jsonl"
REPORT_MD = "report.md"
REPORT_JSON = "report.json"

# Parse failure reasons (anything else is "ok").
NO_JSON = "no-json"
BAD_SHAPE = "bad-shape"
TOO_FEW = "too-few-subtopics"
OVERLAPPING = "overlapping-subtopics"
LENGTH_MISMATCH = "length-mismatch"
EMPTY_ANSWER = "empty-answer"

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

_STOPWORDS = frozenset(
    "a an and are as at be by for from how in into is it its of on or over the their to "
    "was were what when where which who why with".split()
)


# --------------------------------------------------------------------------- text helpers


def _words(text: str) -> list[str]:
    """Content words, lower-cased, with a plural 's' dropped: the unit of topic matching."""
    out = []
    for w in re.findall(r"[a-z0-9]+", text.lower()):
        if w in _STOPWORDS:
            continue
        if len(w) > 3 and w.endswith("s") and not w.endswith("ss"):
            w = w[:-1]
        out.append(w)
    return out


def topics_overlap(a: str, b: str, threshold: float = 0.5) -> bool:
    """Same topic in other words? One's content words contain the other's, or Jaccard >= threshold."""
    wa, wb = set(_words(a)), set(_words(b))
    if not wa or not wb:
        return False
    if wa <= wb or wb <= wa:
        return True
    return len(wa & wb) / len(wa | wb) >= threshold


def _as_sentence(question: str) -> str:
    q = " ".join(question.split())
    return q if q.endswith(("?", ".", "!")) else q + "?"


def compose_question(question: str, include: str, exclude: str, template: str) -> str:
    """The conditioned question for one template name of :data:`TEMPLATES`."""
    try:
        pattern = TEMPLATES[template]
    except KeyError:
        raise UserError(
            f"unknown constraint template {template!r}; expected one of: {', '.join(TEMPLATES)}"
        ) from None
    return pattern.format(q=_as_sentence(question), inc=include, ex=exclude)


# --------------------------------------------------------------------------- set building

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
        f"\n\nQuestion: {_as_sentence(question)}"
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
    q_words = set(_words(question))
    out: list[str] = []
    for raw in obj:
        topic = _clean_topic(raw)
        words = _words(topic)
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


# --------------------------------------------------------------------------- judge


def judge_schema(n_include: int, n_exclude: int) -> dict[str, Any]:
    """The verdict shape, with list lengths fixed to this item's topic counts."""

    def rows(flag: str, n: int) -> dict[str, Any]:
        return {
            "type": "array",
            "minItems": n,
            "maxItems": n,
            "items": {
                "type": "object",
                "properties": {"id": {"type": "integer"}, flag: {"type": "boolean"}},
                "required": ["id", flag],
            },
        }

    return {
        "title": "constraint_judgement",
        "type": "object",
        "properties": {
            "include": rows("covered", n_include),
            "exclude": rows("discussed", n_exclude),
        },
        "required": ["include", "exclude"],
    }


def judge_messages(
    question: str, include: Sequence[str], exclude: Sequence[str], answer: str
) -> list[dict[str, str]]:
    inc = "\n".join(f"{i}. {t}" for i, t in enumerate(include, start=1))
    exc = "\n".join(f"{i}. {t}" for i, t in enumerate(exclude, start=1))
    user = (
        "A user asked the question below and told the assistant which topics to include and "
        "which to leave out. Read the answer and judge each topic.\n"
        '- include topics: "covered" is true only if the answer gives real content about the '
        "topic (a passing mention or a promise to cover it does not count);\n"
        '- exclude topics: "discussed" is true if the answer says anything substantive about '
        "the topic; a short remark that the topic is being left out is not discussing it.\n"
        "Reply with one JSON object, one entry per numbered topic: "
        '{"include": [{"id": 1, "covered": true}], "exclude": [{"id": 1, "discussed": false}]}.'
        f"\n\nQuestion: {_as_sentence(question)}\n\nTopics to include:\n{inc}\n\n"
        f"Topics to leave out:\n{exc}\n\nAnswer: {answer.strip()}"
    )
    return [{"role": "system", "content": SYSTEM_PROMPT}, {"role": "user", "content": user}]


def _flags(rows: Any, flag: str, n: int) -> list[bool] | str:
    """Booleans for ids 1..n from ``[{"id", flag}]`` (ids optional, then by position), or a reason."""
    if not isinstance(rows, list):
        return BAD_SHAPE
    if len(rows) != n:
        return LENGTH_MISMATCH
    if all(isinstance(r, bool) for r in rows):
        return list(rows)
    if not all(isinstance(r, dict) and isinstance(r.get(flag), bool) for r in rows):
        return BAD_SHAPE
    ids = [r.get("id") for r in rows]
    if all(i is None for i in ids):
        return [r[flag] for r in rows]
    if any(isinstance(i, bool) or not isinstance(i, int) for i in ids) or sorted(ids) != list(
        range(1, n + 1)
    ):
        return BAD_SHAPE
    by_id = {r["id"]: r[flag] for r in rows}
    return [by_id[i] for i in range(1, n + 1)]


@dataclass(frozen=True)
class Verdict:
    covered: list[bool]  # per include topic
    discussed: list[bool]  # per exclude topic


def parse_judgement(text: str, n_include: int, n_exclude: int) -> Parsed[Verdict]:
    """Strict: both lists present, exactly one boolean per topic, ids (if given) 1..n once each."""
    try:
        obj = extract_json(text)
    except ValueError:
        return Parsed(None, NO_JSON)
    if not isinstance(obj, dict):
        return Parsed(None, BAD_SHAPE)
    covered = _flags(obj.get("include"), "covered", n_include)
    discussed = _flags(obj.get("exclude"), "discussed", n_exclude)
    for got in (covered, discussed):
        if isinstance(got, str):
            return Parsed(None, got)
    return Parsed(Verdict(covered=covered, discussed=discussed))  # type: ignore[arg-type]


@dataclass
class ComplianceItem:
    key: str
    question: str
    include: list[str]
    exclude: list[str]
    answer: str


@dataclass
class ComplianceVerdict:
    key: str
    status: str
    covered: list[bool] | None = None
    discussed: list[bool] | None = None
    attempts: int = 0
    outputs: list[str] = field(default_factory=list)
    prompt_tokens: int = 0
    completion_tokens: int = 0

    @property
    def ok(self) -> bool:
        return self.covered is not None and self.discussed is not None


class ComplianceJudge:
    """Judges a batch of answers against their include/exclude topics on one engine."""

    def __init__(
        self,
        engine: Engine,
        *,
        max_resamples: int = 3,
        seed: int = 42,
        temperature: float = 0.8,
        top_p: float = 0.95,
        max_tokens: int = 256,
    ) -> None:
        self.engine = engine
        self.max_resamples = max_resamples
        self.seed = seed
        self.temperature = temperature
        self.top_p = top_p
        self.max_tokens = max_tokens

    @classmethod
    def from_settings(
        cls, engine: Engine, settings: Settings, scorer_settings: Settings | None = None
    ) -> ComplianceJudge:
        sampling = (scorer_settings or settings).sampling
        return cls(
            engine,
            max_resamples=settings.eval.max_resamples,
            seed=sampling.seed,
            temperature=sampling.temperature,
            top_p=sampling.top_p,
            max_tokens=settings.eval.coverage_max_tokens,
        )

    async def judge(self, items: Sequence[ComplianceItem]) -> list[ComplianceVerdict]:
        """One batch for all items with an answer; an empty answer covers and discusses nothing."""
        asked = [i for i, it in enumerate(items) if it.answer.strip()]
        requests = [
            ChatRequest(
                messages=judge_messages(
                    items[i].question, items[i].include, items[i].exclude, items[i].answer
                ),
                temperature=self.temperature,
                top_p=self.top_p,
                max_tokens=self.max_tokens,
                seed=self.seed,
                json_schema=judge_schema(len(items[i].include), len(items[i].exclude)),
            )
            for i in asked
        ]
        outcomes: list[Outcome[Verdict]] = await generate_until_parsed(
            self.engine,
            requests,
            lambda j, text: parse_judgement(
                text, len(items[asked[j]].include), len(items[asked[j]].exclude)
            ),
            self.max_resamples,
            self.seed,
        )
        by_index = dict(zip(asked, outcomes, strict=True))
        out = []
        for i, it in enumerate(items):
            o = by_index.get(i)
            if o is None:
                out.append(
                    ComplianceVerdict(
                        it.key,
                        EMPTY_ANSWER,
                        covered=[False] * len(it.include),
                        discussed=[False] * len(it.exclude),
                    )
                )
                continue
            v = o.value if o.ok else None
            out.append(
                ComplianceVerdict(
                    it.key,
                    o.status,
                    covered=list(v.covered) if v else None,
                    discussed=list(v.discussed) if v else None,
                    attempts=o.attempts,
                    outputs=o.outputs,
                    prompt_tokens=o.prompt_tokens,
                    completion_tokens=o.completion_tokens,
                )
            )
        return out


# --------------------------------------------------------------------------- metrics


def compliance(covered: Sequence[bool], discussed: Sequence[bool]) -> dict[str, float]:
    """Per answer: share of include topics covered, share of exclude topics avoided, and 1.0
    only when every include is covered and no exclude is discussed."""
    inc = sum(covered) / len(covered) if covered else 1.0
    exc = 1.0 - (sum(discussed) / len(discussed) if discussed else 0.0)
    return {
        "include_covered": inc,
        "exclude_avoided": exc,
        "both_ok": float(all(covered) and not any(discussed)),
    }


def detection_match(
    constraints: Mapping[str, Any] | None, include: Sequence[str], exclude: Sequence[str]
) -> dict[str, bool]:
    """Did the feature find the set's constraints? Topic-level overlap of each side."""
    if not constraints:
        return {"any": False, "include": False, "exclude": False, "both": False}
    got_inc = [str(x) for x in constraints.get("include") or []]
    got_exc = [str(x) for x in constraints.get("exclude") or []]
    inc = all(any(topics_overlap(t, g) for g in got_inc) for t in include)
    exc = all(any(topics_overlap(t, g) for g in got_exc) for t in exclude)
    return {"any": bool(got_inc or got_exc), "include": inc, "exclude": exc, "both": inc and exc}


# --------------------------------------------------------------------------- runner


def parse_arms(value: str | Sequence[str]) -> list[str]:
    names = value.split(",") if isinstance(value, str) else list(value)
    names = [n.strip().lower() for n in names if n.strip()]
    unknown = [n for n in names if n not in ARMS]
    if not names or unknown:
        raise UserError(
            f"unknown arm(s) {', '.join(unknown) or '(none given)'}; "
            f"expected some of: {', '.join(ARMS)} (values of constraints.mode)"
        )
    return list(dict.fromkeys(names))


def arm_settings(settings: Settings, arm: str) -> Settings:
    """``settings`` with ``constraints.mode`` set to the arm."""
    return settings.model_copy(
        update={"constraints": settings.constraints.model_copy(update={"mode": arm})}
    )


def _arm_key(record: Mapping[str, Any]) -> str:
    return f"{record['arm']}\t{record['question_id']}"


def _key(arm: str, question_id: str) -> str:
    return f"{arm}\t{question_id}"


def _result_dict(result: Any) -> dict[str, Any]:
    if hasattr(result, "model_dump"):
        return result.model_dump(mode="json")
    if isinstance(result, dict):
        return result
    raise TypeError(f"answerer returned {type(result).__name__}, expected a Result")


def file_sha256(path: Path) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


class ArmAnswerers(Protocol):
    """Gives an answerer (the TypedRAG contract) for one arm's settings; closes them all."""

    async def get(self, settings: Settings) -> Any: ...

    async def close(self) -> None: ...


class SharedTypedRAG:
    """One TypedRAG per arm, all sharing the first one's engine, index, reranker and classifier.

    The arms differ only in ``constraints.mode``, so loading the model once
    and wrapping its parts with each arm's settings answers every arm with
    the same model at the cost of one load.
    """

    def __init__(self, build: Callable[[Settings], Any] | None = None) -> None:
        self._build = build
        self._base: Any = None

    async def get(self, settings: Settings) -> Any:
        from typed_rag.system import TypedRAG

        if self._base is None:
            base = (self._build or TypedRAG.from_settings)(settings)
            await base.start()
            self._base = base
            return base
        if settings == self._base.settings:
            return self._base
        b = self._base
        return TypedRAG(settings, b.engine, b.retriever, b.reranker, b.classifier)

    async def close(self) -> None:
        if self._base is not None:
            await self._base.close()
            self._base = None


@dataclass
class Counts:
    done_before: int = 0
    computed: int = 0
    failed: int = 0


@dataclass
class ConstraintRunStats:
    answers: dict[str, Counts] = field(default_factory=dict)
    judgements: Counts = field(default_factory=Counts)


class ConstraintRunner:
    """One run directory: answers per arm, then judgements; a rerun only does what is missing."""

    def __init__(
        self,
        settings: Settings,
        run_dir: Path,
        *,
        answerers: ArmAnswerers,
        scorer_engine: Engine | Callable[[], Any],
        scorer_settings: Settings | None = None,
        progress: bool = True,
    ) -> None:
        self.settings = settings
        self.scorer_settings = scorer_settings or settings
        self.run_dir = Path(run_dir)
        self.run_dir.mkdir(parents=True, exist_ok=True)
        self.answerers = answerers
        self._scorer_target = scorer_engine
        self._scorer: Any = None
        self.progress = progress
        self.answers = JsonlStore(self.run_dir / ANSWERS, key=_arm_key)
        self.judgements = JsonlStore(self.run_dir / JUDGEMENTS, key=_arm_key)

    def _bar(self, total: int, desc: str) -> tqdm:
        return tqdm(
            total=total,
            desc=desc,
            unit="q",
            disable=not self.progress,
            file=sys.stderr,
            dynamic_ncols=True,
        )

    async def run(self, items: Sequence[ConstraintItem], arms: Sequence[str]) -> ConstraintRunStats:
        stats = ConstraintRunStats()
        try:  # every arm first, so the generator is closed before the judge is loaded
            for arm in arms:
                stats.answers[arm] = await self._answer_arm(items, arm)
        finally:
            await self.answerers.close()
        try:
            stats.judgements = await self._judge(items, arms)
        finally:
            await self._close_scorer()
        return stats

    # ------------------------------------------------------------------ answers

    async def _answer_arm(self, items: Sequence[ConstraintItem], arm: str) -> Counts:
        pending = [it for it in items if _key(arm, it.question_id) not in self.answers]
        counts = Counts(done_before=len(items) - len(pending))
        if not pending:
            return counts
        answerer = await self.answerers.get(arm_settings(self.settings, arm))
        size = max(1, self.settings.eval.batch_size)
        with self._bar(len(pending), f"answer {arm}") as bar:
            for start in range(0, len(pending), size):
                chunk = pending[start : start + size]
                records, errors = await self._answer_chunk(answerer, chunk, arm)
                if errors:
                    JsonlStore(
                        self.run_dir / ERRORS, key=lambda r: f"{r['at']}\t{r['question_id']}"
                    ).append(errors)
                counts.failed += len(chunk) - len(records)
                if not records:
                    raise EvalAborted(
                        f"every question of a batch failed in arm {arm!r}; see "
                        f"{self.run_dir / ERRORS}"
                    )
                self.answers.append(records)
                counts.computed += len(records)
                bar.update(len(chunk))
        return counts

    async def _answer_chunk(
        self, answerer: Any, chunk: Sequence[ConstraintItem], arm: str
    ) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
        """Answer a batch; if the batch call fails, one by one so one bad question costs one."""
        t0 = time.perf_counter()
        errors: list[dict[str, Any]] = []
        questions = [it.conditioned_question for it in chunk]
        try:
            results: list[Any] = list(await answerer.answer_many(questions, mode="typed-rag"))
            if len(results) != len(chunk):
                raise RuntimeError(f"answer_many returned {len(results)} results for {len(chunk)}")
        except Exception as exc:
            log.warning("batch of %d failed (%s); answering one by one", len(chunk), exc)
            results = []
            for it in chunk:
                try:
                    results.append(await answerer.answer(it.conditioned_question, mode="typed-rag"))
                except Exception as one_exc:
                    log.error("answer failed for %s (arm %s): %s", it.question_id, arm, one_exc)
                    errors.append(error_row("answer", arm, it.question_id, one_exc))
                    results.append(None)
        wall = time.perf_counter() - t0
        records = []
        for it, res in zip(chunk, results, strict=True):
            if res is None:
                continue
            data = _result_dict(res)
            records.append(
                {
                    "arm": arm,
                    "question_id": it.question_id,
                    "subset": it.subset,
                    "type": it.type,
                    "answered_type": data.get("type"),
                    "conditioned_question": it.conditioned_question,
                    "include": it.include,
                    "exclude": it.exclude,
                    "answer": data.get("answer", ""),
                    "constraints": data.get("constraints"),
                    "latency_s": float((data.get("timings") or {}).get("total", 0.0)),
                    "tokens": int(data.get("prompt_tokens", 0))
                    + int(data.get("completion_tokens", 0)),
                    "result": data,
                    "wall_s": wall / len(chunk),
                    "batch_size": len(chunk),
                    "finished_at": time.time(),
                }
            )
        return records, errors

    # ------------------------------------------------------------------ judgements

    async def _scorer_engine(self) -> Engine:
        if self._scorer is None:
            target = self._scorer_target
            if hasattr(target, "generate"):
                self._scorer = target
            else:
                engine = target()
                await engine.start()
                self._scorer = engine
        return self._scorer

    async def _close_scorer(self) -> None:
        if self._scorer is not None and self._scorer is not self._scorer_target:
            await self._scorer.close()
        self._scorer = None

    async def _judge(self, items: Sequence[ConstraintItem], arms: Sequence[str]) -> Counts:
        counts = Counts()
        todo: list[tuple[ConstraintItem, dict[str, Any]]] = []
        for arm in arms:
            for it in items:
                key = _key(arm, it.question_id)
                answer = self.answers.get(key)
                if answer is None:
                    continue
                if key in self.judgements:
                    counts.done_before += 1
                else:
                    todo.append((it, answer))
        if not todo:
            return counts
        judge = ComplianceJudge.from_settings(
            await self._scorer_engine(), self.settings, self.scorer_settings
        )
        from eval.manifest import scorer_name

        name = scorer_name(self.scorer_settings)
        size = max(1, self.settings.eval.score_batch_size)
        with self._bar(len(todo), "judge") as bar:
            for start in range(0, len(todo), size):
                chunk = todo[start : start + size]
                verdicts = await judge.judge(
                    [
                        ComplianceItem(
                            key=_key(a["arm"], it.question_id),
                            question=it.question,
                            include=it.include,
                            exclude=it.exclude,
                            answer=str(a.get("answer") or ""),
                        )
                        for it, a in chunk
                    ]
                )
                rows = []
                for (it, a), v in zip(chunk, verdicts, strict=True):
                    row: dict[str, Any] = {
                        "arm": a["arm"],
                        "question_id": it.question_id,
                        "subset": it.subset,
                        "type": it.type,
                        "status": v.status,
                        "include": it.include,
                        "exclude": it.exclude,
                        "covered": v.covered,
                        "discussed": v.discussed,
                        "attempts": v.attempts,
                        "outputs": v.outputs,
                        "prompt_tokens": v.prompt_tokens,
                        "completion_tokens": v.completion_tokens,
                        "judge": name,
                    }
                    if v.ok:
                        row.update(compliance(v.covered or [], v.discussed or []))
                    else:
                        counts.failed += 1
                    rows.append(row)
                self.judgements.append(rows)
                counts.computed += len(rows)
                bar.update(len(chunk))
        return counts


def check_run_set(run_dir: Path, set_path: Path) -> None:
    """Keep a copy of the set in the run; refuse to resume a run with a different set."""
    run_dir.mkdir(parents=True, exist_ok=True)
    copy = run_dir / SET_COPY
    data = Path(set_path).read_bytes()
    if copy.exists():
        if copy.read_bytes() != data:
            raise UserError(
                f"run directory {run_dir} was made with a different constraint set than "
                f"{set_path} (see {copy}); use a new --out"
            )
        return
    tmp = copy.with_name(copy.name + ".tmp")
    tmp.write_bytes(data)
    tmp.replace(copy)


# --------------------------------------------------------------------------- report

METRICS: tuple[str, ...] = ("include_covered", "exclude_avoided", "both_ok")
METRIC_TITLES: dict[str, str] = {
    "include_covered": "include covered",
    "exclude_avoided": "exclude avoided",
    "both_ok": "both ok",
}


def _mean(values: Sequence[float]) -> float | None:
    return sum(values) / len(values) if values else None


def build_constraints_report(run_dir: Path, settings: Settings) -> dict[str, Any]:
    """Every number of the report as one JSON-able dict; reading never changes the run."""
    run_dir = Path(run_dir)
    answers = list(JsonlStore(run_dir / ANSWERS, key=_arm_key, readonly=True))
    judgements = list(JsonlStore(run_dir / JUDGEMENTS, key=_arm_key, readonly=True))
    set_items = read_jsonl(run_dir / SET_COPY)
    errors = read_jsonl(run_dir / ERRORS)
    manifest: dict[str, Any] = {}
    if (run_dir / "run.json").is_file():
        manifest = json.loads((run_dir / "run.json").read_text(encoding="utf-8"))
    present = {r["arm"] for r in answers} | {r["arm"] for r in judgements}
    arms = [a for a in ARMS if a in present]
    n_boot, seed = settings.eval.bootstrap, settings.eval.sample_seed

    ok_by_arm: dict[str, dict[str, dict[str, Any]]] = defaultdict(dict)
    for row in judgements:
        if row.get("covered") is not None and row.get("discussed") is not None:
            ok_by_arm[row["arm"]][row["question_id"]] = row

    per_arm: dict[str, Any] = {}
    for arm in arms:
        arm_answers = [r for r in answers if r["arm"] == arm]
        arm_judged = [r for r in judgements if r["arm"] == arm]
        usable = list(ok_by_arm[arm].values())
        cell: dict[str, Any] = {
            "answers": len(arm_answers),
            "judged": len(usable),
            "judge_status": dict(Counter(r["status"] for r in arm_judged)),
            "unparsed": sum(1 for r in arm_judged if r.get("covered") is None),
            # questions that failed and were never answered later (a resumed run may retry)
            "answer_errors": len(
                {e["question_id"] for e in errors if e.get("method") == arm}
                - {r["question_id"] for r in arm_answers}
            ),
        }
        for m in METRICS:
            cell[m] = estimate([float(r[m]) for r in usable], n_boot=n_boot, seed=seed).to_dict()
        det = [
            detection_match(r.get("constraints"), r.get("include") or [], r.get("exclude") or [])
            for r in arm_answers
        ]
        cell["detector_ran"] = _mean([float(r.get("constraints") is not None) for r in arm_answers])
        cell["detected_any"] = _mean([float(d["any"]) for d in det])
        cell["detected_match"] = _mean([float(d["both"]) for d in det])
        cell["detected_include"] = _mean([float(d["include"]) for d in det])
        cell["detected_exclude"] = _mean([float(d["exclude"]) for d in det])
        cell["mean_latency_s"] = _mean([float(r.get("latency_s", 0.0)) for r in arm_answers])
        cell["mean_wall_s"] = _mean([float(r.get("wall_s", 0.0)) for r in arm_answers])
        cell["mean_tokens"] = _mean([float(r.get("tokens", 0)) for r in arm_answers])
        per_type: dict[str, Any] = {}
        for t in sorted({r.get("type") or UNLABELLED for r in usable}):
            group = [r for r in usable if (r.get("type") or UNLABELLED) == t]
            per_type[t] = {
                "n": len(group),
                "both_ok": _mean([float(r["both_ok"]) for r in group]),
            }
        cell["per_type"] = per_type
        per_arm[arm] = cell

    paired: dict[str, Any] = {}
    if arms:
        base = arms[0]
        for arm in arms[1:]:
            common = sorted(set(ok_by_arm[base]) & set(ok_by_arm[arm]))
            paired[arm] = {
                "baseline": base,
                "n": len(common),
                **{
                    m: estimate(
                        [
                            float(ok_by_arm[arm][q][m]) - float(ok_by_arm[base][q][m])
                            for q in common
                        ],
                        n_boot=n_boot,
                        seed=seed,
                    ).to_dict()
                    for m in METRICS
                },
            }
    return {
        "set_items": len(set_items),
        "generator": manifest.get("generator"),
        "judge": (manifest.get("scorer") or {}).get("name"),
        "arms": per_arm,
        "paired": paired,
        "bootstrap": n_boot,
    }


def _pct(est: Mapping[str, Any] | None, ci: bool = True) -> str:
    if not est or not est.get("count"):
        return "-"
    text = f"{100 * est['mean']:.1f}"
    if ci:
        text += f" [{100 * est['low']:.1f}, {100 * est['high']:.1f}]"
    return text


def _share(value: float | None) -> str:
    return "-" if value is None else f"{100 * value:.1f}"


def _num(value: float | None, digits: int = 1) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


def render_constraints_report(report: Mapping[str, Any]) -> str:
    gen = report.get("generator") or {}
    lines = [
        "# Coverage-conditioned questions: constraint compliance",
        "",
        f"Set: {report['set_items']} questions. Generator: "
        f"{gen.get('backend', '?')}:{gen.get('model', '?')}. Judge: {report.get('judge') or '?'}. "
        f"Rates in %, with bootstrap 95% CIs ({report['bootstrap']} resamples).",
        "",
        "| arm | judged | include covered | exclude avoided | both ok | detected (match) "
        "| detected (any) | detector ran | unparsed | errors | latency s | wall s/answer "
        "| tokens/answer |",
        "|---|---:|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for arm, c in report["arms"].items():
        lines.append(
            f"| {arm} | {c['judged']} | {_pct(c['include_covered'])} | "
            f"{_pct(c['exclude_avoided'])} | {_pct(c['both_ok'])} | "
            f"{_share(c['detected_match'])} | {_share(c['detected_any'])} | "
            f"{_share(c['detector_ran'])} | {c['unparsed']} | "
            f"{c['answer_errors']} | {_num(c['mean_latency_s'])} | {_num(c['mean_wall_s'])} | "
            f"{_num(c['mean_tokens'], 0)} |"
        )
    if report["paired"]:
        lines += [
            "",
            "Paired difference to the first arm, over questions judged in both "
            "(percentage points, 95% CI):",
            "",
            "| arm - baseline | n | include covered | exclude avoided | both ok |",
            "|---|---:|---|---|---|",
        ]
        for arm, p in report["paired"].items():
            lines.append(
                f"| {arm} - {p['baseline']} | {p['n']} | "
                + " | ".join(_pct(p[m]) for m in METRICS)
                + " |"
            )
    types = [
        t
        for t in [*REPORT_TYPE_ORDER, UNLABELLED]
        if any(t in c["per_type"] for c in report["arms"].values())
    ]
    if types:
        arms = list(report["arms"])
        lines += [
            "",
            "Both-ok rate (%) per question type (n per arm in parentheses):",
            "",
            "| type | " + " | ".join(arms) + " |",
            "|---|" + "---:|" * len(arms),
        ]
        for t in types:
            cells = []
            for arm in arms:
                cell = report["arms"][arm]["per_type"].get(t)
                cells.append(f"{_share(cell['both_ok'])} ({cell['n']})" if cell else "-")
            lines.append(f"| {t} | " + " | ".join(cells) + " |")
    lines += [
        "",
        "Include covered: share of include topics the judge found covered with real content. "
        "Exclude avoided: share of exclude topics not discussed. Both ok: every include covered "
        "and no exclude discussed. Detected (match): the answer's trace holds constraints whose "
        "include and exclude topics overlap the set's (content-word overlap); (any): it holds "
        "any constraint; detector ran: the trace records a detection attempt (the cue arm asks "
        "only when the question has an instruction cue). Unparsed judge verdicts are left out "
        "of the rates and counted. Latency "
        "is the pipeline's own time per question; wall is batch time divided by batch size.",
        "",
    ]
    return "\n".join(lines)


def write_constraints_report(
    run_dir: Path, settings: Settings, out_dir: Path | None = None
) -> tuple[Path, Path]:
    run_dir = Path(run_dir)
    if not (run_dir / ANSWERS).exists() and not (run_dir / JUDGEMENTS).exists():
        raise UserError(f"not a constraints run directory (no {ANSWERS}): {run_dir}")
    report = build_constraints_report(run_dir, settings)
    out = Path(out_dir or run_dir)
    out.mkdir(parents=True, exist_ok=True)
    md, js = out / REPORT_MD, out / REPORT_JSON
    md.write_text(render_constraints_report(report), encoding="utf-8")
    js.write_text(json.dumps(report, indent=1), encoding="utf-8")
    return md, js
