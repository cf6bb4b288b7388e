"""One question as every edge asks it: the typed request, its defaults and its checks.

HTTP (``serving/``), ``typed-rag ask``, the Python API, the demo (through HTTP) and
evaluation runs all build an :class:`AnswerRequest`. :meth:`AnswerRequest.resolve`
fills in the defaults from the settings and makes the checks that need them (the
largest ``top_k``, the sampling overrides, the model's context window) once, before
any work: the pipelines only read the :class:`Resolved` request, so a question is
answered alike whichever edge it came through.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypedDict

from pydantic import ValidationError

from typed_rag.config import SamplingSettings, Settings
from typed_rag.conversation import ChatOptions, Turn
from typed_rag.errors import UserError
from typed_rag.retrieval.collections import WIKI, check_name, require_collection
from typed_rag.types import MODES, QuestionType

SYSTEM_ROLES = ("system", "developer")

# The context estimate of :func:`fit_top_k`. Wiki passages are 100 words: 100 of them made
# a 13,787-token prompt with Qwen2.5's tokenizer (~138 per passage with its "[n] Title" line).
PASSAGE_TOKENS = 150
PROMPT_TOKENS = 300  # a pipeline's own instructions around the passages
CHARS_PER_TOKEN = 3  # conservative for English text

# A request is short (a small lane and the engine's front of the queue, so it never waits
# behind typed pipelines) when it makes no plan round and writes at most this many tokens.
SHORT_ANSWER_TOKENS = 64


class RequestError(UserError):
    """A bad request field: ``param`` names it as the HTTP API spells it, ``code`` the kind."""

    def __init__(self, message: str, param: str | None = None, code: str = "invalid_value"):
        super().__init__(message)
        self.param = param
        self.code = code


class RequestFields(TypedDict, total=False):
    """The fields of :class:`AnswerRequest` besides the question (keyword arguments of
    :meth:`typed_rag.system.TypedRAG.answer` that build one)."""

    mode: str | None
    force_type: QuestionType | str | None
    top_k: int | None
    seed: int | None
    sampling: dict[str, Any] | None
    chat: ChatOptions
    collection: str | None


@dataclass(frozen=True)
class AnswerRequest:
    """A question and everything its asker set; ``None`` means "the settings' default".

    Checks that need no settings run on construction (a blank question, an unknown
    mode or type, a ``top_k`` below 1, an unknown sampling field), so a bad request
    fails where it is built. ``sampling`` overrides fields of ``settings.sampling``
    (``temperature``, ``top_p``, ``max_tokens`` as budget, ...); ``chat`` carries what a
    chat adds: earlier turns, the asker's instructions, stop strings and output schema
    (see :mod:`typed_rag.conversation`); ``collection`` names the document collection.
    """

    question: str
    mode: str | None = None
    force_type: QuestionType | None = None
    top_k: int | None = None
    seed: int | None = None
    sampling: Mapping[str, Any] = field(default_factory=dict)
    chat: ChatOptions = field(default_factory=ChatOptions)
    collection: str | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.question, str) or not self.question.strip():
            raise RequestError("question is empty", param="messages")
        set_ = object.__setattr__  # frozen: normalise the given values once, here
        set_(self, "question", self.question.strip())
        if self.mode is not None and self.mode not in MODES:
            raise RequestError(
                f"unknown mode {self.mode!r}; expected one of: {', '.join(MODES)}", param="model"
            )
        set_(self, "force_type", _question_type(self.force_type))
        top_k = self.top_k
        if top_k is not None and (
            isinstance(top_k, bool) or not isinstance(top_k, int) or top_k < 1
        ):
            raise RequestError(f"top_k must be at least 1, got {self.top_k}", param="top_k")
        overrides = {k: v for k, v in (self.sampling or {}).items() if v is not None}
        unknown = sorted(set(overrides) - set(SamplingSettings.model_fields))
        if unknown:
            raise RequestError(f"unknown sampling field(s): {', '.join(unknown)}")
        set_(self, "sampling", overrides)
        if self.chat is None:
            set_(self, "chat", ChatOptions())

    @classmethod
    def from_messages(
        cls,
        messages: Sequence[Mapping[str, str]],
        stop: Sequence[str] = (),
        json_schema: dict[str, Any] | None = None,
        **fields: Any,
    ) -> AnswerRequest:
        """A chat as a request: the last user message is the question, the earlier user and
        assistant turns the conversation a follow-up is rewritten from, and the system and
        developer messages instructions for the final answer. ``messages`` are
        ``{"role", "content"}`` mappings; ``stop`` and ``json_schema`` apply to the answer."""
        users = [i for i, m in enumerate(messages) if m["role"] == "user"]
        if not users:
            raise RequestError("'messages' has no message with role 'user' to answer", "messages")
        last = users[-1]
        system = "\n\n".join(
            text for m in messages if m["role"] in SYSTEM_ROLES and (text := m["content"].strip())
        )
        history = tuple(
            Turn(role=m["role"], text=m["content"])
            for m in messages[:last]
            if m["role"] not in SYSTEM_ROLES and m["content"].strip()
        )
        chat = ChatOptions(history, system, tuple(stop), json_schema)
        return cls(question=messages[last]["content"], chat=chat, **fields)

    def resolve(self, settings: Settings) -> Resolved:
        """Defaults from ``settings`` and the checks that need them: :class:`RequestError`
        for a ``top_k`` above ``server.max_top_k``, an invalid sampling value, or a question
        that leaves no room in the model's context; a ``top_k`` whose passages would not
        fit is lowered, and a note says so (it goes to the trace's fallbacks). A
        ``collection`` that is not built is a :class:`RequestError` naming the known ones."""
        if self.collection is not None:
            try:
                if self.collection != WIKI:
                    check_name(self.collection)
            except UserError as exc:
                raise RequestError(str(exc), param="collection") from None
            try:
                require_collection(settings, self.collection)
            except UserError as exc:
                # the request is well formed; the collection it names does not exist (404)
                raise RequestError(str(exc), param="collection", code="not_found") from None
        limit = settings.server.max_top_k
        if self.top_k is not None and self.top_k > limit:
            raise RequestError(
                f"top_k {self.top_k} is more than this server allows: at most {limit} "
                "passages per query (server.max_top_k)",
                param="top_k",
            )
        mode = self.mode or settings.mode
        try:
            sampling = SamplingSettings.model_validate(
                {**settings.sampling.model_dump(), **self.sampling}
            )
        except ValidationError as exc:
            raise RequestError(f"invalid sampling override: {exc}") from None
        top_k = self.top_k or settings.retrieval.top_k
        system = self.chat.system
        fitted, notes = fit_top_k(settings, mode, top_k, self.question, system, sampling)
        seed = settings.sampling.seed if self.seed is None else self.seed
        return Resolved(self, mode, fitted, seed, sampling, tuple(notes))


@dataclass(frozen=True)
class Resolved:
    """A request with every default filled in and every check passed: what a pipeline runs."""

    asked: AnswerRequest
    mode: str
    top_k: int
    seed: int
    sampling: SamplingSettings
    notes: tuple[str, ...] = ()  # what resolution changed, for the trace's fallbacks

    @property
    def question(self) -> str:
        return self.asked.question

    @property
    def force_type(self) -> QuestionType | None:
        return self.asked.force_type

    @property
    def short(self) -> bool:
        """No plan round and a small answer: ``llm`` mode, or plain RAG with at most
        :data:`SHORT_ANSWER_TOKENS` tokens. The server and the engine let it go first."""
        if self.mode == "llm":
            return True
        return self.mode == "rag" and self.sampling.max_tokens <= SHORT_ANSWER_TOKENS


def _question_type(value: QuestionType | str | None) -> QuestionType | None:
    if value is None or isinstance(value, QuestionType):
        return value
    if not isinstance(value, str):
        raise RequestError(f"force_type must be a type label, got {value!r}", param="force_type")
    if not value.strip():
        return None
    try:
        return QuestionType.parse(value)
    except ValueError as exc:
        raise RequestError(str(exc), param="force_type") from None


def context_window(settings: Settings) -> int | None:
    """The model's context length in tokens, where the settings say it (None: unknown)."""
    engine = settings.engine
    if engine.backend in ("llamacpp", "fake"):
        return engine.n_ctx
    if engine.backend == "vllm":
        return engine.max_model_len
    return None


def window_setting(settings: Settings) -> str:
    return "engine.max_model_len" if settings.engine.backend == "vllm" else "engine.n_ctx"


def fit_top_k(
    settings: Settings,
    mode: str,
    top_k: int,
    question: str,
    system: str,
    sampling: SamplingSettings,
) -> tuple[int, list[str]]:
    """``top_k`` lowered so the final prompt fits the model's context, before any engine call.

    An estimate: passages of at most :data:`PASSAGE_TOKENS` tokens, the question and
    system text, the prompt's own instructions, and the answer's tokens (up to half the
    window; the engine stops an answer at the window's end). A request whose text alone
    leaves no room is a :class:`RequestError` naming the limit.
    """
    window = context_window(settings)
    if window is None or mode == "llm":
        return top_k, []
    reserve = min(sampling.max_tokens, window // 2)
    fixed = PROMPT_TOKENS + (len(question) + len(system)) // CHARS_PER_TOKEN
    fits = (window - reserve - fixed) // PASSAGE_TOKENS
    if fits < 1:
        raise RequestError(
            f"the question and system messages (~{fixed} tokens with the prompt) and "
            f"{reserve} answer tokens leave no room for a passage in the model's context "
            f"of {window} tokens ({window_setting(settings)})",
            param="messages",
            code="context_length_exceeded",
        )
    if top_k <= fits:
        return top_k, []
    note = (
        f"context: top_k {top_k} -> {fits}, so passages (~{PASSAGE_TOKENS} tokens each), "
        f"the question and {reserve} answer tokens fit the model's context of {window} "
        f"tokens ({window_setting(settings)})"
    )
    return fits, [note]
