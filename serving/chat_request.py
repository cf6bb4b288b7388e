"""A chat request as Typed-RAG's one request: built and resolved here, at the HTTP edge.

The server only adds what is HTTP's: the per-message size limit of this server and
the error shape. Defaults, checks and the fitting of ``top_k`` to the model's context
are :mod:`typed_rag.request`'s, the same for ``typed-rag ask`` and the Python API.
"""

from __future__ import annotations

from serving import errors
from serving.protocol import ChatCompletionRequest
from typed_rag.config import Settings
from typed_rag.request import SYSTEM_ROLES, AnswerRequest, RequestError, Resolved


def resolve_chat(req: ChatCompletionRequest, settings: Settings) -> Resolved:
    """The request resolved against the server's settings, or a 400 naming the field.

    Each user or system message may have ``server.max_input_chars`` characters
    (the OpenAPI schema says so too); blank user messages fail validation before.
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
    try:
        request = AnswerRequest.from_messages(
            [{"role": m.role, "content": m.text()} for m in req.messages],
            stop=req.stop_strings(),
            json_schema=req.output_schema(),
            mode=req.model,
            force_type=req.force_type,
            top_k=req.top_k,
            seed=req.engine_seed(),
            sampling=req.sampling(),
            collection=req.collection,
        )
        return request.resolve(settings)
    except RequestError as exc:
        raise errors.request_error(exc) from None
