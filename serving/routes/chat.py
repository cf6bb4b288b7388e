"""``POST /v1/chat/completions``; the work is :class:`serving.serving_chat.OpenAIServingChat`'s.

Its route class (:func:`serving.validation.checked_json_route`) checks the key, then reads
and decodes the body within the server's limits; FastAPI validates it as the model.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from fastapi import APIRouter, Request
from fastapi.responses import Response

from serving.protocol import ChatCompletionRequest
from serving.serving_chat import OpenAIServingChat
from serving.validation import checked_json_route


def router(chat: OpenAIServingChat, require_key: Callable[[Request], Awaitable[None]]) -> APIRouter:
    api = APIRouter(route_class=checked_json_route(chat.server, require_key))

    @api.post("/v1/chat/completions")
    async def chat_completions(body: ChatCompletionRequest, request: Request) -> Response:
        return await chat.create(body, request)

    return api
