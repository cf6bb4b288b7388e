"""The wire format of responses: OpenAI chat completions, chunks and errors, plus ``typed_rag``.

Responses carry a top-level ``typed_rag`` object; OpenAI SDKs keep unknown
top-level fields, so their parsing is not affected.
"""

from __future__ import annotations

import time
import uuid
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from typed_rag.result import Result


class UsageInfo(BaseModel):
    prompt_tokens: int = 0
    completion_tokens: int = 0
    total_tokens: int = 0


class Citation(BaseModel):
    """A numbered source of the answer, enough to show it in a UI."""

    citation: int
    id: str
    title: str
    snippet: str
    score: float
    rerank_score: float | None = None
    query: str | None = None
    # A document collection's passage: its file, page (PDF, 1-based) and section heading.
    source: str | None = None
    page: int | None = None
    section: str | None = None


class TypedRAGInfo(BaseModel):
    """What Typed-RAG decided and did: sent as the response's ``typed_rag`` object."""

    mode: str
    # The follow-up made standalone from the conversation (None without earlier turns).
    rewrite: dict[str, Any] | None = None
    type: str | None = None
    predicted_type: str | None = None
    type_source: str | None = None
    probabilities: dict[str, float] = Field(default_factory=dict)
    plan: dict[str, Any] = Field(default_factory=dict)
    constraints: dict[str, Any] | None = None  # include/exclude subtopics found in the question
    citations: list[Citation] = Field(default_factory=list)
    sub_answers: list[dict[str, Any]] = Field(default_factory=list)
    fallbacks: list[str] = Field(default_factory=list)
    # Answer sentences the checks flagged: a command or number no shown passage holds, or a
    # cited claim its passage does not support (removed, or re-cited to the passage that does).
    unverified: list[dict[str, Any]] = Field(default_factory=list)
    # A streamed answer over documents as its checks left it, when they changed what was
    # sent: the text to show in its place (the stream also ends with a note of the change).
    checked_answer: str | None = None
    timings: dict[str, float] = Field(default_factory=dict)
    rounds: int = 0
    server_timings: dict[str, float] = Field(default_factory=dict)
    ignored_params: list[str] = Field(default_factory=list)
    trace: dict[str, Any] | None = None  # the whole Result, when include_trace is set

    @classmethod
    def from_result(
        cls,
        result: Result,
        *,
        include_trace: bool,
        server_timings: dict[str, float],
        ignored_params: list[str] | None = None,
    ) -> TypedRAGInfo:
        return cls(
            mode=result.mode,
            rewrite=result.rewrite,
            type=result.type,
            predicted_type=result.predicted_type,
            type_source=result.type_source,
            probabilities=result.probabilities,
            plan=result.plan,
            constraints=result.constraints,
            citations=[
                Citation(
                    citation=p.citation,
                    id=p.id,
                    title=p.title,
                    snippet=p.snippet,
                    score=p.score,
                    rerank_score=p.rerank_score,
                    query=p.query,
                    source=p.source,
                    page=p.page,
                    section=p.section,
                )
                for p in result.passages
            ],
            sub_answers=[s.model_dump() for s in result.sub_answers],
            fallbacks=result.fallbacks,
            unverified=[u.model_dump() for u in result.unverified],
            checked_answer=result.answer if result.streamed_answer is not None else None,
            timings=result.timings,
            rounds=result.rounds,
            server_timings=server_timings,
            ignored_params=ignored_params or [],
            trace=result.model_dump(mode="json") if include_trace else None,
        )


def usage_of(result: Result) -> UsageInfo:
    prompt, completion = result.prompt_tokens, result.completion_tokens
    return UsageInfo(
        prompt_tokens=prompt, completion_tokens=completion, total_tokens=prompt + completion
    )


def completion_id() -> str:
    return f"chatcmpl-{uuid.uuid4().hex}"


class AssistantMessage(BaseModel):
    role: Literal["assistant"] = "assistant"
    content: str


class Choice(BaseModel):
    index: int = 0
    message: AssistantMessage
    finish_reason: str = "stop"
    logprobs: None = None


class ChatCompletionResponse(BaseModel):
    id: str = Field(default_factory=completion_id)
    object: Literal["chat.completion"] = "chat.completion"
    created: int = Field(default_factory=lambda: int(time.time()))
    model: str
    choices: list[Choice]
    usage: UsageInfo
    typed_rag: TypedRAGInfo


class DeltaMessage(BaseModel):
    role: Literal["assistant"] | None = None
    content: str | None = None


class StreamChoice(BaseModel):
    index: int = 0
    delta: DeltaMessage
    finish_reason: str | None = None
    logprobs: None = None


class ProgressEvent(BaseModel):
    """A progress chunk's ``typed_rag`` object: ``event`` names it (see :mod:`typed_rag.progress`).

    type: mode, type, type_source, predicted_type, probabilities;
    plan: plan (sub_queries / perspectives / keywords ...); sources: query, passages (each
    numbered, with its text, and file, page, section when from documents); sub_answer: index, total,
    step, query, perspective, answer, citations; fallback: note; answer: step; check (a
    streamed answer over documents is being checked against its passages): nothing more.
    The last chunk's ``typed_rag`` (the whole :class:`TypedRAGInfo`) has no ``event``.
    """

    model_config = ConfigDict(extra="allow")

    event: str
    elapsed_s: float


class ChatCompletionChunk(BaseModel):
    id: str
    object: Literal["chat.completion.chunk"] = "chat.completion.chunk"
    created: int
    model: str
    choices: list[StreamChoice]
    usage: UsageInfo | None = None
    typed_rag: TypedRAGInfo | ProgressEvent | None = None

    def sse(self) -> str:
        return f"data: {self.model_dump_json(exclude_none=True)}\n\n"


class ModelCard(BaseModel):
    id: str
    object: Literal["model"] = "model"
    created: int = Field(default_factory=lambda: int(time.time()))
    owned_by: str = "typed-rag"
    root: str | None = None  # the LLM behind the mode
    description: str = ""


class ModelList(BaseModel):
    object: Literal["list"] = "list"
    data: list[ModelCard]


class ErrorInfo(BaseModel):
    message: str
    type: str
    param: str | None = None
    code: str | None = None


class ErrorResponse(BaseModel):
    """Every failure: the OpenAI error shape."""

    error: ErrorInfo


class Health(BaseModel):
    """``GET /health``: ``ok`` when ready; ``loading``, ``failed``, ``unhealthy`` or ``closed``."""

    model_config = ConfigDict(extra="allow")

    status: str
    engine: str
    model: str
    error: str | None = None


class ConfigResponse(BaseModel):
    """``GET /v1/config``: the settings in force, every ``auto`` resolved, by section
    (``typed-rag config show --resolved --json``), keys and tokens ``<redacted>``, the
    server's paths as ``<home>/...`` or ``<path>/NAME``."""

    object: Literal["config"] = "config"
    settings: dict[str, Any]
