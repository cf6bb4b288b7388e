"""Which questions a run evaluates: all, the first N of each subset, or a stratified sample.

The benchmark is reported per subset (the paper's Table 3), so a sample
first splits its size evenly over the subsets (a subset smaller than its
share gives the rest to the others); --sample 30 is 5 questions from each
of the six. Within a subset the share is split over the question types in
proportion to their counts (largest remainder), so the sample keeps each
subset's type mix.
"""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence

from eval.data.labels import QuestionLabel, type_of
from eval.data.wikinfqa import WikiNFQARecord
from typed_rag.errors import UserError
from typed_rag.types import QuestionType


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


def _largest_remainder(weights: Mapping[str, float], size: int) -> dict[str, int]:
    """Split ``size`` in proportion to ``weights``; ties go to the smaller name, for stability."""
    total = sum(weights.values())
    quotas = {k: size * w / total for k, w in weights.items()}
    alloc = {k: int(q) for k, q in quotas.items()}
    for k in sorted(weights, key=lambda k: (-(quotas[k] - alloc[k]), k))[
        : size - sum(alloc.values())
    ]:
        alloc[k] += 1
    return alloc


def _even_split(sizes: Mapping[str, int], size: int) -> dict[str, int]:
    """``size`` split evenly over groups, none given more than it has."""
    alloc = {k: 0 for k in sizes}
    left = size
    open_ = sorted(k for k in sizes if sizes[k] > 0)
    while left > 0 and open_:
        share, extra = divmod(left, len(open_))
        for i, k in enumerate(open_):
            take = min(sizes[k] - alloc[k], share + (1 if i < extra else 0))
            alloc[k] += take
            left -= take
        open_ = [k for k in open_ if alloc[k] < sizes[k]]
    return alloc


# The seed of ``eval run --sample``: the same sample on every machine and rerun.
SAMPLE_SEED = 42


def stratified_sample(
    records: Sequence[WikiNFQARecord],
    labels: Mapping[str, QuestionLabel],
    size: int,
    seed: int = 42,
) -> list[WikiNFQARecord]:
    """``size`` questions, even over subsets, proportional over types; returned in input order."""
    if size < 1:
        raise UserError(f"--sample must be >= 1, got {size}")
    if size >= len(records):
        return list(records)
    by_subset: dict[str, dict[str, list[int]]] = {}
    for i, rec in enumerate(records):
        cell = by_subset.setdefault(rec.subset, {})
        cell.setdefault(type_of(labels, rec.question_id), []).append(i)
    per_subset = _even_split(
        {s: sum(map(len, types.values())) for s, types in by_subset.items()}, size
    )
    rng = random.Random(seed)
    chosen: list[int] = []
    for subset in sorted(by_subset):
        types = by_subset[subset]
        alloc = _largest_remainder({t: len(idx) for t, idx in types.items()}, per_subset[subset])
        for t in sorted(types):
            chosen.extend(rng.sample(types[t], alloc[t]))
    return [records[i] for i in sorted(chosen)]


def select_questions(
    records: Sequence[WikiNFQARecord],
    labels: Mapping[str, QuestionLabel],
    limit: int | None = None,
    sample: int | None = None,
    seed: int = 42,
    types: Sequence[str] | None = None,
    first: int | None = None,
) -> list[WikiNFQARecord]:
    """Keep ``--types`` (stored labels), then apply ``--limit`` (per subset), ``--sample``, and
    ``--first`` (the first N of a seeded shuffle: a larger N extends the same questions, so a
    long run grows in waves that each leave a complete, paired set)."""
    out = list(records)
    if types:
        wanted = {QuestionType.parse(t).value for t in types}
        out = [r for r in out if type_of(labels, r.question_id) in wanted]
        if not out:
            raise UserError(f"no question is labelled {', '.join(sorted(wanted))}")
    if limit is not None:
        out = first_per_subset(out, limit)
    if sample is not None:
        out = stratified_sample(out, labels, sample, seed)
    if first is not None:
        order = list(out)
        random.Random(f"first:{seed}").shuffle(order)
        keep = {r.question_id for r in order[:first]}
        out = [r for r in out if r.question_id in keep]
    return out
