"""The ``gguf`` reranker: a GGUF embedder in llama.cpp embedding mode, with task prefixes.

Runs on the real tiny SmolLM2-135M GGUF (the one the engine tests use), which llama.cpp
can run in embedding mode like any GGUF; nomic-embed itself is too big for a test.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from eval.retrieval.evaluate import embedder_kind
from eval.retrieval.spec import Spec, settings_spec
from tests.conftest import TINY_PASSAGES
from typed_rag.config import load_settings
from typed_rag.rerank import build_reranker
from typed_rag.rerank.embed_reranker import EmbeddingReranker, open_store
from typed_rag.rerank.gguf_embedder import GGUFEmbedder, registry_prefixes
from typed_rag.rerank.vector_store import VectorStore
from typed_rag.retrieval import Passage
from typed_rag.retrieval.reranked import RerankedRetriever

pytest.importorskip("llama_cpp")

PASSAGES = [Passage(id=pid, title=t, text=x, score=1.0) for pid, t, x in TINY_PASSAGES]


@pytest.fixture(scope="module")
def smollm2_gguf() -> Path:
    from typed_rag.models import ensure_model

    return ensure_model(load_settings(), "smollm2-135m-instruct-q4_1")


@pytest.fixture(scope="module")
def embedder(smollm2_gguf: Path) -> GGUFEmbedder:
    return GGUFEmbedder(smollm2_gguf, n_threads=1, max_tokens=128)


class Recording:
    """Wraps an encoder and records every text it is asked to embed."""

    def __init__(self, inner: GGUFEmbedder) -> None:
        self.inner = inner
        self.dim = inner.dim
        self.fingerprint = inner.fingerprint
        self.queries: list[str] = []
        self.documents: list[str] = []

    def encode_queries(self, texts: list[str]) -> np.ndarray:
        self.queries.extend(texts)
        return self.inner.encode_queries(texts)

    def encode_documents(self, texts: list[str]) -> np.ndarray:
        self.documents.extend(texts)
        return self.inner.encode_documents(texts)


def test_vectors_are_unit_length_and_batching_does_not_change_them(
    embedder: GGUFEmbedder,
) -> None:
    texts = [x for _, _, x in TINY_PASSAGES[:4]]
    together = embedder.encode_documents(texts)
    alone = np.stack([embedder.encode_documents([t])[0] for t in texts])
    assert together.shape == (4, embedder.dim)
    assert np.allclose(np.linalg.norm(together, axis=1), 1.0, atol=1e-4)
    # Several texts share one decode: each still gets its own vector (numerics aside).
    assert np.all(np.sum(together * alone, axis=1) > 0.995)
    assert float(together[0] @ together[2]) < 0.99


def test_prefixes_are_applied_to_queries_and_documents_only(
    embedder: GGUFEmbedder, smollm2_gguf: Path
) -> None:
    prefixed = GGUFEmbedder(
        smollm2_gguf,
        query_prefix="search_query: ",
        document_prefix="search_document: ",
        llm=embedder.llm,
    )
    text = "why do leaves change color"
    q, d = prefixed.encode_queries([text])[0], prefixed.encode_documents([text])[0]
    assert np.allclose(q, embedder.encode_documents(["search_query: " + text])[0], atol=1e-4)
    assert np.allclose(d, embedder.encode_documents(["search_document: " + text])[0], atol=1e-4)
    assert not np.allclose(q, d, atol=1e-3)


def test_reranking_moves_the_matching_passage_from_last_to_first(embedder: GGUFEmbedder) -> None:
    target = PASSAGES[0]
    pool = [*PASSAGES[1:], target]  # the first stage ranks it last

    class Fixed:
        def search(self, queries: list[str], k: int) -> list[list[Passage]]:
            return [pool[:k] for _ in queries]

    query = f"{target.title}. {target.text}"  # no prefixes: same text, same vector
    reranker = EmbeddingReranker(embedder)
    (ranked,) = RerankedRetriever(Fixed(), reranker, depth=len(pool), order="rerank").search(
        [query], 3
    )
    assert ranked[0].id == target.id
    assert ranked[0].rerank_score == pytest.approx(1.0, abs=1e-3)
    assert [p.rerank_score for p in ranked] == sorted(
        (p.rerank_score for p in ranked), reverse=True
    )


def test_passages_are_embedded_once_then_read_from_memory_and_disk(
    embedder: GGUFEmbedder, tmp_path: Path
) -> None:
    enc = Recording(embedder)
    store = open_store(tmp_path / "vec", enc)
    reranker = EmbeddingReranker(enc, store=store, batch_size=2)
    first = reranker.score_many(["leaves", "python"], [PASSAGES[:3], PASSAGES[1:4]])
    assert len(enc.documents) == 4  # p2 and p3 shared by both pools: embedded once
    reranker.score("leaves", PASSAGES[:3])
    assert len(enc.documents) == 4  # the memory cache answers

    fresh_enc = Recording(embedder)
    again = EmbeddingReranker(fresh_enc, store=open_store(tmp_path / "vec", fresh_enc))
    second = again.score_many(["leaves", "python"], [PASSAGES[:3], PASSAGES[1:4]])
    assert fresh_enc.documents == []  # a new process reads the vectors from disk
    assert np.allclose(first[0], second[0], atol=2e-3)  # stored as float16

    with again.cold():
        again.score("leaves", PASSAGES[:2])
    assert len(fresh_enc.documents) == 2  # cold: neither cache nor store is used


def test_the_store_drops_a_row_cut_short_and_skips_unkeyed_passages(tmp_path: Path) -> None:
    store = VectorStore(tmp_path, "model-a", dim=4)
    store.add({"p1": np.ones(4), "\0title\0text": np.ones(4)})
    with (store.folder / "vectors.f16").open("ab") as fh:
        fh.write(b"\x00\x3c" * 3)  # a crash in the middle of the next row
    reopened = VectorStore(tmp_path, "model-a", dim=4)
    assert list(reopened.keys()) == ["p1"]
    assert (store.folder / "vectors.f16").stat().st_size == 4 * 2
    assert VectorStore(tmp_path, "model-b", dim=4).get("p1") is None  # another model


def test_settings_build_it_and_eval_specs_name_it(smollm2_gguf: Path, tmp_path: Path) -> None:
    s = load_settings(
        None,
        **{
            "home": str(tmp_path),
            "reranker.kind": "gguf",
            "reranker.gguf_model": str(smollm2_gguf),
            "reranker.gguf_max_tokens": 64,
            "reranker.gguf_query_prefix": "q: ",
            "retrieval.rerank_depth": 30,
        },
    )
    reranker = build_reranker(s)
    assert isinstance(reranker, EmbeddingReranker)
    assert reranker.encoder.query_prefix == "q: " and reranker.encoder.document_prefix == ""
    assert settings_spec(s) == f"bm25+{smollm2_gguf}-rrf@30"
    assert registry_prefixes("nomic") == ("search_query: ", "search_document: ")
    assert registry_prefixes(str(smollm2_gguf)) == ("", "")
    assert embedder_kind("nomic") == "gguf" and embedder_kind("/x/emb.gguf") == "gguf"
    assert embedder_kind("e5") == "e5"
    assert embedder_kind("minilm") is None and embedder_kind("smollm2") is None  # a chat model
    spec = Spec.parse("bm25+nomic-rerank@50")
    assert (spec.model, spec.order, spec.depth) == ("nomic", "rerank", 50)
    nomic = load_settings(None, **{"reranker.kind": "gguf", "retrieval.rerank_depth": 20})
    assert settings_spec(nomic) == "bm25+nomic-rrf@20"


def test_only_the_top_depth_is_reranked_when_more_are_asked_for() -> None:
    class Scores:
        seen: list[list[str]] = []

        def score_many(self, queries, pools):  # noqa: ANN001, ANN202
            self.seen.extend([p.id for p in pool] for pool in pools)
            return [[float(i) for i in range(len(pool))] for pool in pools]  # reverses

    class Fixed:
        def search(self, queries, k):  # noqa: ANN001, ANN202
            return [PASSAGES[:k] for _ in queries]

    scorer = Scores()
    (got,) = RerankedRetriever(Fixed(), scorer, depth=2, order="rerank").search(["q"], 4)  # type: ignore[arg-type]
    assert scorer.seen == [["p1", "p2"]]  # the cost is set by depth, not by k
    assert [p.id for p in got] == ["p2", "p1", "p3", "p4"]  # the rest in first-stage order
    assert got[2].rerank_score is None
    floored = RerankedRetriever(Fixed(), scorer, depth=2, order="rerank", floor=0.0)  # type: ignore[arg-type]
    assert [p.id for p in floored.search(["q"], 4)[0]] == ["p2", "p1"]  # unscored: not shown
