"""Prometheus metrics of one server: traffic, latency per question type, tokens, errors, queue.

Each app gets its own registry, so several servers (or tests) in one process
do not share counters.
"""

from __future__ import annotations

from prometheus_client import (
    CONTENT_TYPE_LATEST,
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    generate_latest,
)

# Answers take from a fraction of a second (fake engine) to minutes (CPU, decomposed).
LATENCY_BUCKETS = (0.05, 0.1, 0.25, 0.5, 1, 2, 5, 10, 20, 30, 60, 120, 300, 600)


class ServerMetrics:
    """The counters the server updates; ``render()`` gives the exposition text."""

    content_type = CONTENT_TYPE_LATEST

    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        r = self.registry
        self.requests = Counter(
            "typed_rag_requests",
            "Chat completion requests by mode and final HTTP status (499: client went away).",
            ["mode", "status"],
            registry=r,
        )
        self.latency = Histogram(
            "typed_rag_request_latency_seconds",
            "End-to-end latency of answered requests, by the question type used.",
            ["question_type"],
            buckets=LATENCY_BUCKETS,
            registry=r,
        )
        self.first_token = Histogram(
            "typed_rag_time_to_first_token_seconds",
            "Time from request to the first streamed answer token.",
            buckets=LATENCY_BUCKETS,
            registry=r,
        )
        self.tokens = Counter(
            "typed_rag_tokens",
            "LLM tokens spent answering, summed over all engine calls of a request.",
            ["kind"],
            registry=r,
        )
        self.errors = Counter(
            "typed_rag_errors",
            "Failed requests by OpenAI error code.",
            ["code"],
            registry=r,
        )
        self.cancelled = Counter(
            "typed_rag_requests_cancelled",
            "Requests whose work was cancelled because the client disconnected.",
            registry=r,
        )
        self.queue_depth = Gauge(
            "typed_rag_queue_depth",
            "Requests waiting for a free slot.",
            registry=r,
        )
        self.in_flight = Gauge(
            "typed_rag_requests_in_flight",
            "Requests holding a slot (being answered).",
            registry=r,
        )

    def observe_done(
        self,
        mode: str,
        status: int,
        *,
        question_type: str | None = None,
        latency_s: float | None = None,
        prompt_tokens: int = 0,
        completion_tokens: int = 0,
    ) -> None:
        self.requests.labels(mode=mode, status=str(status)).inc()
        if latency_s is not None:
            self.latency.labels(question_type=question_type or "none").observe(latency_s)
        if prompt_tokens:
            self.tokens.labels(kind="prompt").inc(prompt_tokens)
        if completion_tokens:
            self.tokens.labels(kind="completion").inc(completion_tokens)

    def observe_error(self, mode: str, status: int, code: str | None) -> None:
        self.requests.labels(mode=mode, status=str(status)).inc()
        self.errors.labels(code=code or f"http_{status}").inc()

    def render(self) -> bytes:
        return generate_latest(self.registry)
