"""Adapt a bi-encoder to a collection with questions the local model writes (``typed-rag index
adapt``; the GPL / InPars / Promptagator idea, issue 63).

1. Passages are sampled with a seed, one per title, none from ``excluded_titles`` (on the
   Wikipedia collection: the articles BM25 ranks in the top 20 for a Wiki-NFQA question, so
   those questions and their gold passages are never trained on or selected with).
2. The default engine writes one non-factoid question per passage, the kinds taken in turn
   (why, how, how do two things differ, what is it, advice, debate), kept in
   ``questions.jsonl`` as they come, so an interrupted run resumes where it stopped.
3. Each question gets a hard negative where BM25 has one: the first passage it ranks 3rd to
   20th for the question that is not from the source's title (ranks 1-2 and the same title
   are too often right too).
4. A tenth of the questions is held back. The encoder trains on the rest with in-batch
   negatives (each question against every positive and hard negative of its batch,
   cross-entropy at scale 20: MultipleNegativesRankingLoss's objective), and the epoch with
   the best held-back recall@5 is saved; the report says whether it beat the base model.

Held-back recall@5: the source passage in the encoder's top 5 of a pool of BM25's top 50
for the question (the source put in where BM25 missed it), a reranking measure that costs
seconds, not a full re-encoding of the collection.
"""

from __future__ import annotations

import asyncio
import json
import random
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from eval.data.devset import QUESTION_ASKS, Source, clean_question
from eval.store import JsonlStore
from typed_rag.config import Settings
from typed_rag.encoder import encode, load_sentence_model, prompt_of
from typed_rag.engines.base import ChatRequest, Engine
from typed_rag.retrieval.base import Passage
from typed_rag.retrieval.bm25 import BM25Index
from typed_rag.retrieval.dense_dtype import MAX_LENGTH
from typed_rag.retrieval.text import passage_text

PROMPT = (
    "Here is a passage from a document titled {title!r}.\n\n{text}\n\n"
    "Write {ask}. A reader who has not seen the passage must understand it, so name the "
    "subject instead of saying 'the passage' or 'the text'. Reply with the question only."
)
QUESTIONS = "questions.jsonl"
REPORT = "report.json"
MODEL = "model"
HELD_BACK = 10  # every 10th question is held back for selection
POOL = 50  # held-back pool: BM25's top 50 (+ the source)
NEGATIVE_RANKS = (2, 20)  # hard negatives from BM25 ranks 3..20
SCALE = 20.0


@dataclass(frozen=True)
class Triple:
    """A training example: a question, its source passage and a hard negative (texts; none
    where BM25 found no passage to use, the other questions' passages still are negatives)."""

    question: str
    positive: str
    negative: str | None


@dataclass
class AdaptReport:
    """What ``adapt`` did and measured; written as ``report.json`` beside the model."""

    base_model: str
    passages: int
    questions: int
    trained_on: int
    held_back: int
    before: dict[str, float]
    epochs: list[dict[str, float]] = field(default_factory=list)
    best_epoch: int | None = None
    improved: bool = False
    model_dir: str | None = None
    seconds: float = 0.0


def source_id(source: Source) -> str:
    return f"adapt-{source.passage_id}"


def _ask(source: Source) -> ChatRequest:
    prompt = PROMPT.format(title=source.title, text=source.text, ask=QUESTION_ASKS[source.type])
    return ChatRequest(
        messages=[{"role": "user", "content": prompt}], temperature=0.0, max_tokens=64, seed=42
    )


async def write_questions(
    engine: Engine,
    sources: Sequence[Source],
    out: JsonlStore,
    batch: int = 8,
    on_batch: Callable[[int], None] | None = None,
) -> None:
    """One question per source not yet in ``out``, appended batch by batch (resumable); the
    engine is started and closed here, on this event loop."""
    done = {str(r["id"]) for r in out}
    todo = [s for s in sources if source_id(s) not in done]
    if not todo:
        return
    await engine.start()
    try:
        for start in range(0, len(todo), batch):
            chunk = todo[start : start + batch]
            replies = await engine.generate([_ask(s) for s in chunk])
            out.append(
                [
                    {"id": source_id(s), "passage_id": s.passage_id, "type": s.type,
                     "question": clean_question(r.text)}
                    for s, r in zip(chunk, replies, strict=True)
                ]
            )  # fmt: skip
            if on_batch is not None:
                on_batch(len(chunk))
    finally:
        await engine.close()


def hard_negative(bm25: BM25Index, question: str, source: Source) -> Passage | None:
    """The first passage BM25 ranks 3rd-20th for ``question`` from another title."""
    lo, hi = NEGATIVE_RANKS
    for hit in bm25.search([question], hi)[0][lo:]:
        if hit.id != source.passage_id and hit.title != source.title:
            return hit
    return None


def source_passage(source: Source) -> Passage:
    return Passage(id=source.passage_id, title=source.title, text=source.text)


