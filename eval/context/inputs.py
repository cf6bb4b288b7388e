"""The questions CRUX judges: an evaluation run's contexts and answers, plus retrieval-only
configurations, with passage texts looked up by id where a run left them out."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, Protocol

from eval.context.run import ContextQuestion, reference_name
from eval.data.wikinfqa import WikiNFQARecord
from eval.runs.runner import ANSWERS
from eval.store import JsonlStore
from typed_rag.retrieval import Retriever

# Passage texts by id, for runs committed without them (eval.store_passage_text=false).
Lookup = Callable[[Sequence[str]], Mapping[str, tuple[str, str]]]


def _by_grade(record: WikiNFQARecord) -> list[int]:
    """The record's answer indices from the highest grade down, first listed first."""
    return sorted(range(len(record.answers)), key=lambda i: (-record.labels[i], i))


def best_reference(record: WikiNFQARecord) -> str:
    """The highest-graded reference answer: CRUX's oracle result stands in for it."""
    return record.answers[_by_grade(record)[0]]


def validity_references(record: WikiNFQARecord) -> dict[str, str]:
    """Two more of the record's graded answers, keyed ``reference:GRADE``, for the judge's
    validity check: the best one after the sub-questions' source, and the first of grade 0.
    A grader worth reading finds more of the sub-questions answered in the first. Empty
    when the record has no such pair."""
    ranked = _by_grade(record)[1:]
    zero = next((i for i in sorted(ranked) if record.labels[i] == 0), None)
    if not ranked or zero is None or record.labels[ranked[0]] == 0:
        return {}
    better = ranked[0]
    return {
        reference_name(record.labels[better]): record.answers[better],
        reference_name(0): record.answers[zero],
    }


def method_context(answer_row: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The passages a method showed its generator, in citation order."""
    passages = (answer_row.get("result") or {}).get("passages") or []
    ordered = sorted(passages, key=lambda p: int(p.get("citation") or 0))
    return [{"id": p["id"], "title": p.get("title", ""), "text": p.get("text")} for p in ordered]


def run_questions(
    run_dir: Path,
    records: Sequence[WikiNFQARecord],
    methods: Sequence[str],
    lookup: Lookup | None = None,
) -> list[ContextQuestion]:
    """One ContextQuestion per record that every method answered: each method is a
    configuration (its shown passages and its answer; ``llm`` has an empty context)."""
    answers = JsonlStore(Path(run_dir) / ANSWERS, readonly=True)
    out = []
    for rec in records:
        rows = {m: answers.get(f"{m}\t{rec.question_id}") for m in methods}
        if any(r is None for r in rows.values()):
            continue
        out.append(
            ContextQuestion(
                question_id=rec.question_id,
                question=rec.question,
                reference=best_reference(rec),
                contexts={m: method_context(r) for m, r in rows.items() if r is not None},
                answers={m: str(r.get("answer") or "") for m, r in rows.items() if r is not None},
                gold=rec.gold,
                references=validity_references(rec),
            )
        )
    if lookup is not None:
        fill_texts(out, lookup)
    return out


def add_retrievers(
    questions: Sequence[ContextQuestion], retrievers: Mapping[str, Retriever], k: int
) -> None:
    """Add each retriever's top-``k`` for every question as a configuration (no answer)."""
    for name, retriever in retrievers.items():
        hits = retriever.search([q.question for q in questions], k)
        for q, ranked in zip(questions, hits, strict=True):
            q.contexts[name] = [{"id": p.id, "title": p.title, "text": p.text} for p in ranked]


def fill_texts(questions: Sequence[ContextQuestion], lookup: Lookup) -> None:
    """Fill missing passage texts (and titles) from ``lookup``; unknown ids raise."""
    missing = sorted(
        {p["id"] for q in questions for ps in q.contexts.values() for p in ps if not p.get("text")}
    )
    if not missing:
        return
    found = lookup(missing)
    unknown = [pid for pid in missing if pid not in found]
    if unknown:
        raise KeyError(f"{len(unknown)} passage id(s) not in the index, e.g. {unknown[:3]}")
    for q in questions:
        for ps in q.contexts.values():
            for p in ps:
                if not p.get("text"):
                    p["title"], p["text"] = found[p["id"]]


class StoreLike(Protocol):
    def __len__(self) -> int: ...
    def get(self, doc: int) -> tuple[str, str, str]: ...


def store_lookup(store: StoreLike) -> Lookup:
    """A lookup over a passage store: one pass over its ids, keeping only those asked for."""

    def lookup(ids: Sequence[str]) -> dict[str, tuple[str, str]]:
        wanted, found = set(ids), {}
        for doc in range(len(store)):
            pid, title, text = store.get(doc)
            if pid in wanted:
                found[pid] = (title, text)
                if len(found) == len(wanted):
                    break
        return found

    return lookup
