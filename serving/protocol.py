"""The wire format: OpenAI chat-completion requests and responses, plus the ``typed_rag`` object.

Requests are validated here (types, ranges, the extra Typed-RAG fields);
everything that needs the running system (is the model known, is the input
too long for this server) is checked in :mod:`serving.serving_chat`.
Responses carry a top-level ``typed_rag`` object; OpenAI SDKs keep unknown
top-level fields, so their parsing is not affected.
"""

from __future__ import annotations

import time
import uuid
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from typed_rag.result import Result
from typed_rag.types import QuestionType

MODES: tuple[str, ...] = ("typed-rag", "rag", "llm")


class TextPart(BaseModel):
    """One part of a message whose content is a list; only text is understood."""

    model_config = ConfigDict(extra="ignore")

    type: Literal["text"]
    text: str


class ChatMessage(BaseModel):
    model_config = ConfigDict(extra="ignore")

    role: Literal["system", "developer", "user", "assistant", "tool"]
    content: str | list[TextPart] | None = None
    name: str | None = None

    def text(self) -> str:
        if self.content is None:
            return ""
        if isinstance(self.content, str):
            return self.content
        return "".join(part.text for part in self.content)


class StreamOptions(BaseModel):
    model_config = ConfigDict(extra="ignore")

    include_usage: bool | None = None


class ChatCompletionRequest(BaseModel):
    """``POST /v1/chat/completions``. The mode is the ``model`` name."""

    # Unknown OpenAI fields (user, metadata, ...) are accepted and ignored,
    # like the OpenAI API does for fields it no longer uses.
    model_config = ConfigDict(extra="ignore")

    model: str = "typed-rag"
    messages: list[ChatMessage]
    stream: bool = False
    stream_options: StreamOptions | None = None
    temperature: float | None = Field(default=None, ge=0.0, le=2.0)
    top_p: float | None = Field(default=None, gt=0.0, le=1.0)
    max_tokens: int | None = Field(default=None, ge=1)
    max_completion_tokens: int | None = Field(default=None, ge=1)
    seed: int | None = None
    n: int = Field(default=1, ge=1, le=1)
    stop: str | list[str] | None = None
    presence_penalty: float | None = Field(default=None, ge=-2.0, le=2.0)
    frequency_penalty: float | None = Field(default=None, ge=-2.0, le=2.0)
    user: str | None = None
    # Typed-RAG extras
    top_k: int | None = Field(default=None, ge=1, le=100)
    force_type: str | None = None
    include_trace: bool = False
    # Streams only: progress chunks (empty delta.content + a typed_rag event) before the answer.
    progress_events: bool = True

    @field_validator("force_type")
    @classmethod
    def _known_type(cls, value: str | None) -> str | None:
        if value is None or value == "":
            return None
        return QuestionType.parse(value).value

    def sampling(self) -> dict[str, Any]:
        """Sampling fields the client set; they override ``settings.sampling`` for this request."""
        return {
            "temperature": self.temperature,
            "top_p": self.top_p,
            "max_tokens": self.max_completion_tokens or self.max_tokens,
        }

    def ignored_params(self) -> list[str]:
        """Fields the client set that Typed-RAG does not apply (its prompts end answers
        themselves). Reported in the ``typed_rag`` object, never silently dropped."""
        names = ("stop", "presence_penalty", "frequency_penalty")
        return [n for n in names if getattr(self, n) is not None]


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


class TypedRAGInfo(BaseModel):
    """What Typed-RAG decided and did: sent as the response's ``typed_rag`` object."""

    mode: str
    type: str | None = None
    predicted_type: str | None = None
    type_source: str | None = None
    probabilities: dict[str, float] = Field(default_factory=dict)
    plan: dict[str, Any] = Field(default_factory=dict)
    constraints: dict[str, Any] | None = None  # include/exclude subtopics found in the question
    citations: list[Citation] = Field(default_factory=list)
    sub_answers: list[dict[str, Any]] = Field(default_factory=list)
    fallbacks: list[str] = Field(default_factory=list)
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
                )
                for p in result.passages
            ],
            sub_answers=[s.model_dump() for s in result.sub_answers],
            fallbacks=result.fallbacks,
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
    plan: plan (sub_queries / perspectives / keywords ...); sub_answer: index, total,
    step, query, perspective, answer, citations; fallback: note; answer: step.
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
