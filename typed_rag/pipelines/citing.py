"""Citation numbers: one per passage id across the question, in the order passages are cited.

Every step that shows passages to the model (the answer, each sub-answer) numbers them
here, so a passage keeps its number wherever it appears and ``result.passages`` lists
each once, by number.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from typed_rag.pipelines.trace import Trace
from typed_rag.result import CitedPassage
from typed_rag.retrieval import Passage


@dataclass
class Citations:
    """The question's cited passages by id; new ones are appended to ``result.passages``."""

    trace: Trace
    _cited: dict[str, CitedPassage] = field(default_factory=dict)

    def cite(self, passages: Sequence[Passage], query: str | Sequence[str]) -> list[CitedPassage]:
        """Give passages their citation numbers (one per passage id across the question).

        ``query`` is the (sub-)query that retrieved them, or one query per passage. They are
        announced at once (a ``sources`` progress event), before any answer is written.
        """
        queries = [query] * len(passages) if isinstance(query, str) else list(query)
        out: list[CitedPassage] = []
        for p, q in zip(passages, queries, strict=True):
            cited = self._cited.get(p.id)
            if cited is None:
                cited = CitedPassage(
                    citation=len(self._cited) + 1,
                    id=p.id,
                    title=p.title,
                    text=p.text,
                    score=float(p.score),
                    rerank_score=p.rerank_score,
                    query=q,
                    source=p.source,
                    page=p.page,
                    section=p.section,
                )
                self._cited[p.id] = cited
                self.trace.result.passages.append(cited)
            if cited not in out:
                out.append(cited)
        if self.trace.listening:  # retrieval for this query is over: show its sources
            one = query if isinstance(query, str) else None
            if one is None and len(set(queries)) == 1:
                one = queries[0]
            self.trace.emit("sources", query=one, passages=[p.model_dump() for p in out])
        return out
