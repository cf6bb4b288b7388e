"""The llama.cpp prompt cache: snapshot bookkeeping, and on the real engine, reuse that
does not change what a seeded request samples."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from tests.engines.conftest import TEST_THREADS
from typed_rag.config import DEFAULT_HOME
from typed_rag.engines.base import ChatRequest, ChoiceRequest
from typed_rag.engines.llamacpp import LlamaCppEngine
from typed_rag.engines.prompt_cache import (
    GRAIN,
    PromptCache,
    aligned_blocks,
    as_tokens,
    common_prefix,
    reusable,
    safe_reuse,
)


def test_common_prefix_and_reusable_length() -> None:
    a = as_tokens(range(40))
    assert common_prefix(a, as_tokens([*range(35), 99])) == 35
    assert common_prefix(a, a[:10]) == 10
    assert common_prefix(a, as_tokens([])) == 0
    assert reusable(35) == 32 and reusable(GRAIN - 1) == 0


def test_a_partly_reused_block_keeps_enough_tokens_to_evaluate() -> None:
    assert safe_reuse(48, 300, 128) == 48  # 80 tokens left in the block
    assert safe_reuse(256, 300, 128) == 256  # whole blocks
    # All but one token of a 785-token prompt: the last block is evaluated whole.
    assert safe_reuse(784, 785, 128) == 768
    assert safe_reuse(240, 250, 128) == 128


def test_blocks_end_at_absolute_multiples_of_the_block_size() -> None:
    assert aligned_blocks(0, 300, 128) == [(0, 128), (128, 256), (256, 300)]
    # A reused prefix of 48 tokens: the first block still ends where a cold run's does.
    assert aligned_blocks(48, 300, 128) == [(48, 128), (128, 256), (256, 300)]
    assert aligned_blocks(256, 256, 128) == []


def test_cache_finds_the_longest_prefix_and_evicts_least_recently_used() -> None:
    cache = PromptCache(budget_bytes=250)
    plan = as_tokens(range(100))
    answer = as_tokens([7] * 64)
    cache.add(plan, b"p" * 100)
    cache.add(answer, b"a" * 100)
    snap, n = cache.best(as_tokens([*range(50), -1]))
    assert snap is not None and snap.data[:1] == b"p" and n == 48
    assert cache.covers(plan) and not cache.covers(as_tokens(range(200)))
    # plan was used last, so adding a third snapshot over budget evicts answer.
    cache.add(as_tokens([3] * 32), b"x" * 100)
    assert len(cache) == 2 and cache.size_bytes == 200
    assert cache.best(answer) == (None, 0)
    cache.add(np.arange(5), b"y" * 1000)  # larger than the whole budget: not kept
    assert len(cache) == 2


FILLER = " ".join(f"Fact {i}: the river town number {i} has a stone bridge." for i in range(30))


def asking(tail: str) -> ChatRequest:
    messages = [
        {"role": "system", "content": "You answer briefly."},
        {"role": "user", "content": f"{FILLER}\n\nQuestion: {tail}"},
    ]
    return ChatRequest(messages=messages, temperature=0.8, max_tokens=24, seed=7)


@pytest.mark.slow
async def test_reused_prefixes_sample_the_same_text_as_a_cold_engine(smollm2_gguf: Path) -> None:
    target = asking("which town has the oldest bridge?")
    cold = LlamaCppEngine(smollm2_gguf, n_ctx=2048, n_threads=TEST_THREADS, prompt_cache_mib=0)
    async with cold:
        expected = (await cold.generate([target]))[0].text
        assert cold.reused_tokens == 0

    warm = LlamaCppEngine(smollm2_gguf, n_ctx=2048, n_threads=TEST_THREADS)
    async with warm:
        await warm.generate([asking("how many towns are there?")])
        other = ChatRequest(messages=[{"role": "user", "content": "Say hello."}], max_tokens=4)
        await warm.generate([other])  # the live context no longer shares the prefix
        before = warm.reused_tokens
        got = (await warm.generate([target]))[0]
        reused = warm.reused_tokens - before
        again = (await warm.generate([target]))[0]  # the whole prompt is cached now
    # The long shared prefix came from the first prompt's snapshot ...
    assert reused >= 300
    # ... and the seeded text is the one a cold engine samples, also when all but the
    # last block comes from the cache.
    assert got.text == expected
    assert again.text == expected


@pytest.mark.slow
async def test_a_prefilled_prompt_serves_the_prefix_of_a_later_request(
    smollm2_gguf: Path,
) -> None:
    engine = LlamaCppEngine(smollm2_gguf, n_ctx=2048, n_threads=TEST_THREADS)
    async with engine:
        await engine.prefill(asking("").messages)
        assert engine.reused_tokens == 0 and len(engine.prompt_cache) == 1
        other = ChatRequest(messages=[{"role": "user", "content": "Say hello."}], max_tokens=4)
        await engine.generate([other])
        before = engine.reused_tokens
        await engine.generate([asking("which town has the oldest bridge?")])
    assert engine.reused_tokens - before >= 300


@pytest.mark.slow
async def test_throughput_counts_only_the_tokens_evaluated(smollm2_gguf: Path) -> None:
    engine = LlamaCppEngine(smollm2_gguf, n_ctx=2048, n_threads=TEST_THREADS)
    async with engine:
        first = (await engine.generate([asking("which town has the oldest bridge?")]))[0]
        counted = engine.throughput
        assert counted.prefill_tokens == first.prompt_tokens
        assert counted.decode_tokens == first.completion_tokens > 0
        assert counted.prefill_s > 0 and counted.decode_s > 0
        second = (await engine.generate([asking("how many towns are there?")]))[0]
    # the shared prefix came from the cache: it is not counted as prefilled again
    assert engine.reused_tokens >= 300
    assert engine.throughput.prefill_tokens == (
        first.prompt_tokens + second.prompt_tokens - engine.reused_tokens
    )


@pytest.fixture(params=["smollm2-135m-instruct-q4_1", "qwen2.5-coder-1.5b-instruct-q4km"])
def gguf(request: pytest.FixtureRequest, smollm2_gguf: Path) -> Path:
    """SmolLM2 always; the default model where it was pulled (``make serve`` does): its
    Q4_K weights take llama.cpp's repacked kernels, whose small-batch path once differed."""
    if request.param.startswith("smollm2"):
        return smollm2_gguf
    path = DEFAULT_HOME / "models" / f"{request.param}.gguf"
    if not path.is_file():
        pytest.skip(f"model not pulled: {path}")
    return path


