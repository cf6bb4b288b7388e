"""Typed-RAG: type-aware decomposition of non-factoid questions for RAG."""

from __future__ import annotations

__version__ = "0.1.0"
