"""``typed-rag eval devset``: write development questions from corpus passages with graded
references (:mod:`eval.data.devset`), resumable, for ``eval run --data``."""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import json
from pathlib import Path

from eval.data import devset
from eval.data.wikinfqa import load_wikinfqa
from eval.runs.resume import progress_bar
from eval.store import JsonlStore, read_jsonl, rewrite_jsonl
from typed_rag import engines
from typed_rag.classifier import build_classifier
from typed_rag.config import Settings
from typed_rag.errors import UserError
from typed_rag.retrieval.collections import WIKI, collection_dir, open_collection
from typed_rag.retrieval.store import PassageStore

NEAR_K = 20  # the Wiki-NFQA questions' top-k articles kept out of the development set


def register(eval_sub: argparse._SubParsersAction) -> None:
    p = eval_sub.add_parser(
        "devset",
        help="write development questions (one per sampled corpus passage, types in turn) "
        "with references graded by construction, for `eval run --data`; resumable",
    )
    p.add_argument("--out", type=Path, required=True, help="the JSONL file (created or resumed)")
    p.add_argument("--n", type=int, default=48, help="passages to write questions from")
    p.add_argument("--seed", type=int, default=64, help="the passages' sampling seed")
    p.add_argument("--batch", type=int, default=6, help="passages per engine call")
    p.add_argument(
        "--collection",
        help="write from this document collection instead of Wikipedia (documentation "
        "questions: how-to, why, comparison, should-I, how-does-it-work)",
    )
    p.add_argument(
        "--unanswerable-from",
        metavar="COLLECTION",
        help="also write questions from this collection, marked answerable: false (the "
        "answers are searched in --collection, which must not hold these documents)",
    )
    p.add_argument(
        "--unanswerable", type=int, default=24, help="questions from --unanswerable-from"
    )
    p.add_argument(
        "--confirm-types",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="keep a question only where the classifier (settings' classifier.kind, confident "
        "above classifier.min_confidence) gives it the type it was asked as; ask again "
        f"otherwise, up to {devset.ATTEMPTS} times (default: on over Wikipedia, off over a "
        "--collection). Records already written without a check are checked first",
    )
    p.add_argument("--no-progress", action="store_true", help="hide the progress bar")
    p.set_defaults(func=cmd_devset)


def near_wikinfqa(settings: Settings) -> set[str]:
    """The titles BM25 ranks in the top ``NEAR_K`` for any Wiki-NFQA question."""
    questions = [r.question for r in load_wikinfqa(settings.eval.data_dir).records]
    retriever = open_collection(settings, WIKI)
    try:
        return {p.title for hits in retriever.search(questions, NEAR_K) for p in hits}
    finally:
        retriever.close()


def _sources(
    settings: Settings, name: str, n: int, seed: int, excluded: set[str], corpus: devset.Corpus
) -> list[devset.Source]:
    store = PassageStore(collection_dir(settings, name))
    try:
        return devset.sample_sources(store, n, seed, excluded, types=corpus.types)
    finally:
        store.close()


def tried_path(out: Path) -> Path:
    """Where the ids of the passages given up on are kept, beside the questions."""
    return out.with_name(out.stem + ".dropped.jsonl")


def _confirming(args: argparse.Namespace) -> bool:
    return not args.collection if args.confirm_types is None else args.confirm_types


def _confirm(settings: Settings) -> devset.Confirm:
    classifier = build_classifier(settings)
    threshold = settings.classifier.min_confidence
    return lambda questions: classifier.predict(questions, min_confidence=threshold)


def cmd_devset(args: argparse.Namespace, settings: Settings) -> int:
    if args.n < 2 or args.batch < 2:
        raise UserError("--n and --batch must be at least 2 (grade 0 is another question's answer)")
    if args.unanswerable_from and not args.collection:
        raise UserError("--unanswerable-from needs --collection (where the answers are searched)")
    if args.unanswerable_from and args.unanswerable < 2:
        raise UserError("--unanswerable must be at least 2")
    corpus = devset.DOCUMENTATION if args.collection else devset.WIKIPEDIA
    excluded = set() if args.collection else near_wikinfqa(settings)
    sources = _sources(settings, args.collection or WIKI, args.n, args.seed, excluded, corpus)
    if args.unanswerable_from:
        outside = _sources(
            settings, args.unanswerable_from, args.unanswerable, args.seed, set(), corpus
        )
        # First: they are few, and a stopped run can already measure declines.
        sources = [dataclasses.replace(s, answerable=False) for s in outside] + sources
    args.out.parent.mkdir(parents=True, exist_ok=True)
    confirm = _confirm(settings) if _confirming(args) else None
    if confirm is not None and args.out.exists():
        kept, unconfirmed = devset.recheck(read_jsonl(args.out), confirm)
        if unconfirmed:
            rewrite_jsonl(args.out, kept)
            print(f"{len(unconfirmed)} written questions not confirmed: asked again")
    out = JsonlStore(args.out, key=lambda r: str(r["id"]))
    # Passages tried and given up on (no usable or confirmed question), so a resumed run
    # does not ask them again.
    tried = JsonlStore(tried_path(args.out), key=lambda r: str(r["id"]))
    done = [*(str(r["id"]) for r in out), *(str(r["id"]) for r in tried)]
    todo = devset.batches(sources, args.batch, done)

    async def write() -> None:
        engine = engines.build_engine(settings)
        await engine.start()
        bar = progress_bar(sum(map(len, todo)), "devset", not args.no_progress)
        try:
            for batch in todo:
                records = await devset.write_batch(engine.generate, batch, corpus, confirm)
                out.append(records)
                written = {str(r["id"]) for r in records}
                tried.append(
                    {"id": rid} for s in batch if (rid := devset.record_id(s)) not in written
                )
                bar.update(len(batch))
        finally:
            bar.close()
            await engine.close()

    asyncio.run(write())
    counts: dict[str, int] = {}
    for record in out:
        key = record["type"] if record.get("answerable", True) else "unanswerable"
        counts[key] = counts.get(key, 0) + 1
    print(
        json.dumps(
            {"file": str(args.out), "questions": len(out), "passages": len(sources),
             "dropped_passages": len(tried), "excluded_titles": len(excluded),
             "types_confirmed": confirm is not None, "by_type": counts},
            indent=1,
        )
    )  # fmt: skip
    return 0