@pytest.mark.slow
async def test_scores_are_bit_identical_with_and_without_the_cache(gguf: Path) -> None:
    cold = LlamaCppEngine(gguf, n_ctx=2048, n_threads=2, prompt_cache_mib=0)
    async with cold:
        # A prompt one token longer than a multiple of GRAIN: everything but its last
        # token is reusable, the case where a one-token batch used to be evaluated.
        for n in range(GRAIN):
            judged = ChoiceRequest(asking("which town" + " and" * n).messages, "", ("1", "2"))
            ids, _, _ = cold.prompt_tokens(judged.messages)
            if len(ids) % GRAIN == 1:
                break
        else:
            pytest.fail("no prompt length of the form k * GRAIN + 1")
        expected = (await cold.score_choices([judged]))[0].logprobs
    warm = LlamaCppEngine(gguf, n_ctx=2048, n_threads=2)
    async with warm:
        first = (await warm.score_choices([judged]))[0]
        again = (await warm.score_choices([judged]))[0]  # all but the last token cached
    assert again.prompt_tokens < first.prompt_tokens
    assert first.logprobs == expected and again.logprobs == expected


@pytest.mark.slow
async def test_a_prompt_restored_from_a_snapshot_samples_as_a_cold_one(gguf: Path) -> None:
    cold = LlamaCppEngine(gguf, n_ctx=2048, n_threads=2, prompt_cache_mib=0)
    async with cold:
        for n in range(GRAIN):  # all but the last token reusable, as above
            target = asking("which town" + " and" * n)
            if len(cold.prompt_tokens(target.messages)[0]) % GRAIN == 1:
                break
        target = replace(target, max_tokens=48)
        expected = (await cold.generate([target]))[0].text
    warm = LlamaCppEngine(gguf, n_ctx=2048, n_threads=2)
    other = replace(asking("a long story about the bridges, please"), max_tokens=160)
    async with warm:
        first = (await warm.generate([target]))[0].text
        await warm.generate([other])  # longer than the target: more KV cells in use
        again = (await warm.generate([target]))[0].text  # restored from its snapshot
    assert first == expected and again == expected
