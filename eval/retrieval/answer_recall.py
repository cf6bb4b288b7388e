"""Answer recall on Wiki-NFQA: is the gold answer string in the top-k passages?

The definition of ``wiki-corpus/coverage.json``: a question is a hit at k when the
normalised ground-truth answer string (any alias) is a substring of the normalised text
of one of its top-k passages. Normalisation is SQuAD's: lower case, punctuation and
English articles removed, spaces collapsed. Non-factoid answers are longer than these
strings, so this is a lower bound on what the passages can support, but it needs no
judge and is the same number for every configuration.
"""

from __future__ import annotations

import ast
import json
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from eval.data.gold import gold_aliases, normalize
from typed_rag.retrieval import Passage

KS: tuple[int, ...] = (1, 5, 10, 20, 100)
SUBSETS: tuple[str, ...] = ("nq", "trivia", "squad", "hotpotqa", "2wikimultihopqa", "musique")


def ground_truth(data_dir: Path, subsets: Iterable[str] = SUBSETS) -> dict[str, list[str]]:
    """question_id -> normalised ground-truth answer aliases (a list repr is expanded)."""
    out: dict[str, list[str]] = {}
    for subset in subsets:
        path = Path(data_dir) / subset / "annotated_odqa_nf_test.jsonl"
        if not path.is_file():  # a subset left out of the data folder has no questions
            continue
        for line in path.read_text(encoding="utf-8").splitlines():
            if not line.strip():
                continue
            rec = json.loads(line)
            ad = rec.get("answer_dict")
            if isinstance(ad, str):
                ad = ast.literal_eval(ad)
            truth = (ad or {}).get("ground_truth", {}).values()
            out[rec["question_id"]] = gold_aliases(str(v) for v in truth)
    return out


class HitFinder:
    """First rank at which a passage holds an alias; normalised texts are cached by id."""

    def __init__(self) -> None:
        self._texts: dict[str, str] = {}

    def first_hit_rank(self, passages: Sequence[Passage], aliases: Sequence[str]) -> int | None:
        """1-based rank of the first passage containing an alias, or None."""
        if not aliases:
            return None
        for rank, p in enumerate(passages, 1):
            text = self._texts.get(p.id)
            if text is None:
                text = self._texts[p.id] = normalize(p.text)
            if any(a in text for a in aliases):
                return rank
        return None


def recall_at(ranks: Sequence[int | None], ks: Sequence[int] = KS) -> dict[str, float]:
    """Share of questions with a hit at each k (keys are the k's as strings)."""
    n = len(ranks)
    return {
        str(k): round(sum(1 for r in ranks if r is not None and r <= k) / n, 4) if n else 0.0
        for k in ks
    }


def grouped_recall(
    ranks: Sequence[int | None], groups: Mapping[str, Sequence[int]], ks: Sequence[int] = KS
) -> dict[str, dict[str, Any]]:
    """``{group: {"n", "recall"}}`` for index lists into ``ranks``."""
    out: dict[str, dict[str, Any]] = {}
    for name, idx in groups.items():
        rs = [ranks[i] for i in idx]
        out[name] = {"n": len(rs), "recall": recall_at(rs, ks)}
    return out


def hits_table(
    records: Sequence[Any], ranks: Sequence[int | None], ks: Sequence[int] = KS
) -> dict[str, dict[str, float | int]]:
    """Per subset of ``records`` and over ``all``: ``n``, ``hits@k`` and ``R@k`` at each k."""
    table: dict[str, dict[str, float | int]] = {}
    groups: dict[str, list[int | None]] = {}
    for rec, rank in zip(records, ranks, strict=True):
        groups.setdefault(rec.subset, []).append(rank)
        groups.setdefault("all", []).append(rank)
    for name, rs in groups.items():
        row: dict[str, float | int] = {"n": len(rs)}
        for k in ks:
            hits = sum(1 for r in rs if r is not None and r <= k)
            row[f"hits@{k}"] = hits
            row[f"R@{k}"] = round(hits / len(rs), 4)
        table[name] = row
    return table
