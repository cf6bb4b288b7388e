"""Our bm25s index against rank-bm25, the reference implementation, on the same tokens.

rank_bm25.BM25Okapi scores ``idf * tf * (k1 + 1) / (tf + k1 * (1 - b + b * dl / avgdl))``
with ``idf = log((N - df + 0.5) / (df + 0.5))``; a negative idf (a term in more than
half the documents) is replaced by ``epsilon * mean idf``. bm25s's "robertson" method
uses the same idf but clamps a negative one to 0, and leaves out the constant factor
``(k1 + 1)`` from the tf part. So with ``epsilon=0`` (negative idf -> 0, as in bm25s)
the two agree up to that factor: the rankings are identical and
``bm25s score * (k1 + 1) == rank-bm25 score``. Both sides get the token lists of our
analyzer (stemmed, stop words removed), so document lengths agree as well.
"""

from __future__ import annotations

import random
from pathlib import Path

import numpy as np
import pytest
from rank_bm25 import BM25Okapi

from indexes import build_index
from tests.conftest import TINY_PASSAGES, write_tsv
from typed_rag.config import load_settings
from typed_rag.retrieval import BM25Index
from typed_rag.retrieval.analyzer import analyze

K1, B = 1.2, 0.75


def _generated(n: int, seed: int = 11) -> list[tuple[str, str, str]]:
    """Passages made of words from the tiny corpus, with a skewed (Zipf-like) frequency."""
    rng = random.Random(seed)
    words = sorted({w.strip(".,;") for _, _, text in TINY_PASSAGES for w in text.split()})
    weights = [1.0 / (rank + 1) for rank in range(len(words))]
    return [
        (f"g{i}", "", " ".join(rng.choices(words, weights, k=rng.randint(5, 90)))) for i in range(n)
    ]


def _full_scores(index: BM25Index, query: str) -> np.ndarray:
    docs, scores = index.search_docs([query], index.num_docs)
    out = np.zeros(index.num_docs, dtype=np.float64)
    out[docs[0]] = scores[0]
    return out


def _top(scores: np.ndarray, k: int) -> list[int]:
    """Top-k document numbers; ties broken by document number on both sides."""
    order = sorted(range(scores.size), key=lambda d: (-round(float(scores[d]), 4), d))
    return [d for d in order[:k] if scores[d] > 0]


@pytest.mark.parametrize(
    "rows",
    [
        pytest.param([(p, "", t) for p, _, t in TINY_PASSAGES], id="tiny_corpus"),
        pytest.param(_generated(400), id="generated_400"),
    ],
)
def test_same_ranking_and_scores_as_rank_bm25(tmp_path: Path, rows) -> None:
    corpus = write_tsv(tmp_path / "c.tsv", rows)
    settings = load_settings(None, home=str(tmp_path / "home"))
    build_index(settings, corpus=corpus, k1=K1, b=B, method="robertson", show_progress=False)
    index = BM25Index(settings.index_dir, backend="numpy")
    reference = BM25Okapi(analyze([text for _, _, text in rows]), k1=K1, b=B, epsilon=0.0)

    rng = random.Random(5)
    vocab_words = [w for _, _, text in rows for w in text.split()]
    queries = [
        "why do leaves change color in autumn",
        "programming language readability",
        "nuclear power waste and costs",
        *(" ".join(rng.choices(vocab_words, k=rng.randint(1, 6))) for _ in range(30)),
    ]
    compared = 0
    for query in queries:
        ours = _full_scores(index, query) * (K1 + 1)
        ref = reference.get_scores(analyze([query])[0])
        np.testing.assert_allclose(ours, ref, rtol=1e-5, atol=1e-5, err_msg=query)
        assert _top(ours, 10) == _top(ref, 10), query
        compared += int((ref > 0).sum() > 0)
    assert compared >= 20  # most queries actually matched something
