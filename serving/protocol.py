"""The wire format of requests: OpenAI chat-completion requests and the extra Typed-RAG fields.

Requests are validated here (types and the ranges of OpenAI's fields); what
needs the settings (is the model known, is the input too long for this server,
the ``top_k`` bound, the type label) is checked in :mod:`serving.validation` and,
for what every edge shares, :mod:`typed_rag.request`. The responses are in :mod:`serving.responses`.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal, Self

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    ModelWrapValidatorHandler,
    StringConstraints,
    WithJsonSchema,
    model_validator,
)
from pydantic_core import PydanticKnownError

# Request models are strict (no "0.5" for a number, no "true" for a bool), so
# the server accepts exactly what the OpenAPI schema, generated from them, says.
STRICT = ConfigDict(extra="ignore", strict=True)
NonBlank = Annotated[str, StringConstraints(pattern=r"\S")]


def _integral(value: Any) -> Any:
    """JSON Schema counts 2.0 as an integer; so does the server (strict ints refuse bools)."""
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return value


def Int(ge: int, le: int) -> Any:  # noqa: N802 - reads as a type
    """An integer in ``[ge, le]``; JSON numbers like 2.0 count as integers."""
    return Annotated[int, Field(ge=ge, le=le), BeforeValidator(_integral)]


def _false(value: bool) -> bool:
    if value:
        raise ValueError("Input should be false")
    return value


# ``false`` only (a bare Literal[False] would also take 0).
FalseOnly = Annotated[bool, AfterValidator(_false), WithJsonSchema({"const": False})]


class Strict(BaseModel):
    """A part of a request: strict, and a JSON object (FastAPI validates a body with
    ``from_attributes``, which would word the refusal of a non-object differently)."""

    model_config = STRICT

    @model_validator(mode="wrap")
    @classmethod
    def _an_object(cls, value: Any, handler: ModelWrapValidatorHandler[Self]) -> Self:
        if not isinstance(value, dict | cls):
            raise PydanticKnownError("model_type", {"class_name": cls.__name__})
        return handler(value)


class TextPart(Strict):
    """One part of a message whose content is a list; only text is understood."""

    type: Literal["text"]
    text: str


class UserTextPart(TextPart):
    text: NonBlank


class _Message(Strict):
    name: str | None = None

    def text(self) -> str:
        content = getattr(self, "content", None)
        if content is None:
            return ""
        if isinstance(content, str):
            return content
        return "".join(part.text for part in content)


class UserMessage(_Message):
    """A user turn: the last one is the question, so none may be blank."""

    role: Literal["user"]
    content: NonBlank | Annotated[list[UserTextPart], Field(min_length=1)]


class OtherMessage(_Message):
    """System/developer (instructions for the answer), assistant and tool turns (history)."""

    role: Literal["system", "developer", "assistant", "tool"]
    content: str | list[TextPart] | None = None


ChatMessage = Annotated[UserMessage | OtherMessage, Field(discriminator="role")]


class StreamOptions(Strict):
    include_usage: bool | None = None


class JSONSchemaFormat(Strict):
    """``response_format.json_schema``: the schema the final answer is decoded under."""

    model_config = ConfigDict(extra="ignore", strict=True, populate_by_name=True)

    name: str = Field(default="response", max_length=64)
    description: str | None = None
    schema_: dict[str, Any] = Field(default_factory=dict, alias="schema")
    strict: bool | None = None


class TextFormat(Strict):
    type: Literal["text"]


class JSONObjectFormat(Strict):
    type: Literal["json_object"]


class JSONSchemaResponseFormat(Strict):
    type: Literal["json_schema"]
    json_schema: JSONSchemaFormat


ResponseFormat = Annotated[
    TextFormat | JSONObjectFormat | JSONSchemaResponseFormat, Field(discriminator="type")
]


def schema_for_engine(fmt: Any) -> dict[str, Any] | None:
    """The JSON schema the final generation is constrained to (None for text)."""
    if isinstance(fmt, JSONObjectFormat):
        return {"type": "object"}
    if isinstance(fmt, JSONSchemaResponseFormat):
        return fmt.json_schema.schema_ or {"type": "object"}
    return None


# What happens to each field of an OpenAI chat-completion request (the names
# are those of ``openai.types.chat.CompletionCreateParams``; a test checks this
# table against the installed SDK). "honoured": applied; "rejected": a value
# other than the neutral one is a 400 naming the field; "ignored": accepted,
# has no effect, and is listed in ``typed_rag.ignored_params`` when set.
FIELD_POLICY: dict[str, tuple[Literal["honoured", "rejected", "ignored"], str]] = {
    "messages": (
        "honoured",
        "last user message is the question; earlier turns resolve "
        "follow-ups; system/developer messages instruct the final answer",
    ),
    "model": ("honoured", "the mode: typed-rag, rag or llm"),
    "stream": ("honoured", "server-sent events"),
    "stream_options": ("honoured", "usage is always sent in the last chunk"),
    "temperature": ("honoured", "every generation of the request"),
    "top_p": ("honoured", "every generation of the request"),
    "max_tokens": ("honoured", "per generation; finish_reason is 'length' when it cut the answer"),
    "max_completion_tokens": ("honoured", "as max_tokens (wins over it)"),
    "seed": ("honoured", "seeds every generation"),
    "stop": ("honoured", "up to 4 stop strings, applied to the final answer"),
    "response_format": (
        "honoured",
        "text, json_object or json_schema: the final answer is decoded under the schema",
    ),
    "n": ("rejected", "only n=1"),
    "logprobs": ("rejected", "only false: token log-probabilities are not returned"),
    "top_logprobs": ("rejected", "log-probabilities are not returned"),
    "logit_bias": ("rejected", "only empty"),
    "tool_choice": ("rejected", "only 'none' or 'auto': the model never calls tools"),
    "function_call": ("rejected", "only 'none' or 'auto': the model never calls functions"),
    "audio": ("rejected", "text only"),
    "modalities": ("rejected", "only ['text']"),
    "web_search_options": ("rejected", "answers come from the server's own corpus"),
    "moderation": ("rejected", "no moderation is run, so none can be promised"),
    "tools": ("ignored", "accepted for clients that always send them; never called"),
    "functions": ("ignored", "accepted for clients that always send them; never called"),
    "parallel_tool_calls": ("ignored", "no tools are called"),
    "presence_penalty": ("ignored", "the prompts end answers themselves"),
    "frequency_penalty": ("ignored", "the prompts end answers themselves"),
    "prediction": ("ignored", "a speed hint; no effect on the answer"),
    "user": ("ignored", "not stored"),
    "metadata": ("ignored", "not stored"),
    "store": ("ignored", "nothing is stored"),
    "service_tier": ("ignored", "one tier"),
    "prompt_cache_key": ("ignored", "no prompt cache keyed by client"),
    "prompt_cache_options": ("ignored", "no prompt cache keyed by client"),
    "prompt_cache_retention": ("ignored", "no prompt cache keyed by client"),
    "safety_identifier": ("ignored", "not stored"),
    "reasoning_effort": ("ignored", "not a reasoning model"),
    "verbosity": ("ignored", "answer length follows the question type"),
}
TYPED_RAG_FIELDS = ("top_k", "force_type", "include_trace", "collection")
StopList = Annotated[list[Annotated[str, Field(min_length=1)]], Field(max_length=4)]


class ChatCompletionRequest(BaseModel):
    """``POST /v1/chat/completions``. The mode is the ``model`` name.

    Every OpenAI field is declared (see :data:`FIELD_POLICY`); fields nobody
    knows are accepted and reported back in ``typed_rag.ignored_params``.
    """

    model_config = ConfigDict(extra="allow", strict=True)

    model: str = "typed-rag"
    messages: list[ChatMessage] = Field(
        min_length=1,
        json_schema_extra={
            "contains": {
                "type": "object",
                "properties": {"role": {"const": "user"}},
                "required": ["role"],
            },
        },
    )
    stream: bool = False
    stream_options: StreamOptions | None = None
    temperature: float | None = Field(default=None, ge=0.0, le=2.0)
    top_p: float | None = Field(default=None, gt=0.0, le=1.0)
    max_tokens: Int(1, 2**31 - 1) | None = None
    max_completion_tokens: Int(1, 2**31 - 1) | None = None
    seed: Int(-(2**63), 2**63 - 1) | None = None
    stop: Annotated[str, Field(min_length=1)] | StopList | None = None
    response_format: ResponseFormat | None = None
    # Rejected fields: only their neutral values validate (see FIELD_POLICY).
    n: Int(1, 1) | None = None
    logprobs: FalseOnly | None = None
    top_logprobs: Int(0, 0) | None = None
    logit_bias: Annotated[dict[str, float], Field(max_length=0)] | None = None
    tool_choice: Literal["none", "auto"] | None = None
    function_call: Literal["none", "auto"] | None = None
    audio: None = None
    modalities: list[Literal["text"]] | None = None
    web_search_options: None = None
    moderation: None = None
    tools: list[dict[str, Any]] | None = None
    functions: list[dict[str, Any]] | None = None
    parallel_tool_calls: bool | None = None
    presence_penalty: float | None = Field(default=None, ge=-2.0, le=2.0)
    frequency_penalty: float | None = Field(default=None, ge=-2.0, le=2.0)
    prediction: dict[str, Any] | None = None
    user: str | None = None
    metadata: dict[str, str] | None = None
    store: bool | None = None
    service_tier: str | None = None
    prompt_cache_key: str | None = None
    prompt_cache_options: dict[str, Any] | None = None
    prompt_cache_retention: str | None = None
    safety_identifier: str | None = None
    reasoning_effort: str | None = None
    verbosity: str | None = None
    # Typed-RAG extras
    # Range (1 to server.max_top_k) and type label are checked by typed_rag.request.
    top_k: Annotated[int, BeforeValidator(_integral)] | None = None
    force_type: str | None = None
    include_trace: bool = False
    # A document collection to answer from (GET /v1/collections lists them; default: the
    # server's own index). An unknown name is a 400 naming the known ones (typed_rag.request).
    collection: Annotated[str, Field(min_length=1, max_length=64)] | None = None
    # Streams only: progress chunks (empty delta.content + a typed_rag event) before the answer.
    progress_events: bool = True

    def stop_strings(self) -> list[str]:
        return [self.stop] if isinstance(self.stop, str) else list(self.stop or [])

    def output_schema(self) -> dict[str, Any] | None:
        return schema_for_engine(self.response_format)

    def sampling(self) -> dict[str, Any]:
        """Sampling fields the client set; they override ``settings.sampling`` for this request."""
        return {
            "temperature": self.temperature,
            "top_p": self.top_p,
            "max_tokens": self.max_completion_tokens or self.max_tokens,
        }

    def engine_seed(self) -> int | None:
        """The seed folded into 32 bits (what llama.cpp takes); any int64 is accepted."""
        return None if self.seed is None else self.seed % 2**32

    def ignored_params(self) -> list[str]:
        """Fields the client set that Typed-RAG does not apply: reported in the
        ``typed_rag`` object, never silently dropped. Unknown fields are included."""
        names = [n for n, (cls, _) in FIELD_POLICY.items() if cls == "ignored"]
        neutral: dict[str, Any] = {"presence_penalty": 0.0, "frequency_penalty": 0.0}
        out = [
            n
            for n in names
            if getattr(self, n) is not None and getattr(self, n) != neutral.get(n, object())
        ]
        return out + sorted(self.model_extra or {})
