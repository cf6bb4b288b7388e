"""LLM engines behind one interface (see :mod:`typed_rag.engines.base`).

``build_engine(settings)`` picks the backend; backends load their heavy
libraries only when built. ``backend_scores_choices(backend)`` says, before anything is
built, whether a backend reads token probabilities (``Engine.scores_choices``).
"""

from __future__ import annotations

from typed_rag.engines.base import ChatRequest, ChatResult, Engine, EngineError, StreamDelta
from typed_rag.engines.factory import backend_scores_choices, build_engine, scoring_backends

__all__ = [
    "ChatRequest",
    "ChatResult",
    "Engine",
    "EngineError",
    "StreamDelta",
    "backend_scores_choices",
    "build_engine",
    "scoring_backends",
]
