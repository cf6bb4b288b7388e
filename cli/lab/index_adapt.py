"""``typed-rag index adapt``: fine-tune a bi-encoder on questions the local model writes from a
collection's passages (:mod:`training.retriever_adapt`), resumable, for an overnight CPU run."""

from __future__ import annotations

import argparse
import json
from dataclasses import asdict
from pathlib import Path

from cli.lab.eval_devset import near_wikinfqa
from eval.data.devset import sample_sources
from training.retriever_adapt import adapt
from typed_rag import engines
from typed_rag.config import Settings
from typed_rag.errors import UserError
from typed_rag.retrieval.bm25 import BM25Index
from typed_rag.retrieval.collections import WIKI, collection_settings


def register(index_sub: argparse._SubParsersAction) -> None:
    p = index_sub.add_parser(
        "adapt",
        help="fine-tune the dense encoder on questions the local model writes from a "
        "collection's passages (resumable; hours on a CPU)",
        description="Sample passages (one per title), have the default engine write a "
        "non-factoid question for each, mine a BM25 hard negative, train the encoder with "
        "in-batch negatives and keep the epoch that best finds the source of held-back "
        "questions. On the Wikipedia collection, no article BM25 ranks in the top 20 for a "
        "Wiki-NFQA question is used. Use the result with --set retrieval.dense_model=DIR/model "
        "(then `index build --dense`) or --set reranker.biencoder_model=DIR/model.",
    )
    p.add_argument("--collection", help="the collection (default: the Wikipedia index)")
    p.add_argument("--model", help="the encoder to adapt (default: retrieval.dense_model)")
    p.add_argument("--passages", type=int, default=2000, help="passages to write questions from")
    p.add_argument("--epochs", type=int, default=2)
    p.add_argument("--batch", type=int, default=16, help="questions per training batch")
    p.add_argument("--seed", type=int, default=63, help="the passages' sampling seed")
    p.add_argument("--min-words", type=int, default=40, help="shorter passages are not used")
    p.add_argument(
        "--out", type=Path, help="work folder (default: <home>/adapted/<collection>-<model>)"
    )
    p.add_argument("--quiet", action="store_true", help="no progress lines")
    p.set_defaults(func=cmd_adapt)


def cmd_adapt(args: argparse.Namespace, settings: Settings) -> int:
    if args.passages < 10 or args.epochs < 1 or args.batch < 2:
        raise UserError("--passages must be at least 10, --epochs at least 1, --batch at least 2")
    name = args.collection or WIKI
    model = args.model or settings.retrieval.dense_model
    out = args.out or settings.home / "adapted" / f"{name}-{Path(model).name}"
    excluded = near_wikinfqa(settings) if name == WIKI else set()
    bm25 = BM25Index.from_settings(collection_settings(settings, args.collection))
    try:
        sources = sample_sources(bm25.store, args.passages, args.seed, excluded, args.min_words)
        if len(sources) < 10:
            raise UserError(
                f"collection {name!r} has {len(sources)} passages of {args.min_words}+ words "
                "from distinct titles; adapting needs at least 10"
            )

        def progress(stage: str, done: int, total: int) -> None:
            if not args.quiet:
                print(f"adapt: {stage} {done}/{total}", flush=True)

        report = adapt(
            settings, engines.build_engine(settings), bm25, sources, out, base_model=model,
            epochs=args.epochs, batch_size=args.batch, seed=args.seed, on_progress=progress,
        )  # fmt: skip
    finally:
        bm25.close()
    print(json.dumps({"out": str(out), **asdict(report)}, indent=1))
    return 0
