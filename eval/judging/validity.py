"""Judge validity: how often a judging protocol orders answers of known quality correctly.

Wiki-NFQA grades several answers per question (3 best .. 0 wrong); the LINKAGE
reference list uses one per grade, and the others are held out. A judge that
can be trusted ranks held-out grade-3 answers above grade-0 and grade-1 ones.
The failures that matter for an evaluation are on *system-style* answers, so
two kinds of candidates of known quality come from the generator itself:

- ``offtopic``: its fluent answer to a *different* question of the same type:
  it must be placed below every reference, and never first;
- ``nogold``: its answer to the question that contains none of the source
  dataset's short answers: it should score below the held-out grade-3 answer.

Three more probes copy the held-out grade-1 answer with words that add nothing and ask
whether the judge pays for them: ``padded`` appends on-topic sentences that say nothing
(:func:`padding`, length), ``vouched`` one sentence vouching for the answer's sources
(:func:`vouching`, as the small generator writes them), ``scaffolded`` opens it with the
pipeline's talk about its sources (:func:`scaffolding`, the commonest leak the scaffolding
guard rewrites away). A judge that credits content does not score a copy above the answer
as it was.

Judgements are stored per (protocol, model, candidate) in a JSONL file, so
protocols and models are added one run at a time and ensembles are computed
from what is stored.
"""

from __future__ import annotations

import random
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from eval.data.gold import contains_gold, gold_aliases
from eval.data.labels import QuestionLabel, type_of
from eval.data.wikinfqa import WikiNFQARecord
from eval.judging.linkage import LinkageItem, Reference, build_references
from eval.reports.linkage_metrics import ordered, spearman
from typed_rag.errors import UserError

GRADED = "graded"
OFFTOPIC = "offtopic"
NOGOLD = "nogold"
PADDED = "padded"
VOUCHED = "vouched"
SCAFFOLDED = "scaffolded"


def padding(answer: str, question: str) -> str:
    """``answer`` followed by sentences about ``question`` that add no information (the
    ``padded`` probe)."""
    asked = question.strip().rstrip("?")
    return (
        f'{answer.rstrip()} Answering "{asked}?" means looking at the relevant facts and their '
        "context. The answer depends on several factors, and sources describe them in different "
        "ways. Taken together, these points give a fuller picture of the question."
    )


def vouching(answer: str, question: str) -> str:
    """``answer`` followed by a sentence that vouches for its sources and adds nothing (the
    ``vouched`` probe), worded like the ones the default generator appends to its answers."""
    del question  # the same sentence for every question, as the generator writes it
    return (
        f"{answer.rstrip()} This answer is supported by the information provided in the references."
    )


def scaffolding(answer: str, question: str) -> str:
    """``answer`` opened by the pipeline's talk about its sources (the ``scaffolded`` probe),
    worded as the generator's commonest leak: "Based on the information provided in the
    references, ..." (``typed_rag.finishing.scaffolding`` rewrites it away)."""
    del question
    text = answer.strip()
    if text[:1].isupper() and not text[1:2].isupper():
        text = text[:1].lower() + text[1:]
    return f"Based on the information provided in the references, {text}"


# The probes that copy a grade-1 answer with words that add nothing: kind -> the copy.
COPIES = {PADDED: padding, VOUCHED: vouching, SCAFFOLDED: scaffolding}


def probes(names: str) -> tuple[str, ...]:
    """The probes a comma list names (``none``: no copies), checked against :data:`COPIES`."""
    picked = tuple(n.strip() for n in names.split(",") if n.strip() and n.strip() != "none")
    unknown = [n for n in picked if n not in COPIES]
    if unknown:
        raise UserError(
            f"unknown probe {', '.join(unknown)}: choose from {', '.join(COPIES)} or none"
        )
    return picked


