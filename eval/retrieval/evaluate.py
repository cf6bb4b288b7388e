"""Retrieval evaluation on Wiki-NFQA: answer recall@k and latency of several configs in one run.

A config is named by a spec: a first stage, optionally followed by a reranker::

    bm25                     the BM25 index as it is
    bm25+mpnet-rrf@30        BM25 top 30, RRF of BM25's and all-mpnet-base-v2's ranks
    bm25+minilm-rerank@50    BM25 top 50 reordered by all-MiniLM-L6-v2 alone
    bm25/t0.3/a0.1           BM25 top 100 rescored by title match and article support
    bm25+minilm-rrf@20>0.3   ... and only passages whose reranker score is at least 0.3
    dense                    the dense index (``typed-rag index build --dense``)
    hybrid+minilm-rrf@20     BM25 and dense fused by RRF (typed_rag.retrieval.fusion),
                             its top 20 reranked as above

Every config answers all questions (``k = 100``); recall@k is the share of questions
whose normalised gold answer string is in the top k (:mod:`eval.retrieval.answer_recall`),
overall, per subset and, with a labels file, per question type and for the typed
subset (the types with their own pipeline). Latency is single-query wall time on a
fixed sample of questions, with the reranker's passage cache emptied before each, so
it is what one new question costs.
"""

from __future__ import annotations

import json
import logging
import statistics
import time
from collections.abc import Callable, Sequence
from contextlib import nullcontext
from pathlib import Path
from typing import Any

from eval.data.labels import load_labels
from eval.data.wikinfqa import load_wikinfqa
from eval.retrieval.answer_recall import KS, HitFinder, ground_truth, grouped_recall, recall_at
from eval.retrieval.relevance import fixed_sample, judged_rows, pipeline_queries
from eval.retrieval.spec import RERANKER_MODELS, Spec, row_name, settings_spec
from typed_rag.config import Settings
from typed_rag.encoder import load_sentence_model
from typed_rag.engines.factory import build_engine
from typed_rag.errors import UserError
from typed_rag.rerank.biencoder import BiEncoderReranker
from typed_rag.retrieval import Passage, RerankedRetriever, Reranker, Retriever
from typed_rag.retrieval.base import rerank_batch_size
from typed_rag.retrieval.bm25 import BM25Index
from typed_rag.retrieval.dense import DenseIndex
from typed_rag.retrieval.fusion import HybridRetriever
from typed_rag.retrieval.loader import dense_models
from typed_rag.retrieval.rescore import RescoredRetriever

log = logging.getLogger(__name__)

TYPED_TYPES = ("REASON", "INSTRUCTION", "DEBATE", "COMPARISON", "EXPERIENCE")


class Builder:
    """Builds retrievers for specs, sharing the BM25 index and one reranker per model."""

    def __init__(self, settings: Settings, index: BM25Index, cache_size: int) -> None:
        self.settings = settings
        self.index = index
        self.cache_size = cache_size
        self._rerankers: dict[str, Reranker] = {}
        self._dense: dict[str, DenseIndex] = {}

    def dense(self, model: str | None = None) -> DenseIndex:
        """The dense index of ``model`` (default: ``dense_model``) in the settings' index
        folder, opened once."""
        model = model or self.settings.retrieval.dense_model
        if model not in self._dense:
            self._dense[model] = DenseIndex.from_settings(
                self.settings.with_section("retrieval", dense_model=model)
            )
        return self._dense[model]

    def reranker(self, model: str) -> Reranker:
        name = RERANKER_MODELS.get(model, model)
        if name not in self._rerankers:
            r = self.settings.reranker
            st = load_sentence_model(self.settings, name, r.device or "cpu")
            self._rerankers[name] = BiEncoderReranker(
                st, rerank_batch_size(r.device), self.cache_size
            )
        return self._rerankers[name]

    def build(self, spec: Spec) -> Retriever:
        first: Retriever = self.index
        if spec.base == "dense":
            first = self.dense()
        elif spec.base == "hybrid":
            first = HybridRetriever(
                self.index, [self.dense(m) for m in dense_models(self.settings, spec.base)]
            )
        if spec.title or spec.article:
            first = RescoredRetriever(first, self.index, spec.title, spec.article)
        if not spec.model:
            return first
        return RerankedRetriever(
            first,
            self.reranker(spec.model),
            depth=spec.depth,
            order=spec.order,  # type: ignore[arg-type]
            floor=spec.floor,
        )


def single_query_ms(
    retriever: Retriever, queries: Sequence[str], k: int
) -> tuple[list[float], list[float]]:
    """Wall and CPU milliseconds of ``search([q], k)`` per query, each with the reranker's
    cache empty. On a shared machine the CPU time (this process, all its threads) is the
    cost that does not depend on what else runs."""
    cold = getattr(getattr(retriever, "reranker", None), "cold", None)
    wall, cpu = [], []
    for q in queries:
        with cold() if cold is not None else nullcontext():
            t0, c0 = time.perf_counter(), time.process_time()
            retriever.search([q], k)
            wall.append((time.perf_counter() - t0) * 1000)
            cpu.append((time.process_time() - c0) * 1000)
    return wall, cpu


