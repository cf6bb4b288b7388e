"""Progress events of one question's run, emitted as soon as each thing exists.

A typed question spends most of its time before the first answer token (plan,
sub-answers); these events let a chat client show what is happening: the
detected type, the plan, each sub-answer as it completes, and the start of the
final answer. The question's :class:`~typed_rag.pipelines.trace.Trace` emits them
through its ``on_event`` hook; ``TypedRAG.answer_stream(progress=True)`` yields them.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal

# "type": the question type is known (right after classification)
# "plan": the plan (sub-queries / perspectives / keywords) is ready
# "sources": passages were retrieved (and reranked) for a query and given citation numbers
# "sub_answer": one sub-answer (or perspective answer) has completed
# "fallback": a step degraded (e.g. plan unparseable -> plain RAG)
# "answer": the final generation starts; text deltas follow
# "check": the streamed answer (over documents) is being checked against its passages
Kind = Literal["type", "plan", "sources", "sub_answer", "fallback", "answer", "check"]
KINDS: tuple[str, ...] = ("type", "plan", "sources", "sub_answer", "fallback", "answer", "check")


@dataclass(frozen=True)
class Progress:
    """One event: its kind, when (seconds since the question arrived) and its data."""

    kind: Kind
    elapsed_s: float
    data: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        """The wire form: ``{"event": kind, "elapsed_s": ..., **data}``."""
        return {"event": self.kind, "elapsed_s": round(self.elapsed_s, 3), **self.data}


ProgressSink = Callable[[Progress], None]
