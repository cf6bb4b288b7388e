"""Client for any OpenAI-compatible ``/v1/chat/completions`` server (vLLM, llama.cpp, OpenAI).

Requests of a batch are sent concurrently (up to ``max_concurrency``), so a
server with continuous batching sees them together. Failures that may pass
(HTTP 429, 5xx, connection errors and timeouts) are retried with exponential
backoff; other 4xx answers are the caller's mistake and are raised at once.
JSON-schema requests use the OpenAI ``json_schema`` response format, or
llama.cpp's ``json_object`` + ``schema`` variant (``json_mode``).
"""

from __future__ import annotations

import asyncio
import logging
import random
import time
from collections.abc import AsyncIterator
from typing import Any, Literal

import httpx

from typed_rag.engines.base import (
    ChatRequest,
    ChatResult,
    EngineError,
    PerRequestEngine,
    StreamDelta,
)

log = logging.getLogger(__name__)

JsonMode = Literal["json_schema", "json_object"]
# Retries of a failed call (429, 5xx, connection errors, timeouts), with capped backoff:
# enough to ride out a server restart, few enough that a dead server fails fast.
MAX_RETRIES = 3


def is_retryable(exc: BaseException) -> bool:
    """Whether a failed call may succeed if repeated: 429, 5xx, connection errors, timeouts."""
    import openai  # heavy: openai

    if isinstance(exc, openai.APIConnectionError):  # includes APITimeoutError
        return True
    if isinstance(exc, openai.APIStatusError):
        return exc.status_code == 429 or exc.status_code >= 500
    return False


def backoff_delay(
    attempt: int, base_s: float, cap_s: float, retry_after: str | None = None
) -> float:
    """Seconds to wait before retry ``attempt`` (0-based): exponential with jitter, or Retry-After."""
    if retry_after:
        try:
            return min(max(float(retry_after), 0.0), cap_s)
        except ValueError:
            pass
    return min(cap_s, base_s * (2**attempt)) * (0.5 + random.random() / 2)


class OpenAIEngine(PerRequestEngine):
    """Talks to a remote server; the server owns the model and the chat template."""

    name = "openai"
    # Chat completions give at most the top 20 logprobs of a sampled token, and no portable
    # way to start the reply with a judge's prefix: no exact probability of a given choice.
    scores_choices = False

    def __init__(
        self,
        *,
        base_url: str,
        model: str,
        api_key: str | None = None,
        timeout_s: float = 120.0,
        max_retries: int = MAX_RETRIES,
        max_concurrency: int = 8,
        json_mode: JsonMode = "json_schema",
        backoff_base_s: float = 0.5,
        backoff_cap_s: float = 20.0,
    ) -> None:
        self.base_url = base_url
        self.model = model
        self.api_key = api_key or "not-needed"
        self.timeout_s = timeout_s
        self.max_retries = max_retries
        self.json_mode = json_mode
        self.backoff_base_s = backoff_base_s
        self.backoff_cap_s = backoff_cap_s
        self._limit = asyncio.Semaphore(max_concurrency)
        self._client: Any = None
        self._healthy = True

    async def start(self) -> None:
        if self._client is None:
            from openai import AsyncOpenAI  # heavy: openai

            self._client = AsyncOpenAI(
                base_url=self.base_url,
                api_key=self.api_key,
                max_retries=0,  # retries follow our policy (429/5xx/connection only)
                timeout=httpx.Timeout(self.timeout_s, connect=min(10.0, self.timeout_s)),
            )

    async def close(self) -> None:
        if self._client is not None:
            await self._client.close()
            self._client = None

    def healthy(self) -> bool:
        return self._healthy

    # ---------------------------------------------------------------- calls

    def _params(self, req: ChatRequest) -> dict[str, Any]:
        params: dict[str, Any] = {
            "model": self.model,
            "messages": req.messages,
            "temperature": req.temperature,
            "top_p": req.top_p,
            "max_tokens": req.max_tokens,
        }
        if req.seed is not None:
            params["seed"] = req.seed
        if req.stop:
            params["stop"] = req.stop
        if req.json_schema is not None:
            if self.json_mode == "json_object":
                params["response_format"] = {"type": "json_object", "schema": req.json_schema}
            else:
                params["response_format"] = {
                    "type": "json_schema",
                    "json_schema": {"name": "output", "schema": req.json_schema},
                }
        return params

    async def _with_retries(self, call: Any) -> Any:
        attempt = 0
        while True:
            try:
                return await call()
            except Exception as exc:
                if not is_retryable(exc) or attempt >= self.max_retries:
                    if is_retryable(exc):
                        self._healthy = False
                    raise self._wrap(exc) from exc
                headers = getattr(getattr(exc, "response", None), "headers", None) or {}
                delay = backoff_delay(
                    attempt, self.backoff_base_s, self.backoff_cap_s, headers.get("retry-after")
                )
                log.warning(
                    "%s: %s; retry %d/%d in %.1f s",
                    self.base_url,
                    type(exc).__name__,
                    attempt + 1,
                    self.max_retries,
                    delay,
                )
                attempt += 1
                await asyncio.sleep(delay)

    def _wrap(self, exc: Exception) -> Exception:
        import openai  # heavy: openai

        if isinstance(exc, openai.APIStatusError):
            return EngineError(f"{self.base_url} answered HTTP {exc.status_code}: {exc.message}")
        if isinstance(exc, openai.APIConnectionError):
            return EngineError(f"cannot reach {self.base_url}: {exc}")
        return exc

    async def _one(self, req: ChatRequest) -> ChatResult:
        async with self._limit:
            start = time.perf_counter()
            resp = await self._with_retries(
                lambda: self._client.chat.completions.create(**self._params(req))
            )
            self._healthy = True
            choice = resp.choices[0]
            usage = resp.usage
            return ChatResult(
                text=choice.message.content or "",
                prompt_tokens=usage.prompt_tokens if usage else 0,
                completion_tokens=usage.completion_tokens if usage else 0,
                latency_s=time.perf_counter() - start,
                finish_reason=choice.finish_reason or "stop",
            )

    async def stream(self, request: ChatRequest) -> AsyncIterator[StreamDelta]:
        await self.start()
        params = self._params(request) | {
            "stream": True,
            "stream_options": {"include_usage": True},
        }
        async with self._limit:
            start = time.perf_counter()
            # Only opening the stream is retried: once text has been yielded it cannot be.
            stream = await self._with_retries(
                lambda: self._client.chat.completions.create(**params)
            )
            pieces: list[str] = []
            finish, usage, chunks = "stop", None, 0
            try:
                async for chunk in stream:
                    if chunk.usage is not None:
                        usage = chunk.usage
                    if not chunk.choices:
                        continue
                    choice = chunk.choices[0]
                    text = choice.delta.content if choice.delta else None
                    if text:
                        chunks += 1
                        pieces.append(text)
                        yield StreamDelta(text=text)
                    finish = choice.finish_reason or finish
            except Exception as exc:
                raise self._wrap(exc) from exc
            finally:
                await stream.close()
        yield StreamDelta(
            text="",
            result=ChatResult(
                text="".join(pieces),
                prompt_tokens=usage.prompt_tokens if usage else 0,
                completion_tokens=usage.completion_tokens if usage else chunks,
                latency_s=time.perf_counter() - start,
                finish_reason=finish,
            ),
        )
