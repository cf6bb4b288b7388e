"""Document collections benchmark: parsing, indexing, updating and searching real documents.

The document set is documentation nobody here wrote, from Debian's packages (fetched with
``apt-get download``, unpacked with ``dpkg-deb -x``; nothing is installed): PDF manuals
(ReportLab user guide, Why3 manual, C++ Annotations, Live Systems manual), HTML manuals
(C++ Annotations, Live Systems, ReportLab API) and Markdown (the Node.js API docs,
gunzipped). The files are not committed; ``summary.json`` lists them with their sizes.

Measured: parsing speed per format (files/s, PDF pages/s: every file parsed once, timed);
a full ``build_collection`` in a fresh process (passages/s of the BM25 build, seconds,
peak RSS, index size on disk); an incremental rebuild after one file changed (seconds,
files re-read); single-query latency p50 over passages' opening words; and retrieval
sanity: for passages sampled with each of two fixed seeds, the default engine
(``typed_rag.engines.build_engine``) writes a question from the passage (kept in
``questions.jsonl``, so reruns ask the same ones); per seed the first 100 stand-alone
questions (not pointing at "the given code snippet" or "the passage", which a reader has
not seen) are searched in the collection: recall@5 counts the questions whose top 5 hold a
passage of the same file and page (PDF) or section (others), with BM25 alone and with the
default reranking (``retrieval.rerank_depth``), over all questions (with a Wilson 95%
interval) and per seed; ``recall.jsonl`` has each question's rank. The same questions then
go to each first-stage retriever of ``--kinds`` without reranking (``bm25``, ``hybrid``:
the collection is encoded first), recall@5 with its interval and query p50 in
``summary.json`` under the kind's name. Two samples, because
one of 100 questions moved by 0.10 between seeds (0.79 and 0.89 with the same retrieval).

    .venv/bin/python benchmarks/documents_bench.py                # writes results/documents/
    .venv/bin/python benchmarks/documents_bench.py --no-recall    # without the LLM
"""

from __future__ import annotations

import argparse
import asyncio
import gzip
import json
import os
import random
import re
import shutil
import statistics
import subprocess
import sys
import time
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from eval.data.devset import clean_question  # noqa: E402
from indexes.documents import build_collection  # noqa: E402
from indexes.documents.discover import discover  # noqa: E402
from indexes.documents.document import SkipFile  # noqa: E402
from indexes.documents.parse import SUPPORTED, parse_document  # noqa: E402
from typed_rag.config import Settings, load_settings  # noqa: E402
from typed_rag.retrieval.base import Passage  # noqa: E402
from typed_rag.retrieval.collections import (  # noqa: E402
    collection_dir,
    collection_settings,
    open_collection,
)
from typed_rag.retrieval.reranked import rerank_depth  # noqa: E402
from typed_rag.retrieval.store import PassageStore  # noqa: E402

NAME = "docbench"
QUESTIONS = "questions.jsonl"  # the generated questions, kept (under --out) for reruns
PER_QUESTION = "recall.jsonl"  # each question's rank of its source in the top 5
# Debian package -> the files taken from it (globs under /usr/share/doc; .gz is unpacked).
PACKAGES: dict[str, tuple[str, ...]] = {
    "python-reportlab-doc": (
        "python-reportlab-doc/reportlab-userguide.pdf",
        "python-reportlab-doc/html/*.html",
    ),
    "why3-doc-pdf": ("why3-doc-pdf/manual.pdf",),
    "c++-annotations-pdf": ("c++-annotations/cplusplus.pdf",),
    "c++-annotations-html": ("c++-annotations/html/*.html",),
    "live-manual-pdf": ("live-manual/pdf/live-manual.portrait.en.a4.pdf.gz",),
    "live-manual-html": ("live-manual/html/live-manual/*.en.html",),
    "nodejs-doc": ("nodejs/api/*.md.gz",),
}
QUESTION_PROMPT = (
    "Here is a passage from a document.\n\n{text}\n\n"
    "Write one question that a reader of this document could ask and that this passage "
    "answers. Use your own words where you can. Reply with the question only."
)


