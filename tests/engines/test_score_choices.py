"""Token-probability scoring on the real llama.cpp engine (the judge's linkage-prob protocol)."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from tests.engines.conftest import TEST_THREADS
from typed_rag.engines.base import ChatRequest, ChoiceRequest, EngineError
from typed_rag.engines.llamacpp import LlamaCppEngine

pytestmark = pytest.mark.slow


def request(candidate: str) -> ChoiceRequest:
    messages = [
        {"role": "system", "content": "You are a judge."},
        {
            "role": "user",
            "content": "Question: what is 2 + 2?\nAnswer 1: 4\nAnswer 2: 5\n"
            f"Candidate: {candidate}\nReply [[k]] with the candidate's position, k in 1..3.",
        },
    ]
    return ChoiceRequest(messages, "[[", ("1", "2", "3"))


async def test_choice_logprobs_are_a_sub_distribution_and_reuse_the_prefix(
    smollm2_gguf: Path,
) -> None:
    engine = LlamaCppEngine(smollm2_gguf, n_ctx=2048, n_threads=TEST_THREADS)
    async with engine:
        first, second = await engine.score_choices([request("four"), request("five")])
        again = (await engine.score_choices([request("four")]))[0]
        # Scored after an unrelated generation: the cache is rebuilt, same numbers.
        hello = ChatRequest(messages=[{"role": "user", "content": "hi"}], max_tokens=4)
        await engine.generate([hello])
        fresh = (await engine.score_choices([request("four")]))[0]
        with pytest.raises(EngineError, match="one"):
            await engine.score_choices([ChoiceRequest(request("x").messages, "[[", ("10000",))])
    for res in (first, second):
        probs = [math.exp(v) for v in res.logprobs.values()]
        assert set(res.logprobs) == {"1", "2", "3"}
        assert all(0 < p < 1 for p in probs) and sum(probs) <= 1 + 1e-6
    # The second candidate shares the prompt up to the candidate: only the tail was evaluated.
    assert second.prompt_tokens < first.prompt_tokens
    assert again.logprobs == pytest.approx(first.logprobs, abs=0.05)
    assert fresh.logprobs == pytest.approx(first.logprobs, abs=0.05)
