"""RM3 pseudo-relevance feedback over the BM25 index (Lavrenko & Croft; Anserini's BM25+RM3).

A first BM25 pass takes the top ``fb_docs`` passages; each term of those passages gets
the relevance-model weight ``sum_d w(d) * tf(t, d) / |d|`` with ``w(d)`` the passage's
share of the first-pass scores; the ``fb_terms`` heaviest terms, normalised to sum 1, are
interpolated with the query's own terms (``orig_weight`` on the query) and a second pass
scores the weighted query. The expansion puts words of the answer's neighbourhood into
the query, which BM25 alone cannot do; its cost is a second pass and analysing
``fb_docs`` passages per query (a few ms).

Weighted scoring sums each term's precomputed BM25 column times its weight, straight
from the index's CSC matrix (the rows of one column are distinct documents, so a fancy
``+=`` is exact).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

import numpy as np

from typed_rag.retrieval.base import Passage
from typed_rag.retrieval.bm25 import BM25Index


def weighted_scores(index: BM25Index, weights: dict[int, float]) -> np.ndarray:
    """BM25 score of every document for a query of ``term id -> weight``."""
    s = index.bm25.scores
    data, indptr, indices = s["data"], s["indptr"], s["indices"]
    scores = np.zeros(index.num_docs, dtype=np.float32)
    for term, w in weights.items():
        lo, hi = int(indptr[term]), int(indptr[term + 1])
        if hi > lo:
            scores[indices[lo:hi]] += np.float32(w) * data[lo:hi]
    return scores


def top_k(scores: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """Indices and values of the ``k`` largest scores, best first (ties: lower index)."""
    k = min(k, scores.shape[0])
    if k <= 0:
        return np.zeros(0, np.int64), np.zeros(0, np.float32)
    part = np.argpartition(-scores, k - 1)[:k]
    order = np.lexsort((part, -scores[part]))
    docs = part[order]
    return docs, scores[docs]


class RM3Retriever:
    """BM25 with RM3 query expansion; ``search(queries, k)`` like :class:`BM25Index`."""

    def __init__(
        self,
        index: BM25Index,
        fb_docs: int = 10,
        fb_terms: int = 10,
        orig_weight: float = 0.5,
    ) -> None:
        if fb_docs < 1 or fb_terms < 1 or not 0.0 <= orig_weight <= 1.0:
            raise ValueError("RM3 needs fb_docs >= 1, fb_terms >= 1 and 0 <= orig_weight <= 1")
        self.index = index
        self.fb_docs = fb_docs
        self.fb_terms = fb_terms
        self.orig_weight = orig_weight
        self.folder = index.folder

    def expand(
        self, query_terms: Sequence[int], docs: Sequence[int], scores: Sequence[float]
    ) -> dict[int, float]:
        """The interpolated ``term id -> weight`` query (original terms when no feedback)."""
        orig = Counter(query_terms)
        total = sum(orig.values())
        query = {t: n / total for t, n in orig.items()} if total else {}
        fb = [(d, s) for d, s in zip(docs, scores, strict=True) if s > 0]
        if not fb or not query:
            return query
        mass = sum(s for _, s in fb)
        store = self.index.store
        texts = []
        for d, _ in fb:
            _, title, text = store.get(int(d))
            texts.append(f"{title}\n{text}" if title else text)
        rel: Counter[int] = Counter()
        for ids, (_, s) in zip(self.index.query_term_ids(texts), fb, strict=True):
            if not ids:
                continue
            w = s / mass / len(ids)
            for t, n in Counter(ids).items():
                rel[t] += w * n
        best = rel.most_common(self.fb_terms)
        norm = sum(w for _, w in best) or 1.0
        out = {t: self.orig_weight * w for t, w in query.items()}
        for t, w in best:
            out[t] = out.get(t, 0.0) + (1.0 - self.orig_weight) * w / norm
        return out

    def search(self, queries: Sequence[str], k: int) -> list[list[Passage]]:
        """Top-``k`` passages per query after expansion, best first (positive scores only)."""
        if isinstance(queries, str):
            raise TypeError("search() takes a sequence of queries, not one string")
        if not queries or k <= 0:
            return [[] for _ in queries]
        first_docs, first_scores = self.index.search_docs(queries, self.fb_docs)
        terms = self.index.query_term_ids(queries)
        rows_d, rows_s = [], []
        for q_terms, docs, scores in zip(terms, first_docs, first_scores, strict=True):
            weights = self.expand(q_terms, docs.tolist(), scores.tolist())
            d, s = top_k(weighted_scores(self.index, weights), k)
            rows_d.append(d)
            rows_s.append(s)
        return [
            self.index.store.passages(d[None, :], s[None, :], positive_only=True)[0]
            for d, s in zip(rows_d, rows_s, strict=True)
        ]

    def close(self) -> None:
        self.index.close()
