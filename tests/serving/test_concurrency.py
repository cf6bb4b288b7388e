"""Many clients share one TypedRAG; a client that leaves takes its engine work with it."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import httpx

from tests.serving.conftest import ProbeEngine, live_server, make_rag, server_settings

QUESTIONS = [
    "Why do leaves change color in autumn?",
    "How do I bake bread?",
    "Is nuclear power a good idea?",
    "What is the difference between coffee and tea?",
    "What was it like backpacking in Europe?",
    "What is photosynthesis?",
    "Why did the Roman Empire fall?",
    "Should I drink coffee or tea?",
]


def wait_until(check, timeout_s: float = 10.0) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if check():
            return
        time.sleep(0.05)
    raise AssertionError("condition not met in time")


def test_sixteen_concurrent_requests_all_complete(tmp_path: Path) -> None:
    engine = ProbeEngine(delay_s=0.2)
    settings = server_settings(tmp_path, **{"server.max_concurrent": 4, "server.max_queue": 16})
    with live_server(settings, make_rag(settings, engine)) as srv:

        async def one(client: httpx.AsyncClient, i: int) -> httpx.Response:
            body = {
                "model": "typed-rag",
                "messages": [{"role": "user", "content": QUESTIONS[i % len(QUESTIONS)]}],
                "stream": i % 2 == 1,
            }
            return await client.post(srv.api + "/chat/completions", json=body)

        async def run() -> list[httpx.Response]:
            async with httpx.AsyncClient(timeout=60) as client:
                return await asyncio.gather(*(one(client, i) for i in range(16)))

        started = time.perf_counter()
        responses = asyncio.run(run())
        elapsed = time.perf_counter() - started
        assert [r.status_code for r in responses] == [200] * 16
        for i, r in enumerate(responses):
            if i % 2 == 0:
                assert r.json()["choices"][0]["message"]["content"] == "A fake answer [1]."
            else:
                assert r.text.rstrip().endswith("data: [DONE]")
        assert srv.metric("typed_rag_requests_total", 'mode="typed-rag",status="200"') == 16
        assert srv.metric("typed_rag_requests_in_flight") == 0
        assert srv.metric("typed_rag_queue_depth") == 0
        # 4 at a time, each a few engine rounds of 0.2 s: they overlapped
        # (one after another would take 16 x rounds x 0.2 s).
        assert elapsed < 16 * 0.2 * 2, elapsed


def test_disconnect_cancels_engine_work(tmp_path: Path) -> None:
    engine = ProbeEngine(delay_s=10.0)
    settings = server_settings(tmp_path)
    with live_server(settings, make_rag(settings, engine)) as srv:
        body = {"model": "llm", "messages": [{"role": "user", "content": "Why is the sky blue?"}]}
        try:
            httpx.post(srv.api + "/chat/completions", json=body, timeout=1.5)
        except httpx.ReadTimeout:
            pass  # the client gives up and closes the connection
        wait_until(lambda: engine.cancelled == 1, 6.0)  # long before the 10 s delay ends
        assert engine.finished == 0
        wait_until(lambda: srv.metric("typed_rag_requests_cancelled_total") == 1)
        assert srv.metric("typed_rag_requests_total", 'mode="llm",status="499"') == 1
        assert srv.metric("typed_rag_requests_in_flight") == 0


def test_disconnect_mid_stream_cancels_engine_work(tmp_path: Path) -> None:
    # Sentences: the scaffolding guard sends a streamed answer a sentence at a time.
    engine = ProbeEngine(lambda req: "A b. C d e f g h i j.", token_delay_s=1.0)
    settings = server_settings(tmp_path)
    with live_server(settings, make_rag(settings, engine)) as srv:
        body = {
            "model": "llm",
            "stream": True,
            "messages": [{"role": "user", "content": "Why is the sky blue?"}],
        }
        with httpx.stream("POST", srv.api + "/chat/completions", json=body, timeout=10) as r:
            for line in r.iter_lines():
                if '"content":"A b."' in line:
                    break  # got the first sentence, now hang up
        wait_until(lambda: engine.cancelled == 1, 4.0)
        assert engine.finished == 0
        wait_until(lambda: srv.metric("typed_rag_requests_cancelled_total") == 1)
        wait_until(lambda: srv.metric("typed_rag_requests_in_flight") == 0)


def test_a_waiting_client_that_leaves_frees_its_queue_place(tmp_path: Path) -> None:
    engine = ProbeEngine(delay_s=1.5)
    settings = server_settings(tmp_path, **{"server.max_concurrent": 1, "server.max_queue": 1})
    with live_server(settings, make_rag(settings, engine)) as srv:
        body = {"model": "llm", "messages": [{"role": "user", "content": "Why?"}]}

        async def run() -> tuple[int, int, int]:
            async with httpx.AsyncClient(timeout=30) as client:
                running = asyncio.create_task(client.post(srv.api + "/chat/completions", json=body))
                await asyncio.sleep(0.3)
                async with httpx.AsyncClient(timeout=0.3) as impatient:
                    try:
                        await impatient.post(srv.api + "/chat/completions", json=body)
                    except httpx.ReadTimeout:
                        pass
                # The server notices the hang-up on its own time: wait for it, with a bound.
                deadline = time.monotonic() + 10
                while (
                    depth := srv.metric("typed_rag_queue_depth")
                ) and time.monotonic() < deadline:
                    await asyncio.sleep(0.05)
                third = await client.post(srv.api + "/chat/completions", json=body)
                return int(depth), third.status_code, (await running).status_code

        depth, third, first = asyncio.run(run())
        assert depth == 0
        assert (first, third) == (200, 200)


def test_long_waits_in_a_stream_send_keepalives_the_sdk_ignores(tmp_path: Path) -> None:
    import openai

    engine = ProbeEngine(delay_s=2.0)  # the streamed call starts after 2 s
    settings = server_settings(tmp_path, **{"server.sse_keepalive_s": 0.2})
    with live_server(settings, make_rag(settings, engine)) as srv:
        body = {"model": "llm", "stream": True, "messages": [{"role": "user", "content": "Why?"}]}
        with httpx.stream("POST", srv.api + "/chat/completions", json=body, timeout=10) as r:
            lines = [line for line in r.iter_lines() if line]
        assert lines.count(": keep-alive") >= 3
        assert lines[-1] == "data: [DONE]"

        client = openai.OpenAI(base_url=srv.api, api_key="x", max_retries=0)
        chunks = list(
            client.chat.completions.create(
                model="llm", stream=True, messages=[{"role": "user", "content": "Why?"}]
            )
        )
        text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
        assert text == "A fake answer [1]."
