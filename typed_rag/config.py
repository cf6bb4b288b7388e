"""The one configuration object, passed down from the CLI or server to every stage.

Values come, lowest priority first, from the defaults here, a TOML file
(``--config FILE`` or ``TYPED_RAG_CONFIG``), environment variables
(``TYPED_RAG_<SECTION>__<FIELD>``, e.g. ``TYPED_RAG_ENGINE__BACKEND=vllm``) and
explicit overrides (CLI flags). No other module reads the environment.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Literal, Self, TypeVar, cast

from pydantic import Field, PrivateAttr
from pydantic_settings import (
    BaseSettings,
    PydanticBaseSettingsSource,
    SettingsConfigDict,
    TomlConfigSettingsSource,
)

from typed_rag.config_sections import (
    DATA_ROOT as DATA_ROOT,
)
from typed_rag.config_sections import (
    DEFAULT_CORPUS as DEFAULT_CORPUS,
)
from typed_rag.config_sections import (
    DEFAULT_HOME as DEFAULT_HOME,
)
from typed_rag.config_sections import (
    MINILM_FLOOR as MINILM_FLOOR,
)
from typed_rag.config_sections import (
    REPO_ROOT as REPO_ROOT,
)
from typed_rag.config_sections import (
    ClassifierSettings as ClassifierSettings,
)
from typed_rag.config_sections import (
    ConstraintSettings as ConstraintSettings,
)
from typed_rag.config_sections import (
    ConversationSettings as ConversationSettings,
)
from typed_rag.config_sections import (
    CorpusSettings as CorpusSettings,
)
from typed_rag.config_sections import (
    DocumentSettings as DocumentSettings,
)
from typed_rag.config_sections import (
    EngineSettings as EngineSettings,
)
from typed_rag.config_sections import (
    RerankerSettings as RerankerSettings,
)
from typed_rag.config_sections import (
    RetrievalSettings as RetrievalSettings,
)
from typed_rag.config_sections import (
    SamplingSettings as SamplingSettings,
)
from typed_rag.config_sections import (
    ServerSettings as ServerSettings,
)
from typed_rag.errors import UserError
from typed_rag.method_settings import METHOD_PROFILES as METHOD_PROFILES
from typed_rag.method_settings import MethodOptions as MethodOptions
from typed_rag.method_settings import MethodSettings


class Settings(BaseSettings):
    """Everything a run needs; build with :func:`load_settings`."""

    model_config = SettingsConfigDict(
        env_prefix="TYPED_RAG_",
        env_nested_delimiter="__",
        extra="forbid",
        use_attribute_docstrings=True,
    )

    home: Path = DEFAULT_HOME
    """Where models, indexes, the classifier and caches live (``~/.cache/typed-rag``)."""
    mode: Literal["typed-rag", "rag", "llm"] = "typed-rag"
    """How questions are answered: the typed pipelines, plain RAG, or the LLM alone."""
    corpus: CorpusSettings = Field(default_factory=CorpusSettings)
    retrieval: RetrievalSettings = Field(default_factory=RetrievalSettings)
    reranker: RerankerSettings = Field(default_factory=RerankerSettings)
    classifier: ClassifierSettings = Field(default_factory=ClassifierSettings)
    sampling: SamplingSettings = Field(default_factory=SamplingSettings)
    engine: EngineSettings = Field(default_factory=EngineSettings)
    server: ServerSettings = Field(default_factory=ServerSettings)
    documents: DocumentSettings = Field(default_factory=DocumentSettings)
    constraints: ConstraintSettings = Field(default_factory=ConstraintSettings)
    conversation: ConversationSettings = Field(default_factory=ConversationSettings)
    method: MethodSettings = Field(default_factory=MethodSettings)
    # The settings as declared, kept by :func:`typed_rag.config_resolve.resolve_settings` on
    # the copy it resolves: a collection is resolved again from them for its own folder, and
    # an evaluation's fingerprint records them, not what this machine made of them.
    _declared: Settings | None = PrivateAttr(default=None)

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        toml_file = _CONFIG_FILE.get("path")
        sources: list[PydanticBaseSettingsSource] = [init_settings, env_settings]
        if toml_file:
            sources.append(TomlConfigSettingsSource(settings_cls, toml_file=toml_file))
        return tuple(sources)

    def with_section(self, section: str, **fields: Any) -> Self:
        """A copy with some fields of one section replaced (e.g. ``("retrieval",
        dense_model=m)``): the one way stages derive a variant of the settings. The new
        values are validated and an unknown name is an error (``model_copy`` checks neither)."""
        current = getattr(self, section)
        unknown = sorted(set(fields) - set(type(current).model_fields))
        if unknown:
            raise ValueError(f"{section} has no setting {', '.join(unknown)}")
        updated = type(current).model_validate({**current.model_dump(), **fields})
        out = self.model_copy(update={section: updated})
        if self._declared is not None:  # a resolved copy's declared twin changes alike
            out._declared = self._declared.with_section(section, **fields)
        return out

    @property
    def resolved(self) -> bool:
        """Whether every ``auto`` here was turned into its value (``resolve_settings``)."""
        return self._declared is not None

    def declared(self) -> Self:
        """The settings as given, before ``auto`` was resolved (these, when never resolved)."""
        return cast(Self, self._declared) if self._declared is not None else self

    # Derived locations, so every stage agrees on where artefacts live.
    @property
    def index_dir(self) -> Path:
        return self.retrieval.index_dir or self.home / "indexes" / "wiki-bm25"

    @property
    def models_dir(self) -> Path:
        return self.home / "models"

    @property
    def classifier_dir(self) -> Path:
        return self.classifier.path or self.home / "classifier"


_CONFIG_FILE: dict[str, str | None] = {"path": None}
S = TypeVar("S", bound=Settings)


def load_settings(
    config_file: str | Path | None = None, *, cls: type[S] = Settings, **overrides: Any
) -> S:
    """Build settings from an optional TOML file, the environment and overrides.

    ``overrides`` use dotted keys for nested fields, e.g.
    ``load_settings(**{"engine.backend": "fake"})``. ``cls``: the settings class (the lab's
    adds its evaluation section, :mod:`eval.settings`).
    """
    path = config_file or os.environ.get("TYPED_RAG_CONFIG")
    if path is not None and not Path(path).is_file():
        raise FileNotFoundError(f"config file not found: {path}")
    _CONFIG_FILE["path"] = str(path) if path else None
    try:
        nested: dict[str, Any] = {}
        for key, value in overrides.items():
            if value is None:
                continue
            node = nested
            *parents, leaf = key.split(".")
            for part in parents:
                node = node.setdefault(part, {})
            node[leaf] = value
        base = cls()
        if not nested:
            return base
        merged = _deep_merge(base.model_dump(), nested)
        return cls.model_validate(merged)
    finally:
        _CONFIG_FILE["path"] = None


def parse_overrides(pairs: Sequence[str]) -> dict[str, str]:
    """``--set KEY=VALUE`` pairs as :func:`load_settings` overrides (the CLI and benchmarks)."""
    out: dict[str, str] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise UserError(f"--set expects KEY=VALUE, got {pair!r}")
        out[key.strip()] = value.strip()
    return out


def _deep_merge(base: dict[str, Any], extra: dict[str, Any]) -> dict[str, Any]:
    out = dict(base)
    for key, value in extra.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = _deep_merge(out[key], value)
        else:
            out[key] = value
    return out
