"""How the vLLM engine turns a ChoiceRequest into one-token reads, without vLLM: the reads
are stubbed (the real ones are checked in ``test_vllm_scores.py``, ``-m slow``)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from typed_rag.engines.base import ChoiceRequest, EngineError
from typed_rag.engines.vllm_engine import MAX_READ_IDS, VllmEngine

PROMPT = [1, 2, 3]


class CharTokenizer:
    """One token per character, its code point."""

    def encode(self, text: str, add_special_tokens: bool = False) -> list[int]:
        return [ord(c) for c in text]


def engine(max_model_len: int = 64) -> tuple[VllmEngine, list[tuple[list[int], list[int]]]]:
    eng = VllmEngine("stub", max_model_len=max_model_len)
    eng._llm = object()  # started
    eng._tokenizer = CharTokenizer()
    eng._prompt = lambda messages: {"prompt_token_ids": list(PROMPT)}  # type: ignore[method-assign]
    reads: list[tuple[list[int], list[int]]] = []

    async def read(ids: list[int], targets: list[int]) -> tuple[dict[int, float], int]:
        reads.append((ids, targets))
        await asyncio.sleep(0)
        # log P(t | ids): depends on the context, so a wrong context shows in the sum
        return {t: -(t % 7) / 10 - len(ids) / 100 for t in targets}, 1

    eng._read = read  # type: ignore[method-assign]
    return eng, reads


def logprob(t: str, context: int) -> float:
    return -(ord(t) % 7) / 10 - context / 100


def request(*choices: str, prefix: str = "[") -> ChoiceRequest:
    return ChoiceRequest([{"role": "user", "content": "q"}], prefix, choices)


async def test_multi_token_choices_chain_one_read_per_context_shallowest_first() -> None:
    eng, reads = engine()
    (result,) = await eng.score_choices([request("ab", "ac", "b")])
    base = [*PROMPT, ord("[")]
    # the prompt and prefix once for "a" and "b", then after "a" for "b" and "c"
    assert reads == [(base, [ord("a"), ord("b")]), ([*base, ord("a")], [ord("b"), ord("c")])]
    n = len(base)
    assert result.logprobs == pytest.approx(
        {
            "ab": logprob("a", n) + logprob("b", n + 1),
            "ac": logprob("a", n) + logprob("c", n + 1),
            "b": logprob("b", n),
        }
    )
    assert result.prompt_tokens == 2  # one evaluated token a read, as the stub says


async def test_many_choices_are_read_in_chunks_that_vllm_accepts() -> None:
    eng, reads = engine()
    choices = tuple(chr(0x100 + i) for i in range(300))
    (result,) = await eng.score_choices([request(*choices, prefix="")])
    assert [len(t) for _, t in reads] == [MAX_READ_IDS, MAX_READ_IDS, 300 - 2 * MAX_READ_IDS]
    assert all(ids == PROMPT for ids, _ in reads)
    assert set(result.logprobs) == set(choices)


async def test_requests_of_a_batch_keep_their_order() -> None:
    eng, _ = engine()
    results = await eng.score_choices([request("a"), request("bb"), request("c", prefix="")])
    assert [set(r.logprobs) for r in results] == [{"a"}, {"bb"}, {"c"}]


async def test_an_empty_choice_or_an_overlong_prompt_is_an_engine_error() -> None:
    eng, reads = engine(max_model_len=6)
    with pytest.raises(EngineError, match="no token"):
        await eng.score_choices([request("a", "")])
    with pytest.raises(EngineError, match="engine.max_model_len=6"):
        await eng.score_choices([request("abc")])  # 4 prompt tokens + 3
    assert reads == []  # refused before anything was read
    await eng.score_choices([request("ab")])  # 4 + 2 fits


def test_vllm_says_it_scores_choices() -> None:
    assert VllmEngine.scores_choices
    stub: Any = VllmEngine("stub")
    assert stub.scores_choices and stub.name == "vllm"
