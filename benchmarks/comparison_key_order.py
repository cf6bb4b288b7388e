"""COMPARISON plans under the two key orders of llama.cpp's JSON grammar.

Until the key-order fix the engine compiled every schema with its keys sorted, so the
COMPARISON plan was decoded as compare_type, is_compare, keywords_list. This plans the
headline run's COMPARISON questions both ways (same prompt, seed and sampling) and counts
how many plans change; the schema keeps the measured order until answers are compared.

    python -m benchmarks.comparison_key_order [--run results/wiki-nfqa/reranked]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import time
from pathlib import Path
from typing import Any

from typed_rag import engines
from typed_rag.config import Settings, load_settings
from typed_rag.engines import llamacpp
from typed_rag.engines.base import ChatRequest
from typed_rag.engines.grammar import grammar, schema_grammar
from typed_rag.json_reply import PlanError
from typed_rag.pipelines.comparison import (
    COMPARISON_SCHEMA,
    comparison_plan_messages,
    parse_comparison,
)
from typed_rag.store import read_jsonl

OUT = Path("results/method/key-order/comparison-plans.json")
PAPER_ORDER = ["is_compare", "compare_type", "keywords_list"]


def comparison_questions(run: Path) -> dict[str, str]:
    return {
        r["question_id"]: r["result"]["question"]
        for r in read_jsonl(run / "answers.jsonl")
        if r.get("method") == "typed-rag" and r["result"].get("type") == "COMPARISON"
    }


async def plans(settings: Settings, questions: dict[str, str], sort_keys: bool) -> list[Any]:
    """One plan per question; keys sorted as before the fix, or in the paper's order."""
    if sort_keys:
        llamacpp.schema_grammar = lambda sc: grammar(json.dumps(sc, sort_keys=True))  # type: ignore[assignment]
        schema = COMPARISON_SCHEMA
    else:
        llamacpp.schema_grammar = schema_grammar
        props = COMPARISON_SCHEMA["properties"]
        schema = {**COMPARISON_SCHEMA, "properties": {k: props[k] for k in PAPER_ORDER}}
    s = settings.sampling
    requests = [
        ChatRequest(messages=comparison_plan_messages(q), temperature=s.temperature,
                    top_p=s.top_p, max_tokens=s.plan_max_tokens, seed=42, json_schema=schema)
        for q in questions.values()
    ]  # fmt: skip
    out: list[Any] = []
    engine = engines.build_engine(settings)
    async with engine:
        for res in await engine.generate(requests):
            try:
                p = parse_comparison(res.text)
                out.append([p.is_compare, p.compare_type, p.keywords])
            except PlanError as exc:
                out.append(["error", str(exc)[:80]])
    return out


async def main(run: Path) -> dict[str, Any]:
    settings = load_settings(**{"engine.n_threads": 2})
    questions = comparison_questions(run)
    t0 = time.perf_counter()
    before = await plans(settings, questions, sort_keys=True)
    t1 = time.perf_counter()
    after = await plans(settings, questions, sort_keys=False)
    t2 = time.perf_counter()
    summary = {
        "n": len(questions),
        "identical_plans": sum(a == b for a, b in zip(before, after, strict=True)),
        "is_compare_false": {"sorted": sum(a[0] is False for a in before),
                             "schema_order": sum(b[0] is False for b in after)},
        "errors": {"sorted": sum(a[0] == "error" for a in before),
                   "schema_order": sum(b[0] == "error" for b in after)},
        "seconds": {"sorted": round(t1 - t0, 1), "schema_order": round(t2 - t1, 1)},
    }  # fmt: skip
    rows = [
        {"question": q, "sorted": a, "schema_order": b}
        for q, a, b in zip(questions.values(), before, after, strict=True)
    ]
    return {"summary": summary, "plans": rows}


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--run", type=Path, default=Path("results/wiki-nfqa/reranked"))
    ap.add_argument("--out", type=Path, default=OUT)
    args = ap.parse_args()
    report = asyncio.run(main(args.run))
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=1) + "\n")
    print(json.dumps(report["summary"], indent=1))
