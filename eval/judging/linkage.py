"""LINKAGE (Yang et al. 2024): rank a candidate answer inside a graded reference list.

Reference list: the question's answers grouped by quality label, groups taken
from label 3 down to 0, one answer drawn at random from each non-empty group
(2 to 4 references, best first). The draw uses ``random.Random`` seeded from
``reference_seed`` *and the question id*, so a question gets the same list
whatever subset, order or sample it is evaluated in.

Verdict: the scorer answers ``[[k]]``. In the original LINKAGE (the default)
``k = n + 1`` means worse than all ``n`` references, so ``1 <= k <= n + 1``.
The Typed-RAG paper's prompt told the scorer to answer ``[[n]]`` in that case
(an off-by-one); ``paper_off_by_one=True`` reproduces that prompt, and then
``1 <= k <= n``.

Parsing is strict: only ``[[k]]`` (spaces inside the brackets allowed) counts;
``[k]``, ``[[k]`` or a bare number do not. If the output holds several
``[[k]]`` with *different* values the verdict is ambiguous and counts as
unparsed (it is resampled), because a model that writes ``[[1]] ... [[3]]``
has not committed to a rank; repeating one value is fine.
"""

from __future__ import annotations

import random
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from eval.data.wikinfqa import WikiNFQARecord
from eval.judging.resample import Judge, Parsed, generate_until_parsed
from typed_rag.config import Settings
from typed_rag.engines.base import ChatRequest, Engine

REFERENCE_LABEL_ORDER: tuple[int, ...] = (3, 2, 1, 0)

# Status values of a LINKAGE verdict (besides "ok").
NO_MATCH = "no-match"
OUT_OF_RANGE = "out-of-range"
AMBIGUOUS = "ambiguous"
EMPTY_CANDIDATE = "empty-candidate"

_RANK_RE = re.compile(r"(?<!\[)\[\[\s*(\d+)\s*\]\](?!\])")

_NUMBER_WORDS = ("zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine")


@dataclass(frozen=True)
class Reference:
    """One reference answer and its quality label (3 = best)."""

    text: str
    label: int


# The seed of every reference list (with the question id), so that every run and method
# compares against the same references; a run's fingerprint records it.
REFERENCE_SEED = 42
# The paper's output budget for a LINKAGE verdict: a verdict is never cut off.
SCORER_MAX_TOKENS = 512


def reference_rng(seed: int, question_id: str) -> random.Random:
    """A generator that depends only on (seed, question id); str seeds hash stably (SHA-512)."""
    return random.Random(f"{seed}:{question_id}")


def build_references(record: WikiNFQARecord, seed: int) -> list[Reference]:
    """Best-first reference list: one random answer per non-empty label group, labels 3..0."""
    rng = reference_rng(seed, record.question_id)
    groups: dict[int, list[str]] = {label: [] for label in REFERENCE_LABEL_ORDER}
    for text, label in zip(record.answers, record.labels, strict=True):
        groups[label].append(text)
    return [
        Reference(text=rng.choice(groups[label]), label=label)
        for label in REFERENCE_LABEL_ORDER
        if groups[label]
    ]


def max_rank(n: int, off_by_one: bool = False) -> int:
    """The largest valid verdict for ``n`` references."""
    return n if off_by_one else n + 1


def render_references(references: Sequence[Reference | str]) -> str:
    lines = []
    for i, ref in enumerate(references, start=1):
        text = ref.text if isinstance(ref, Reference) else ref
        lines.append(f"Answer {i}: {text.strip()}")
    return "\n".join(lines)


SYSTEM_PROMPT = "You are an impartial judge of answers to open-ended questions."


OFF_TOPIC_RULE = (
    "An answer that does not address this question (for example one about another "
    "subject) is worse than every reference."
)


def scorer_messages(
    question: str,
    references: Sequence[Reference | str],
    candidate: str,
    off_by_one: bool = False,
    off_topic_rule: bool = True,
) -> list[dict[str, str]]:
    """The LINKAGE prompt: question, references best first, candidate; asks for ``[[k]]``.

    ``off_topic_rule`` adds one sentence that places answers to another question
    last: without it the small local judges ranked such fluent answers first.
    """
    n = len(references)
    n_words = _NUMBER_WORDS[n] if n < len(_NUMBER_WORDS) else str(n)
    worst = max_rank(n, off_by_one)
    instructions = (
        "Place a candidate answer to a non-factoid question within a list of reference "
        "answers. The references are ordered from best to worst: Answer 1 is the most "
        "complete and accurate, and the last ones may be weak, wrong or off-topic.\n"
        "Decide which position the candidate would take in that list. If it is better "
        "than every reference, reply [[1]]. If it is worse than Answers 1 to k-1 but "
        f"better than Answer k, reply [[k]]. If it is worse than all {n_words} "
        f"references, reply [[{worst}]].\n"
        'Reply with the position only, in double square brackets: for example "[[2]]" '
        "if the candidate belongs in second place. Judge content, not length or style."
    )
    if off_topic_rule:
        instructions += " " + OFF_TOPIC_RULE
    user = (
        f"{instructions}\n\n"
        f"Question: {question.strip()}\n\n"
        f"Reference answers:\n{render_references(references)}\n\n"
        f"Candidate answer: {candidate.strip()}"
    )
    return [{"role": "system", "content": SYSTEM_PROMPT}, {"role": "user", "content": user}]


