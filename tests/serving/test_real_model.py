"""The served system on a real model (SmolLM2-135M through llama.cpp): slow, run with ``-m slow``."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import openai
import pytest

from tests.conftest import TINY_PASSAGES, write_tsv
from tests.serving.conftest import cli_server
from typed_rag.config import DEFAULT_HOME

pytestmark = pytest.mark.slow

MODEL = "smollm2-135m-instruct-q4_1"


@pytest.fixture(scope="module")
def api(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    tmp = tmp_path_factory.mktemp("real-server")
    corpus = write_tsv(tmp / "tiny.tsv", TINY_PASSAGES)
    with cli_server(
        tmp,
        corpus,
        backend="llamacpp",
        model=MODEL,
        home=DEFAULT_HOME,  # reuse pulled weights
        reranker="auto",
        ready_timeout_s=900,
        # short answers keep a decomposed question (plan, sub-answers, aggregation:
        # several engine calls, one at a time on llama.cpp) within minutes on 2 cores
        extra_config="request_timeout_s = 600\n[sampling]\nmax_tokens = 48\nplan_max_tokens = 96",
    ) as url:
        yield url + "/v1"


def test_real_completion_has_answer_usage_and_sources(api: str) -> None:
    client = openai.OpenAI(base_url=api, api_key="unused", max_retries=0, timeout=600)
    resp = client.chat.completions.create(
        model="rag",
        messages=[{"role": "user", "content": "Why do leaves change color in autumn?"}],
        seed=1,
    )
    assert resp.choices[0].message.content.strip()
    assert resp.usage.prompt_tokens > 20 and resp.usage.completion_tokens > 0
    info = resp.typed_rag  # type: ignore[attr-defined]
    assert info["citations"] and info["citations"][0]["id"] in {"p1", "p2"}


def test_real_stream_of_a_decomposed_question(api: str) -> None:
    client = openai.OpenAI(base_url=api, api_key="unused", max_retries=0, timeout=600)
    stream = client.chat.completions.create(
        model="typed-rag",
        messages=[{"role": "user", "content": "Why did the Western Roman Empire fall?"}],
        stream=True,
        extra_body={"force_type": "REASON", "include_trace": True},
    )
    chunks = list(stream)
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    info = chunks[-1].typed_rag  # type: ignore[attr-defined]
    assert text.strip() and text == info["trace"]["answer"]
    assert info["type"] == "REASON"
    # a plan was made, or the fallback to plain RAG is recorded
    assert info["plan"].get("sub_queries") or info["fallbacks"]


def test_real_concurrent_requests_share_the_engine(api: str) -> None:
    client = openai.AsyncOpenAI(base_url=api, api_key="unused", max_retries=0, timeout=600)

    async def ask(q: str) -> str:
        r = await client.chat.completions.create(
            model="rag", messages=[{"role": "user", "content": q}]
        )
        return r.choices[0].message.content or ""

    async def run() -> list[str]:
        qs = ["What is tea?", "What is coffee?", "What is bread?", "What is Paris?"]
        return await asyncio.gather(*(ask(q) for q in qs))

    answers = asyncio.run(run())
    assert len(answers) == 4 and all(a.strip() for a in answers)
