"""Paired differences of the judge-free grounding measures between two measured states
(e.g. typed-rag after minus typed-rag before), per question, with a bootstrap interval.

Reads the per-answer records ``eval grounding`` writes (``<out>/<when>/answers.jsonl``): an
answer is span-faithful when no span of it is missing from its shown passages (an answer
without spans counts as faithful: it stated nothing checkable wrongly), and its uncited
share is its sentences without a citation over its sentences.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from eval.reports.linkage_metrics import estimate
from typed_rag.finishing.citations import split_sentences


def _measures(record: Mapping[str, Any]) -> dict[str, float]:
    sentences = max(1, len(split_sentences(str(record.get("answer") or ""))))
    rank = record.get("rank")
    return {
        "span_faithful": float(not record.get("spans_missing")),
        "uncited_share": len(record.get("uncited") or []) / sentences,
        "words": float(len(str(record.get("answer") or "").split())),
        **({"rr": 1.0 / rank} if rank else {}),
    }


def paired(
    a: Sequence[Mapping[str, Any]], b: Sequence[Mapping[str, Any]], *, seed: int = 42
) -> dict[str, Any]:
    """A minus B per measure over the answerable questions both hold: mean, interval, n."""
    mine = {str(r["question_id"]): _measures(r) for r in a if r.get("answerable", True)}
    theirs = {str(r["question_id"]): _measures(r) for r in b if r.get("answerable", True)}
    both = sorted(set(mine) & set(theirs))
    out: dict[str, Any] = {"questions": len(both)}
    for key in ("span_faithful", "uncited_share", "words", "rr"):
        diffs = [mine[q][key] - theirs[q][key] for q in both if key in mine[q] and key in theirs[q]]
        if diffs:
            out[key] = estimate(diffs, seed=seed).to_dict()
    return out
