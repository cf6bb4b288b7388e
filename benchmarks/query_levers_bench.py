"""Two cheap-to-serve retrieval levers on Wiki-NFQA answer recall, each beside plain BM25.

``draft`` (query2doc / HyDE style): the generator writes a short passage answering the
question (temperature 0, ``--max-tokens``), and BM25 searches with the question plus that
draft, so the answer's likely words join the query. One engine call per query; drafts are
cached in ``--work`` (resumable). Compared: the question alone, question + draft, the
draft alone, and reciprocal rank fusion of question and question + draft.

``static``: a static (model2vec-style) embedding distilled from a sentence-transformers
encoder: each vocabulary token is run through the encoder once ([CLS] token [SEP], mean of
the states), the vectors are reduced by PCA, and a text is the idf-weighted sum of its
tokens' vectors. Encoding the whole default corpus then takes minutes instead of hours, and
a query costs a lookup. Compared: BM25, static dense alone, RRF, and BM25's top 100
rescored by a z-scored mix of both scores.

A hit at k is the normalised gold answer string in one of the top-k passages
(:mod:`eval.retrieval.answer_recall`, the definition of ``wiki-corpus/coverage.json``).

    python -m benchmarks.query_levers_bench draft --limit 200 --out results/retrieval/tried/query-draft.json
    python -m benchmarks.query_levers_bench static --out results/retrieval/tried/static-embeddings.json
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from eval.data.wikinfqa import WikiNFQARecord, load_wikinfqa
from eval.retrieval.answer_recall import HitFinder, ground_truth, recall_at
from eval.settings import load_lab_settings
from typed_rag.config import Settings, parse_overrides
from typed_rag.engines.base import ChatRequest
from typed_rag.engines.factory import build_engine
from typed_rag.retrieval import Passage
from typed_rag.retrieval.bm25 import BM25Index

DRAFT_PROMPT = (
    "Write a short Wikipedia-style passage (2-3 sentences) that answers the question. "
    "Name the specific people, places, dates and things involved.\n\nQuestion: {question}"
)


def spread(records: Sequence[WikiNFQARecord], limit: int | None) -> list[WikiNFQARecord]:
    """``limit`` questions evenly spread over the file order (every subset represented)."""
    if not limit or limit >= len(records):
        return list(records)
    return [records[i * len(records) // limit] for i in range(limit)]


def fuse(runs: Sequence[Sequence[Passage]], k: int = 60) -> list[Passage]:
    """Reciprocal rank fusion of ranked lists (ties keep first-seen order)."""
    score: dict[str, float] = {}
    by_id: dict[str, Passage] = {}
    for run in runs:
        for rank, p in enumerate(run, 1):
            score[p.id] = score.get(p.id, 0.0) + 1.0 / (k + rank)
            by_id.setdefault(p.id, p)
    return [by_id[i] for i in sorted(score, key=lambda i: -score[i])]


class Scorer:
    """Answer recall of ranked lists for a fixed list of questions."""

    def __init__(self, settings: Settings, records: Sequence[WikiNFQARecord]) -> None:
        gt = ground_truth(settings.eval.data_dir)
        self.aliases = [gt.get(r.question_id, []) for r in records]
        self.finder = HitFinder()

    def recall(self, hits: Sequence[Sequence[Passage]]) -> dict[str, float]:
        ranks = [self.finder.first_hit_rank(h, a) for h, a in zip(hits, self.aliases, strict=True)]
        return recall_at(ranks)


async def drafts_for(
    settings: Settings, records: Sequence[WikiNFQARecord], max_tokens: int, cache: Path
) -> dict[str, dict[str, Any]]:
    """question_id -> {draft, seconds, completion_tokens}; cached line by line in ``cache``."""
    done: dict[str, dict[str, Any]] = {}
    if cache.is_file():
        for line in cache.read_text(encoding="utf-8").splitlines():
            row = json.loads(line)
            done[row["id"]] = row
    todo = [r for r in records if r.question_id not in done]
    if not todo:
        return done
    engine = build_engine(settings)
    cache.parent.mkdir(parents=True, exist_ok=True)
    try:
        with cache.open("a", encoding="utf-8") as f:
            for i, r in enumerate(todo, 1):
                prompt = DRAFT_PROMPT.format(question=r.question)
                req = ChatRequest(
                    messages=[{"role": "user", "content": prompt}],
                    temperature=0.0,
                    max_tokens=max_tokens,
                    seed=settings.sampling.seed,
                )
                t0 = time.perf_counter()
                (res,) = await engine.generate([req])
                row = {
                    "id": r.question_id,
                    "draft": res.text,
                    "seconds": time.perf_counter() - t0,
                    "completion_tokens": res.completion_tokens,
                }
                done[r.question_id] = row
                f.write(json.dumps(row) + "\n")
                f.flush()
                if i % 20 == 0 or i == len(todo):
                    print(f"  drafts {i}/{len(todo)} ({row['seconds']:.1f} s last)", flush=True)
    finally:
        await engine.close()
    return done


def run_draft(args: argparse.Namespace, settings: Settings) -> dict[str, Any]:
    records = spread(load_wikinfqa(settings.eval.data_dir).records, args.limit)
    cache = args.work / f"drafts-{settings.engine.model}-{args.max_tokens}.jsonl"
    drafts = asyncio.run(drafts_for(settings, records, args.max_tokens, cache))
    index = BM25Index.from_settings(settings)
    scorer = Scorer(settings, records)
    q = [r.question for r in records]
    d = [drafts[r.question_id]["draft"] for r in records]
    by_q = index.search(q, 100)
    by_qd = index.search([f"{a} {b}" for a, b in zip(q, d, strict=True)], 100)
    rows = {
        "question (bm25)": scorer.recall(by_q),
        "question + draft": scorer.recall(by_qd),
        "draft alone": scorer.recall(index.search(d, 100)),
        "rrf(question, question + draft)": scorer.recall(
            [fuse(pair) for pair in zip(by_q, by_qd, strict=True)]
        ),
    }
    used = [drafts[r.question_id] for r in records]
    return {
        "lever": "draft",
        "n": len(records),
        "model": settings.engine.model,
        "max_tokens": args.max_tokens,
        "engine_calls_per_query": 1,
        "draft_seconds_p50": round(statistics.median(u["seconds"] for u in used), 3),
        "draft_completion_tokens_p50": statistics.median(u["completion_tokens"] for u in used),
        "recall": rows,
    }


def token_vectors(folder: Path, dims: int) -> tuple[Any, np.ndarray]:
    """The encoder's tokenizer and one PCA-reduced vector per vocabulary token."""
    import torch  # heavy: torch
    from transformers import AutoModel, AutoTokenizer  # heavy: transformers

    tok = AutoTokenizer.from_pretrained(str(folder))
    model = AutoModel.from_pretrained(str(folder)).eval()
    vocab = tok.vocab_size
    out = np.zeros((vocab, model.config.hidden_size), np.float32)
    with torch.inference_mode():
        for start in range(0, vocab, 1024):
            ids = torch.arange(start, min(vocab, start + 1024))
            x = torch.stack(
                [
                    torch.full_like(ids, tok.cls_token_id),
                    ids,
                    torch.full_like(ids, tok.sep_token_id),
                ],
                dim=1,
            )
            states = model(input_ids=x, attention_mask=torch.ones_like(x)).last_hidden_state
            out[start : start + len(ids)] = states.mean(dim=1).numpy()
    centred = out - out.mean(axis=0)
    _, _, vt = np.linalg.svd(centred, full_matrices=False)
    return tok, centred @ vt[:dims].T


