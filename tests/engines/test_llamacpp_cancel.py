"""A cancelled llama.cpp request stops its prompt processing, not just its decoding.

Real engine (SmolLM2-135M, one thread). A long prompt takes seconds to
evaluate; the request is abandoned while it is being evaluated, and the next
short request must then run about as fast as on an idle engine (within a
second), instead of waiting for the abandoned prompt to finish. Measured on
the shared 2-core box (load ~15): idle 6.2 s, the long prompt 194 s, the next
request after abandoning it 8.1 s (before the abort callback it would have
waited for the rest of the 194 s).
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import pytest

from typed_rag.engines.base import ChatRequest
from typed_rag.engines.llamacpp import LlamaCppEngine

pytestmark = [pytest.mark.slow, pytest.mark.timeout(1800)]

SHORT = ChatRequest(
    messages=[{"role": "user", "content": "Say hello."}], max_tokens=4, temperature=0.0, seed=1
)


def long_request(words: int, colour: str = "blue") -> ChatRequest:
    text = " ".join(f"{colour} item{i}" for i in range(words // 3))
    return ChatRequest(
        messages=[{"role": "user", "content": text + "\nWhich item is red?"}],
        max_tokens=4,
        temperature=0.0,
        seed=1,
    )


async def timed(engine: LlamaCppEngine, request: ChatRequest) -> float:
    start = time.perf_counter()
    await engine.generate([request])
    return time.perf_counter() - start


async def test_cancel_stops_prompt_processing(smollm2_gguf: Path) -> None:
    engine = LlamaCppEngine(smollm2_gguf, n_ctx=8192, n_threads=1, n_batch=512)
    await engine.start()
    try:
        await timed(engine, SHORT)  # warm up
        fresh = min([await timed(engine, SHORT) for _ in range(3)])
        long = long_request(600)
        whole = await timed(engine, long)  # what an abandoned request would cost
        assert whole > fresh + 2.0, (whole, fresh)  # the test means something

        # Another long prompt: the engine's prompt cache would answer the same one at once.
        task = asyncio.ensure_future(engine.generate([long_request(600, colour="green")]))
        await asyncio.sleep(min(1.0, whole / 4))  # well inside its prompt processing
        task.cancel()
        after = await timed(engine, SHORT)
        with pytest.raises(asyncio.CancelledError):
            await task
        print(f"fresh {fresh:.2f}s, long prompt {whole:.2f}s, next after cancel {after:.2f}s")
        # As fast as on an idle engine: within 20% (plus a second for a busy CI box),
        # and far from waiting for the abandoned prompt.
        assert after < 1.2 * fresh + 1.0 and after < whole / 3, (after, fresh, whole)

        # The engine is intact after an abort: the same prompt gives the same text.
        (again,) = await engine.generate([SHORT])
        (first,) = await engine.generate([SHORT])
        assert again.text == first.text and engine.healthy()
    finally:
        await engine.close()
