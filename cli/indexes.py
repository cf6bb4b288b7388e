"""CLI: ``index build``, ``retrieve`` and ``corpus download``."""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import typed_rag.retrieval.manifest as mf
from cli.documents import add_build_options, add_index_commands, build_documents, wants_documents
from indexes.build import build_index
from indexes.dense import DenseBuildReport, build_dense
from indexes.download import REGISTRY, download
from typed_rag.config import Settings
from typed_rag.errors import UserError

SNIPPET_CHARS = 160


def register(sub: argparse._SubParsersAction) -> None:
    """Add this area's subcommands."""
    index = sub.add_parser("index", help="build the BM25 (and dense) index")
    index_sub = index.add_subparsers(dest="index_command", required=True, metavar="ACTION")
    build = index_sub.add_parser(
        "build",
        help="build a BM25 index from a DPR psgs_w100.tsv corpus",
        description="Build a BM25 index (bm25s, English stemming and stop words) from a "
        "DPR-format TSV corpus (id, text, title; plain or .gz; a path or an http(s) URL, "
        "which is downloaded to <home>/corpora first).",
    )
    build.add_argument("--corpus", help="corpus path or URL (default: corpus.path)")
    build.add_argument("--out", help="index folder (default: retrieval.index_dir)")
    build.add_argument(
        "--on-error",
        choices=("skip", "stop"),
        help="malformed rows: skip and count them, or stop at the first (default: skip)",
    )
    build.add_argument(
        "--if-missing",
        action="store_true",
        help="do nothing if an index built from the same corpus and parameters exists",
    )
    build.add_argument("--k1", type=float, help="BM25 k1 (default: 0.9)")
    build.add_argument("--b", type=float, help="BM25 b (default: 0.4)")
    build.add_argument(
        "--method",
        choices=("lucene", "robertson", "atire", "bm25l", "bm25+"),
        help="BM25 variant (default: lucene)",
    )
    build.add_argument("--limit", type=int, help="index only the first N good rows")
    build.add_argument(
        "--shard-size",
        type=int,
        metavar="N",
        help="build a sharded BM25 index of N passages a shard (bounded memory for corpora of "
        "millions of passages, e.g. 1000000 for the 21M DPR passages; resumable per shard, the "
        "same top-k as one index); searched like any index",
    )
    build.add_argument(
        "--dense",
        action="store_true",
        help="also encode every passage with retrieval.dense_model for dense and hybrid "
        "retrieval (into <index>/dense). An existing BM25 index is used as it is unless "
        "--corpus is given; an interrupted encode resumes where it stopped. With --docs: "
        "every encoder hybrid search uses (retrieval.dense_model and retrieval.fuse_models)",
    )
    build.add_argument(
        "--ann",
        choices=("auto", "hnsw", "ivfpq", "none"),
        default="none",
        help="with --dense: an approximate nearest-neighbour index (FAISS, the 'ann' extra) "
        "beside the embeddings, searched instead of the exact scan: hnsw (up to about a million "
        "passages), ivfpq (tens of millions), auto (the exact scan below 50,000 passages, hnsw "
        "up to 1M, ivfpq above; the exact scan where faiss is missing), none (default: the "
        "exact scan; removes an ANN index built before). Resumable like the encode",
    )
    build.add_argument("--quiet", action="store_true", help="no progress bars")
    add_build_options(build)
    build.set_defaults(func=_index_build)
    add_index_commands(index_sub)

    retrieve = sub.add_parser(
        "retrieve",
        help="search the index (BM25, dense or hybrid)",
        description="Print the top passages for a question: rank, score, id, title, text.",
    )
    retrieve.add_argument("question", help="the query text")
    retrieve.add_argument("-k", type=int, default=None, help="passages (default: retrieval.top_k)")
    retrieve.add_argument("--index", help="index folder (default: retrieval.index_dir)")
    retrieve.add_argument(
        "--collection",
        help="search this collection (`typed-rag index list`; default: the Wikipedia index)",
    )
    retrieve.add_argument(
        "--kind",
        choices=("bm25", "dense", "hybrid", "auto"),
        help="retriever (default: retrieval.kind); dense and hybrid need `index build --dense`, "
        "auto is hybrid where it was built and BM25 elsewhere",
    )
    retrieve.add_argument("--json", action="store_true", help="print JSON instead of a table")
    retrieve.set_defaults(func=_retrieve)

    corpus = sub.add_parser("corpus", help="fetch corpora")
    corpus_sub = corpus.add_subparsers(dest="corpus_command", required=True, metavar="ACTION")
    dl = corpus_sub.add_parser(
        "download",
        help="download a known corpus (resumable, checksum-checked)",
        description="Download a corpus. An interrupted download resumes when the command "
        "is run again. DPR publishes no checksum for psgs_w100.tsv.gz: pass --sha256 or "
        "--md5 to check against a value you trust; the sha256 is always printed.",
    )
    dl.add_argument("name", choices=sorted(REGISTRY), help="which corpus")
    dl.add_argument("--out", help="folder (default: <home>/corpora)")
    dl.add_argument("--url", help="download from this URL instead (a mirror)")
    dl.add_argument("--sha256", help="expected sha256 of the file")
    dl.add_argument("--md5", help="expected md5 of the file")
    dl.add_argument("--force", action="store_true", help="download again even if present")
    dl.add_argument("--quiet", action="store_true", help="no progress bar")
    dl.set_defaults(func=_corpus_download)


