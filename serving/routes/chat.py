"""``POST /v1/chat/completions``; the work is :class:`serving.serving_chat.OpenAIServingChat`'s."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from fastapi import APIRouter, Depends, Request
from fastapi.responses import Response

from serving.serving_chat import OpenAIServingChat


def router(chat: OpenAIServingChat, require_key: Callable[..., Any]) -> APIRouter:
    api = APIRouter()

    @api.post("/v1/chat/completions", dependencies=[Depends(require_key)])
    async def chat_completions(request: Request) -> Response:
        return await chat.create(request)

    return api
