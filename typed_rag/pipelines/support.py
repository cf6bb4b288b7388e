"""Each cited sentence asked against the passage it cites, before the answer is returned
(issue 77, ``method.support_check``).

Over documentation, the answers users cannot trust state what the cited page does not say
or says the opposite of ("SQLite is generally recommended for a busy website with many
writers" citing the page that recommends a client/server engine). The span and word checks
(:mod:`typed_rag.finishing.verify`) catch an unshown command or filler; a claim worded from
the page but turned around passes them. So the model is asked, for every (cited sentence,
cited shown passage), whether the passage supports the sentence: one forward pass reading
P(yes) after ``[[`` (instruction and passage first, the statement last, so the sentences
citing one passage share its prefix in the prompt cache). A sentence no passage it cites
supports (P(yes) < :data:`THRESHOLD` for each) is asked again against the shown passages it
does not cite: one that supports it becomes its citation (the answer cited the wrong page),
and a sentence none supports is removed. The project's faithfulness
measure asks the same question (:mod:`eval.citation_support`), whose validity on known cases
is in ``results/grounding/validity.json``.
"""

from __future__ import annotations

import math
import re
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass

from typed_rag.engines.base import ChoiceRequest, ChoiceResult
from typed_rag.finishing.citations import check_citations, cited_sentences
from typed_rag.finishing.layout import tidy_layout
from typed_rag.finishing.sentences import answer_pieces
from typed_rag.finishing.verify import FENCE, UNSUPPORTED, join_kept
from typed_rag.messages import CITATION_GROUP
from typed_rag.result import CitedPassage, Result, Unverified

# One engine round of verdicts (the pipeline's Rounds.score, or an engine's score_choices).
Score = Callable[[list[ChoiceRequest]], Awaitable[list[ChoiceResult]]]

THRESHOLD = 0.5
MAX_PASSAGE_CHARS = 2000
VERDICT_PREFIX = "[["
SYSTEM_PROMPT = "You are a careful fact checker. You judge only from the passage you are given."
SUPPORT_PROMPT = (
    "Is the statement supported by the passage? Answer yes only if the passage states or "
    "clearly implies what the statement says; answer no if the passage does not mention "
    'it or says something else. Reply "[[yes]]" or "[[no]]".'
)
_LIST_MARKER = re.compile(r"^\s*(?:\d{1,2}[.)]|[-*•])\s+")


def statement_of(sentence: str) -> str:
    """The claim of a cited sentence: without its ``[n]`` groups, list marker and markup."""
    text = CITATION_GROUP.sub("", sentence)
    text = _LIST_MARKER.sub("", text).replace("**", "")
    text = re.sub(r"\s+([.,;:!?])", r"\1", text)
    return re.sub(r"\s+", " ", text).strip()


def support_messages(
    statement: str, title: str, text: str, prompt: str = SUPPORT_PROMPT
) -> list[dict[str, str]]:
    """Instruction and passage first, the statement last: requests about the same passage
    share their prompt prefix (the llama.cpp engine reuses it). ``prompt``: the yes/no
    question asked (support; :mod:`eval.grounding` also asks for contradiction)."""
    passage = f"{title.strip()}\n{text.strip()[:MAX_PASSAGE_CHARS]}" if title else text.strip()
    user = f"{prompt}\n\nPassage:\n{passage}\n\nStatement: {statement}"
    return [{"role": "system", "content": SYSTEM_PROMPT}, {"role": "user", "content": user}]


def support_request(
    statement: str, title: str, text: str, prompt: str = SUPPORT_PROMPT
) -> ChoiceRequest:
    return ChoiceRequest(
        support_messages(statement, title, text, prompt), VERDICT_PREFIX, ("yes", "no")
    )


def p_yes(logprobs: dict[str, float]) -> float:
    """P(yes) renormalised over the two answers (0.5 when the model gives neither)."""
    yes, no = (math.exp(logprobs.get(k, -math.inf)) for k in ("yes", "no"))
    return yes / (yes + no) if yes + no > 0 else 0.5


@dataclass
class Verdict:
    """One cited sentence of an answer and the best P(yes) of the shown passages it cites."""

    sentence: str
    claim: str  # statement_of(sentence): what was asked, and how the answer's piece is found
    p_supported: float
    cited: tuple[int, ...] = ()  # the shown passages it cites
    recite: int | None = None  # a shown passage it does not cite that supports it

    @property
    def supported(self) -> bool:
        return self.p_supported >= THRESHOLD


async def check_support(
    score: Score, answer: str, passages: Sequence[CitedPassage]
) -> list[Verdict]:
    """A verdict for every sentence of ``answer`` that cites a shown passage, asked in one
    round ordered by passage (a sentence citing only unshown numbers is left to the
    citation checks, a heading or lead-in ending in ":" is not asked)."""
    shown = {p.citation: p for p in passages}
    asks: list[tuple[int, int]] = []  # (sentence index, passage number)
    sentences: list[tuple[str, str, tuple[int, ...]]] = []  # (sentence, claim, cited)
    for sentence, numbers in cited_sentences(answer):
        cited = sorted({n for n in numbers if n in shown})
        claim = statement_of(sentence)
        # a heading or lead-in ("3. **Combining values** [2]:") states nothing to check, and
        # removing it would orphan what it introduces
        if cited and re.search(r"\w", claim) and not claim.endswith(":"):
            asks += [(len(sentences), n) for n in cited]
            sentences.append((sentence, claim, tuple(cited)))
    if not asks:
        return []
    best = await _best_support(score, asks, [c for _, c, _ in sentences], shown)
    return [Verdict(s, c, p, n) for (s, c, n), (p, _) in zip(sentences, best, strict=True)]


