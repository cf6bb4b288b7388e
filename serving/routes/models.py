"""``GET /v1/models`` (the modes, as OpenAI model cards) and ``GET /v1/config``."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

from fastapi import APIRouter, Depends

from serving.config_view import public_settings
from serving.responses import ConfigResponse, ModelCard, ModelList
from serving.state import ServerState
from typed_rag.pipelines import MODES

MODE_DESCRIPTIONS = {
    "typed-rag": "type-aware decomposition: classify, plan per type, retrieve, answer",
    "rag": "plain retrieval-augmented generation (the paper's RAG baseline)",
    "llm": "the language model alone, no retrieval (the paper's LLM baseline)",
}


def router(state: ServerState, require_key: Callable[..., Any]) -> APIRouter:
    api = APIRouter()

    @api.get("/v1/models", dependencies=[Depends(require_key)])
    async def list_models() -> ModelList:
        root = state.model_name()
        return ModelList(
            data=[ModelCard(id=m, root=root, description=MODE_DESCRIPTIONS[m]) for m in MODES]
        )

    @api.get("/v1/config", dependencies=[Depends(require_key)])
    async def config() -> ConfigResponse:
        """The settings in force, every ``auto`` resolved; no key, token or server path."""
        resolved = await asyncio.to_thread(state.resolved_settings)
        return ConfigResponse(settings=public_settings(resolved, state.paths.home))

    return api
