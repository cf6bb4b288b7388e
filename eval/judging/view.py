"""What the LINKAGE judge reads of an answer (``eval.judge_citations``, ``eval.judge_source_talk``,
``eval.judge_scaffolding``).

Wiki-NFQA's graded references neither cite nor vouch for sources, and the 1.5B judge pays
for both: the same answer ranks higher with its ``[n]`` markers than without, and one
sentence such as "This answer is supported by the information provided in the references."
lifts a grade-1 answer above itself in every question of the judge-validity probe
(``docs/judge-validity.md``). Reading answers without them judges what they say about the
question; no graded answer has a sentence the source-talk cut removes, so the judge's
validity on graded answers is unchanged. The same holds for talk about the pipeline
("Based on the information provided in the references, ...", "**Perspective 1:**"): the
judge-validity benchmark's scaffolded probe measures what the judge pays for it
(``results/judge/scaffolding``), and no graded answer holds any that
:func:`~typed_rag.finishing.scaffolding.unscaffold` rewrites.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from eval.settings import EvalSettings
from typed_rag.finishing.citations import without_citations
from typed_rag.finishing.finish import drop_sentences
from typed_rag.finishing.scaffolding import unscaffold
from typed_rag.finishing.source_talk import is_source_talk


@dataclass(frozen=True)
class JudgeView:
    """Which parts of an answer the judge does not read."""

    strip_citations: bool = False
    strip_source_talk: bool = False
    strip_scaffolding: bool = False

    @classmethod
    def from_settings(cls, ev: EvalSettings) -> JudgeView:
        return cls(
            ev.judge_citations == "strip",
            ev.judge_source_talk == "strip",
            ev.judge_scaffolding == "strip",
        )

    def read(self, answer: str) -> str:
        """``answer`` as the judge reads it (scaffolding and source talk first: a sentence
        that only cites, "This is supported by [1].", is found by its numbers)."""
        if self.strip_scaffolding:
            answer = unscaffold(answer).answer
        if self.strip_source_talk:
            answer = drop_sentences(answer, is_source_talk)
        return without_citations(answer) if self.strip_citations else answer

    @classmethod
    def from_identity(cls, judge: dict[str, Any]) -> JudgeView:
        """The view a run was judged with, from its fingerprint's judge identity."""
        return cls(
            judge.get("citations") == "strip",
            judge.get("source_talk") == "strip",
            judge.get("scaffolding") == "strip",
        )

    def identity(self) -> dict[str, Any]:
        """The run fingerprint's part: only what is stripped, so runs judged before an
        option existed still match."""
        return {
            **({"citations": "strip"} if self.strip_citations else {}),
            **({"source_talk": "strip"} if self.strip_source_talk else {}),
            **({"scaffolding": "strip"} if self.strip_scaffolding else {}),
        }
