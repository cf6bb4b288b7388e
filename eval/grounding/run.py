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

from eval.citation_support import (
    SUPPORT_PROMPT,
    VERDICTS,
    Lookup,
    Progress,
    SupportRun,
    sentences_of,
)
from eval.grounding.measure import (
    CONTRADICTION_PROMPT,
    CONTRADICTIONS,
    answer_record,
    method_row,
    verdicts_by_sentence,
)
from eval.store import read_jsonl
from typed_rag.engines.base import Engine

SUMMARY = "summary.json"
ANSWERS = "answers.jsonl"  # per (when): each measured answer's record
JUDGES = ("support", "contradiction")
_JUDGE_FILES = {
    "support": (SUPPORT_PROMPT, VERDICTS),
    "contradiction": (CONTRADICTION_PROMPT, CONTRADICTIONS),
}


Passages = Mapping[str, Mapping[str, str]]  # passage id -> {"title", "text"}


async def judge_sentences(
    engine: Engine,
    answers: Sequence[Mapping[str, Any]],
    passages: Passages,
    folder: Path,
    *,
    model: str,
    batch_size: int = 16,
    on_progress: Progress | None = None,
    judges: Sequence[str] = JUDGES,
) -> tuple[dict[tuple[str, str, str], bool | None], dict[tuple[str, str, str], bool | None]]:
    """Support and contradiction verdicts of every cited sentence of ``answers``:
    (method, question id, sentence) -> verdict, one map each (empty for a judge not in
    ``judges``)."""
    sentences = [s for a in answers for s in sentences_of(a)]
    maps: dict[str, dict[tuple[str, str, str], bool | None]] = {name: {} for name in JUDGES}
    for name in judges:
        prompt, verdicts = _JUDGE_FILES[name]
        run = SupportRun(folder, engine, model, batch_size, prompt=prompt, verdicts=verdicts)
        await run.judge_missing(sentences, passages, None, on_progress)
        maps[name] = verdicts_by_sentence(sentences, run.sentence_rows(sentences))
    return maps["support"], maps["contradiction"]


def shown_passages(answers: Sequence[Mapping[str, Any]], lookup: Lookup | None) -> Passages:
    """Every passage the answers were shown, with its text (from the run, else the
    collection: one lookup for all that lack it)."""
    shown: dict[str, dict[str, str]] = {}
    for a in answers:
        for p in (a.get("result") or {}).get("passages") or []:
            pid = str(p["id"])
            if p.get("text") or pid not in shown:
                shown[pid] = {"title": str(p.get("title") or ""), "text": str(p.get("text") or "")}
    missing = [pid for pid, p in shown.items() if not p["text"]]
    if missing and lookup is not None:
        shown.update(
            {pid: {"title": title, "text": text} for pid, (title, text) in lookup(missing).items()}
        )
    return shown


def write_rows(out: Path, rows: Sequence[Mapping[str, Any]], meta: Mapping[str, Any]) -> Path:
    """Merge ``rows`` into ``out/summary.json`` (a row per method and ``when``)."""
    out.mkdir(parents=True, exist_ok=True)
    path = out / SUMMARY
    old = json.loads(path.read_text())["rows"] if path.is_file() else []
    new_keys = {(r["method"], r["when"]) for r in rows}
    kept = [r for r in old if (r["method"], r["when"]) not in new_keys]
    merged = sorted([*kept, *rows], key=lambda r: (r["when"] != "before", r["method"]))
    path.write_text(json.dumps({**meta, "rows": merged}, indent=1) + "\n", encoding="utf-8")
    return path


async def evaluate_grounding(
    engine: Engine | None,
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
    judges: Sequence[str] = JUDGES,
) -> list[dict[str, Any]]:
    """Judge what is missing, compute each method's row and merge it into the summary.
    Without ``judges`` (and ``engine``) the rows hold the judge-free measures only (code
    spans, uncited sentences, declines, MRR), the judged shares None."""
    answerable = {str(r["id"]): bool(r.get("answerable", True)) for r in records}
    judged = [a for a in answers if answerable.get(str(a["question_id"]), True)]
    shown = shown_passages(judged, lookup)
    support, contradiction = {}, {}
    if engine is not None and judges:
        support, contradiction = await judge_sentences(
            engine,
            judged,
            shown,
            out / when,
            model=model,
            batch_size=batch_size,
            on_progress=on_progress,
            judges=judges,
        )
    texts = {pid: p["text"] for pid, p in shown.items()}
    rows, records_out = [], []
    for method in methods:
        ranks = {str(s["question_id"]): s.get("rank") for s in scores if s["method"] == method}
        row = method_row(method, answers, answerable, support, contradiction, ranks, texts)
        rows.append({**row, "when": when, "judge": model if judges else None})
        for a in answers:
            if a["method"] == method:
                qid = str(a["question_id"])
                records_out.append(
                    answer_record(a, answerable.get(qid, True), ranks.get(qid), texts)
                )
    write_rows(out, rows, dict(meta or {}))
    write_answer_records(out / when, records_out)
    return rows


def write_answer_records(folder: Path, records: Sequence[Mapping[str, Any]]) -> Path:
    """``folder/answers.jsonl``: each measured answer's record (:func:`answer_record`),
    replaced per (method, question) when measured again."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / ANSWERS
    new = {(r["method"], r["question_id"]) for r in records}
    old = [r for r in read_jsonl(path) if (r["method"], r["question_id"]) not in new]
    lines = [json.dumps(r, ensure_ascii=False) for r in [*old, *records]]
    path.write_text("".join(f"{line}\n" for line in lines), encoding="utf-8")
    return path
