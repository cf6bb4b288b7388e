"""``build_engine``: the one place that turns settings into an engine.

Backends are imported only when chosen, so a CPU install without vLLM (or a
GPU install without llama.cpp) can still import the package.
"""

from __future__ import annotations

from pathlib import Path
from typing import get_args

from typed_rag.config import EngineSettings, Settings
from typed_rag.engines.base import Engine, EngineError
from typed_rag.errors import UserError
from typed_rag.models import ensure_model, find_spec


def resolve_vllm_model(settings: Settings, model: str) -> str:
    """A local transformers folder for vLLM: registry GGUFs are converted once.

    A name that is neither a local path nor a registry entry but looks like a
    Hub id (``org/name``) is passed through for vLLM to fetch itself.
    """
    if Path(model).expanduser().exists() or find_spec(model) is not None:
        return str(ensure_model(settings, model, fmt="hf"))
    if model.count("/") == 1 and not model.startswith(("/", ".", "~")):
        return model
    return str(ensure_model(settings, model, fmt="hf"))  # raises the unknown-name error


def engine_class(backend: str) -> type[Engine]:
    """The class ``engine.backend`` names, imported without its heavy dependencies."""
    if backend == "fake":
        from typed_rag.engines.fake import FakeEngine

        return FakeEngine
    if backend == "llamacpp":
        from typed_rag.engines.llamacpp import LlamaCppEngine

        return LlamaCppEngine
    if backend == "llama-server":
        from typed_rag.engines.llama_server import LlamaServerEngine

        return LlamaServerEngine
    if backend == "vllm":
        from typed_rag.engines.vllm_engine import VllmEngine

        return VllmEngine
    if backend == "openai":
        from typed_rag.engines.openai_client import OpenAIEngine

        return OpenAIEngine
    raise UserError(f"unknown engine.backend {backend!r}")


def backend_scores_choices(backend: str) -> bool:
    """Whether the ``backend`` engine reads next-token probabilities (``score_choices``):
    asked before a model is fetched or started, so a judge that needs them fails at once."""
    return engine_class(backend).scores_choices


def scoring_backends() -> tuple[str, ...]:
    """The real backends (not ``fake``) whose engines score choices, in settings order."""
    backends = get_args(EngineSettings.model_fields["backend"].annotation)
    return tuple(b for b in backends if b != "fake" and backend_scores_choices(b))


def build_engine(settings: Settings) -> Engine:
    """Build the engine ``settings.engine.backend`` names (not started yet)."""
    cfg = settings.engine
    backend = cfg.backend
    if backend == "fake":
        from typed_rag.engines.fake import FakeEngine

        return FakeEngine()
    if backend == "llamacpp":
        from typed_rag.engines.llamacpp import LlamaCppEngine

        path = ensure_model(settings, cfg.model, fmt="gguf")
        return LlamaCppEngine(
            path,
            n_ctx=cfg.n_ctx,
            n_threads=cfg.n_threads,
            model_name=cfg.model,
        )
    if backend == "llama-server":
        from typed_rag.engines.llama_server import (
            REQUEST_TIMEOUT_S,
            LlamaServerEngine,
            find_binary,
        )

        path = ensure_model(settings, cfg.model, fmt="gguf")
        try:
            binary = find_binary(cfg.server_bin, settings.home)
        except EngineError as exc:
            raise UserError(str(exc)) from None
        return LlamaServerEngine(
            path,
            binary=binary,
            slots=cfg.server_slots,
            n_ctx=cfg.n_ctx,
            n_threads=cfg.n_threads,
            model_name=cfg.model,
            log_dir=settings.home / "logs",
            timeout_s=REQUEST_TIMEOUT_S,
            max_concurrency=max(cfg.max_concurrency, cfg.server_slots),
        )
    if backend == "vllm":
        from typed_rag.engines.vllm_engine import VllmEngine

        return VllmEngine.from_settings(settings, resolve_vllm_model(settings, cfg.model))
    if backend == "openai":
        from typed_rag.engines.openai_client import OpenAIEngine

        if not cfg.base_url:
            raise UserError(
                "engine.backend=openai needs engine.base_url "
                "(e.g. --set engine.base_url=http://127.0.0.1:8080/v1)"
            )
        return OpenAIEngine(
            base_url=cfg.base_url,
            model=cfg.model,
            api_key=cfg.api_key,
            timeout_s=cfg.timeout_s,
            max_concurrency=cfg.max_concurrency,
            json_mode=cfg.openai_json_mode,
        )
    raise UserError(f"unknown engine.backend {backend!r}")  # pragma: no cover - Literal
