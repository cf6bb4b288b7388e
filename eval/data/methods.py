"""The methods an evaluation compares, and how a method name maps to an answering mode.

``typed-rag@<profile>`` is typed-rag answering with that ``method.profile`` (issue 15),
so that a method variant (``typed-rag@paper``: the paper's prompts and generated
sub-answers) is paired with the default on the same questions in one run.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from typed_rag.errors import UserError
from typed_rag.method_settings import METHOD_PROFILES, MethodSettings
from typed_rag.system import TypedRAG

# typed-rag answers with the default profile; every other profile is a variant.
DEFAULT_PROFILE: str = MethodSettings.model_fields["profile"].default
VARIANTS: tuple[str, ...] = tuple(f"typed-rag@{p}" for p in METHOD_PROFILES if p != DEFAULT_PROFILE)
METHODS: tuple[str, ...] = ("llm", "rag", "typed-rag", *VARIANTS)


def parse_choices(
    value: str | Sequence[str], allowed: Sequence[str], noun: str, hint: str = ""
) -> list[str]:
    """A comma list (or list) of names from ``allowed``, lower-cased, de-duplicated in order."""
    names = value.split(",") if isinstance(value, str) else list(value)
    names = [n.strip().lower() for n in names if n.strip()]
    unknown = [n for n in names if n not in allowed]
    if not names or unknown:
        raise UserError(
            f"unknown {noun}(s) {', '.join(unknown) or '(none given)'}; "
            f"expected some of: {', '.join(allowed)}{hint}"
        )
    return list(dict.fromkeys(names))


def parse_methods(value: str | Sequence[str]) -> list[str]:
    return parse_choices(value, METHODS, "method")


def mode_of(method: str) -> str:
    """The answering mode of an evaluated method (``typed-rag@paper`` -> ``typed-rag``)."""
    return method.split("@", 1)[0]


def with_method_profile(rag: TypedRAG, profile: str) -> TypedRAG:
    """The same components answering with another ``method.profile`` (an evaluation
    compares method variants on one engine, index and classifier)."""
    settings = rag.settings.with_section("method", profile=profile)
    return TypedRAG(settings, rag.engine, rag.retriever, rag.reranker, rag.classifier)


def answerer_for(answerer: Any, method: str) -> Any:
    """The answerer of ``method``: a variant answers with its own method profile (a TypedRAG
    through :func:`with_method_profile`; a stand-in answerer, its own ``with_method_profile``)."""
    _, _, profile = method.partition("@")
    if not profile:
        return answerer
    if isinstance(answerer, TypedRAG):
        return with_method_profile(answerer, profile)
    return answerer.with_method_profile(profile)
