"""The server's one TypedRAG, and whether it is loading, ready, failed or dead.

The system is built in the background after the server starts listening, so
``/health`` can answer 503 while the model loads instead of refusing
connections; every request then shares this one instance (and its engine,
which batches concurrent requests).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import Any, Literal

from serving.paths import ServerPaths, display_model
from typed_rag.config import Settings
from typed_rag.config_resolve import resolve_settings
from typed_rag.errors import UserError
from typed_rag.system import TypedRAG

log = logging.getLogger(__name__)

Status = Literal["loading", "warming", "ready", "failed", "closed"]


class ServerState:
    """Owns the TypedRAG instance for the server's lifetime."""

    def __init__(
        self,
        settings: Settings,
        rag: Any | None = None,
        on_fatal: Callable[[str], None] | None = None,
    ) -> None:
        self.settings = settings
        self.rag = rag
        self.status: Status = "loading"
        self.error: str | None = None
        self._on_fatal = on_fatal
        self.paths = ServerPaths(settings)  # what clients may see of the server's disk
        self._resolved: Settings | None = None

    async def load(self) -> None:
        """Build (unless injected) and start TypedRAG; record a failure instead of raising."""
        try:
            if self.rag is None:
                # Building reads indexes and model files: keep the event loop
                # free so /health keeps answering meanwhile.
                self.rag = await asyncio.to_thread(TypedRAG.from_settings, self.settings)
            await self.rag.start()
            if self.settings.server.warm_up:
                self.status = "warming"
                await self._warm_up()
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # noqa: BLE001 - reported via /health and the log
            self.status = "failed"
            user_fault = isinstance(exc, UserError | FileNotFoundError)
            # A setup problem (missing index, unknown model) is reported by its
            # message; anything else is a bug and gets its traceback in the log.
            self.error = str(exc) if user_fault else f"{type(exc).__name__}: {exc}"
            log.error(
                "Typed-RAG failed to start (engine.backend=%s, engine.model=%s): %s",
                self.settings.engine.backend,
                self.settings.engine.model,
                self.error,
                exc_info=None if user_fault else exc,
            )
            if self._on_fatal is not None:
                self._on_fatal(self.error)
            return
        self.status = "ready"
        log.info(
            "Typed-RAG ready (engine.backend=%s, engine.model=%s)",
            self.settings.engine.backend,
            self.settings.engine.model,
        )

    async def _warm_up(self) -> None:
        """Serve one internal request (and fill the prompt cache) before saying ready, so
        the first user's request is as fast as the tenth. A failure is logged: the
        engine's own health decides whether the server can answer."""
        warm_up = getattr(self.rag, "warm_up", None)
        if warm_up is None:
            return
        try:
            seconds = await warm_up()
            log.info("warmed up in %.1f s (classifier, retrieval, engine)", seconds)
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # noqa: BLE001 - reported; /health follows the engine
            log.warning("warm-up request failed: %s", exc, exc_info=exc)
        await self._warm()

    async def _warm(self) -> None:
        """Fill the engine's prompt cache; a failure only costs speed, so it is logged."""
        try:
            sent = await self.rag.warm_prompts()
            log.info("prompt cache warmed with %d plan prompts", sent)
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # noqa: BLE001 - the server works without it
            log.warning("could not warm the prompt cache: %s", exc)

    async def close(self) -> None:
        rag, self.rag = self.rag, None
        self.status = "closed"
        if rag is not None:
            try:
                await rag.close()
            except Exception:  # noqa: BLE001 - shutting down anyway
                log.exception("error while closing Typed-RAG")

    def engine_healthy(self) -> bool:
        """The engine's own view (False once its backend died)."""
        rag = self.rag
        if rag is None:
            return False
        check = getattr(rag, "healthy", None)
        if callable(check):
            return bool(check())
        engine = getattr(rag, "engine", None)
        return bool(engine.healthy()) if engine is not None else True

    @property
    def ready(self) -> bool:
        return self.status == "ready" and self.engine_healthy()

    def resolved_settings(self) -> Settings:
        """The settings in force: those the system was built with (every ``auto``
        resolved), or, before it is built or when it was given ready-made, these resolved."""
        built = getattr(self.rag, "settings", None)
        if isinstance(built, Settings) and built.resolved:
            return built
        if self._resolved is None:
            self._resolved = resolve_settings(self.settings)
        return self._resolved

    def model_name(self) -> str:
        """The model as clients see it (a local model file by its name, not its path)."""
        engine = getattr(self.rag, "engine", None)
        return display_model(getattr(engine, "model", "") or self.settings.engine.model)

    def describe(self) -> dict[str, Any]:
        """The body of ``/health`` (``warming``: loaded, serving its warm-up request)."""
        status: str = self.status
        if status == "ready" and not self.engine_healthy():
            status = "unhealthy"
        out: dict[str, Any] = {
            "status": "ok" if status == "ready" else status,
            "engine": self.settings.engine.backend,
            "model": self.model_name(),
        }
        if self.error:  # the log has it as it is; a client, without the server's paths
            out["error"] = self.paths.message(self.error)
        return out