def _index_build(args: argparse.Namespace, settings: Settings) -> int:
    if wants_documents(args) and args.ann != "none":
        raise UserError("--ann is for the Wikipedia index's dense build, not for --docs")
    if wants_documents(args):
        return build_documents(args, settings)
    if args.limit is not None and args.limit <= 0:
        raise UserError(f"--limit must be a positive number, got {args.limit}")
    if args.shard_size is not None:
        if args.dense:
            raise UserError(
                "--dense encodes one passage store; it cannot be combined with --shard-size"
            )
        return _index_build_sharded(args, settings)
    if args.ann != "none" and not args.dense:
        raise UserError("--ann indexes the dense embeddings: give it with --dense")
    if args.dense:
        return _index_build_dense(args, settings)
    return _index_build_bm25(args, settings, if_missing=args.if_missing)


def _index_build_sharded(args: argparse.Namespace, settings: Settings) -> int:
    from indexes.sharded import build_sharded

    report = build_sharded(
        settings,
        corpus=args.corpus,
        out=args.out,
        shard_size=args.shard_size,
        on_error=args.on_error,
        limit=args.limit,
        k1=args.k1,
        b=args.b,
        method=args.method,
        if_missing=args.if_missing,
        show_progress=not args.quiet,
    )
    if report.skipped:
        print(f"index at {report.out} is up to date; nothing to do")
        return 0
    resumed = f", {report.resumed_shards} resumed" if report.resumed_shards else ""
    print(
        f"indexed {report.passages:,} passages in {report.shards} shards of up to "
        f"{report.shard_size:,}{resumed} ({report.vocab_terms:,} terms, "
        f"{report.postings:,} postings) in {report.seconds:.1f} s -> {report.out}"
    )
    if report.skipped_rows:
        print(f"skipped {report.skipped_rows:,} malformed rows (first: {report.first_error})")
    return 0


def _index_build_dense(args: argparse.Namespace, settings: Settings) -> int:
    """BM25 first (kept when present and up to date), then the resumable dense encode."""
    out = Path(args.out).expanduser() if args.out else settings.index_dir
    if args.corpus or mf.read_manifest(out) is None:
        _index_build_bm25(args, settings, if_missing=True)
    else:
        print(f"using the BM25 index at {out} (pass --corpus to rebuild it)")
    report = build_dense(
        settings, out, if_missing=args.if_missing, show_progress=not args.quiet, ann=args.ann
    )
    if report.skipped:
        print(f"dense index at {report.out} is up to date; nothing to encode")
        _print_ann(report)
        return 0
    resumed = f", resumed at {report.resumed_from:,}" if report.resumed_from else ""
    print(
        f"encoded {report.encoded:,} of {report.passages:,} passages (dim {report.dim}"
        f"{resumed}) in {report.seconds:.1f} s ({report.passages_per_s:,.1f} passages/s) "
        f"-> {report.out}"
    )
    _print_ann(report)
    return 0


