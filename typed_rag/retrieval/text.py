"""How a passage is shown to an encoder or reranker: ``"title. text"``.

The dense index encodes stored passages and the rerankers score retrieved ones the same
way, so both take their text from here. A model's own prompts (e5's ``"passage: "``) are
not added here but by :func:`typed_rag.encoder.encode`, the one place that knows whether a
text is a query or a passage.
"""

from __future__ import annotations

from typed_rag.retrieval.base import Passage


def passage_text(passage: Passage) -> str:
    """``"title. text"``; just the text when the passage has no title."""
    title = passage.title.strip()
    text = passage.text.strip()
    if not title:
        return text
    return f"{title}. {text}" if not title.endswith((".", "?", "!")) else f"{title} {text}"


def encoder_text(row: tuple[str, str, str]) -> str:
    """What the encoder sees of a stored ``(id, title, text)``: ``"title. text"``."""
    _, title, text = row
    return passage_text(Passage(id="", title=title, text=text))
