"""Reciprocal rank fusion scores and order, and the hybrid retriever over stub retrievers."""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from typed_rag.retrieval import Passage
from typed_rag.retrieval.fusion import HybridRetriever, reciprocal_rank_fusion


def test_rrf_scores_are_hand_computed() -> None:
    fused = reciprocal_rank_fusion([["a", "b", "c"], ["b", "d"]], k=60)
    assert [pid for pid, _ in fused] == ["b", "a", "d", "c"]
    scores = dict(fused)
    assert scores["b"] == pytest.approx(1 / 62 + 1 / 61)
    assert scores["a"] == pytest.approx(1 / 61)
    assert scores["d"] == pytest.approx(1 / 62)
    assert scores["c"] == pytest.approx(1 / 63)


def test_rrf_ties_go_to_the_best_single_rank_then_the_id() -> None:
    # k=0: z = 1/1, b = 1/1, a = 1/2 + 1/2: all three score 1.0.
    fused = reciprocal_rank_fusion([["z", "a"], ["b", "a"]], k=0)
    assert [s for _, s in fused] == [1.0, 1.0, 1.0]
    # b and z were ranked first somewhere (b < z by id); a only second, despite its id.
    assert [pid for pid, _ in fused] == ["b", "z", "a"]
    # The same symmetric input in the other order gives the same result.
    assert reciprocal_rank_fusion([["b", "a"], ["z", "a"]], k=0) == fused


def test_rrf_counts_a_repeated_id_once_per_list() -> None:
    assert reciprocal_rank_fusion([["a", "a", "b"]], k=1) == [("a", 0.5), ("b", 0.25)]


def test_rrf_edge_cases() -> None:
    assert reciprocal_rank_fusion([]) == []
    assert reciprocal_rank_fusion([[], []]) == []
    with pytest.raises(ValueError, match="RRF k"):
        reciprocal_rank_fusion([["a"]], k=-1)


class StubRetriever:
    """Returns a fixed ranking (cut to k) for every query; records the k it was asked for."""

    def __init__(self, ids: Sequence[str]) -> None:
        self.ids = list(ids)
        self.asked: list[int] = []

    def search(self, queries: Sequence[str], k: int) -> list[list[Passage]]:
        self.asked.append(k)
        hits = [Passage(id=i, title=f"T{i}", text=f"text {i}", score=9.0) for i in self.ids]
        return [hits[:k] for _ in queries]


def test_hybrid_fuses_and_keeps_documents_found_by_one_retriever() -> None:
    bm25 = StubRetriever(["lex1", "both", "lex2"])
    dense = StubRetriever(["sem1", "both"])
    hybrid = HybridRetriever(bm25, [dense], rrf_k=60, depth=10)
    out = hybrid.search(["q1", "q2"], 4)
    assert len(out) == 2
    ids = [p.id for p in out[0]]
    assert ids == ["both", "lex1", "sem1", "lex2"]  # lexical-only and dense-only docs kept
    assert out[0][0].score == pytest.approx(1 / 62 + 1 / 62)
    assert out[0][2].score == pytest.approx(1 / 61)
    assert out[0][2].title == "Tsem1" and out[0][2].text == "text sem1"
    assert bm25.asked == [10] and dense.asked == [10]  # depth candidates from each


def test_hybrid_takes_k_candidates_when_k_exceeds_depth_and_cuts_to_k() -> None:
    bm25 = StubRetriever([f"b{i}" for i in range(8)])
    dense = StubRetriever([f"d{i}" for i in range(8)])
    hybrid = HybridRetriever(bm25, [dense], rrf_k=60, depth=2)
    out = hybrid.search(["q"], 5)[0]
    assert bm25.asked == [5] and dense.asked == [5]
    assert len(out) == 5
    assert [p.id for p in out] == ["b0", "d0", "b1", "d1", "b2"]
    assert hybrid.search([], 5) == []
    assert hybrid.search(["q"], 0) == [[]]
    with pytest.raises(TypeError):
        hybrid.search("one string", 3)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="depth"):
        HybridRetriever(bm25, [dense], depth=0)


def test_hybrid_fuses_every_dense_retriever_with_bm25() -> None:
    bm25 = StubRetriever(["lex", "all"])
    first = StubRetriever(["e5", "all"])
    second = StubRetriever(["all", "minilm"])
    hybrid = HybridRetriever(bm25, [first, second], rrf_k=60, depth=3)
    out = hybrid.search(["q"], 4)[0]
    # all: 1/62 + 1/62 + 1/61; lex, e5 and minilm one term each, ties by best rank, then id.
    assert [p.id for p in out] == ["all", "e5", "lex", "minilm"]
    assert out[0].score == pytest.approx(2 / 62 + 1 / 61)
    assert out[0].title == "Tall"
    assert bm25.asked == first.asked == second.asked == [4]  # max(depth, k)
