"""Every pipeline query reranked (retrieval.rerank_depth > 0), with a relevance floor."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.core.conftest import MemoryRetriever, OverlapReranker
from typed_rag.config import load_settings
from typed_rag.retrieval import RerankedRetriever, with_reranking

Q = "Why do leaves change color in autumn?"


@pytest.mark.parametrize(
    ("mode", "qtype"), [("rag", None), ("typed-rag", "REASON"), ("typed-rag", "DEBATE")]
)
async def test_every_query_of_every_pipeline_is_reranked(make_rag, mode, qtype) -> None:
    base, reranker = MemoryRetriever(), OverlapReranker()
    rag, _ = make_rag(retriever=RerankedRetriever(base, reranker, depth=10, order="rerank"))
    result = await rag.answer(Q, mode=mode, force_type=qtype)
    assert result.passages
    assert all(p.rerank_score is not None for p in result.passages)
    # the first stage was asked for the rerank depth for every query of each round
    assert base.searches and all(k == 10 for _, k in base.searches)
    asked = {q for qs, _ in base.searches for q in qs}
    assert asked <= set(reranker.queries)


async def test_floor_leaves_a_query_without_passages_and_the_trace_says_so(make_rag) -> None:
    rr = RerankedRetriever(MemoryRetriever(), OverlapReranker(), depth=10, floor=3.0)
    rag, _ = make_rag(retriever=rr)
    result = await rag.answer("how do you bake sourdough bread with yeast", mode="rag")
    assert result.passages and all((p.rerank_score or 0) >= 3.0 for p in result.passages)
    result = await rag.answer("coffee or tea?", mode="rag")
    assert not result.passages
    assert any("reaches the floor 3" in note for note in result.fallbacks)
    assert any("answered without passages" in note for note in result.fallbacks)


def test_paper_profile_turns_per_query_reranking_off(tmp_path: Path) -> None:
    repo = Path(__file__).resolve().parents[2]
    paper = load_settings(repo / "configs" / "paper.toml", home=str(tmp_path))
    assert paper.retrieval.rerank_depth == 0
    base = MemoryRetriever()
    assert with_reranking(paper, base, OverlapReranker()) is base
