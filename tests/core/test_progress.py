"""Progress events: the type, the plan and each sub-answer reach a listener as soon as they exist."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Sequence
from contextlib import aclosing

import pytest

from tests.core.conftest import FixedClassifier, MemoryRetriever
from tests.serving.conftest import collect
from typed_rag.engines.base import ChatRequest, ChatResult, each_or_cancel
from typed_rag.engines.fake import FakeEngine, scripted_responder
from typed_rag.progress import Progress
from typed_rag.result import Result
from typed_rag.system import TypedRAG
from typed_rag.types import QuestionType as T

REASON_Q = "Why do leaves change color in autumn?"
THREE = json.dumps({"sub_queries": ["leaf pigments", "chlorophyll breakdown", "day length"]})


def kinds(items: Sequence[object]) -> list[str]:
    out = []
    for item in items:
        if isinstance(item, Progress):
            if item.kind != "fallback":  # e.g. a sub-query the tiny corpus has nothing for
                out.append(item.kind)
        elif isinstance(item, Result):
            out.append("result")
        elif not out or out[-1] != "text":
            out.append("text")
    return out


async def test_stream_yields_type_plan_each_sub_answer_then_the_answer(make_rag) -> None:
    rag, _engine = make_rag(scripted_responder({"sub_query_plan": THREE}))
    items = await collect(rag.answer_stream(REASON_Q, force_type=T.REASON, progress=True))
    assert kinds(items) == ["type", "plan"] + ["sources"] * 3 + ["sub_answer"] * 3 + [
        "answer",
        "text",
        "result",
    ]
    events = [i for i in items if isinstance(i, Progress)]
    # the sources of each sub-query, as soon as its retrieval ends: numbered, with their text
    found = [e.data for e in events if e.kind == "sources"]
    assert [f["query"] for f in found] == json.loads(THREE)["sub_queries"]
    numbers = [p["citation"] for f in found for p in f["passages"]]
    assert numbers and all(p["text"] and p["title"] for f in found for p in f["passages"])
    assert sorted(set(numbers)) == list(range(1, len(set(numbers)) + 1))
    events = [e for e in events if e.kind != "sources"]
    assert events[0].data["type"] == "REASON" and events[0].data["type_source"] == "forced"
    assert events[1].data["plan"]["sub_queries"] == json.loads(THREE)["sub_queries"]
    subs = [e.data for e in events if e.kind == "sub_answer"]
    assert [s["query"] for s in subs] == json.loads(THREE)["sub_queries"]
    assert {s["total"] for s in subs} == {3} and [s["index"] for s in subs] == [0, 1, 2]
    assert all(s["answer"] == "A fake answer [1]." and s["citations"] == [1] for s in subs)
    assert events[-1].data["step"] == "aggregate"
    elapsed = [e.elapsed_s for e in events]
    assert elapsed == sorted(elapsed) and elapsed[0] >= 0
    # the deltas and the Result are unchanged by the events
    result = items[-1]
    assert isinstance(result, Result)
    text = "".join(i for i in items if isinstance(i, str))
    assert text == result.answer == "A fake answer [1]."


async def test_without_progress_the_stream_is_text_then_result(make_rag) -> None:
    rag, _ = make_rag()
    items = await collect(rag.answer_stream(REASON_Q, force_type=T.REASON))
    assert kinds(items) == ["text", "result"]


async def test_type_event_comes_before_any_engine_call(make_rag, classifier) -> None:
    seen: list[str] = []

    def respond(req: ChatRequest) -> str:
        seen.append(f"engine:{'plan' if req.json_schema else 'text'}")
        return scripted_responder()(req)

    rag, _ = make_rag(respond, classifier=classifier)
    await rag.answer(REASON_Q, on_event=lambda e: seen.append(e.kind))
    assert seen[0] == "type" and seen[1] == "engine:plan"
    assert seen.index("plan") < seen.index("engine:text")  # plan shown before sub-answers run


async def test_debate_perspectives_and_comparison_keywords_are_announced(make_rag) -> None:
    rag, _ = make_rag()
    events: list[Progress] = []
    await rag.answer("Is nuclear power good?", force_type=T.DEBATE, on_event=events.append)
    plan = next(e for e in events if e.kind == "plan").data["plan"]
    assert [p["perspective"] for p in plan["perspectives"]] == ["supporters", "opponents"]
    subs = [e.data for e in events if e.kind == "sub_answer"]
    assert [s["perspective"] for s in subs] == ["supporters", "opponents"]
    assert {s["step"] for s in subs} == {"perspective"}

    events.clear()
    await rag.answer("coffee or tea?", force_type=T.COMPARISON, on_event=events.append)
    plan = next(e for e in events if e.kind == "plan").data["plan"]
    assert plan["keywords"] == ["coffee", "tea"]


async def test_fallback_is_announced(make_rag) -> None:
    rag, _ = make_rag(scripted_responder({"sub_query_plan": "not json"}))
    events: list[Progress] = []
    await rag.answer(REASON_Q, force_type=T.REASON, on_event=events.append)
    notes = [e.data["note"] for e in events if e.kind == "fallback"]
    assert any("plan unparseable" in n for n in notes)
    assert "plan" not in [e.kind for e in events]


async def test_a_broken_listener_does_not_break_the_answer(make_rag) -> None:
    rag, _ = make_rag()

    def broken(_event: Progress) -> None:
        raise RuntimeError("listener bug")

    result = await rag.answer(REASON_Q, force_type=T.REASON, on_event=broken)
    assert result.answer == "A fake answer [1]." and len(result.sub_answers) == 2


class OneByOneEngine(FakeEngine):
    """Finishes a batch's requests one at a time; the second waits until the test lets it."""

    def __init__(self) -> None:
        super().__init__()
        self.release = asyncio.Event()

    async def generate_each(
        self, requests: Sequence[ChatRequest]
    ) -> AsyncIterator[tuple[int, ChatResult]]:  # type: ignore[override]
        results = await self.generate(requests)
        for i, res in enumerate(results):
            if i == 1:
                await self.release.wait()
            yield i, res