async def find_other_support(
    score: Score, verdicts: Sequence[Verdict], passages: Sequence[CitedPassage]
) -> None:
    """For each unsupported verdict, ask the shown passages it does not cite (one round);
    the one with the highest P(yes) at or above :data:`THRESHOLD` becomes its ``recite``."""
    shown = {p.citation: p for p in passages}
    flagged = [v for v in verdicts if not v.supported]
    asks = [(i, n) for i, v in enumerate(flagged) for n in sorted(shown) if n not in v.cited]
    if not asks:
        return
    best = await _best_support(score, asks, [v.claim for v in flagged], shown)
    for v, (p, n) in zip(flagged, best, strict=True):
        if p >= THRESHOLD:
            v.recite = n


async def _best_support(
    score: Score,
    asks: list[tuple[int, int]],
    claims: Sequence[str],
    shown: dict[int, CitedPassage],
) -> list[tuple[float, int | None]]:
    """Per claim, the best P(yes) over the (claim index, passage number) ``asks`` and its
    passage, asked in one round ordered by passage (shared prompt prefixes)."""
    asks = sorted(asks, key=lambda a: (a[1], a[0]))
    requests = [support_request(claims[i], shown[n].title, shown[n].text) for i, n in asks]
    best: list[tuple[float, int | None]] = [(0.0, None)] * len(claims)
    for (i, n), res in zip(asks, await score(requests), strict=True):
        p = p_yes(res.logprobs)
        if p > best[i][0]:
            best[i] = (p, n)
    return best


def without_sentences(answer: str, statements: set[str]) -> tuple[str, set[str]]:
    """``answer`` without the pieces (sentences, list items) whose claim is one of
    ``statements``, and the statements removed. Nothing inside or across a code block goes:
    cutting it would break the block."""
    pieces = _pieces(answer)
    gone = {i for i in _prose(pieces) if statement_of(pieces[i]) in statements}
    kept = join_kept(pieces, gone)
    return re.sub(r"[ \t]+\n", "\n", kept).strip(), {statement_of(pieces[i]) for i in gone}


def with_citations(answer: str, recite: dict[str, int]) -> str:
    """``answer`` with each piece whose claim ``recite`` names citing that passage alone
    (its first citation group becomes ``[n]``, the others go)."""
    pieces = _pieces(answer)
    for i in _prose(pieces):
        n = recite.get(statement_of(pieces[i]))
        first = CITATION_GROUP.search(pieces[i])
        if n is not None and first is not None:
            rest = CITATION_GROUP.sub("", pieces[i][first.end() :])
            pieces[i] = pieces[i][: first.start()] + f"[{n}]" + rest
            pieces[i] = re.sub(r"[ \t]+([.,;:!?])", r"\1", pieces[i])
    return "".join(pieces)


def _pieces(answer: str) -> list[str]:
    """The sentences and list items of ``answer``, joining back into it; cut at line breaks
    too: a list item under a heading without a full stop ("1. **X** [1]:\n   - Y [1].") is
    a piece of its own, as cited_sentences reads it."""
    return [line for piece in answer_pieces(answer) for line in re.split(r"(?=\n)", piece) if line]


def _prose(pieces: Sequence[str]) -> list[int]:
    """The pieces outside code blocks that hold no fence: a check may change them without
    breaking a block."""
    out: list[int] = []
    in_fence = False
    for i, piece in enumerate(pieces):
        fences = piece.count(FENCE)
        if not in_fence and not fences:
            out.append(i)
        in_fence ^= fences % 2 == 1
    return out


async def drop_unsupported(result: Result, score: Score) -> None:
    """Re-cite or remove the cited sentences of ``result.answer`` that no passage they cite
    supports: one a shown passage it does not cite supports cites that passage instead, the
    others go. Each is recorded in ``result.unverified`` (kind ``support``, with the passage
    it now cites); when nothing is left, the answer says the documents do not say (the
    passages are still shown)."""
    verdicts = await check_support(score, result.answer, result.passages)
    flagged = {v.claim: v for v in verdicts if not v.supported}
    if not flagged:
        return
    await find_other_support(score, list(flagged.values()), result.passages)
    recite = {c: v.recite for c, v in flagged.items() if v.recite is not None}
    answer, removed = without_sentences(
        with_citations(result.answer, recite), set(flagged) - set(recite)
    )
    for claim, v in flagged.items():
        result.unverified.append(
            Unverified(
                sentence=v.sentence,
                missing=[],
                kind="support",
                p_supported=round(v.p_supported, 3),
                removed=claim in removed,
                recited=v.recite,
            )
        )
    if not re.search(r"\w", CITATION_GROUP.sub("", answer)):
        answer = UNSUPPORTED
        result.fallbacks.append(
            "support check: no cited sentence is supported by its passage -> the documents "
            "do not say"
        )
    result.answer = tidy_layout(answer)
    result.citations = check_citations(result.answer, {p.citation for p in result.passages}).valid
