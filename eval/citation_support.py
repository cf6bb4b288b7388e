"""Citation support: is each cited sentence of an answer supported by the passage it cites?

The judge-free :func:`typed_rag.finishing.citations.citation_share` says whether an answer
cites a passage it was shown; this module says whether the citations hold (issue
15: "at least 70% of cited sentences are judged supported by their citation").

Each final answer is split by :func:`typed_rag.finishing.citations.cited_sentences` into
sentences with the numbers they cite. For every (sentence, cited passage that
was shown), a judge model is asked "Is the statement supported by the passage?"
and its next-token probabilities of ``yes`` / ``no`` after ``[[`` give P(yes)
(one forward pass, deterministic, nothing to parse: the relevance gate's method in
:mod:`eval.judging.linkage_prob`). As in ALCE's *citation recall*, a sentence counts as
**supported** when P(yes) >= 0.5 for at least one of its cited shown passages; a
citation of a number that was never shown supports nothing, so a sentence citing
only such numbers is unsupported without asking. (ALCE's citation precision, which
asks whether each citation is needed, is not measured.)

Per method the summary gives the cited sentences, the share supported (sentences
pooled; the 95% interval is a bootstrap over questions, which keeps an answer's
sentences together) and the answers with at least one cited sentence. Pairs of
methods are compared on the questions where both cite something, by the paired
bootstrap of the per-question share of supported sentences. Verdicts are stored
by (judge model, question, method, sentence, passage id), so a killed run
resumes and a rerun asks nothing twice.
"""

from __future__ import annotations

import json
import re
from collections import defaultdict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from eval.judging.linkage_prob import p_yes
from eval.reports.linkage_metrics import Estimate, paired_difference
from eval.reports.paired import PAIRS
from eval.store import JsonlStore
from typed_rag.engines.base import Engine
from typed_rag.finishing.citations import cited_sentences
from typed_rag.pipelines.support import (
    SUPPORT_PROMPT,
    THRESHOLD,
    statement_of,
    support_request,
)

VERDICTS = "verdicts.jsonl"
SENTENCES = "support.jsonl"
SUMMARY = "summary.json"

# Passage (title, text) by id, for runs committed without texts (eval.store_passage_text=false).
Lookup = Callable[[Sequence[str]], Mapping[str, tuple[str, str]]]
Progress = Callable[[int, int], None]


@dataclass
class CitedSentence:
    """One cited sentence of one answer: what it cites, split into shown and unshown numbers."""

    question_id: str
    method: str
    type: str
    sentence: str
    statement: str
    shown: dict[int, str]  # cited number -> passage id, for numbers the answer was shown
    unshown: list[int] = field(default_factory=list)


def sentences_of(row: Mapping[str, Any]) -> list[CitedSentence]:
    """The cited sentences of one ``answers.jsonl`` row (a sentence with no words is skipped)."""
    passages = (row.get("result") or {}).get("passages") or []
    ids = {int(p["citation"]): str(p["id"]) for p in passages if p.get("citation") is not None}
    out = []
    for sentence, numbers in cited_sentences(str(row.get("answer") or "")):
        statement = statement_of(sentence)
        if not re.search(r"\w", statement):
            continue
        out.append(
            CitedSentence(
                question_id=str(row["question_id"]),
                method=str(row["method"]),
                type=str(row.get("type") or ""),
                sentence=sentence,
                statement=statement,
                shown={n: ids[n] for n in numbers if n in ids},
                unshown=[n for n in numbers if n not in ids],
            )
        )
    return out


def common_rows(
    rows: Sequence[Mapping[str, Any]],
    methods: Sequence[str],
    order: Sequence[str] = (),
    limit: int | None = None,
) -> list[Mapping[str, Any]]:
    """The rows of ``methods`` for the questions every one of them answered: in ``order``
    (the run's question ids), then file order; only the first ``limit`` questions."""
    by_q: dict[str, dict[str, Mapping[str, Any]]] = defaultdict(dict)
    for row in rows:
        if row.get("method") in methods:
            by_q[str(row["question_id"])][str(row["method"])] = row
    rank = {q: i for i, q in enumerate(order)}
    qs = [q for q, d in by_q.items() if all(m in d for m in methods)]
    qs.sort(key=lambda q: rank.get(q, len(rank)))
    if limit:
        qs = qs[:limit]
    return [by_q[q][m] for q in qs for m in methods]


