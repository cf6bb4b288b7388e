"""Which questions a run evaluates: all, the first N of each subset, or a stratified sample.

A small sample drawn at random could miss a rare type (36 Comparison
questions in 945) or a small subset; stratifying by (subset, type) with
proportional, largest-remainder allocation keeps each cell's share, so a
100-question smoke run looks like the benchmark in miniature.
"""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence

from eval.labels import QuestionLabel, type_of
from eval.wikinfqa import WikiNFQARecord
from typed_rag.errors import UserError


def first_per_subset(records: Sequence[WikiNFQARecord], limit: int) -> list[WikiNFQARecord]:
    """The first ``limit`` questions of each subset, in file order."""
    if limit < 1:
        raise UserError(f"--limit must be >= 1, got {limit}")
    seen: dict[str, int] = {}
    out = []
    for rec in records:
        if seen.get(rec.subset, 0) < limit:
            out.append(rec)
            seen[rec.subset] = seen.get(rec.subset, 0) + 1
    return out


def stratified_sample(
    records: Sequence[WikiNFQARecord],
    labels: Mapping[str, QuestionLabel],
    size: int,
    seed: int = 42,
) -> list[WikiNFQARecord]:
    """``size`` questions, proportional to the (subset, type) cells; returned in input order."""
    if size < 1:
        raise UserError(f"--sample must be >= 1, got {size}")
    if size >= len(records):
        return list(records)
    cells: dict[tuple[str, str], list[int]] = {}
    for i, rec in enumerate(records):
        cells.setdefault((rec.subset, type_of(labels, rec.question_id)), []).append(i)
    total = len(records)
    quotas = {cell: size * len(idx) / total for cell, idx in cells.items()}
    alloc = {cell: int(q) for cell, q in quotas.items()}
    left = size - sum(alloc.values())
    # Largest remainder first; ties broken by cell name so the result is stable.
    by_remainder = sorted(cells, key=lambda c: (-(quotas[c] - alloc[c]), c))
    for cell in by_remainder[:left]:
        alloc[cell] += 1
    rng = random.Random(seed)
    chosen: list[int] = []
    for cell in sorted(cells):
        chosen.extend(rng.sample(cells[cell], alloc[cell]))
    return [records[i] for i in sorted(chosen)]


def select_questions(
    records: Sequence[WikiNFQARecord],
    labels: Mapping[str, QuestionLabel],
    limit: int | None = None,
    sample: int | None = None,
    seed: int = 42,
) -> list[WikiNFQARecord]:
    """Apply ``--limit`` (per subset) then ``--sample`` (stratified)."""
    out = list(records)
    if limit is not None:
        out = first_per_subset(out, limit)
    if sample is not None:
        out = stratified_sample(out, labels, sample, seed)
    return out