def run_config(
    retriever: Retriever,
    queries: Sequence[str],
    batch: int,
    progress: Callable[[int, int], None] | None = None,
) -> list[list[Passage]]:
    """Top-100 for every query, ``batch`` queries per call (one reranker round each)."""
    hits: list[list[Passage]] = []
    for start in range(0, len(queries), batch):
        hits.extend(retriever.search(list(queries[start : start + batch]), max(KS)))
        if progress:
            progress(min(start + batch, len(queries)), len(queries))
    return hits


def evaluate(
    settings: Settings,
    specs: Sequence[str],
    *,
    limit: int | None = None,
    subsets: str | None = None,
    labels_path: Path | None = None,
    latency_queries: int = 50,
    batch: int = 16,
    out_dir: Path | None = None,
    echo: Callable[[str], None] = print,
) -> list[dict[str, Any]]:
    """Evaluate every spec; returns the summary rows (and writes them under ``out_dir``)."""
    parsed = [Spec.parse(s) for s in specs]
    default = settings_spec(settings)
    if default not in [p.name for p in parsed]:
        parsed.insert(0, Spec.parse(default))
    if "bm25" not in [p.name for p in parsed]:
        parsed.insert(0, Spec.parse("bm25"))
    records = load_wikinfqa(settings.eval.data_dir, subsets).records
    if limit and limit < len(records):  # spread evenly, so every subset is represented
        records = [records[i * len(records) // limit] for i in range(limit)]
    if not records:
        raise UserError(f"no Wiki-NFQA questions to evaluate in {settings.eval.data_dir}")
    gt = ground_truth(settings.eval.data_dir)
    queries = [r.question for r in records]
    aliases = [gt.get(r.question_id, []) for r in records]
    groups: dict[str, list[int]] = {}
    for i, r in enumerate(records):
        groups.setdefault(r.subset, []).append(i)
    types: dict[str, list[int]] = {}
    if labels_path is not None:
        labels = load_labels(labels_path)
        for i, r in enumerate(records):
            lab = labels.get(r.question_id)
            if lab is not None:
                types.setdefault(lab.type, []).append(i)
        types["typed"] = [i for t in TYPED_TYPES for i in types.get(t, [])]

    index = BM25Index.from_settings(settings)
    index.warmup()
    builder = Builder(settings, index, cache_size=200_000)
    finder = HitFinder()
    lat_sample = queries[:: max(1, len(queries) // max(1, latency_queries))][:latency_queries]
    rows: list[dict[str, Any]] = []
    base_ms: float | None = None
    default_row = row_name(Spec.parse(default), settings)
    for spec in parsed:
        retriever = builder.build(spec)
        name = row_name(spec, settings)
        t0 = t1 = time.perf_counter()

        def progress(done: int, total: int, name: str = name, t1: float = t1) -> None:
            if done == total or done % (batch * 8) == 0:
                echo(f"  {name}: {done}/{total} questions, {time.perf_counter() - t1:.0f} s")

        hits = run_config(retriever, queries, batch, progress)
        ranks = [finder.first_hit_rank(h, a) for h, a in zip(hits, aliases, strict=True)]
        ms, cpu_ms = single_query_ms(retriever, lat_sample, max(KS))
        p50 = statistics.median(ms)
        if spec.name == "bm25":
            base_ms = p50
        row: dict[str, Any] = {
            "config": name,
            "default": name == default_row,
            "recall": recall_at(ranks),
            "n": len(records),
            "ms_per_query_p50": round(p50, 2),
            "ms_per_query_p90": round(sorted(ms)[int(0.9 * (len(ms) - 1))], 2),
            "added_ms_p50": round(p50 - base_ms, 2) if base_ms is not None else None,
            "cpu_ms_per_query_p50": round(statistics.median(cpu_ms), 2),
            "latency_queries": len(lat_sample),
            "subsets": grouped_recall(ranks, groups),
            "seconds": round(time.perf_counter() - t0, 1),
        }
        if types:
            row["types"] = grouped_recall(ranks, types)
        if spec.model:
            row["floor_calibration"] = floor_calibration(hits, aliases, finder)
        rows.append(row)
        echo(format_row(row))
        if out_dir is not None:
            write_summary(out_dir, rows, extra={"ranks": {name: ranks}})
    return rows


def floor_calibration(
    hits: Sequence[Sequence[Passage]],
    aliases: Sequence[Sequence[str]],
    finder: HitFinder,
    k: int = 5,
    keep: float = 0.95,
) -> dict[str, Any]:
    """A relevance floor from answer-bearing passages: the reranker score that keeps
    ``keep`` of the top-``k`` passages holding the gold answer, and what it removes."""
    good: list[float] = []
    other: list[float] = []
    for ps, al in zip(hits, aliases, strict=True):
        for p in ps[:k]:
            if p.rerank_score is None:
                continue
            (good if finder.first_hit_rank([p], al) else other).append(p.rerank_score)
    if not good:
        return {"answer_passages": 0}
    good.sort()
    floor = good[int((1.0 - keep) * (len(good) - 1))]
    return {
        "k": k,
        "keep": keep,
        "floor": round(floor, 4),
        "answer_passages": len(good),
        "other_passages": len(other),
        "other_removed": round(sum(s < floor for s in other) / len(other), 4) if other else None,
    }


def format_row(row: dict[str, Any]) -> str:
    r = row["recall"]
    cells = " ".join(f"{r[str(k)]:.3f}" for k in KS)
    return (
        f"{row['config']:<28} {cells}   p50 {row['ms_per_query_p50']:>8.1f} ms"
        f" (CPU {row.get('cpu_ms_per_query_p50', float('nan')):.1f} ms)"
    )


def format_table(rows: Sequence[dict[str, Any]]) -> str:
    head = f"{'config':<28} " + " ".join(f"{'R@' + str(k):>5}" for k in KS) + "   latency"
    lines = [head, "-" * len(head)]
    lines += [format_row(r) + ("  (default)" if r["default"] else "") for r in rows]
    return "\n".join(lines)


def write_summary(
    out_dir: Path, rows: Sequence[dict[str, Any]], extra: dict[str, Any] | None = None
) -> Path:
    """``summary.json`` (the list of config rows); per-question ranks go to ``ranks.json``.

    Rows of configs this run did not evaluate stay (one table grows over runs); a config
    evaluated again replaces its row but keeps the judged relevance ``index judge`` added (an
    LLM run that ``index eval`` does not repeat), and only this run's default is marked default.
    """
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / "summary.json"
    new = {r["config"]: r for r in rows}
    old = json.loads(path.read_text(encoding="utf-8")) if path.is_file() else []
    old = [r for r in old if isinstance(r, dict) and "config" in r]
    marked = any(r.get("default") for r in rows)
    table = [
        _replaced(r, new.pop(r["config"])) if r["config"] in new
        else {**r, "default": False} if marked else r
        for r in old
    ]  # fmt: skip
    path.write_text(json.dumps(table + list(new.values()), indent=1) + "\n", encoding="utf-8")
    if extra and "ranks" in extra:
        ranks_path = out_dir / "ranks.json"
        known = json.loads(ranks_path.read_text()) if ranks_path.is_file() else {}
        known.update(extra["ranks"])
        ranks_path.write_text(json.dumps(known) + "\n", encoding="utf-8")
    return path


def _replaced(old: dict[str, Any], new: dict[str, Any]) -> dict[str, Any]:
    if "judged_relevance" in old and "judged_relevance" not in new:
        return {**new, "judged_relevance": old["judged_relevance"]}
    return new


def judge(
    settings: Settings,
    answers: Path,
    specs: Sequence[str],
    *,
    sample: int,
    seed: int,
    k: int,
    out_dir: Path | None = None,
    method: str = "typed-rag",
) -> list[dict[str, Any]]:
    """Judged relevance (eval.retrieval.relevance) of each config's top-``k`` for a fixed sample
    of the queries the typed pipelines issued in an evaluation run."""
    pairs = pipeline_queries(answers, method)
    if not pairs:
        raise UserError(f"{answers}: no {method} passages retrieved for a sub-query to judge")
    chosen = fixed_sample(pairs, sample, seed)
    parsed = [Spec.parse(s) for s in specs] or [Spec.parse(settings_spec(settings))]
    index = BM25Index.from_settings(settings)
    builder = Builder(settings, index, cache_size=50_000)
    retrievers = {spec.name: builder.build(spec) for spec in parsed}
    rows = judged_rows(build_engine(settings), retrievers, [q for _, q in chosen], k, seed)
    for row in rows:
        row.update(sample_seed=seed, k=k, source=str(answers))
    if out_dir is not None:
        out_dir.mkdir(parents=True, exist_ok=True)
        (out_dir / "judged.json").write_text(json.dumps(rows, indent=1) + "\n", encoding="utf-8")
        summary = out_dir / "summary.json"
        if summary.is_file():  # the judged rate goes next to each config's recall
            table = json.loads(summary.read_text(encoding="utf-8"))
            by_name = {r["config"]: r for r in rows}
            for row in table:
                if row.get("config") in by_name:
                    row["judged_relevance"] = by_name[row["config"]]
            summary.write_text(json.dumps(table, indent=1) + "\n", encoding="utf-8")
    return rows
