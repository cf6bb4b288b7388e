"""A valid example reply per plan schema title, registered by whoever defines the schema.

A scripted engine (``engines.fake``) replays them so that tests drive each pipeline down its
planned path without the engine knowing any pipeline: the arrow points from the pipelines to
this registry, never from the engines to the pipelines.
"""

from __future__ import annotations

_EXAMPLES: dict[str, str] = {}


def register(title: str, example: str) -> None:
    """Record ``example`` as a valid reply under the schema titled ``title``."""
    _EXAMPLES[title] = example


def example_for(title: str) -> str:
    """The registered example for ``title``; ``{}`` for a schema nobody registered."""
    return _EXAMPLES.get(title, "{}")


def examples() -> dict[str, str]:
    """Every registered example, by title."""
    return dict(_EXAMPLES)
