"""Rescoring BM25's candidates with two cheap signals of the passage's article.

The corpus holds whole articles cut into ~100-word passages, so a question about a
subject is answered by a passage of the subject's article, whose title names it:

- ``title``: the idf-weighted share of the query's terms that occur in the passage
  title (1.0 when the title holds every query term);
- ``article``: how much the rest of the passage's article supports it: ``log(1 + x)``
  of the summed first-stage scores of the other candidates with the same title, over
  the best score.

The new score is ``score / best + title * t + article * a`` over the first stage's top
``depth``; with both weights 0 the order is the first stage's.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import replace

from typed_rag.retrieval.base import Passage, Retriever
from typed_rag.retrieval.bm25 import BM25Index


class RescoredRetriever:
    """``search(queries, k)``: the first stage's top ``depth``, rescored, best ``k``."""

    def __init__(
        self,
        base: Retriever,
        index: BM25Index,
        title: float = 0.0,
        article: float = 0.0,
        depth: int = 100,
    ) -> None:
        if depth < 1 or title < 0 or article < 0:
            raise ValueError("rescoring needs depth >= 1 and non-negative weights")
        self.base = base
        self.index = index
        self.title = title
        self.article = article
        self.depth = depth
        self.folder = index.folder
        indptr = index.bm25.scores["indptr"]
        self._indptr = indptr
        self._n = index.num_docs

    def idf(self, term: int) -> float:
        df = int(self._indptr[term + 1]) - int(self._indptr[term])
        return math.log(1.0 + (self._n - df + 0.5) / (df + 0.5))

    def search(self, queries: Sequence[str], k: int) -> list[list[Passage]]:
        if isinstance(queries, str):
            raise TypeError("search() takes a sequence of queries, not one string")
        if k <= 0 or not queries:
            return [[] for _ in queries]
        pools = self.base.search(list(queries), max(self.depth, k))
        terms = self.index.query_term_ids(list(queries))
        return [self._rescore(q, pool)[:k] for q, pool in zip(terms, pools, strict=True)]

    def _rescore(self, query_terms: Sequence[int], pool: list[Passage]) -> list[Passage]:
        if not pool or (self.title == 0 and self.article == 0):
            return pool
        best = max(p.score for p in pool) or 1.0
        weights = {t: self.idf(t) for t in set(query_terms)}
        total = sum(weights.values()) or 1.0
        titles = list(dict.fromkeys(p.title for p in pool))
        title_terms = dict(zip(titles, self.index.query_term_ids(titles), strict=True))
        per_title: dict[str, float] = {}
        for p in pool:
            per_title[p.title] = per_title.get(p.title, 0.0) + p.score
        scored = []
        for i, p in enumerate(pool):
            tt = set(title_terms[p.title])
            t = sum(w for term, w in weights.items() if term in tt) / total
            a = math.log1p((per_title[p.title] - p.score) / best)
            new = p.score / best + self.title * t + self.article * a
            scored.append((new, i, replace(p, score=new)))
        scored.sort(key=lambda x: (-x[0], x[1]))
        return [p for _, _, p in scored]

    def close(self) -> None:
        self.index.close()
