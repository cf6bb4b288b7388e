"""Context coverage of several retrievers' passages: can they answer a question's core sub-questions?

For a sample of questions, each question's core sub-questions come from the coverage
judge's decomposition (made once, or reused from an eval run's ``subquestions.jsonl``);
then the judge scores, per retriever, how well its top passages alone answer each of
them (0-5, answerable at ``ANSWERABLE_THRESHOLD`` and above). Used to compare
retrievers side by side (``benchmarks/hybrid_bench.py --coverage N``).
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from eval.answer_coverage.judge import (
    ANSWERABILITY_SCHEMA,
    ANSWERABLE_THRESHOLD,
    CoverageJudge,
    answerability_messages,
)
from eval.answer_coverage.parse import parse_answerability
from eval.judging.resample import generate_until_parsed
from typed_rag.engines.factory import build_engine


def load_decompositions(path: Path) -> dict[str, list[str]]:
    """question_id -> core sub-questions, from an eval run's ``subquestions.jsonl``."""
    out: dict[str, list[str]] = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        if not line.strip():
            continue
        row = json.loads(line)
        core = (row.get("decomposition") or {}).get("core") or []
        if row.get("status") == "ok" and core:
            out[row["question_id"]] = [str(c) for c in core]
    return out


def context_coverage(
    settings: Any,
    records: Sequence[Any],
    contexts: dict[str, list[list[Any]]],
    known: dict[str, list[str]] | None = None,
) -> dict[str, Any]:
    """Decompose each question once (unless ``known`` has its core sub-questions), then
    judge each retriever's top-5 passages."""
    engine = build_engine(settings)
    judge = CoverageJudge.from_settings(engine, settings)
    thr = ANSWERABLE_THRESHOLD

    async def run() -> dict[str, Any]:
        await engine.start()
        try:
            t0 = time.perf_counter()
            given = known or {}
            todo = [r for r in records if r.question_id not in given]
            decs = await judge.decompose([r.question for r in todo]) if todo else []
            made = {
                r.question_id: (d.value.core if d.ok and d.value else [])
                for r, d in zip(todo, decs, strict=True)
            }
            out: dict[str, Any] = {
                "questions": len(records),
                "decomposed": sum(d.ok for d in decs),
                "reused_decompositions": len(records) - len(todo),
                "threshold": thr,
            }
            cores = [given.get(r.question_id) or made.get(r.question_id, []) for r in records]
            for name, ctx in contexts.items():
                idx = [i for i, c in enumerate(cores) if c and ctx[i]]
                reqs = [
                    judge._request(
                        answerability_messages(
                            cores[i], [{"title": p.title, "text": p.text} for p in ctx[i]]
                        ),
                        ANSWERABILITY_SCHEMA,
                    )
                    for i in idx
                ]
                res = await generate_until_parsed(
                    engine,
                    reqs,
                    lambda j, text, idx=idx: parse_answerability(text, len(cores[idx[j]])),
                    judge.max_resamples,
                    judge.seed,
                )
                shares, answerable, total, per_q = [], 0, 0, []
                for j, r in enumerate(res):
                    if not (r.ok and r.value is not None):
                        per_q.append(None)
                        continue
                    hits = sum(s >= thr for s in r.value)
                    answerable += hits
                    total += len(r.value)
                    shares.append(hits / len(r.value))
                    per_q.append({"id": records[idx[j]].question_id, "scores": r.value})
                out[name] = {
                    "judged": len(shares),
                    "unparsed": len(res) - len(shares),
                    "mean_context_coverage": round(sum(shares) / len(shares), 4)
                    if shares
                    else None,
                    "core_answerable": answerable,
                    "core_total": total,
                    "per_question": per_q,
                }
            out["seconds"] = round(time.perf_counter() - t0, 1)
            out["decompositions"] = [
                {"id": r.question_id, "core": c} for r, c in zip(records, cores, strict=True)
            ]
            return out
        finally:
            await engine.close()

    return asyncio.run(run())