def parse_rank(text: str, n: int, off_by_one: bool = False) -> Parsed[int]:
    """Strictly read ``[[k]]`` with ``1 <= k <= max_rank(n)`` from a scorer output."""
    values = {int(m.group(1)) for m in _RANK_RE.finditer(text or "")}
    if not values:
        return Parsed(None, NO_MATCH)
    if len(values) > 1:
        return Parsed(None, AMBIGUOUS)
    (k,) = values
    if not 1 <= k <= max_rank(n, off_by_one):
        return Parsed(None, OUT_OF_RANGE)
    return Parsed(k)


@dataclass
class LinkageItem:
    """A candidate answer to score against its question's references."""

    key: str
    question: str
    references: list[Reference]
    candidate: str


@dataclass
class LinkageScore:
    """The verdict for one item: ``rank`` is None when it never parsed."""

    key: str
    rank: int | None
    n: int
    status: str
    attempts: int
    outputs: list[str]
    prompt_tokens: int = 0
    completion_tokens: int = 0
    latency_s: float = 0.0
    off_by_one: bool = False
    # Probability of each verdict k = 1..max_rank (token-probability protocol only).
    dist: list[float] | None = None
    # The relevance gate's P(the answer addresses the question) (gated protocol only).
    relevance: float | None = None

    @property
    def parsed(self) -> bool:
        return self.rank is not None


class LinkageScorer(Judge):
    """Scores many candidates with one engine: one batch per round, bounded resampling."""

    def __init__(
        self,
        engine: Engine,
        *,
        off_by_one: bool = False,
        off_topic_rule: bool = True,
        max_tokens: int = 512,
        **sampling: Any,
    ) -> None:
        super().__init__(engine, max_tokens=max_tokens, **sampling)
        self.off_by_one = off_by_one
        self.off_topic_rule = off_topic_rule

    @classmethod
    def from_settings(
        cls, engine: Engine, settings: Settings, scorer_settings: Settings | None = None
    ) -> LinkageScorer:
        """LINKAGE options from the run's ``settings.eval``; sampling as :meth:`Judge.sampling_from`."""
        return cls(
            engine,
            off_by_one=settings.eval.paper_off_by_one,
            max_tokens=SCORER_MAX_TOKENS,
            **cls.sampling_from(settings, scorer_settings),
        )

    def request(self, item: LinkageItem) -> ChatRequest:
        return self.chat(
            scorer_messages(
                item.question,
                item.references,
                item.candidate,
                off_by_one=self.off_by_one,
                off_topic_rule=self.off_topic_rule,
            )
        )

    async def score(self, items: Sequence[LinkageItem]) -> list[LinkageScore]:
        """Verdicts in item order. An empty candidate is ranked last without asking."""
        asked = [i for i, it in enumerate(items) if it.candidate.strip()]
        requests = [self.request(items[i]) for i in asked]

        def parse(j: int, text: str) -> Parsed[int]:
            return parse_rank(text, len(items[asked[j]].references), self.off_by_one)

        outcomes = await generate_until_parsed(
            self.engine, requests, parse, self.max_resamples, self.seed
        )
        by_index = dict(zip(asked, outcomes, strict=True))
        scores: list[LinkageScore] = []
        for i, item in enumerate(items):
            n = len(item.references)
            out = by_index.get(i)
            if out is None:
                scores.append(
                    LinkageScore(
                        item.key,
                        max_rank(n, self.off_by_one),
                        n,
                        EMPTY_CANDIDATE,
                        0,
                        [],
                        off_by_one=self.off_by_one,
                    )
                )
                continue
            scores.append(
                LinkageScore(
                    key=item.key,
                    rank=out.value if out.ok else None,
                    n=n,
                    status=out.status,
                    attempts=out.attempts,
                    outputs=out.outputs,
                    prompt_tokens=out.prompt_tokens,
                    completion_tokens=out.completion_tokens,
                    latency_s=out.latency_s,
                    off_by_one=self.off_by_one,
                )
            )
        return scores
