"""Warming the prompt cache: every typed plan prompt, up to where the question goes."""

from __future__ import annotations

from typed_rag.config import Settings
from typed_rag.engines.fake import FakeEngine
from typed_rag.pipelines import TYPED
from typed_rag.system import TypedRAG
from typed_rag.types import QuestionType


class PrefillRecorder(FakeEngine):
    def __init__(self) -> None:
        super().__init__()
        self.prefilled: list[list[dict[str, str]]] = []

    async def prefill(self, messages: list[dict[str, str]]) -> None:
        self.prefilled.append(messages)


async def test_each_plan_prompt_is_prefilled_once_without_a_question(settings: Settings) -> None:
    engine = PrefillRecorder()
    rag = TypedRAG(settings, engine)
    assert await rag.warm_prompts() == 5  # reason, instruction, debate, comparison, experience
    users = [m[-1]["content"] for m in engine.prefilled]
    assert len(set(users)) == 5
    assert all(u.rstrip().endswith("### Question\n\n\n### Output") for u in users)
    # The real plan prompt of a question starts with the warmed text up to the question.
    opts = rag.settings.method.options()
    plan = TYPED[QuestionType.DEBATE].plan_prompt
    assert plan is not None
    real = plan("Is tea or coffee better for focus?", opts)[-1]["content"]
    warmed = plan("", opts)[-1]["content"]
    head = warmed.split("### Question")[0]
    assert real.startswith(head + "### Question\nIs tea")