def held_back_pools(
    bm25: BM25Index, pairs: Sequence[tuple[str, Source]]
) -> list[tuple[str, list[str], int]]:
    """(question, pool texts, index of the source in the pool) per held-back question."""
    pools = []
    for question, source in pairs:
        hits = bm25.search([question], POOL)[0]
        gold = next((i for i, h in enumerate(hits) if h.id == source.passage_id), None)
        if gold is None:
            hits = [*hits[: POOL - 1], source_passage(source)]
            gold = len(hits) - 1
        pools.append((question, [passage_text(h) for h in hits], gold))
    return pools


def pool_recall(model: Any, pools: Sequence[tuple[str, list[str], int]]) -> dict[str, float]:
    """Recall@1/@5 and MRR of the source when ``model`` orders each pool."""
    if not pools:
        return {"recall_at_1": 0.0, "recall_at_5": 0.0, "mrr": 0.0}
    queries = encode(model, [q for q, _, _ in pools], 64, "query")
    ranks = []
    for (_, texts, gold), q in zip(pools, queries, strict=True):
        scores = encode(model, texts, 64, "document") @ q
        ranks.append(int((scores > scores[gold]).sum()) + 1)
    n = len(ranks)
    return {
        "recall_at_1": round(sum(r == 1 for r in ranks) / n, 4),
        "recall_at_5": round(sum(r <= 5 for r in ranks) / n, 4),
        "mrr": round(sum(1 / r for r in ranks) / n, 4),
    }


def train_epoch(
    model: Any, triples: Sequence[Triple], batch_size: int, optimizer: Any, rng: random.Random
) -> float:
    """One pass of in-batch-negatives training; the mean loss."""
    import torch
    import torch.nn.functional as F  # noqa: N812

    q_prompt, d_prompt = prompt_of(model, "query"), prompt_of(model, "document")
    order = list(range(len(triples)))
    rng.shuffle(order)
    model.train()
    losses = []
    for start in range(0, len(order), batch_size):
        batch = [triples[i] for i in order[start : start + batch_size]]
        if len(batch) < 2:  # one question alone has no in-batch negatives
            continue
        q = _embed(model, [q_prompt + t.question for t in batch])
        docs = [t.positive for t in batch] + [t.negative for t in batch if t.negative]
        d = _embed(model, [d_prompt + text for text in docs])
        scores = SCALE * q @ d.T
        loss = F.cross_entropy(scores, torch.arange(len(batch)))
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
        losses.append(loss.item())
    model.eval()
    return sum(losses) / len(losses) if losses else 0.0


def _embed(model: Any, texts: list[str]) -> Any:
    import torch.nn.functional as F  # noqa: N812

    features = model.tokenize(texts)
    return F.normalize(model(features)["sentence_embedding"], dim=-1)


def adapt(
    settings: Settings,
    engine: Engine,
    bm25: BM25Index,
    sources: Sequence[Source],
    out_dir: Path,
    *,
    base_model: str,
    epochs: int = 2,
    batch_size: int = 16,
    lr: float = 2e-5,
    seed: int = 63,
    on_progress: Callable[[str, int, int], None] | None = None,
) -> AdaptReport:
    """Questions (resumed), triples, training and selection; the report is also written."""
    import torch

    t0 = time.perf_counter()
    out_dir.mkdir(parents=True, exist_ok=True)
    store = JsonlStore(out_dir / QUESTIONS, key=lambda r: str(r["id"]))
    total = len(sources)
    done = [len(list(store))]

    def advance(n: int) -> None:
        done[0] += n
        if on_progress is not None:
            on_progress("questions", done[0], total)

    asyncio.run(write_questions(engine, sources, store, on_batch=advance))
    asked = {str(r["id"]): r.get("question") for r in store}
    train: list[Triple] = []
    held: list[tuple[str, Source]] = []
    for i, source in enumerate(sources):
        question = asked.get(source_id(source))
        if not question:
            continue
        if i % HELD_BACK == HELD_BACK - 1:
            held.append((question, source))
            continue
        negative = hard_negative(bm25, question, source)
        positive = passage_text(source_passage(source))
        train.append(Triple(question, positive, negative and passage_text(negative)))
    model = load_sentence_model(settings, base_model)
    model.max_seq_length = MAX_LENGTH
    pools = held_back_pools(bm25, held)
    report = AdaptReport(
        base_model=base_model,
        passages=len(sources),
        questions=sum(1 for q in asked.values() if q),
        trained_on=len(train),
        held_back=len(held),
        before=pool_recall(model, pools),
    )
    best = report.before["recall_at_5"]
    rng = random.Random(seed)
    torch.manual_seed(seed)
    optimizer = torch.optim.AdamW(model.parameters(), lr=lr)
    for epoch in range(1, epochs + 1):
        loss = train_epoch(model, train, batch_size, optimizer, rng)
        scores = {"epoch": epoch, "loss": round(loss, 4), **pool_recall(model, pools)}
        report.epochs.append(scores)
        if on_progress is not None:
            on_progress("epochs", epoch, epochs)
        if scores["recall_at_5"] > best:
            best = scores["recall_at_5"]
            report.best_epoch, report.improved = epoch, True
            model.save(str(out_dir / MODEL))
            report.model_dir = str(out_dir / MODEL)
    report.seconds = round(time.perf_counter() - t0, 1)
    (out_dir / REPORT).write_text(json.dumps(asdict(report), indent=1) + "\n", encoding="utf-8")
    return report