def _key(row: Mapping[str, Any]) -> str:
    parts = ("model", "question_id", "method", "sentence", "passage_id")
    return "\t".join(str(row[k]) for k in parts)


class SupportRun:
    """One output folder: cached verdicts, then per-sentence rows and a summary.

    ``prompt`` and ``verdicts`` name the question asked of each (sentence, passage) and the
    file its verdicts are kept in (support by default; contradiction in :mod:`eval.grounding`).
    """

    def __init__(
        self,
        out_dir: Path,
        engine: Engine,
        model: str,
        batch_size: int = 16,
        prompt: str = SUPPORT_PROMPT,
        verdicts: str = VERDICTS,
    ) -> None:
        self.out_dir = Path(out_dir)
        self.out_dir.mkdir(parents=True, exist_ok=True)
        self.engine = engine
        self.model = model
        self.batch_size = max(1, batch_size)
        self.prompt = prompt
        self.verdicts = JsonlStore(self.out_dir / verdicts, key=_key)

    def p_yes(self, s: CitedSentence, passage_id: str) -> float | None:
        row = self.verdicts.get(_key(self._row(s, passage_id)))
        return None if row is None else float(row["p_yes"])

    def _row(self, s: CitedSentence, passage_id: str) -> dict[str, Any]:
        return {
            "model": self.model,
            "question_id": s.question_id,
            "method": s.method,
            "sentence": s.sentence,
            "passage_id": passage_id,
        }

    def pending(self, sentences: Sequence[CitedSentence]) -> list[tuple[CitedSentence, str]]:
        """(sentence, passage id) pairs without a stored verdict, grouped by passage."""
        todo = {
            _key(self._row(s, pid)): (s, pid)
            for s in sentences
            for pid in s.shown.values()
            if self.p_yes(s, pid) is None
        }
        return sorted(todo.values(), key=lambda sp: (sp[0].question_id, sp[1]))

    async def judge_missing(
        self,
        sentences: Sequence[CitedSentence],
        passages: Mapping[str, Mapping[str, Any]],
        lookup: Lookup | None = None,
        on_progress: Progress | None = None,
    ) -> int:
        """Ask the judge for every missing verdict; returns how many were asked.

        Texts missing from ``passages`` (id -> title, text) come from ``lookup``, opened
        only when something is to be judged; an id found nowhere raises KeyError.
        """
        todo = self.pending(sentences)
        if not todo:
            return 0
        texts = {pid: (str(p.get("title") or ""), p.get("text")) for pid, p in passages.items()}
        missing = sorted({pid for _, pid in todo if not texts.get(pid, ("", None))[1]})
        if missing and lookup is not None:
            found = lookup(missing)
            texts.update({pid: found[pid] for pid in missing if pid in found})
        unknown = [pid for _, pid in todo if not texts.get(pid, ("", None))[1]]
        if unknown:
            raise KeyError(f"no text for {len(set(unknown))} passage id(s), e.g. {unknown[:3]}")
        for start in range(0, len(todo), self.batch_size):
            chunk = todo[start : start + self.batch_size]
            reqs = [support_request(s.statement, *texts[pid], self.prompt) for s, pid in chunk]
            results = await self.engine.score_choices(reqs)
            self.verdicts.append(
                {**self._row(s, pid), "statement": s.statement, "p_yes": p_yes(r.logprobs)}
                for (s, pid), r in zip(chunk, results, strict=True)
            )
            if on_progress:
                on_progress(start + len(chunk), len(todo))
        return len(todo)

    def sentence_rows(self, sentences: Sequence[CitedSentence]) -> list[dict[str, Any]]:
        """One row per cited sentence with its verdicts; ``supported`` None while one is missing."""
        rows = []
        for s in sentences:
            probs = {n: self.p_yes(s, pid) for n, pid in s.shown.items()}
            known = [p for p in probs.values() if p is not None]
            done = len(known) == len(probs)
            supported = any(p >= THRESHOLD for p in known)
            rows.append(
                {
                    "question_id": s.question_id,
                    "method": s.method,
                    "type": s.type,
                    "sentence": s.sentence,
                    "cited": sorted([*s.shown, *s.unshown]),
                    "unshown": s.unshown,
                    "p_yes": {str(n): p for n, p in probs.items()},
                    "supported": supported if (done or supported) else None,
                }
            )
        return rows