def _print_ann(report: DenseBuildReport) -> None:
    ann = report.ann
    if ann is None:
        return
    if ann.kind == "none":
        print(f"dense search: exact scan ({ann.reason})")
    elif ann.reason == "up to date":
        print(f"{ann.kind} ANN index is up to date")
    else:
        resumed = f", resumed at {ann.resumed_from:,}" if ann.resumed_from else ""
        print(f"{ann.kind} ANN index of {ann.rows:,} rows{resumed} in {ann.seconds:.1f} s")


def _index_build_bm25(args: argparse.Namespace, settings: Settings, *, if_missing: bool) -> int:
    report = build_index(
        settings,
        corpus=args.corpus,
        out=args.out,
        on_error=args.on_error,
        limit=args.limit,
        k1=args.k1,
        b=args.b,
        method=args.method,
        if_missing=if_missing,
        show_progress=not args.quiet,
    )
    if report.skipped:
        print(f"index at {report.out} is up to date; nothing to do")
        return 0
    print(
        f"indexed {report.passages:,} passages ({report.vocab:,} terms, "
        f"{report.postings:,} postings) in {report.seconds:.1f} s "
        f"({report.passages_per_s:,.0f} passages/s) -> {report.out}"
    )
    if report.skipped_rows:
        print(f"skipped {report.skipped_rows:,} malformed rows (first: {report.first_error})")
    return 0


def _retrieve(args: argparse.Namespace, settings: Settings) -> int:
    from typed_rag.retrieval import open_retriever
    from typed_rag.retrieval.collections import collection_settings

    if args.collection and args.index:
        raise UserError("give --collection or --index, not both")
    settings = collection_settings(settings, args.collection)
    if args.kind:
        settings = settings.with_section("retrieval", kind=args.kind)
    k = settings.retrieval.top_k if args.k is None else args.k
    if k <= 0:
        raise UserError(f"-k must be a positive number, got {k}")
    if not args.question.strip():
        raise UserError("the question is empty")
    t0 = time.perf_counter()
    index = open_retriever(settings, args.index)
    t1 = time.perf_counter()
    hits = index.search([args.question], k)[0]
    t2 = time.perf_counter()
    if args.json:
        payload = {
            "question": args.question,
            "index": str(index.folder),
            "load_ms": round((t1 - t0) * 1000, 1),
            "search_ms": round((t2 - t1) * 1000, 1),
            "passages": [
                {
                    "rank": i,
                    "score": round(p.score, 4),
                    "id": p.id,
                    "title": p.title,
                    "text": p.text,
                    "source": p.source,
                    "page": p.page,
                    "section": p.section,
                }
                for i, p in enumerate(hits, 1)
            ],
        }
        print(json.dumps(payload, ensure_ascii=False, indent=2))
        return 0
    if not hits:
        print("no passage matches the question")
    for i, p in enumerate(hits, 1):
        text = " ".join(p.text.split())
        snippet = text if len(text) <= SNIPPET_CHARS else text[: SNIPPET_CHARS - 1] + "…"
        where = p.id if p.source is None else p.source + (f" p.{p.page}" if p.page else "")
        print(f"{i:>2}. {p.score:7.3f}  {where}  {p.title}")
        print(f"    {snippet}")
    print(
        f"({len(hits)} passages; load {(t1 - t0) * 1000:.0f} ms, search {(t2 - t1) * 1000:.0f} ms)"
    )
    return 0


def _corpus_download(args: argparse.Namespace, settings: Settings) -> int:
    resource = REGISTRY[args.name]
    folder = Path(args.out).expanduser() if args.out else settings.home / "corpora"
    result = download(
        args.url or resource.url,
        folder / resource.filename,
        sha256=args.sha256 or resource.sha256,
        md5=args.md5 or resource.md5,
        force=args.force,
        show_progress=not args.quiet,
    )
    state = "already present" if result.already_present else "downloaded"
    if result.resumed_from:
        state += f" (resumed at {result.resumed_from:,} bytes)"
    print(f"{state}: {result.path} ({result.bytes:,} bytes)")
    print(f"sha256 {result.sha256}" + (f" (verified {result.verified})" if result.verified else ""))
    if not result.verified:
        print("no checksum given: pass --sha256 to verify against a trusted value")
    print(f"build the index with: typed-rag index build --corpus {result.path}")
    return 0