@dataclass(frozen=True)
class Candidate:
    """A candidate answer of known quality for one question."""

    key: str
    question_id: str
    kind: str  # graded | offtopic | nogold | padded | vouched | scaffolded
    grade: int | None
    item: LinkageItem

    def to_dict(self) -> dict[str, Any]:
        return {
            "key": self.key,
            "question_id": self.question_id,
            "kind": self.kind,
            "grade": self.grade,
            "question": self.item.question,
            "candidate": self.item.candidate,
        }


def pick_questions(
    records: Sequence[WikiNFQARecord], n: int, seed: int, reference_seed: int
) -> list[WikiNFQARecord]:
    """``n`` questions (seeded) that have a held-out grade-3 answer and another held-out grade."""
    usable = []
    for rec in records:
        spare = _spare(rec, reference_seed)
        if spare.get(3) and any(spare.get(g) for g in (0, 1, 2)):
            usable.append(rec)
    rng = random.Random(seed)
    rng.shuffle(usable)
    return usable[:n]


def _spare(rec: WikiNFQARecord, reference_seed: int) -> dict[int, list[str]]:
    used = {r.text for r in build_references(rec, reference_seed)}
    out: dict[int, list[str]] = defaultdict(list)
    for text, grade in zip(rec.answers, rec.labels, strict=True):
        if text not in used and text not in out[grade]:
            out[grade].append(text)
    return out


def build_candidates(
    records: Sequence[WikiNFQARecord],
    pool: Mapping[str, str],
    labels: Mapping[str, QuestionLabel],
    seed: int,
    reference_seed: int,
    copies: Sequence[str] = tuple(COPIES),
) -> list[Candidate]:
    """Held-out graded answers, plus off-topic and no-gold generator answers from ``pool``;
    and each grade-1 answer's copies named in ``copies`` (:data:`COPIES`).

    ``pool`` maps question id -> the generator's answer to that question. The
    off-topic answer of a question is drawn from pool answers to other
    questions of the same type (any type when none is left).
    """
    rng = random.Random(seed)
    by_type: dict[str, list[str]] = defaultdict(list)
    for qid in sorted(pool):
        by_type[type_of(labels, qid)].append(qid)
    out: list[Candidate] = []
    for rec in records:
        refs = build_references(rec, reference_seed)
        spare = _spare(rec, reference_seed)

        for grade in (3, 2, 1, 0):
            if spare.get(grade):
                text = rng.choice(spare[grade])
                out.append(_candidate(rec, refs, GRADED, grade, text))
                if grade == 1:
                    for kind in copies:
                        copy = COPIES[kind](text, rec.question)
                        out.append(_candidate(rec, refs, kind, grade, copy))
        others = [
            q for q in by_type.get(type_of(labels, rec.question_id), []) if q != rec.question_id
        ]
        if not others:
            others = [q for q in sorted(pool) if q != rec.question_id]
        if others:
            out.append(_candidate(rec, refs, OFFTOPIC, None, pool[rng.choice(others)]))
        own = pool.get(rec.question_id)
        aliases = gold_aliases(rec.gold)
        if own and aliases and not contains_gold(own, aliases):
            out.append(_candidate(rec, refs, NOGOLD, None, own))
    return out


def _candidate(
    rec: WikiNFQARecord, refs: list[Reference], kind: str, grade: int | None, text: str
) -> Candidate:
    key = f"{rec.question_id}/{kind}" + (f"/{grade}" if grade is not None else "")
    return Candidate(key, rec.question_id, kind, grade, LinkageItem(key, rec.question, refs, text))


# ---------------------------------------------------------------- metrics


def _pair_accuracy(pairs: Sequence[tuple[float, float]]) -> float:
    """Share of (better, worse) pairs ordered correctly; ties count half."""
    if not pairs:
        return float("nan")
    return float(np.mean([ordered(a, b) for a, b in pairs]))


