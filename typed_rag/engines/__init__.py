"""LLM engines behind one interface (see :mod:`typed_rag.engines.base`)."""

from __future__ import annotations

from typed_rag.engines.base import ChatRequest, ChatResult, Engine, EngineError, StreamDelta

__all__ = ["ChatRequest", "ChatResult", "Engine", "EngineError", "StreamDelta"]
