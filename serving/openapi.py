"""The OpenAPI document, made to describe what the server really does.

FastAPI generates the chat request's schema from the model that validates it; added
here are what only the settings know (the modes, the ``top_k`` and length limits),
every status an endpoint can answer and its body, and both content types of the
chat 200 (JSON, or an SSE stream).
"""

from __future__ import annotations

import json
from typing import Any

from fastapi import FastAPI
from fastapi.openapi.utils import get_openapi
from pydantic import BaseModel

from serving import documents_openapi
from serving.responses import (
    ChatCompletionResponse,
    ConfigResponse,
    ErrorResponse,
    Health,
    ModelList,
)
from typed_rag.pipelines import MODES
from typed_rag.types import QuestionType

REF = "#/components/schemas/{model}"

ERRORS: dict[int, str] = {
    400: "invalid body or field (`param` names it), unknown model, input or context too long",
    401: "`server.api_key` is set and the Bearer key is missing or wrong",
    404: "the `collection` named is not built (`GET /v1/collections` lists them)",
    413: "body larger than `server.max_body_bytes`",
    429: "all slots busy and the queue full (`Retry-After`)",
    500: "a bug; details only in the server log",
    503: "model loading, engine died or failed (`Retry-After`)",
    504: "`server.request_timeout_s` passed",
}
SSE_DESCRIPTION = (
    "With `stream: true`: `data: {chunk}` events (chat.completion.chunk), then "
    "`data: [DONE]`; a failure after the stream began arrives as `data: {error}`."
)


# One server-sent event; ``data`` is a chat.completion.chunk, an error object
# (both JSON) or ``[DONE]``.
SSE_EVENT: dict[str, Any] = {
    "type": "object",
    "properties": {"event": {"type": "string"}, "data": {"type": "string"}},
    "required": ["data"],
}


def _schemas(*models: type[BaseModel]) -> dict[str, Any]:
    """JSON schemas of ``models`` (and everything they use) as OpenAPI components."""
    out: dict[str, Any] = {}
    for model in models:
        schema = model.model_json_schema(ref_template=REF, mode="validation")
        out.update(schema.pop("$defs", {}))
        out[model.__name__] = schema
    return out


def _json(name: str) -> dict[str, Any]:
    return {"application/json": {"schema": {"$ref": REF.format(model=name)}}}


def _errors(*statuses: int) -> dict[str, Any]:
    return {
        str(status): {"description": ERRORS[status], "content": _json("ErrorResponse")}
        for status in statuses
    }


def _request_schema(components: dict[str, Any], max_input_chars: int, max_top_k: int) -> None:
    """What validation adds beyond the pydantic model: the mode names, the type labels,
    the ``top_k`` range and the per-message length limit of this server."""
    request = components["ChatCompletionRequest"]
    request["properties"]["model"]["enum"] = list(MODES)
    # FastAPI's OpenAPI model holds bounds as floats: int64's maximum would round up to 2**63.
    request["properties"]["seed"]["anyOf"][0].update(minimum=-(2**63), maximum=2**63 - 1)
    request["properties"]["top_k"] = {
        "anyOf": [{"type": "integer", "minimum": 1, "maximum": max_top_k}, {"type": "null"}],
        "default": None,
        "description": "passages per (sub-)query; at most server.max_top_k",
    }
    labels = [t.value for t in QuestionType]
    request["properties"]["force_type"] = {
        "anyOf": [{"enum": [*labels, *(v.lower() for v in labels), ""]}, {"type": "null"}],
        "default": None,
        "description": "skip the classifier: a question type label (any case)",
    }
    for name in ("UserMessage", "OtherMessage"):
        content = components[name]["properties"]["content"]
        for option in content["anyOf"]:
            if option.get("type") == "string" and name == "UserMessage":
                option["maxLength"] = max_input_chars
    # System and developer messages have the same limit: split them off.
    other = components["OtherMessage"]
    system = json.loads(json.dumps(other))
    system["title"] = "SystemMessage"
    system["properties"]["role"] = {"enum": ["system", "developer"], "type": "string"}
    for option in system["properties"]["content"]["anyOf"]:
        if option.get("type") == "string":
            option["maxLength"] = max_input_chars
    components["SystemMessage"] = system
    other["properties"]["role"] = {"enum": ["assistant", "tool"], "type": "string"}
    items = request["properties"]["messages"]["items"]
    items["oneOf"].append({"$ref": REF.format(model="SystemMessage")})
    mapping = items["discriminator"]["mapping"]
    for role in ("system", "developer"):
        mapping[role] = REF.format(model="SystemMessage")


def install(app: FastAPI, *, auth: bool, max_input_chars: int, max_top_k: int = 20) -> None:
    """Replace ``app.openapi`` with the document built here (cached after the first call)."""

    def build() -> dict[str, Any]:
        if app.openapi_schema is not None:
            return app.openapi_schema
        doc = get_openapi(
            title=app.title, version=app.version, summary=app.summary, routes=app.routes
        )
        components = doc.setdefault("components", {}).setdefault("schemas", {})
        components.update(
            _schemas(ChatCompletionResponse, ErrorResponse, ModelList, Health, ConfigResponse)
        )
        _request_schema(components, max_input_chars, max_top_k)
        auth_errors = (401,) if auth else ()
        paths = doc["paths"]
        chat = paths["/v1/chat/completions"]["post"]
        chat["responses"] = {
            "200": {
                "description": "the answer; " + SSE_DESCRIPTION,
                "content": {
                    **_json("ChatCompletionResponse"),
                    "text/event-stream": {"schema": SSE_EVENT},
                },
            },
            **_errors(400, *auth_errors, 404, 413, 429, 500, 503, 504),
        }
        models = paths["/v1/models"]["get"]
        models["responses"] = {
            "200": {"description": "the modes", "content": _json("ModelList")},
            **_errors(*auth_errors),
        }
        config = paths["/v1/config"]["get"]
        config["responses"] = {
            "200": {
                "description": "the settings in force, resolved, without secrets or paths",
                "content": _json("ConfigResponse"),
            },
            **_errors(*auth_errors),
        }
        health = paths["/health"]["get"]
        health["responses"] = {
            "200": {"description": "ready", "content": _json("Health")},
            "503": {"description": "loading, failed or unhealthy", "content": _json("Health")},
        }
        documents_openapi.describe(doc, _json("ErrorResponse"), auth=auth)
        metrics = paths["/metrics"]["get"]
        metrics["responses"] = {
            "200": {
                "description": "Prometheus exposition",
                "content": {"text/plain": {"schema": {"type": "string"}}},
            }
        }
        app.openapi_schema = doc
        return doc

    app.openapi = build  # type: ignore[method-assign]
