"""Model provisioning: a registry of named models and ``ensure_model`` to fetch and check them.

Other stages call ``ensure_model(settings, name_or_path)`` and get a local,
sha256-checked file (GGUF) or folder (sentence-transformers, transformers).
"""

from __future__ import annotations

from typed_rag.models.integrity import ModelIntegrityError
from typed_rag.models.provision import ensure_model, list_installed, model_path, pull
from typed_rag.models.registry import MODELS, ModelSpec, find_spec, get_spec, known_names

__all__ = [
    "MODELS",
    "ModelIntegrityError",
    "ModelSpec",
    "ensure_model",
    "find_spec",
    "get_spec",
    "known_names",
    "list_installed",
    "model_path",
    "pull",
]