def ratio_estimate(
    num: Sequence[float], den: Sequence[float], n_boot: int = 1000, seed: int = 42
) -> Estimate:
    """``sum(num) / sum(den)`` with a bootstrap 95% CI resampling the (num, den) pairs
    (questions); ``count`` is the number of pairs."""
    a, b = np.asarray(num, dtype=float), np.asarray(den, dtype=float)
    if not a.size or b.sum() <= 0:
        return Estimate(float("nan"), float("nan"), float("nan"), int(a.size))
    mean = float(a.sum() / b.sum())
    if a.size == 1 or n_boot <= 0:
        return Estimate(mean, mean, mean, 1)
    idx = np.random.default_rng(seed).integers(0, a.size, size=(n_boot, a.size))
    ratios = a[idx].sum(axis=1) / np.maximum(b[idx].sum(axis=1), 1e-12)
    low, high = np.quantile(ratios, [0.025, 0.975])
    return Estimate(mean, float(low), float(high), int(a.size))


def pooled_difference(
    a: Mapping[str, tuple[int, int]],
    b: Mapping[str, tuple[int, int]],
    n_boot: int = 2000,
    seed: int = 42,
) -> dict[str, Any]:
    """Share of supported cited sentences (pooled, the issue's measure) of ``a`` minus
    ``b``, with a paired bootstrap over questions (a question keeps both its counts; a
    side with no judged sentence in a resample counts 0). Counts: question -> (supported,
    judged)."""
    qs = sorted(set(a) | set(b))
    m = np.array([[*a.get(q, (0, 0)), *b.get(q, (0, 0))] for q in qs], dtype=float)

    def diff(x: np.ndarray) -> np.ndarray:
        s = x.sum(axis=-2)
        return s[..., 0] / np.maximum(s[..., 1], 1) - s[..., 2] / np.maximum(s[..., 3], 1)

    idx = np.random.default_rng(seed).integers(0, len(qs), size=(n_boot, len(qs)))
    low, high = np.quantile(diff(m[idx]), [0.025, 0.975])
    return {"n": len(qs), "diff": float(diff(m)), "ci": [float(low), float(high)]}


def counts_by_question(rows: Sequence[Mapping[str, Any]]) -> dict[str, tuple[int, int]]:
    """Per question of ``rows`` (``support.jsonl`` rows): (supported, judged) cited
    sentences; a sentence still without a verdict is left out."""
    counts: dict[str, tuple[int, int]] = {}
    for r in rows:
        if r["supported"] is not None:
            ok, n = counts.get(str(r["question_id"]), (0, 0))
            counts[str(r["question_id"])] = (ok + int(r["supported"]), n + 1)
    return counts