def prepare(work: Path) -> Path:
    """The document set under ``work/set`` (fetched and unpacked once)."""
    docs = work / "set"
    if docs.is_dir() and any(docs.rglob("*")):
        return docs
    debs, tree = work / "debs", work / "tree"
    debs.mkdir(parents=True, exist_ok=True)
    subprocess.run(["apt-get", "download", *PACKAGES], cwd=debs, check=True)
    for deb in sorted(debs.glob("*.deb")):
        subprocess.run(["dpkg-deb", "-x", str(deb), str(tree)], check=True)
    base = tree / "usr" / "share" / "doc"
    for package, patterns in PACKAGES.items():
        out = docs / package
        out.mkdir(parents=True, exist_ok=True)
        for pattern in patterns:
            for src in sorted(base.glob(pattern)):
                if src.suffix == ".gz":
                    (out / src.stem).write_bytes(gzip.decompress(src.read_bytes()))
                else:
                    shutil.copyfile(src, out / src.name)
    return docs


def _peak_rss_mb() -> float:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    return float("nan")


def child_build(home: str, docs: str) -> None:
    """Run in a fresh process: one build, its report and this process's peak RSS as JSON."""
    settings = load_settings(home=home)
    t0 = time.perf_counter()
    report = build_collection(settings, NAME, [docs], show_progress=False)
    out = {
        "seconds": time.perf_counter() - t0,
        "peak_rss_mb": round(_peak_rss_mb(), 1),
        "files": report.files,
        "pages": report.pages,
        "passages": report.passages,
        "read": report.read,
        "read_pages": report.read_pages,
        "kept": report.kept,
        "parse_s": report.parse_s,
        "index_s": report.index_s,
        "skipped": [{"path": s.path, "reason": s.reason} for s in report.skipped],
        "warnings": [{"path": p, "warning": w} for p, w in report.warnings],
    }
    print(json.dumps(out))


