"""The support and contradiction judges on known cases, before their numbers are trusted.

From each answerable devset record and the passage it was written from:
- ``copied``: the passage's own first sentence, against the passage (must be supported);
- ``reference``: the first sentence of the grade-3 reference, written from the passage
  (supported, in the main);
- ``flipped``: that sentence negated (:func:`flip`), against the same passage (must be
  contradicted, and not supported);
- ``wrong passage``: the reference sentence against the next record's passage (neither).

A judge whose ``flipped`` sentences pass as supported, or whose ``wrong passage`` ones do, is
paying for shared words rather than meaning; the summary gives each case's rates.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from eval.citation_support import SUPPORT_PROMPT, THRESHOLD, support_request
from eval.grounding.measure import CONTRADICTION_PROMPT
from eval.judging.linkage_prob import p_yes
from typed_rag.engines.base import Engine
from typed_rag.finishing.citations import split_sentences

CASES = ("copied", "reference", "flipped", "wrong passage")
# One negation per sentence: the first auxiliary gets "not" (or loses it), else a denial.
_AUX = re.compile(
    r"\b(is|are|was|were|can|could|will|would|should|must|does|do|did|has|have|may)"
    r"(\s+not\b|n't\b)?",
    re.IGNORECASE,
)


def flip(sentence: str) -> str:
    """The sentence made to say the opposite, by its first auxiliary verb."""
    m = _AUX.search(sentence)
    if m is None:  # "SQLite ..." keeps its capitals; "The ..." does not
        head = sentence[:1].lower() if sentence[1:2].islower() else sentence[:1]
        return f"It is not true that {head}{sentence[1:]}"
    verb, negation = m.group(1), m.group(2)
    replaced = verb if negation else f"{verb} not"
    return sentence[: m.start()] + replaced + sentence[m.end() :]


@dataclass(frozen=True)
class Probe:
    case: str
    statement: str
    title: str
    text: str


def probes(
    records: Sequence[Mapping[str, Any]], texts: Mapping[str, tuple[str, str]]
) -> list[Probe]:
    """The four cases for each answerable record whose passage text is known (``texts``:
    passage id -> (title, text)); the wrong passage is the next such record's."""
    usable = [
        r
        for r in records
        if r.get("answerable", True) and str(r.get("passage_id")) in texts and r.get("references")
    ]
    out = []
    for i, r in enumerate(usable):
        title, text = texts[str(r["passage_id"])]
        other = texts[str(usable[(i + 1) % len(usable)]["passage_id"])]
        full = next(ref["text"] for ref in r["references"] if ref["grade"] == 3)
        first = (split_sentences(full) or [full])[0]
        copied = (split_sentences(" ".join(text.split())) or [text])[0]
        out += [
            Probe("copied", copied, title, text),
            Probe("reference", first, title, text),
            Probe("flipped", flip(first), title, text),
        ]
        if len(usable) > 1:
            out.append(Probe("wrong passage", first, *other))
    return out


async def judge_probes(
    engine: Engine, items: Sequence[Probe], batch_size: int = 16
) -> list[dict[str, Any]]:
    """Each probe's P(supported) and P(contradicted)."""
    rows = []
    for start in range(0, len(items), batch_size):
        chunk = items[start : start + batch_size]
        reqs = [
            support_request(p.statement, p.title, p.text, prompt)
            for p in chunk
            for prompt in (SUPPORT_PROMPT, CONTRADICTION_PROMPT)
        ]
        res = await engine.score_choices(reqs)
        for j, p in enumerate(chunk):
            rows.append(
                {
                    "case": p.case,
                    "statement": p.statement,
                    "title": p.title,
                    "p_supported": p_yes(res[2 * j].logprobs),
                    "p_contradicted": p_yes(res[2 * j + 1].logprobs),
                }
            )
    return rows


def gated(p_supported: float, p_contradicted: float) -> bool:
    """Contradicted as ``eval grounding`` counts it: the contradiction judge says yes and
    the support judge says no (alone, the small judge's yes follows shared words)."""
    return p_contradicted >= THRESHOLD > p_supported


def rates(rows: Sequence[Mapping[str, Any]]) -> dict[str, dict[str, Any]]:
    """Per case: n, the shares judged supported, contradicted, and contradicted when gated
    by the support judge (:func:`gated`)."""
    out = {}
    for case in CASES:
        mine = [r for r in rows if r["case"] == case]
        n = len(mine)
        votes = [
            (r["p_supported"] >= THRESHOLD, r["p_contradicted"] >= THRESHOLD,
             gated(r["p_supported"], r["p_contradicted"]))
            for r in mine
        ]  # fmt: skip
        out[case] = {"n": n} | {
            name: sum(v[i] for v in votes) / n if n else None
            for i, name in enumerate(("supported", "contradicted", "contradicted_gated"))
        }
    return out
