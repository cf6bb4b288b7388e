"""How a passage is shown to a reranker: ``"title. text"``, as the retriever's index sees it."""

from __future__ import annotations

from typed_rag.retrieval import Passage


def passage_text(passage: Passage) -> str:
    """``"title. text"``; just the text when the passage has no title."""
    title = passage.title.strip()
    text = passage.text.strip()
    if not title:
        return text
    return f"{title}. {text}" if not title.endswith((".", "?", "!")) else f"{title} {text}"