def embed(token_vecs: np.ndarray, flat: np.ndarray, pointers: np.ndarray) -> np.ndarray:
    """Unit-length sums of token vectors; text i has tokens flat[pointers[i]:pointers[i+1]]."""
    n = len(pointers) - 1
    out = np.zeros((n, token_vecs.shape[1]), np.float32)
    for a in range(0, n, 4096):
        b = min(n, a + 4096)
        lo, hi = int(pointers[a]), int(pointers[b])
        if hi == lo:
            continue
        starts = np.minimum(pointers[a:b] - lo, hi - lo - 1)
        sums = np.add.reduceat(token_vecs[flat[lo:hi]], starts, axis=0)
        nonempty = np.diff(pointers[a : b + 1]) > 0
        out[a:b][nonempty] = sums[nonempty]
    out /= np.maximum(np.linalg.norm(out, axis=1, keepdims=True), 1e-9)
    return out


def tokenize(tok: Any, texts: Sequence[str], max_length: int) -> tuple[np.ndarray, np.ndarray]:
    flat: list[int] = []
    pointers = [0]
    for start in range(0, len(texts), 5000):
        enc = tok(list(texts[start : start + 5000]), add_special_tokens=False,
                  truncation=True, max_length=max_length)["input_ids"]  # fmt: skip
        for ids in enc:
            flat.extend(ids)
            pointers.append(len(flat))
    return np.asarray(flat, np.int32), np.asarray(pointers, np.int64)


