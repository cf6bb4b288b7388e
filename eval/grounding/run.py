"""``eval grounding``: the faithfulness rows of one ``eval run`` over a documentation devset.

Verdicts are cached in the output folder (``<out>/<when>/``: support and contradiction, by
judge model, question, method, sentence and passage), so a killed run resumes and a rerun asks
nothing twice; ``<out>/summary.json`` keeps one row per (method, when), replaced when the same
pair is measured again, so the before and after rows sit side by side.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from eval.citation_support import VERDICTS, Lookup, Progress, SupportRun, sentences_of
from eval.grounding.measure import (
    CONTRADICTION_PROMPT,
    CONTRADICTIONS,
    method_row,
    verdicts_by_sentence,
)
from typed_rag.engines.base import Engine

SUMMARY = "summary.json"


async def judge_sentences(
    engine: Engine,
    answers: Sequence[Mapping[str, Any]],
    folder: Path,
    *,
    model: str,
    lookup: Lookup | None,
    batch_size: int = 16,
    on_progress: Progress | None = None,
) -> tuple[dict[tuple[str, str, str], bool | None], dict[tuple[str, str, str], bool | None], int]:
    """Support and contradiction verdicts of every cited sentence of ``answers``; returns
    both maps ((method, question id, sentence) -> verdict) and how many verdicts were asked."""
    sentences = [s for a in answers for s in sentences_of(a)]
    passages = {
        str(p["id"]): p for a in answers for p in (a.get("result") or {}).get("passages") or []
    }
    maps = []
    asked = 0
    for prompt, name in ((None, VERDICTS), (CONTRADICTION_PROMPT, CONTRADICTIONS)):
        kw = {"prompt": prompt} if prompt else {}
        run = SupportRun(folder, engine, model, batch_size, verdicts=name, **kw)
        asked += await run.judge_missing(sentences, passages, lookup, on_progress)
        rows = run.sentence_rows(sentences)
        maps.append(verdicts_by_sentence(sentences, rows))
    return maps[0], maps[1], asked


def passage_texts(answers: Sequence[Mapping[str, Any]], lookup: Lookup | None) -> dict[str, str]:
    """Passage id -> text of every passage the answers were shown (from the run, else the
    collection)."""
    texts: dict[str, str] = {}
    for a in answers:
        for p in (a.get("result") or {}).get("passages") or []:
            if p.get("text"):
                texts[str(p["id"])] = str(p["text"])
            else:
                texts.setdefault(str(p["id"]), "")
    missing = [pid for pid, text in texts.items() if not text]
    if missing and lookup is not None:
        texts.update({pid: text for pid, (_, text) in lookup(missing).items()})
    return texts


def write_rows(out: Path, rows: Sequence[Mapping[str, Any]], meta: Mapping[str, Any]) -> Path:
    """Merge ``rows`` into ``out/summary.json`` (a row per method and ``when``)."""
    path = out / SUMMARY
    old = json.loads(path.read_text())["rows"] if path.is_file() else []
    new_keys = {(r["method"], r["when"]) for r in rows}
    kept = [r for r in old if (r["method"], r["when"]) not in new_keys]
    merged = sorted([*kept, *rows], key=lambda r: (r["when"] != "before", r["method"]))
    path.write_text(json.dumps({**meta, "rows": merged}, indent=1) + "\n", encoding="utf-8")
    return path


async def evaluate_grounding(
    engine: Engine,
    answers: Sequence[Mapping[str, Any]],
    records: Sequence[Mapping[str, Any]],
    scores: Sequence[Mapping[str, Any]],
    out: Path,
    *,
    when: str,
    model: str,
    methods: Sequence[str],
    lookup: Lookup | None = None,
    batch_size: int = 16,
    on_progress: Progress | None = None,
    meta: Mapping[str, Any] | None = None,
) -> list[dict[str, Any]]:
    """Judge what is missing, compute each method's row and merge it into the summary."""
    answerable = {str(r["id"]): bool(r.get("answerable", True)) for r in records}
    judged = [a for a in answers if answerable.get(str(a["question_id"]), True)]
    support, contradiction, _ = await judge_sentences(
        engine,
        judged,
        out / when,
        model=model,
        lookup=lookup,
        batch_size=batch_size,
        on_progress=on_progress,
    )
    texts = passage_texts(judged, lookup)
    rows = []
    for method in methods:
        ranks = {str(s["question_id"]): s.get("rank") for s in scores if s["method"] == method}
        row = method_row(method, answers, answerable, support, contradiction, ranks, texts)
        rows.append({**row, "when": when, "judge": model})
    write_rows(out, rows, dict(meta or {}))
    return rows
