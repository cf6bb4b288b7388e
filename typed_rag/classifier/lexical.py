"""Lexical features of a question: TF-IDF of its words, word pairs and opening words.

Why: question type is largely carried by form words ("why", "how do I",
"difference between", "your experience", "best"), which a sentence embedding
trained for topical similarity blurs. A small vocabulary learnt from the
training questions costs nothing at inference and travels in the artefact's
metadata as plain JSON. :class:`LexicalPart` is the logistic regression on
them, calibrated and joined to another model's probabilities (the embedding
head's or the fine-tuned encoder's). Learning the vocabulary and training the
regression is :mod:`training.classifier.lexical`.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

import numpy as np
import torch

from typed_rag.classifier.head import combine, softmax
from typed_rag.errors import UserError
from typed_rag.types import LABELS

TENSOR_PREFIX = "lexical."  # the lexical part's tensors in an artefact beside another model's
_TOKEN = re.compile(r"[a-z0-9']+|[?!]")


def words_of(question: str) -> list[str]:
    """The lower-cased words (and ? / !) the lexical features are made of."""
    return _TOKEN.findall(question.lower())


def features(question: str) -> set[str]:
    """Words, adjacent word pairs, and the first one and two words marked as openers."""
    words = words_of(question)
    out = set(words)
    out.update(f"{a} {b}" for a, b in zip(words, words[1:], strict=False))
    if words:
        out.add(f"^{words[0]}")
    if len(words) > 1:
        out.add(f"^{words[0]} {words[1]}")
    return out


def features_plus(question: str) -> set[str]:
    """:func:`features` plus word trigrams and the first and last one to three words
    (closing words carry type too: "... better?", "... for beginners")."""
    words = words_of(question)
    out = features(question)
    out.update(f"{a} {b} {c}" for a, b, c in zip(words, words[1:], words[2:], strict=False))
    for n in (1, 2, 3):
        if len(words) >= n:
            out.add("^" + " ".join(words[:n]))
            out.add(" ".join(words[-n:]) + "$")
    return out


FEATURE_SETS: dict[str, Callable[[str], set[str]]] = {"base": features, "plus": features_plus}


def feature_function(name: str) -> Callable[[str], set[str]]:
    try:
        return FEATURE_SETS[name]
    except KeyError:
        raise UserError(
            f"unknown lexical feature set {name!r}; known: {', '.join(FEATURE_SETS)}"
        ) from None


@dataclass
class Vocabulary:
    """Feature names and their inverse document frequencies (a JSON-friendly pair of lists),
    and the name of the feature set they come from."""

    terms: list[str]
    idf: list[float]
    feature_set: str = "base"

    @cached_property
    def _lookup(self) -> tuple[dict[str, int], np.ndarray, Callable[[str], set[str]]]:
        index = {t: i for i, t in enumerate(self.terms)}
        return index, np.asarray(self.idf, dtype=np.float32), feature_function(self.feature_set)

    def transform(self, questions: Sequence[str]) -> np.ndarray:
        """Binary term presence x idf, L2-normalised rows; shape ``(n, len(terms))``."""
        index, idf, extract = self._lookup
        out = np.zeros((len(questions), len(self.terms)), dtype=np.float32)
        for row, q in enumerate(questions):
            cols = [index[f] for f in extract(q) if f in index]
            out[row, cols] = idf[cols]
        norms = np.linalg.norm(out, axis=1, keepdims=True)
        return out / np.maximum(norms, 1e-12)


class LinearModel(torch.nn.Module):
    """Multinomial logistic regression on (sparse) lexical features."""

    def __init__(self, n_features: int, n_labels: int = len(LABELS)) -> None:
        super().__init__()
        self.weight = torch.nn.Parameter(torch.zeros(n_features, n_labels))
        self.bias = torch.nn.Parameter(torch.zeros(n_labels))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        mm = torch.sparse.mm(x, self.weight) if x.is_sparse else x @ self.weight
        return mm + self.bias


def linear_logits(model: LinearModel, x: np.ndarray) -> np.ndarray:
    with torch.no_grad():
        return model(torch.from_numpy(np.ascontiguousarray(x, dtype=np.float32))).numpy()


@dataclass
class LexicalPart:
    """The logistic regression with its vocabulary, its own temperature, and the temperature
    of its geometric mean with the model it is joined to (both fitted on valid)."""

    vocabulary: Vocabulary
    model: LinearModel
    temperature: float
    ensemble_temperature: float
    info: dict[str, Any] = field(default_factory=dict)  # recorded (l2, scores), not used

    def join(self, probabilities: np.ndarray, questions: Sequence[str]) -> np.ndarray:
        """The other model's calibrated probabilities combined with this model's."""
        z = linear_logits(self.model, self.vocabulary.transform(questions))
        return combine([probabilities, softmax(z, self.temperature)], self.ensemble_temperature)

    def meta(self) -> dict[str, Any]:
        """What an artefact's metadata keeps (the weights go in its tensors)."""
        v = self.vocabulary
        return self.info | {
            "terms": v.terms,
            "idf": v.idf,
            "feature_set": v.feature_set,
            "temperature": self.temperature,
            "ensemble_temperature": self.ensemble_temperature,
        }

    def tensors(self, prefix: str) -> dict[str, torch.Tensor]:
        return {f"{prefix}{k}": v for k, v in self.model.state_dict().items()}

    @classmethod
    def from_artefact(
        cls, meta: dict[str, Any], tensors: dict[str, torch.Tensor], prefix: str, n_labels: int
    ) -> LexicalPart:
        """Rebuild from :meth:`meta` and the tensors named with ``prefix``; artefacts written
        before feature sets existed use the base set."""
        known = ("terms", "idf", "feature_set", "temperature", "ensemble_temperature")
        vocab = Vocabulary(meta["terms"], meta["idf"], meta.get("feature_set", "base"))
        model = LinearModel(len(vocab.terms), n_labels)
        model.load_state_dict(
            {k[len(prefix) :]: v for k, v in tensors.items() if k.startswith(prefix)}
        )
        info = {k: v for k, v in meta.items() if k not in known}
        return cls(vocab, model.eval(), meta["temperature"], meta["ensemble_temperature"], info)


def add_to_artefact(
    part: LexicalPart | None, tensors: dict[str, torch.Tensor], fields: dict[str, Any]
) -> None:
    """Put ``part`` (or None) into an artefact's tensors and metadata fields, as both
    classifier kinds store it: ``lexical.*`` tensors and ``fields["lexical"]``."""
    fields["lexical"] = None
    if part is not None:
        tensors |= part.tensors(TENSOR_PREFIX)
        fields["lexical"] = part.meta()
