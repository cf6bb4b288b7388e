"""llama.cpp backend (llama-cpp-python): the embedded CPU default.

A ``Llama`` object is not thread-safe, so one worker thread owns it and runs requests
one after another from a queue; short ones go to a second context (``llamacpp_lane``).
Callers await futures on their own event loop. Cancelling the awaiting task drops a
request that has not started and stops a running one at its next token.

Prompts are built with the chat template stored in the GGUF (the same Jinja
formatter ``create_chat_completion`` uses), JSON-schema requests are decoded
under a grammar compiled from the schema, and every request's seed is applied.
A prompt reuses the KV cells of the longest prefix it shares with the previous
prompt or with a snapshot of a recent one (``prompt_cache``), evaluated in
position-aligned blocks so that a seeded request samples the same text whether
or not its prefix was cached (see ``prompt_cache``).
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import queue
import threading
import time
from collections.abc import AsyncIterator, Sequence
from concurrent.futures import Future as ThreadFuture
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from typed_rag.engines.base import (
    ChatRequest,
    ChatResult,
    ChoiceRequest,
    ChoiceResult,
    ContextLengthError,
    Engine,
    EngineError,
    StreamDelta,
)
from typed_rag.engines.grammar import schema_grammar
from typed_rag.engines.llamacpp_jobs import Guard, Job, default_threads, post, resolve
from typed_rag.engines.llamacpp_lane import ShortLane
from typed_rag.engines.llamacpp_model import (
    choice_logprobs,
    choice_token_ids,
    install_abort,
    last_logits,
    load_gguf,
    prompt_tokens,
)
from typed_rag.engines.prompt_cache import (
    PromptCache,
    aligned_blocks,
    as_tokens,
    common_prefix,
    load_sequence,
    reusable,
    safe_reuse,
    save_sequence,
)

log = logging.getLogger(__name__)

# KV snapshots of recent prompts (MiB): a prompt that starts like one of them skips that
# prefix. Typed-RAG / RAG latency 1.21x -> 0.99x with identical seeded completions
# (docs/experiments.md); 0 keeps only the previous prompt.
PROMPT_CACHE_MIB = 512


@dataclass
class Throughput:
    """Tokens this context evaluated and the seconds they took, prompt and generation
    apart: the rates a request really gets, which benchmarks set against the engine's
    limit (a bare evaluation loop with the same settings)."""

    prefill_tokens: int = 0
    prefill_s: float = 0.0
    decode_tokens: int = 0
    decode_s: float = 0.0


@dataclass(frozen=True)
class PrefillRequest:
    """Evaluate a prompt and keep its KV snapshot; nothing is generated."""

    messages: list[dict[str, str]]


class LlamaCppEngine(ShortLane, Engine):
    """A GGUF model run in-process by llama.cpp, one request at a time."""

    name = "llamacpp"
    scores_choices = True

    def __init__(
        self,
        model_path: str | Path,
        *,
        n_ctx: int = 8192,
        n_threads: int | None = None,
        n_batch: int = 128,
        prompt_cache_mib: int = PROMPT_CACHE_MIB,
        model_name: str | None = None,
    ) -> None:
        """``n_batch`` is the prompt block size: 128 prefills a 785-token prompt at 58
        tokens/s on 2 cores, 512 at 46. ``prompt_cache_mib`` bounds the KV snapshots
        of recent prompts (0: only the previous prompt's prefix is reused)."""
        self.model_path = Path(model_path)
        self.model = model_name or self.model_path.stem
        self.n_ctx = n_ctx
        self.n_threads = n_threads or default_threads()
        self.n_batch = n_batch
        self.prompt_cache = PromptCache(prompt_cache_mib * 2**20)
        # The prompt whose KV cells sequence 0 holds, all computed in aligned blocks.
        self._live = as_tokens([])
        self.reused_tokens = 0  # prompt tokens served from the cache, for benchmarks
        self.throughput = Throughput()
        # (-priority, arrival, job); None, after every job, stops the worker.
        self._queue: queue.PriorityQueue[tuple[int, int, Job | None]] = queue.PriorityQueue()
        self._arrival = itertools.count()
        self._thread: threading.Thread | None = None
        self._ready: ThreadFuture[None] | None = None
        self._llm: Any = None
        self._formatter: Any = None
        self._fatal: BaseException | None = None
        self._start_lock = threading.Lock()
        # The running job's cancel flag, read by llama.cpp's abort callback
        # between graph nodes, so a cancelled prompt stops mid-evaluation.
        self._running: threading.Event | None = None
        self._abort_callback: Any = None
        ShortLane.__init__(self)

    async def start(self) -> None:
        await asyncio.wrap_future(self._spawn())

    def _spawn(self) -> ThreadFuture[None]:
        with self._start_lock:
            if self._ready is None:
                self._ready = ThreadFuture()
                self._thread = threading.Thread(
                    target=self._worker, name=f"llamacpp-{self.model}", daemon=True
                )
                self._thread.start()
            return self._ready

    async def close(self) -> None:
        if self._lane is not None:
            await self._lane.close()
        thread = self._thread
        if thread is None:
            return
        self._queue.put((1, next(self._arrival), None))
        await asyncio.get_running_loop().run_in_executor(None, thread.join)
        self._thread = None
        self._ready = None

    def healthy(self) -> bool:
        return self._fatal is None and (self._thread is None or self._thread.is_alive())

    async def generate(self, requests: Sequence[ChatRequest]) -> list[ChatResult]:
        return await self._submit(requests)

    async def score_choices(self, requests: Sequence[ChoiceRequest]) -> list[ChoiceResult]:
        """One forward pass per request; consecutive requests share their common prompt prefix."""
        return await self._submit(requests)

    async def prefill(self, messages: list[dict[str, str]]) -> None:
        await self._submit([PrefillRequest(messages)])

    async def _submit(
        self, requests: Sequence[ChatRequest | ChoiceRequest | PrefillRequest]
    ) -> list[Any]:
        """Queue the requests in order and await their results; cancelling drops them all."""
        await self.start()
        loop = asyncio.get_running_loop()
        jobs = [Job(request=req, loop=loop, future=loop.create_future()) for req in requests]
        for job in jobs:
            self._put(job)
        try:
            return list(await asyncio.gather(*(job.future for job in jobs)))
        except BaseException:
            for job in jobs:
                job.cancelled.set()
            raise

    async def generate_each(
        self, requests: Sequence[ChatRequest]
    ) -> AsyncIterator[tuple[int, ChatResult]]:
        """The batch runs one request after another; each is yielded as it finishes."""
        await self.start()
        loop = asyncio.get_running_loop()
        jobs = [Job(request=req, loop=loop, future=loop.create_future()) for req in requests]
        for job in jobs:
            self._put(job)
        try:
            for i, job in enumerate(jobs):
                yield i, await job.future
        finally:
            for job in jobs:
                job.cancelled.set()

    async def stream(self, request: ChatRequest) -> AsyncIterator[StreamDelta]:
        await self.start()
        loop = asyncio.get_running_loop()
        pieces: asyncio.Queue[str | None] = asyncio.Queue()
        job = Job(
            request=request,
            loop=loop,
            future=loop.create_future(),
            on_delta=lambda text: post(loop, pieces.put_nowait, text),
        )
        # Resolved after every piece was queued (call_soon_threadsafe keeps order).
        job.future.add_done_callback(lambda _f: pieces.put_nowait(None))
        self._put(job)
        try:
            while (piece := await pieces.get()) is not None:
                yield StreamDelta(text=piece)
            yield StreamDelta(text="", result=job.future.result())
        finally:
            job.cancelled.set()

    def _worker(self) -> None:
        assert self._ready is not None
        try:
            self._load()
        except BaseException as exc:  # noqa: BLE001 - reported to every awaiting caller
            if self._main is not None:
                self._lane_failed(exc)
                return
            self._fatal = exc
            self._ready.set_exception(EngineError(f"could not load {self.model_path}: {exc}"))
            return
        self._ready.set_result(None)
        while True:
            job = self._queue.get()[2]
            if job is None:
                break
            if job.cancelled.is_set() or job.future.done():
                continue  # cancelled before it started: dropped
            self._running = job.cancelled
            self.idle.clear()
            try:
                if isinstance(job.request, ChoiceRequest):
                    result: Any = self._score(job.request)
                elif isinstance(job.request, PrefillRequest):
                    ids = self.prompt_tokens(job.request.messages)[0][: self.n_ctx - 1]
                    self._prefill(ids)
                    self._remember(ids)
                    result = None
                else:
                    result = self._run(job)
                post(job.loop, resolve, job.future, result, None)
            except BaseException as exc:  # noqa: BLE001 - handed to the caller
                if job.cancelled.is_set():  # aborted in llama_decode: nobody is waiting
                    log.debug("llama.cpp request aborted after its caller left: %s", exc)
                    post(job.loop, job.future.cancel)
                else:
                    log.exception("llama.cpp request failed")
                    post(job.loop, resolve, job.future, None, exc)
            finally:
                self._running = None
                self.idle.set()
        self._llm.close()
        self._llm = None

    def _load(self) -> None:
        start = time.perf_counter()
        llm, self._formatter = load_gguf(
            self.model_path, n_ctx=self.n_ctx, n_threads=self.n_threads, n_batch=self.n_batch
        )
        self._llm = llm
        self._abort_callback = install_abort(llm, self._should_abort)  # kept alive here
        log.info("llama.cpp loaded %s in %.1f s", self.model_path.name, time.perf_counter() - start)

    def _should_abort(self) -> bool:
        """llama.cpp's abort callback: the running job was cancelled."""
        running = self._running
        return running is not None and running.is_set()

    def prompt_tokens(self, messages: list[dict[str, str]]) -> tuple[list[int], list[str], Any]:
        """Token ids of the templated prompt, the template's stop strings and criteria."""
        return prompt_tokens(self._llm, self._formatter, messages)

    def _score(self, req: ChoiceRequest) -> ChoiceResult:
        """Log-softmax of the next-token logits after the templated prompt plus ``prefix``.

        A judge's instructions, question and references repeat across its
        candidates, so the prompt cache leaves only the new tail to evaluate.
        """
        llm = self._llm
        start = time.perf_counter()
        ids, _, _ = self.prompt_tokens(req.messages)
        ids += llm.tokenize(req.prefix.encode("utf-8"), add_bos=False, special=False)
        if len(ids) >= self.n_ctx:
            raise EngineError(
                f"prompt is {len(ids)} tokens, longer than the context window "
                f"(engine.n_ctx={self.n_ctx})"
            )
        choice_ids = choice_token_ids(llm, req.choices)
        keep = self._prefill(ids)
        logits = last_logits(llm)  # before _remember cuts the KV cells back
        self._remember(ids)
        return ChoiceResult(
            logprobs=choice_logprobs(logits, choice_ids),
            prompt_tokens=len(ids) - keep,
            latency_s=time.perf_counter() - start,
        )

    def _prefill(self, ids: list[int]) -> int:
        """Evaluate the prompt in aligned blocks after the longest reusable cached prefix.

        The last token is always evaluated: its logits are what gets sampled.
        Returns how many tokens were reused.
        """
        import llama_cpp  # heavy: llama_cpp

        llm = self._llm
        head = as_tokens(ids[:-1])
        keep = reusable(common_prefix(self._live, head))
        snapshot, n = self.prompt_cache.best(head)
        n = safe_reuse(n, len(ids), self.n_batch)
        keep = safe_reuse(keep, len(ids), self.n_batch)
        if snapshot is not None and n > keep:
            keep = n if load_sequence(llama_cpp, llm._ctx.ctx, snapshot.data) else 0
        self._live = as_tokens([])  # until the prompt is evaluated in full
        llm.input_ids[:keep] = ids[:keep]
        llm.n_tokens = keep  # eval drops the cells after it
        for start, stop in aligned_blocks(keep, len(ids), self.n_batch):
            self._pause()
            llm.eval(ids[start:stop])
        self._live = as_tokens(ids)
        self.reused_tokens += keep
        return keep

    def _remember(self, ids: list[int]) -> None:
        """Cut the KV cells back to the prompt and keep a snapshot of it."""
        llm = self._llm
        llm.n_tokens = len(ids)
        llm._ctx.kv_cache_seq_rm(0, len(ids), -1)
        tokens = self._live
        if self.prompt_cache.budget_bytes and not self.prompt_cache.covers(tokens):
            import llama_cpp  # heavy: llama_cpp

            self.prompt_cache.add(tokens, save_sequence(llama_cpp, llm._ctx.ctx))

    def _run(self, job: Job) -> ChatResult:
        from llama_cpp import StoppingCriteriaList  # heavy: llama_cpp

        llm, req = self._llm, job.request
        assert isinstance(req, ChatRequest)
        start = time.perf_counter()
        ids, template_stop, template_criteria = self.prompt_tokens(req.messages)
        room = self.n_ctx - len(ids)
        if room < 1:
            raise ContextLengthError(
                f"prompt is {len(ids)} tokens, longer than the context window "
                f"(engine.n_ctx={self.n_ctx})"
            )
        limit = min(req.max_tokens, room)
        guard = Guard(job.cancelled, prompt_len=len(ids), limit=limit, pause=self._pause)
        criteria = StoppingCriteriaList([guard])
        if template_criteria is not None:
            criteria.extend(template_criteria)
        prefill_start = time.perf_counter()
        prefilled = len(ids) - self._prefill(ids)
        decode_start = time.perf_counter()
        kwargs: dict[str, Any] = {
            "prompt": ids,
            # The guard enforces the limit: llama-cpp-python lets a few extra
            # tokens through while it completes a multi-byte character.
            "max_tokens": min(limit + 16, room),
            "temperature": req.temperature,
            "top_p": req.top_p,
            "stop": template_stop + list(req.stop or []),
            "seed": req.seed,
            "stopping_criteria": criteria,
            "repeat_penalty": 1.0,
        }
        if req.json_schema is not None:
            kwargs["grammar"] = schema_grammar(req.json_schema)
        if job.on_delta is None:
            out = llm.create_completion(**kwargs)
            choice, usage = out["choices"][0], out["usage"]
            text, finish = choice["text"], choice["finish_reason"] or "stop"
            completion_tokens = usage["completion_tokens"]
        else:
            pieces: list[str] = []
            finish = "stop"
            for chunk in llm.create_completion(stream=True, **kwargs):
                choice = chunk["choices"][0]
                if choice["text"]:
                    pieces.append(choice["text"])
                    job.on_delta(choice["text"])
                finish = choice["finish_reason"] or finish
                if job.cancelled.is_set():
                    break
            text = "".join(pieces)
            # Positions evaluated after the prompt (exact for an end-of-sequence
            # stop; a stop string ends before its last token is evaluated).
            completion_tokens = llm.n_tokens - len(ids)
        self._remember(ids)
        if guard.hit_limit:
            finish, completion_tokens = "length", limit
        if job.cancelled.is_set():
            finish = "cancelled"
        self.throughput.prefill_tokens += prefilled
        self.throughput.prefill_s += decode_start - prefill_start
        self.throughput.decode_tokens += max(completion_tokens, 0)
        self.throughput.decode_s += time.perf_counter() - decode_start
        return ChatResult(
            text=text,
            prompt_tokens=len(ids),
            completion_tokens=max(completion_tokens, 0),
            latency_s=time.perf_counter() - start,
            finish_reason=finish,
        )
