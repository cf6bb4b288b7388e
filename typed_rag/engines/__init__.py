"""LLM engines behind one interface (see :mod:`typed_rag.engines.base`).

``build_engine(settings)`` picks the backend; backends load their heavy
libraries only when built.
"""

from __future__ import annotations

from typed_rag.engines.base import ChatRequest, ChatResult, Engine, EngineError, StreamDelta
from typed_rag.engines.factory import build_engine

__all__ = ["ChatRequest", "ChatResult", "Engine", "EngineError", "StreamDelta", "build_engine"]