def run_static(args: argparse.Namespace, settings: Settings) -> dict[str, Any]:
    from typed_rag.models import ensure_model

    records = spread(load_wikinfqa(settings.eval.data_dir).records, args.limit)
    index = BM25Index.from_settings(settings)
    store = index.store
    t0 = time.perf_counter()
    tok, vecs = token_vectors(ensure_model(settings, args.encoder), args.dims)
    distil_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    n = len(store)
    texts = [f"{title}. {text}" for _, title, text in store.get_many(range(n))]
    flat, pointers = tokenize(tok, texts, 256)
    df = np.zeros(len(vecs), np.int64)
    for i in range(n):
        df[np.unique(flat[pointers[i] : pointers[i + 1]])] += 1
    idf = np.where(df > 0, np.log((n + 1) / (df + 0.5)), 0.0).astype(np.float32)
    weighted = vecs * idf[:, None]
    passages = embed(weighted, flat, pointers)
    corpus_s = time.perf_counter() - t0
    queries = [r.question for r in records]
    qflat, qptr = tokenize(tok, queries, 128)
    t0 = time.perf_counter()
    qvec = embed(weighted, qflat, qptr)
    sims = qvec @ passages.T
    dense_docs = np.argsort(-sims, axis=1)[:, :100]
    query_ms = (time.perf_counter() - t0) * 1000 / len(queries)
    bm_docs, bm_scores = index.search_docs(queries, 100)
    scorer = Scorer(settings, records)

    def as_passages(rows: np.ndarray) -> list[list[Passage]]:
        return store.passages(np.asarray(rows), np.ones(np.shape(rows)))

    bm25 = as_passages(bm_docs)
    dense = as_passages(dense_docs)
    mixed = []
    for i, (docs, scores) in enumerate(zip(bm_docs, bm_scores, strict=True)):
        zb = (scores - scores.mean()) / (scores.std() + 1e-9)
        ds = sims[i, docs]
        zd = (ds - ds.mean()) / (ds.std() + 1e-9)
        mixed.append(docs[np.argsort(-(0.7 * zb + 0.3 * zd))])
    return {
        "lever": "static",
        "n": len(records),
        "encoder": args.encoder,
        "dims": args.dims,
        "distil_seconds": round(distil_s, 1),
        "corpus_encode_seconds": round(corpus_s, 1),
        "query_ms_per_query_batched": round(query_ms, 2),
        "recall": {
            "bm25": scorer.recall(bm25),
            "static dense": scorer.recall(dense),
            "rrf(bm25, static)": scorer.recall([fuse(p) for p in zip(bm25, dense, strict=True)]),
            "bm25 top 100 rescored 0.7 bm25 + 0.3 static": scorer.recall(
                as_passages(np.array(mixed))
            ),
        },
    }


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("lever", choices=("draft", "static"))
    ap.add_argument("--limit", type=int, help="questions spread over the subsets (default all)")
    ap.add_argument("--max-tokens", type=int, default=64, help="draft length (draft)")
    ap.add_argument("--encoder", default="all-MiniLM-L6-v2", help="encoder to distil (static)")
    ap.add_argument("--dims", type=int, default=256, help="PCA dimensions (static)")
    ap.add_argument("--work", type=Path, default=Path.home() / ".cache/typed-rag/bench/levers")
    ap.add_argument("--set", action="append", default=[], metavar="KEY=VALUE")
    ap.add_argument("--out", type=Path, help="write the results as JSON here")
    args = ap.parse_args(argv)
    settings = load_lab_settings(None, **parse_overrides(args.set))
    result = (run_draft if args.lever == "draft" else run_static)(args, settings)
    for name, rec in result["recall"].items():
        print(f"{name:<45} " + "  ".join(f"R@{k} {v:.3f}" for k, v in rec.items()))
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(result, indent=1) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
