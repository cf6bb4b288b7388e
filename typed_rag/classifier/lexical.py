"""Lexical features of a question: TF-IDF of its words, word pairs and opening words.

Why: question type is largely carried by form words ("why", "how do I",
"difference between", "your experience", "best"), which a sentence embedding
trained for topical similarity blurs. A small vocabulary learnt from the
training questions costs nothing at inference and travels in the artefact's
metadata as plain JSON.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

_TOKEN = re.compile(r"[a-z0-9']+|[?!]")


def features(question: str) -> set[str]:
    """Words, adjacent word pairs, and the first one and two words marked as openers."""
    words = _TOKEN.findall(question.lower())
    out = set(words)
    out.update(f"{a} {b}" for a, b in zip(words, words[1:], strict=False))
    if words:
        out.add(f"^{words[0]}")
    if len(words) > 1:
        out.add(f"^{words[0]} {words[1]}")
    return out


@dataclass
class Vocabulary:
    """Feature names and their inverse document frequencies (a JSON-friendly pair of lists)."""

    terms: list[str]
    idf: list[float]

    @classmethod
    def fit(cls, questions: Sequence[str], max_terms: int = 4000, min_df: int = 2) -> Vocabulary:
        """The ``max_terms`` features seen in most questions (at least ``min_df``), by df."""
        df: Counter[str] = Counter()
        for q in questions:
            df.update(features(q))
        kept = sorted((t for t, c in df.items() if c >= min_df), key=lambda t: (-df[t], t))
        kept = kept[:max_terms]
        n = len(questions)
        return cls(kept, [math.log((1 + n) / (1 + df[t])) + 1.0 for t in kept])

    def transform(self, questions: Sequence[str]) -> np.ndarray:
        """Binary term presence x idf, L2-normalised rows; shape ``(n, len(terms))``."""
        index = {t: i for i, t in enumerate(self.terms)}
        idf = np.asarray(self.idf, dtype=np.float32)
        out = np.zeros((len(questions), len(self.terms)), dtype=np.float32)
        for row, q in enumerate(questions):
            cols = [index[f] for f in features(q) if f in index]
            out[row, cols] = idf[cols]
        norms = np.linalg.norm(out, axis=1, keepdims=True)
        return out / np.maximum(norms, 1e-12)