def summarize(
    answers: Sequence[Mapping[str, Any]],
    rows: Sequence[Mapping[str, Any]],
    methods: Sequence[str],
    n_boot: int = 1000,
    seed: int = 42,
) -> dict[str, Any]:
    """Per method and paired; sentences still without a verdict are left out (``pending``)."""
    mine = {m: [r for r in rows if r["method"] == m] for m in methods}
    per_q = {m: counts_by_question(mine[m]) for m in methods}
    pending = {m: sum(r["supported"] is None for r in mine[m]) for m in methods}
    unshown = {m: sum(bool(r["unshown"]) for r in mine[m]) for m in methods}
    out: dict[str, Any] = {}
    for m in methods:
        n_answers = sum(1 for a in answers if a["method"] == m)
        counts = list(per_q[m].values())
        est = ratio_estimate([c[0] for c in counts], [c[1] for c in counts], n_boot, seed)
        out[m] = {
            "answers": n_answers,
            "answers_citing": len(counts),
            "answers_citing_share": len(counts) / n_answers if n_answers else None,
            "sentences": sum(c[1] for c in counts),
            "supported": sum(c[0] for c in counts),
            "share": est.to_dict(),
            "sentences_citing_unshown": unshown[m],
            "pending": pending[m],
        }
    paired = []
    for a, b in PAIRS:
        if a not in per_q or b not in per_q:
            continue
        qs = sorted(set(per_q[a]) & set(per_q[b]))
        d = paired_difference(
            [per_q[a][q][0] / per_q[a][q][1] for q in qs],
            [per_q[b][q][0] / per_q[b][q][1] for q in qs],
            n_boot,
            seed,
        )
        paired.append({"a": a, "b": b, "n": len(qs), "diff": d.mean, "ci": [d.low, d.high]})
    return {"methods": out, "paired": paired}


def write(out_dir: Path, rows: Sequence[Mapping[str, Any]], summary: Mapping[str, Any]) -> None:
    """``support.jsonl`` (one row per cited sentence) and ``summary.json``, rewritten whole."""
    out_dir = Path(out_dir)
    with (out_dir / SENTENCES).open("w", encoding="utf-8") as f:
        f.writelines(json.dumps(r, ensure_ascii=False) + "\n" for r in rows)
    (out_dir / SUMMARY).write_text(json.dumps(summary, indent=1) + "\n", encoding="utf-8")


def _pct(x: float | None) -> str:
    return "-" if x is None or x != x else f"{100 * x:.1f}%"


def render(summary: Mapping[str, Any]) -> str:
    """A small plain-text table of the summary."""
    lines = [
        f"citation support (judge {summary.get('judge')}, supported = P(yes) >= {THRESHOLD} "
        f"for a cited shown passage; {summary.get('questions')} questions)",
        f"{'method':<20} {'answers citing':>15} {'sentences':>9} {'supported [95% CI]':>26}",
    ]
    for m, s in summary["methods"].items():
        sh = s["share"]
        ci = f"{_pct(sh['mean'])} [{_pct(sh['low'])}, {_pct(sh['high'])}]"
        citing = f"{s['answers_citing']}/{s['answers']}"
        lines.append(f"{m:<20} {citing:>15} {s['sentences']:>9} {ci:>26}")
    for d in summary["paired"]:
        lo, hi = d["ci"]
        lines.append(
            f"{d['a']} - {d['b']} (per-question share, n={d['n']}): "
            f"{100 * d['diff']:+.1f} points [{100 * lo:+.1f}, {100 * hi:+.1f}]"
        )
    return "\n".join(lines)


async def evaluate_support(
    engine: Engine,
    answers: Sequence[Mapping[str, Any]],
    out_dir: Path,
    *,
    model: str,
    methods: Sequence[str],
    lookup: Lookup | None = None,
    batch_size: int = 16,
    n_boot: int = 1000,
    seed: int = 42,
    on_progress: Progress | None = None,
    meta: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """Judge what is missing for ``answers`` (rows of ``answers.jsonl``), write the files
    (``meta``, e.g. the run directory, heads the summary)."""
    sentences = [s for a in answers for s in sentences_of(a)]
    passages = {
        str(p["id"]): p for a in answers for p in (a.get("result") or {}).get("passages") or []
    }
    run = SupportRun(out_dir, engine, model, batch_size)
    asked = await run.judge_missing(sentences, passages, lookup, on_progress)
    rows = run.sentence_rows(sentences)
    summary = {
        **(meta or {}),
        "judge": model,
        "threshold": THRESHOLD,
        "questions": len({a["question_id"] for a in answers}),
        "verdicts_asked": asked,
        **summarize(answers, rows, methods, n_boot, seed),
    }
    write(out_dir, rows, summary)
    return summary
