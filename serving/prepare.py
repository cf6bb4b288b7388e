"""A chat request as Typed-RAG's input: the question, the conversation, and a fitted ``top_k``."""

from __future__ import annotations

from dataclasses import dataclass

from serving import errors
from serving.bodies import (
    CHARS_PER_TOKEN,
    PASSAGE_TOKENS,
    PROMPT_TOKENS,
    context_window,
    window_setting,
)
from serving.protocol import ChatCompletionRequest
from typed_rag.config import Settings
from typed_rag.conversation import ChatOptions, Turn

SYSTEM_ROLES = ("system", "developer")


@dataclass(frozen=True)
class Prepared:
    """A validated request's question, what the chat adds, and the fitted ``top_k``."""

    question: str
    chat: ChatOptions
    top_k: int | None
    notes: list[str]


def prepare(req: ChatCompletionRequest, settings: Settings) -> Prepared:
    """The last user message (the question) and what the rest of the request adds.

    Earlier user/assistant turns become the conversation a follow-up is
    rewritten from; system and developer messages instruct the final answer.
    Each user or system message may have ``server.max_input_chars`` characters
    (the OpenAPI schema says so too); blank user messages fail validation.
    """
    limit = settings.server.max_input_chars
    for i, m in enumerate(req.messages):
        size = len(m.text())
        if m.role in ("user", *SYSTEM_ROLES) and size > limit:
            raise errors.bad_request(
                f"messages[{i}] ({m.role}) has {size} characters; this server accepts "
                f"at most {limit} per message (server.max_input_chars)",
                param=f"messages.{i}.content",
                code="input_too_long",
            )
    users = [i for i, m in enumerate(req.messages) if m.role == "user"]
    if not users:
        raise errors.bad_request(
            "'messages' has no message with role 'user' to answer", param="messages"
        )
    last = users[-1]
    question = req.messages[last].text().strip()
    system = "\n\n".join(
        text for m in req.messages if m.role in SYSTEM_ROLES and (text := m.text().strip())
    )
    history = [
        Turn(role=m.role, text=m.text())
        for m in req.messages[:last]
        if m.role not in SYSTEM_ROLES and m.text().strip()
    ]
    chat = ChatOptions(
        history=history,
        system=system,
        stop=req.stop_strings(),
        json_schema=req.output_schema(),
    )
    top_k, notes = fit_context(req, question, system, settings)
    return Prepared(question=question, chat=chat, top_k=top_k, notes=notes)


def fit_context(
    req: ChatCompletionRequest, question: str, system: str, settings: Settings
) -> tuple[int | None, list[str]]:
    """``top_k`` lowered so the final prompt fits the model's context, before any engine call.

    An estimate: passages of at most :data:`PASSAGE_TOKENS` tokens, the question
    and system text, the prompt's own instructions, and the answer's tokens
    (up to half the window; the engine stops an answer at the window's end).
    A lowered ``top_k`` is reported in ``typed_rag.fallbacks``; a request
    whose text alone leaves no room is a 400 naming the limit.
    """
    window = context_window(settings)
    if window is None or req.model == "llm":
        return req.top_k, []
    answer = req.max_completion_tokens or req.max_tokens or settings.sampling.max_tokens
    reserve = min(answer, window // 2)
    fixed = PROMPT_TOKENS + (len(question) + len(system)) // CHARS_PER_TOKEN
    fits = (window - reserve - fixed) // PASSAGE_TOKENS
    if fits < 1:
        raise errors.bad_request(
            f"the question and system messages (~{fixed} tokens with the prompt) and "
            f"{reserve} answer tokens leave no room for a passage in the model's context "
            f"of {window} tokens ({window_setting(settings)})",
            param="messages",
            code="context_length_exceeded",
        )
    top_k = req.top_k or settings.retrieval.top_k
    if top_k <= fits:
        return req.top_k, []
    note = (
        f"context: top_k {top_k} -> {fits}, so passages (~{PASSAGE_TOKENS} tokens each), "
        f"the question and {reserve} answer tokens fit the model's context of {window} "
        f"tokens ({window_setting(settings)})"
    )
    return fits, [note]
