"""Fixtures for the pipeline and system tests: an in-memory BM25 retriever over the
tiny corpus (rank-bm25), a word-overlap reranker and a scripted classifier."""

from __future__ import annotations

import re
from collections.abc import Sequence

import pytest
from rank_bm25 import BM25Okapi

from tests.conftest import TINY_PASSAGES
from typed_rag.classifier.base import TypeClassifier
from typed_rag.config import Settings
from typed_rag.engines.fake import FakeEngine
from typed_rag.retrieval import Passage, Reranker
from typed_rag.system import TypedRAG
from typed_rag.types import LABELS, QuestionType


def tokens(text: str) -> list[str]:
    return re.findall(r"[a-z0-9]+", text.lower())


class MemoryRetriever:
    """BM25 (rank-bm25) over a list of (id, title, text); records every search."""

    def __init__(self, rows: Sequence[tuple[str, str, str]] = TINY_PASSAGES) -> None:
        self.rows = list(rows)
        self.bm25 = BM25Okapi([tokens(f"{title} {text}") for _, title, text in self.rows])
        self.searches: list[tuple[list[str], int]] = []

    def search(self, queries: Sequence[str], k: int) -> list[list[Passage]]:
        self.searches.append((list(queries), k))
        out = []
        for q in queries:
            scores = self.bm25.get_scores(tokens(q))
            order = sorted(range(len(self.rows)), key=lambda i: -scores[i])
            hits = [
                Passage(
                    id=self.rows[i][0],
                    title=self.rows[i][1],
                    text=self.rows[i][2],
                    score=float(scores[i]),
                )
                for i in order
                if scores[i] > 0
            ]
            out.append(hits[:k])
        return out


class EmptyRetriever:
    def search(self, queries: Sequence[str], k: int) -> list[list[Passage]]:
        return [[] for _ in queries]


class OverlapReranker(Reranker):
    """Scores a passage by how many query words it contains; records each query."""

    name = "overlap"

    def __init__(self) -> None:
        self.queries: list[str] = []

    def score(self, query: str, passages: Sequence[Passage]) -> list[float]:
        self.queries.append(query)
        q = set(tokens(query))
        return [float(len(q & set(tokens(f"{p.title} {p.text}")))) for p in passages]


class FixedClassifier(TypeClassifier):
    """Puts probability ``p`` on ``qtype`` and spreads the rest evenly."""

    name = "fixed"

    def __init__(self, qtype: QuestionType, p: float = 0.9) -> None:
        self.qtype, self.p = qtype, p
        self.calls = 0

    def predict_proba(self, questions: Sequence[str]) -> list[list[float]]:
        self.calls += 1
        rest = (1 - self.p) / (len(LABELS) - 1)
        return [[self.p if t == self.qtype else rest for t in LABELS] for _ in questions]


@pytest.fixture
def retriever() -> MemoryRetriever:
    return MemoryRetriever()


@pytest.fixture
def reranker() -> OverlapReranker:
    return OverlapReranker()


@pytest.fixture
def make_rag(settings: Settings, retriever: MemoryRetriever, reranker: OverlapReranker):
    """Build a TypedRAG over a FakeEngine(responder) with the in-memory parts."""

    def build(responder=None, classifier=None, **kwargs) -> tuple[TypedRAG, FakeEngine]:
        engine = FakeEngine(responder) if responder else FakeEngine()
        parts = {"retriever": retriever, "reranker": reranker, "classifier": classifier}
        parts.update(kwargs)
        return TypedRAG(settings, engine=engine, **parts), engine

    return build