def validity(
    candidates: Sequence[Candidate],
    quality: Mapping[str, float | None],
    worst: Mapping[str, bool],
    best: Mapping[str, bool],
    n_boot: int = 1000,
    seed: int = 42,
) -> dict[str, Any]:
    """The validity numbers of one protocol, with bootstrap CIs over questions."""
    by_q: dict[str, dict[str, Candidate]] = defaultdict(dict)
    for c in candidates:
        if quality.get(c.key) is not None:
            by_q[c.question_id][c.key] = c
    qids = sorted(by_q)

    def stats(sample: Sequence[str]) -> dict[str, float]:
        p30, p31, pall, nogold, grades, scores = [], [], [], [], [], []
        off_last, off_first = [], []
        copies: dict[str, list[tuple[float, float]]] = {kind: [] for kind in COPIES}
        for qid in sample:
            cands = by_q[qid].values()
            graded = {c.grade: quality[c.key] for c in cands if c.kind == GRADED}
            for c in cands:
                if c.kind == GRADED:
                    grades.append(float(c.grade))  # type: ignore[arg-type]
                    scores.append(quality[c.key])
                elif c.kind == OFFTOPIC:
                    off_last.append(float(worst[c.key]))
                    off_first.append(float(best[c.key]))
                elif c.kind == NOGOLD and 3 in graded:
                    nogold.append((graded[3], quality[c.key]))
                elif c.kind in copies and 1 in graded:
                    copies[c.kind].append((graded[1], quality[c.key]))
            if 3 in graded and 0 in graded:
                p30.append((graded[3], graded[0]))
            if 3 in graded and 1 in graded:
                p31.append((graded[3], graded[1]))
            for hi in graded:
                for lo in graded:
                    if hi > lo:
                        pall.append((graded[hi], graded[lo]))
        return {
            "acc_3v0": _pair_accuracy(p30),
            "acc_3v1": _pair_accuracy(p31),
            "acc_pairs": _pair_accuracy(pall),
            "spearman": spearman(grades, scores),  # type: ignore[arg-type]
            "acc_offtopic": float(np.mean(off_last)) if off_last else float("nan"),
            "offtopic_first": float(np.mean(off_first)) if off_first else float("nan"),
            "acc_nogold": _pair_accuracy(nogold),
            # the answer above its copy with sentences appended (ties half): 0.5 or more, the
            # judge does not pay for them
            "acc_padding": _pair_accuracy(copies[PADDED]),
            "acc_vouching": _pair_accuracy(copies[VOUCHED]),
            "acc_scaffolding": _pair_accuracy(copies[SCAFFOLDED]),
            "n_3v0": len(p30),
            "n_3v1": len(p31),
            "n_offtopic": len(off_last),
            "n_nogold": len(nogold),
            "n_padding": len(copies[PADDED]),
            "n_vouching": len(copies[VOUCHED]),
            "n_scaffolding": len(copies[SCAFFOLDED]),
        }

    point = stats(qids)
    rng = np.random.default_rng(seed)
    boots: dict[str, list[float]] = defaultdict(list)
    for _ in range(n_boot if len(qids) > 1 else 0):
        sample = [qids[i] for i in rng.integers(0, len(qids), len(qids))]
        for k, v in stats(sample).items():
            if k.startswith(("acc", "spearman", "offtopic")) and not np.isnan(v):
                boots[k].append(v)
    ci = {
        k: [round(float(np.quantile(v, 0.025)), 4), round(float(np.quantile(v, 0.975)), 4)]
        for k, v in boots.items()
    }
    grade_means = defaultdict(list)
    for qid in qids:
        for c in by_q[qid].values():
            grade_means[c.kind if c.kind != GRADED else f"grade{c.grade}"].append(quality[c.key])
    return {
        **{k: (round(v, 4) if isinstance(v, float) else v) for k, v in point.items()},
        "ci": ci,
        "n": len(qids),
        "mean_quality": {k: round(float(np.mean(v)), 4) for k, v in sorted(grade_means.items())},
    }