def run_build(home: Path, docs: Path) -> dict[str, Any]:
    cmd = [sys.executable, __file__, "--child-build", str(home), str(docs)]
    done = subprocess.run(cmd, capture_output=True, text=True, check=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


def parse_pass(docs: Path, max_bytes: int) -> dict[str, Any]:
    """Every file parsed once, timed per format."""
    found = discover([docs], SUPPORTED, max_bytes)
    per: dict[str, dict[str, float]] = defaultdict(lambda: Counter())  # type: ignore[arg-type]
    for f in found.files:
        kind = Path(f.path).suffix.lower().lstrip(".")
        data = Path(f.path).read_bytes()
        t0 = time.perf_counter()
        try:
            doc = parse_document(Path(f.path), data)
            per[kind]["pages"] += doc.pages or 0
            per[kind]["files"] += 1
        except SkipFile:
            per[kind]["skipped"] += 1
        per[kind]["seconds"] += time.perf_counter() - t0
        per[kind]["bytes"] += len(data)
    out: dict[str, Any] = {}
    for kind, c in sorted(per.items()):
        s = c["seconds"]
        out[kind] = {
            "files": int(c["files"]),
            "skipped": int(c["skipped"]),
            "pages": int(c["pages"]),
            "mb": round(c["bytes"] / 1e6, 2),
            "seconds": round(s, 2),
            "files_per_s": round((c["files"] + c["skipped"]) / s, 2) if s else None,
            "pages_per_s": round(c["pages"] / s, 1) if s and c["pages"] else None,
        }
    return out


def folder_mb(folder: Path) -> float:
    return round(sum(p.stat().st_size for p in folder.resolve().rglob("*") if p.is_file()) / 1e6, 2)


def sample_passages(settings: Settings, n: int, seed: int, min_words: int) -> list[dict[str, Any]]:
    store = PassageStore(collection_dir(settings, NAME))
    try:
        assert store.meta is not None
        candidates = []
        for doc in range(len(store)):
            pid, title, text = store.get(doc)
            if len(text.split()) >= min_words:
                candidates.append(doc)
        rng = random.Random(seed)
        picked = rng.sample(candidates, min(n, len(candidates)))
        out = []
        for doc in picked:
            pid, title, text = store.get(doc)
            meta = store.meta.get(doc)
            out.append(
                {"id": pid, "title": title, "text": text, "source": meta.source,
                 "page": meta.page, "section": meta.section}
            )  # fmt: skip
        return out
    finally:
        store.close()


def query_latency(settings: Settings, queries: list[str]) -> dict[str, float]:
    retriever = open_collection(settings, NAME)
    try:
        retriever.search([queries[0]], 5)  # load the kernel
        times = []
        for q in queries:
            t0 = time.perf_counter()
            retriever.search([q], 5)
            times.append((time.perf_counter() - t0) * 1000)
    finally:
        retriever.close()
    times.sort()
    return {
        "queries": len(times),
        "p50_ms": round(statistics.median(times), 2),
        "p95_ms": round(times[int(0.95 * (len(times) - 1))], 2),
    }


async def _generate(settings: Settings, samples: list[dict[str, Any]]) -> list[str]:
    from typed_rag.engines import build_engine
    from typed_rag.engines.base import ChatRequest

    engine = build_engine(settings)
    await engine.start()
    try:
        requests = [
            ChatRequest(
                messages=[{"role": "user", "content": QUESTION_PROMPT.format(text=s["text"])}],
                temperature=0.0,
                max_tokens=64,
                seed=42,
            )
            for s in samples
        ]
        results = await engine.generate(requests)
    finally:
        await engine.close()
    return [r.text.strip().splitlines()[0].strip() if r.text.strip() else "" for r in results]


def questions_for(settings: Settings, samples: list[dict[str, Any]], path: Path) -> dict[str, str]:
    """Passage id -> the model's question, generated once and kept in ``path`` (JSONL), so
    that a rerun (another retrieval setting) asks the same questions."""
    cached: dict[str, str] = {}
    if path.is_file():
        for line in path.read_text().splitlines():
            row = json.loads(line)
            cached[row["id"]] = row["question"]
    missing = [s for s in samples if s["id"] not in cached]
    if missing:
        path.parent.mkdir(parents=True, exist_ok=True)
        with path.open("a") as f:
            for s, q in zip(missing, asyncio.run(_generate(settings, missing)), strict=True):
                cached[s["id"]] = q
                f.write(json.dumps({"id": s["id"], "question": q}, ensure_ascii=False) + "\n")
    return cached


def pick_questions(
    by_seed: dict[int, list[dict[str, Any]]], asked: dict[str, str], n: int
) -> tuple[list[dict[str, Any]], list[str], list[int], int]:
    """The first ``n`` stand-alone questions of each seed's passages (a passage drawn
    by an earlier seed is not asked twice): samples, questions, their seeds, how many were
    dropped as not stand-alone."""
    samples: list[dict[str, Any]] = []
    questions: list[str] = []
    seeds: list[int] = []
    dropped = 0
    seen: set[str] = set()
    for seed, candidates in by_seed.items():
        kept = 0
        for s in candidates:
            if kept == n:
                break
            if s["id"] in seen:
                continue
            seen.add(s["id"])
            q = clean_question(asked[s["id"]])
            if q is None:
                dropped += 1
                continue
            samples.append(s)
            questions.append(q)
            seeds.append(seed)
            kept += 1
    return samples, questions, seeds, dropped


def per_seed(
    seeds: list[int], bm25: list[int | None], reranked: list[int | None]
) -> dict[str, dict[str, Any]]:
    """Recall@5 of each seed's questions, BM25 alone and reranked."""
    out = {}
    for seed in dict.fromkeys(seeds):
        mine = [i for i, s in enumerate(seeds) if s == seed]
        out[str(seed)] = {
            "questions": len(mine),
            "bm25": round(sum(bm25[i] is not None for i in mine) / len(mine), 3),
            "reranked": round(sum(reranked[i] is not None for i in mine) / len(mine), 3),
        }
    return out


def wilson(hits: int, n: int, z: float = 1.96) -> list[float]:
    """95% Wilson interval of a proportion (recall over n questions)."""
    p = hits / n
    mid = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * (p * (1 - p) / n + z * z / (4 * n * n)) ** 0.5 / (1 + z * z / n)
    return [round(mid - half, 3), round(mid + half, 3)]


def same_place(hit: Passage, sample: dict[str, Any]) -> bool:
    if hit.source != sample["source"]:
        return False
    if sample["page"] is not None:
        return hit.page == sample["page"]
    return hit.section == sample["section"]


def recall_at_5(
    settings: Settings, samples: list[dict[str, Any]], questions: list[str], rerank: bool
) -> tuple[dict[str, Any], list[int | None]]:
    """Recall@5 (same file and page or section; same passage) and, per question, the rank
    of the first hit of the same place in the top 5 (None: not there)."""
    from typed_rag.rerank import build_reranker
    from typed_rag.retrieval import with_reranking

    retriever: Any = open_collection(settings, NAME)
    if rerank:
        retriever = with_reranking(settings, retriever, build_reranker(settings))
    ranks: list[int | None] = []
    passage_hits = 0
    try:
        for sample, question in zip(samples, questions, strict=True):
            hits = retriever.search([question], 5)[0]
            ranks.append(next((i for i, h in enumerate(hits) if same_place(h, sample)), None))
            passage_hits += any(h.id == sample["id"] for h in hits)
    finally:
        close = getattr(retriever, "close", None)
        if close:
            close()
    asked = len(ranks)
    return {
        "questions": asked,
        "recall_at_5": round(sum(r is not None for r in ranks) / asked, 3) if asked else None,
        "ci95": wilson(sum(r is not None for r in ranks), asked) if asked else None,
        "passage_recall_at_5": round(passage_hits / asked, 3) if asked else None,
    }, ranks


def kind_rows(
    settings: Settings,
    samples: list[dict[str, Any]],
    questions: list[str],
    latency_queries: list[str],
    kinds: list[str],
) -> dict[str, dict[str, Any]]:
    """Each first-stage retriever (``retrieval.kind``, no reranking) on the same questions:
    source recall@5 with its interval and single-query latency. Dense and hybrid encode the
    collection first (``index build --dense``, resumable; minutes on a CPU)."""
    rows: dict[str, dict[str, Any]] = {}
    for kind in kinds:
        if kind != "bm25":
            cli = Path(sys.executable).with_name("typed-rag")
            folder = collection_dir(settings, NAME)
            cmd = [str(cli), "--set", f"home={settings.home}", "index", "build", "--dense"]
            subprocess.run([*cmd, "--if-missing", "--quiet", "--out", str(folder)], check=True)
        mine = settings.with_section("retrieval", kind=kind, rerank_depth=0)
        recall, _ = recall_at_5(mine, samples, questions, rerank=False)
        rows[kind] = {
            **recall,
            "query_ms_p50": query_latency(mine, latency_queries)["p50_ms"],
            "settings": f"retrieval.kind={kind}, rerank_depth=0",
        }
        print(kind, json.dumps(rows[kind]), flush=True)
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--work", type=Path, default=Path("/tmp/documents-bench"))
    parser.add_argument("--home", type=Path, help="typed-rag home (default: settings.home)")
    parser.add_argument("--out", type=Path, default=REPO / "results" / "documents")
    parser.add_argument("--samples", type=int, default=100, help="questions per seed")
    parser.add_argument("--seeds", type=int, nargs="+", default=[42, 7])
    parser.add_argument("--no-recall", action="store_true", help="skip the LLM questions")
    parser.add_argument(
        "--kinds", default="bm25,hybrid", help="first-stage retrievers measured side by side"
    )
    parser.add_argument("--child-build", nargs=2, metavar=("HOME", "DOCS"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child_build:
        child_build(*args.child_build)
        return
    docs = prepare(args.work)
    # the user's home (its models are reused); only the benchmark's collection is replaced
    settings = load_settings(**({"home": str(args.home)} if args.home else {}))
    home = settings.home
    parent = collection_dir(settings, NAME).parent
    mine = re.compile(rf"^\.?{NAME}(\..+)?$")  # the collection, its versions and lock
    for old in parent.iterdir() if parent.is_dir() else []:
        if not mine.match(old.name):
            continue
        if old.is_symlink() or old.is_file():
            old.unlink()
        else:
            shutil.rmtree(old)
    max_bytes = int(settings.documents.max_file_mb * 1_000_000)
    summary: dict[str, Any] = {"set": {p: list(v) for p, v in PACKAGES.items()}}

    print("parsing every file once ...", flush=True)
    summary["parse"] = parse_pass(docs, max_bytes)
    print(json.dumps(summary["parse"], indent=1), flush=True)

    print("full build in a fresh process ...", flush=True)
    full = run_build(home, docs)
    folder = collection_dir(settings, NAME)
    summary["build"] = {
        **{k: v for k, v in full.items() if k not in ("skipped", "warnings")},
        "index_mb": folder_mb(folder),
        "index_passages_per_s": round(full["passages"] / full["index_s"], 1),
    }
    print(json.dumps(summary["build"], indent=1), flush=True)

    changed = sorted(docs.rglob("*.md"))[0]
    original = changed.read_bytes()
    changed.write_bytes(original + b"\n\nA paragraph added by the benchmark to change one file.\n")
    try:
        inc = run_build(home, docs)
    finally:
        changed.write_bytes(original)
    summary["incremental"] = {
        "changed_file": changed.name,
        "seconds": round(inc["seconds"], 2),
        "files_read": inc["read"],
        "files_kept": inc["kept"],
        "peak_rss_mb": inc["peak_rss_mb"],
    }
    print(json.dumps(summary["incremental"], indent=1), flush=True)

    # spare passages: a question that points at text the reader has not seen ("the given
    # code snippet") is not asked; the first --samples stand-alone questions are
    by_seed = {
        seed: sample_passages(settings, args.samples * 13 // 10, seed=seed, min_words=50)
        for seed in args.seeds
    }
    candidates = by_seed[args.seeds[0]]
    latency_queries = [" ".join(s["text"].split()[:12]) for s in candidates[: args.samples]]
    summary["query"] = query_latency(settings, latency_queries * 2)
    print(json.dumps(summary["query"], indent=1), flush=True)

    recall: dict[str, Any] = {"bm25": None, "reranked": None, "missing": None}
    if args.no_recall:
        recall["missing"] = "run without --no-recall (needs the default engine's model)"
    else:
        try:
            t0 = time.perf_counter()
            everything = [s for seed in args.seeds for s in by_seed[seed]]
            asked = questions_for(settings, everything, args.out / QUESTIONS)
            recall["generation_s"] = round(time.perf_counter() - t0, 1)
            recall["engine"] = f"{settings.engine.backend}:{settings.engine.model}"
            samples, questions, seeds, dropped = pick_questions(by_seed, asked, args.samples)
            recall["not_stand_alone"] = dropped
            recall["bm25"], bm25_ranks = recall_at_5(settings, samples, questions, rerank=False)
            reranked_ranks: list[int | None] = [None] * len(samples)
            if rerank_depth(collection_settings(settings, NAME)):
                recall["reranked"], reranked_ranks = recall_at_5(
                    settings, samples, questions, rerank=True
                )
            recall["per_seed"] = per_seed(seeds, bm25_ranks, reranked_ranks)
            kinds = [k for k in args.kinds.split(",") if k]
            recall["kinds"] = kind_rows(settings, samples, questions, latency_queries, kinds)
            rows = zip(samples, questions, seeds, bm25_ranks, reranked_ranks, strict=True)
            with (args.out / PER_QUESTION).open("w") as f:
                for s, q, seed, b, r in rows:
                    row = {"id": s["id"], "seed": seed, "source": os.path.relpath(s["source"], docs),
                           "page": s["page"], "section": s["section"], "question": q,
                           "bm25_rank": b, "reranked_rank": r}  # fmt: skip
                    f.write(json.dumps(row, ensure_ascii=False) + "\n")
        except Exception as exc:  # no model here: the rest of the benchmark still counts
            recall["missing"] = f"{type(exc).__name__}: {exc}"
    summary["recall"] = recall
    print(json.dumps(recall, indent=1), flush=True)

    default = recall.get("reranked") or recall.get("bm25") or {}
    pdf = summary["parse"].get("pdf", {})
    result = {
        "files": full["files"],
        "pages": full["pages"],
        "passages": full["passages"],
        "parse_pages_per_s": pdf.get("pages_per_s"),
        "parse_files_per_s": round(
            sum(v["files"] + v["skipped"] for v in summary["parse"].values())
            / sum(v["seconds"] for v in summary["parse"].values()),
            2,
        ),
        "index_passages_per_s": summary["build"]["index_passages_per_s"],
        "index_mb": summary["build"]["index_mb"],
        "build_s": round(full["seconds"], 1),
        "peak_rss_mb": full["peak_rss_mb"],
        "query_ms_p50": summary["query"]["p50_ms"],
        "incremental_s": summary["incremental"]["seconds"],
        "incremental_files_read": summary["incremental"]["files_read"],
        "recall_at_5": default.get("recall_at_5"),
        "recall_at_5_ci95": default.get("ci95"),
        **recall.get("kinds", {}),
        "skipped": [
            {"path": os.path.relpath(s["path"], docs), "reason": s["reason"]}
            for s in full["skipped"]
        ],
        "details": summary,
        "machine": {"cpus": os.cpu_count(), "python": sys.version.split()[0]},
    }
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "summary.json").write_text(json.dumps(result, indent=2, ensure_ascii=False) + "\n")
    print(f"wrote {args.out / 'summary.json'}")


if __name__ == "__main__":
    main()
