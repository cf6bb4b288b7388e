"""Judged relevance of the passages shown for the typed pipelines' own queries.

Answer recall scores whole questions; the typed pipelines retrieve for sub-queries,
keywords and perspectives, where a passage about the wrong subject becomes a wrong
sentence. Here an LLM judge (temperature 0, a JSON yes/no) reads each (query, passage)
pair of a fixed, seeded sample of those queries -- taken from an evaluation run's
``answers.jsonl`` (``Result.passages[].query`` of the typed-rag method) -- for every
retrieval config, and the share judged "not about the query" is reported per config.
"""

from __future__ import annotations

import asyncio
import json
import random
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from typed_rag.engines.base import ChatRequest, Engine
from typed_rag.errors import UserError
from typed_rag.messages import Messages
from typed_rag.retrieval import Passage, Retriever

RELEVANCE_SCHEMA: dict[str, Any] = {
    "title": "passage_relevance",
    "type": "object",
    "properties": {"relevant": {"type": "boolean"}},
    "required": ["relevant"],
}
PASSAGE_CHARS = 1200


def relevance_messages(query: str, passage: Passage) -> Messages:
    """The judge's prompt: is this passage about this query?"""
    return [
        {
            "role": "system",
            "content": "You check search results. A passage is relevant when it is about "
            "the subject of the query and holds information a good answer to the query "
            'would use. Reply with JSON only: {"relevant": true} or {"relevant": false}.',
        },
        {
            "role": "user",
            "content": f"Query: {query}\n\nPassage (title: {passage.title}):\n"
            f"{passage.text[:PASSAGE_CHARS]}\n\nIs this passage relevant to the query?",
        },
    ]


def parse_relevance(text: str) -> bool | None:
    """``{"relevant": bool}``, or a bare yes/no; None when neither can be read."""
    text = text.strip()
    try:
        value = json.loads(text)
        if isinstance(value, dict) and isinstance(value.get("relevant"), bool):
            return bool(value["relevant"])
    except ValueError:
        pass
    word = text.lower().lstrip("{\"' ").split()[:1]
    if word and word[0].startswith(("yes", "true")):
        return True
    if word and word[0].startswith(("no", "false")):
        return False
    return None


def pipeline_queries(answers: Path, method: str = "typed-rag") -> list[tuple[str, str]]:
    """``(question_id, query)`` for every query other than the question itself that
    retrieved a passage the pipeline showed, in file order, without repeats."""
    if not answers.is_file():
        raise UserError(f"answers file not found: {answers}")
    out: dict[tuple[str, str], None] = {}
    for n, line in enumerate(answers.read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except ValueError as exc:
            raise UserError(f"{answers}:{n}: not JSON: {exc}") from None
        if row.get("method") != method:
            continue
        result = row.get("result") or {}
        question = str(result.get("question") or row.get("question") or "")
        for p in result.get("passages") or []:
            q = str(p.get("query") or "").strip()
            if q and q != question.strip():
                out[(str(row.get("question_id", "")), q)] = None
    return list(out)


def fixed_sample(items: Sequence[Any], n: int, seed: int) -> list[Any]:
    """A seeded sample of ``n`` items in their original order (all when n >= len)."""
    if n >= len(items):
        return list(items)
    keep = sorted(random.Random(seed).sample(range(len(items)), n))
    return [items[i] for i in keep]


async def judge_pairs(
    engine: Engine, pairs: Sequence[tuple[str, Passage]], seed: int, batch: int = 32
) -> list[bool | None]:
    """The judge's verdict per (query, passage), temperature 0, ``batch`` per engine call."""
    verdicts: list[bool | None] = []
    for start in range(0, len(pairs), batch):
        requests = [
            ChatRequest(
                messages=relevance_messages(q, p),
                temperature=0.0,
                top_p=1.0,
                max_tokens=16,
                seed=seed,
                json_schema=RELEVANCE_SCHEMA,
            )
            for q, p in pairs[start : start + batch]
        ]
        results = await engine.generate(requests)
        verdicts.extend(parse_relevance(r.text) for r in results)
    return verdicts


def judged_rows(
    engine: Engine,
    retrievers: dict[str, Retriever],
    queries: Sequence[str],
    k: int,
    seed: int,
) -> list[dict[str, Any]]:
    """Per config: how many of the top-``k`` passages of each query the judge calls relevant.

    A (query, passage) pair that several configs show is judged once.
    """
    known: dict[tuple[str, str], bool | None] = {}

    async def run() -> list[dict[str, Any]]:
        await engine.start()
        try:
            rows = []
            for name, retriever in retrievers.items():
                hits = retriever.search(list(queries), k)
                pairs = [(q, p) for q, ps in zip(queries, hits, strict=True) for p in ps]
                new = list({(q, p.id): (q, p) for q, p in pairs if (q, p.id) not in known}.values())
                for (q, p), v in zip(new, await judge_pairs(engine, new, seed), strict=True):
                    known[(q, p.id)] = v
                verdicts = [known[(q, p.id)] for q, p in pairs]
                yes = sum(v is True for v in verdicts)
                no = sum(v is False for v in verdicts)
                rows.append(
                    {
                        "config": name,
                        "queries": len(queries),
                        "passages": len(pairs),
                        "relevant": yes,
                        "irrelevant": no,
                        "unparsed": len(verdicts) - yes - no,
                        "queries_without_passages": sum(1 for h in hits if not h),
                        "irrelevant_rate": round(no / (yes + no), 4) if yes + no else None,
                    }
                )
            return rows
        finally:
            await engine.close()

    return asyncio.run(run())
