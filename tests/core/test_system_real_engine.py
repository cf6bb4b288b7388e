"""End to end on the real tiny engine (llama.cpp, SmolLM2-135M): every type runs without errors.

Slow: run with ``pytest -m slow tests/core``. Skipped when the engine code or the
model file is not there (``typed-rag models pull smollm2-135m-instruct-q4_1``).
"""

from __future__ import annotations

import pytest
import pytest_asyncio

from eval.data.methods import with_method_profile
from tests.core.conftest import MemoryRetriever, OverlapReranker
from typed_rag.config import DEFAULT_HOME, Settings, load_settings
from typed_rag.system import TypedRAG
from typed_rag.types import QuestionType as T

# One engine for the module: the fixture and the tests share the module's event loop.
pytestmark = [pytest.mark.slow, pytest.mark.asyncio(loop_scope="module")]

MODEL = DEFAULT_HOME / "models" / "smollm2-135m-instruct-q4_1.gguf"

QUESTIONS = {
    T.EVIDENCE_BASED: "What is photosynthesis?",
    T.COMPARISON: "How is coffee different from tea?",
    T.EXPERIENCE: "What do travellers say about backpacking in Europe?",
    T.REASON: "Why do leaves change color in autumn?",
    T.INSTRUCTION: "How do I bake bread at home?",
    T.DEBATE: "Should countries build more nuclear power plants?",
    T.FACTOID: "What is the capital of Australia?",
}


@pytest.fixture(scope="module")
def real_settings(tmp_path_factory: pytest.TempPathFactory) -> Settings:
    if not MODEL.is_file():
        pytest.skip(f"model not pulled: {MODEL}")
    home = tmp_path_factory.mktemp("home")
    return load_settings(
        None,
        **{
            "home": str(home),
            "engine.backend": "llamacpp",
            "engine.model": str(MODEL),
            "engine.n_ctx": 2048,
            # Short outputs and one plan retry keep the module to a few minutes on 2 cores.
            "sampling.max_tokens": 48,
            "sampling.plan_max_tokens": 96,
            "sampling.plan_retries": 1,
        },
    )


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def real_rag(real_settings: Settings):
    engines = pytest.importorskip("typed_rag.engines")
    if not hasattr(engines, "build_engine"):
        pytest.skip("typed_rag.engines.build_engine has not landed yet")
    engine = engines.build_engine(real_settings)
    rag = TypedRAG(real_settings, engine, MemoryRetriever(), OverlapReranker(), classifier=None)
    async with rag:
        yield rag


@pytest.mark.parametrize("qtype", list(QUESTIONS), ids=lambda t: t.value)
async def test_every_type_end_to_end(real_rag: TypedRAG, qtype: T) -> None:
    result = await real_rag.answer(QUESTIONS[qtype], force_type=qtype)
    assert result.answer.strip(), result
    assert result.type == qtype.value and result.type_source == "forced"
    planned = bool({"keywords", "sub_queries", "perspectives", "is_compare"} & set(result.plan))
    fell_back = any("-> rag" in note for note in result.fallbacks)
    opts = real_rag.settings.method.options()
    drafted = opts.own_knowledge.startswith("draft") and qtype.value in opts.own_knowledge_types
    if qtype is T.FACTOID:
        # the factoid route: plain RAG, after a closed-book draft when the profile lists it
        assert result.rounds == 1 + drafted
        assert [c.step for c in result.calls].count("draft") == drafted
    elif qtype.value in opts.rag_types:
        # routed to plain RAG (method.rag_types): one answer, no plan
        assert result.rounds == 1 and not planned and result.sub_answers == []
    elif qtype is not T.EVIDENCE_BASED:
        assert planned or fell_back, result.plan
    if qtype in (T.REASON, T.INSTRUCTION, T.DEBATE) and planned:
        # plan, final answer; the paper's profile adds a round of generated sub-answers,
        # the fast profile a closed-book draft for REASON
        generated = opts.sub_answers == "generate"
        failed_plans = sum(1 for c in result.calls if c.step == "plan" and not c.ok)
        assert result.rounds == 2 + generated + drafted + failed_plans
        assert [c.step for c in result.calls].count("draft") == drafted
        assert result.sub_answers
    assert all(c.completion_tokens > 0 for c in result.calls if c.ok)
    assert result.timings["total"] > 0


async def test_paper_profile_generates_sub_answers_on_the_real_engine(real_rag: TypedRAG) -> None:
    paper = with_method_profile(real_rag, "paper")
    result = await paper.answer(QUESTIONS[T.REASON], force_type=T.REASON)
    if "sub_queries" in result.plan:
        assert [c.step for c in result.calls if c.ok][-1] == "aggregate"
        generated = [c for c in result.calls if c.step == "sub-answer"]
        assert len(generated) == len(result.sub_answers) >= 2
        assert all(c.completion_tokens > 0 for c in generated)


async def test_stream_on_real_engine(real_rag: TypedRAG) -> None:
    events = [e async for e in real_rag.answer_stream(QUESTIONS[T.EVIDENCE_BASED], mode="rag")]
    *deltas, result = events
    assert deltas and "".join(deltas) == result.answer and result.answer.strip()
