"""Retrieval configs by name (``bm25+minilm-rrf@20>0.3``), and the name of what the settings serve.

Kept apart from :mod:`eval.retrieval.evaluate` so that light code (run manifests) can name
a retrieval config without loading the evaluation's models.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from typed_rag.config import RetrievalSettings, Settings
from typed_rag.errors import UserError
from typed_rag.retrieval.dense import model_name
from typed_rag.retrieval.loader import dense_models, served_kind
from typed_rag.retrieval.reranked import ORDER, rerank_depth

# Short names for the bi-encoders that can be had here (see the README's model table).
RERANKER_MODELS: dict[str, str] = {
    "minilm": "all-MiniLM-L6-v2",
    "mpnet": "all-mpnet-base-v2",
}
_SPEC = re.compile(
    r"^(?P<base>bm25|dense|hybrid)"
    r"(?:/t(?P<title>[0-9.]+))?(?:/a(?P<article>[0-9.]+))?"
    r"(?:\+(?P<model>[\w.-]+?)-(?P<order>rerank|rrf)@(?P<depth>\d+)(?:>(?P<floor>-?[0-9.]+))?)?$"
)


@dataclass(frozen=True)
class Spec:
    """A parsed config spec (the grammar: :mod:`eval.retrieval.evaluate`'s docstring)."""

    name: str
    base: str  # "bm25" | "dense" | "hybrid" (BM25 and dense fused by RRF)
    title: float = 0.0  # rescoring weights (typed_rag.retrieval.rescore)
    article: float = 0.0
    model: str | None = None  # reranker short name or registry name / folder
    order: str = "rrf"
    depth: int = 0
    floor: float | None = None  # reranker score below which a passage is not shown

    @classmethod
    def parse(cls, text: str) -> Spec:
        m = _SPEC.match(text.strip())
        if not m:
            raise UserError(
                f"bad retrieval config {text!r}: expected bm25|dense|hybrid"
                "[/tTITLE][/aARTICLE][+MODEL-rerank|rrf@DEPTH[>FLOOR]], e.g. bm25/t0.2+mpnet-rrf@30"
            )
        g = m.groupdict()
        spec = cls(
            name=text.strip(),
            base=g["base"],
            title=float(g["title"] or 0.0),
            article=float(g["article"] or 0.0),
            model=g["model"],
            order=g["order"] or "rrf",
            depth=int(g["depth"] or 0),
            floor=float(g["floor"]) if g["floor"] else None,
        )
        if spec.model and spec.depth < 1:
            raise UserError(f"bad retrieval config {text!r}: the rerank depth must be >= 1")
        if spec.base in ("dense", "hybrid") and (spec.title or spec.article):
            raise UserError(
                f"bad retrieval config {text!r}: title and article rescoring apply to BM25 only"
            )
        return spec


DEFAULT_DENSE = RetrievalSettings().dense_model


def row_name(spec: Spec, settings: Settings) -> str:
    """A summary row's name: the spec, plus the dense encoders where they are not the
    default, so a ``hybrid`` row of e5 does not replace MiniLM's
    (``hybrid[multilingual-e5-small]``, ``hybrid[multilingual-e5-small+all-MiniLM-L6-v2]``)."""
    models = dense_models(settings, spec.base)
    if spec.base == "bm25" or models == [DEFAULT_DENSE]:
        return spec.name
    return f"{spec.name}[{'+'.join(model_name(m) for m in models)}]"


def settings_spec(settings: Settings) -> str:
    """The spec of what ``open_retriever(settings)`` + the per-query reranker serve."""
    r = settings.retrieval
    base = served_kind(settings)
    depth = rerank_depth(settings)
    if depth <= 0 or settings.reranker.kind == "none":
        return base
    rr = settings.reranker
    model = rr.biencoder_model
    short = next((k for k, v in RERANKER_MODELS.items() if v == model), model)
    value = r.floor_for(rr)
    floor = "" if value is None else f">{value:g}"
    return f"{base}+{short}-{ORDER}@{depth}{floor}"