async def test_each_sub_answer_is_announced_before_the_round_ends(settings) -> None:
    engine = OneByOneEngine()
    rag = TypedRAG(settings, engine=engine, retriever=MemoryRetriever())

    def listen(event: Progress) -> None:
        if event.kind == "sub_answer" and event.data["index"] == 0:
            engine.release.set()  # only reachable if the first one is shown before the second

    result = await asyncio.wait_for(
        rag.answer(REASON_Q, force_type=T.REASON, on_event=listen), timeout=10
    )
    assert len(result.sub_answers) == 2
    assert [len(b) for b in engine.batches] == [1, 2, 1]  # still one batch per round


class SlowFirstTokenEngine(FakeEngine):
    """The final answer's first token waits until the test lets it (a long prefill)."""

    def __init__(self) -> None:
        super().__init__()
        self.release = asyncio.Event()

    async def stream(self, request: ChatRequest):  # type: ignore[override]
        await self.release.wait()
        async for delta in super().stream(request):
            yield delta


@pytest.mark.parametrize("qtype", [T.REASON, T.EVIDENCE_BASED])
async def test_every_event_arrives_before_the_first_token_is_ready(settings, qtype) -> None:
    """What prepare announced as it ended (the sources, the last sub-answer) and the answer's
    start reach the stream at once, not with the first token a long prefill delays."""
    engine = SlowFirstTokenEngine()
    rag = TypedRAG(settings, engine=engine, retriever=MemoryRetriever())
    seen: list[str] = []
    stream = rag.answer_stream(REASON_Q, force_type=qtype, progress=True)
    async with aclosing(stream):
        while not seen or seen[-1] != "answer":
            item = await asyncio.wait_for(anext(stream), timeout=5)  # the engine still waits
            assert isinstance(item, Progress), item
            seen.append(item.kind)
        engine.release.set()
        rest = [item async for item in stream]
    assert "sources" in seen and (qtype != T.REASON or "sub_answer" in seen)
    assert "".join(i for i in rest if isinstance(i, str)) == "A fake answer [1]."
    assert isinstance(rest[-1], Result) and rest[-1].answer == "A fake answer [1]."


async def test_intermediate_steps_get_their_own_token_budgets(make_rag) -> None:
    rag, engine = make_rag()
    sampling = rag.settings.sampling.model_copy(update={"sub_answer_max_tokens": 192})
    rag.settings = rag.settings.model_copy(update={"sampling": sampling})
    await rag.answer(REASON_Q, force_type=T.REASON)
    plan, subs, final = engine.batches
    s = rag.settings.sampling
    assert plan[0].max_tokens == s.plan_max_tokens == 256
    assert [r.max_tokens for r in subs] == [s.sub_answer_max_tokens] * 2 == [192, 192]
    assert final[0].max_tokens == s.max_tokens == 512
    engine.batches.clear()
    await rag.answer("Is nuclear power good?", force_type=T.DEBATE)
    assert [r.max_tokens for r in engine.batches[1]] == [s.sub_answer_max_tokens] * 2
    engine.batches.clear()
    # a client's smaller max_tokens caps the intermediate answers too
    await rag.answer(REASON_Q, force_type=T.REASON, sampling={"max_tokens": 100})
    assert [r.max_tokens for r in engine.batches[1]] == [100, 100]
    assert engine.batches[2][0].max_tokens == 100


async def test_each_or_cancel_yields_in_completion_order_and_cancels_the_rest() -> None:
    gates = [asyncio.Event() for _ in range(3)]
    cancelled: list[int] = []

    async def call(i: int) -> int:
        try:
            await gates[i].wait()
        except asyncio.CancelledError:
            cancelled.append(i)
            raise
        return i * 10

    gates[2].set()
    seen = []
    async with aclosing(each_or_cancel([call(0), call(1), call(2)])) as each:
        async for i, value in each:
            seen.append((i, value))
            break  # the consumer stops early: the two still running are cancelled
    assert seen == [(2, 20)]
    assert sorted(cancelled) == [0, 1]


@pytest.fixture
def classifier() -> FixedClassifier:
    return FixedClassifier(T.REASON)
