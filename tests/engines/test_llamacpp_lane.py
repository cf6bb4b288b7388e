"""A short request runs in the llama.cpp engine's short lane while a long one is generating.

Real engine (SmolLM2-135M, one thread). Without the lane a short request waits for the
long engine call to end; with it, the short one answers in about its idle time while the
long one is still running, and neither text changes (the long one pauses between tokens,
the lane samples like the main context).
"""

from __future__ import annotations

import asyncio
import dataclasses
import time
from pathlib import Path

import pytest

from typed_rag.engines.base import ChatRequest
from typed_rag.engines.llamacpp import LlamaCppEngine

pytestmark = [pytest.mark.slow, pytest.mark.timeout(1800)]

SHORT = ChatRequest(
    messages=[{"role": "user", "content": "Say hello."}], max_tokens=4, temperature=0.0, seed=1
)
LONG = ChatRequest(
    messages=[{"role": "user", "content": "Write a long story about a lighthouse keeper."}],
    max_tokens=400,
    temperature=0.7,
    seed=3,
)


async def timed(engine: LlamaCppEngine, request: ChatRequest) -> tuple[float, str]:
    start = time.perf_counter()
    (result,) = await engine.generate([request])
    return time.perf_counter() - start, result.text


async def test_short_request_overtakes_a_long_generation(smollm2_gguf: Path) -> None:
    engine = LlamaCppEngine(smollm2_gguf, n_ctx=4096, n_threads=1)
    short = dataclasses.replace(SHORT, priority=1)
    try:
        await engine.start()
        await timed(engine, SHORT)  # warm up
        alone, short_text = min([await timed(engine, SHORT) for _ in range(3)])
        long_alone, long_text = await timed(engine, LONG)
        assert long_alone > 4 * alone + 2.0, (long_alone, alone)  # the test means something
        await timed(engine, short)  # makes the lane and loads its context

        task = asyncio.ensure_future(timed(engine, LONG))
        await asyncio.sleep(long_alone / 4)  # well inside the long generation
        waited, lane_text = await timed(engine, short)
        assert not task.done(), "the short request waited for the long one"
        long_again, long_text_again = await task
        print(f"short alone {alone:.2f}s, beside a long one {waited:.2f}s; long {long_alone:.2f}s")
        assert waited < 2 * alone + 1.0, (waited, alone)
        assert lane_text == short_text
        assert long_text_again == long_text
        assert engine._lane is not None and engine._lane.healthy()
    finally:
        await engine.close()


async def test_a_lane_that_cannot_load_hands_its_requests_back(smollm2_gguf: Path) -> None:
    engine = LlamaCppEngine(smollm2_gguf, n_ctx=2048, n_threads=1)
    try:
        (expected,) = await engine.generate([SHORT])
        engine.model_path = smollm2_gguf.parent / "no-such-model.gguf"  # the lane's context
        short = dataclasses.replace(SHORT, priority=1)
        results = await asyncio.wait_for(engine.generate([short, short]), timeout=300)
        assert [r.text for r in results] == [expected.text] * 2
        assert engine._lane is not None and engine._lane._fatal is not None
        (after,) = await engine.generate([short])  # later short requests go to the main context
        assert after.text == expected.text and engine.healthy()
    finally:
        await engine.close()
