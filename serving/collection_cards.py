"""``GET /v1/collections``: each collection as a card, with no server path.

The built collections (``typed_rag.retrieval.collections.list_collections``) and the empty
ones made over HTTP (an upload folder without an index yet). Roots are shown by name; an
uploaded collection's one root is its own upload folder, so it shows none.
"""

from __future__ import annotations

from typing import Any

from serving import uploads
from serving.paths import display_roots
from typed_rag.config import Settings
from typed_rag.errors import UserError
from typed_rag.retrieval.collections import (
    UPLOADS_DIR,
    WIKI,
    CollectionInfo,
    check_name,
    list_collections,
    uploads_dir,
)


def collection_cards(settings: Settings) -> list[dict[str, Any]]:
    """Every collection a request may name, and the empty ones made over HTTP."""
    infos = list_collections(settings)
    cards = [_card(settings, info) for info in infos]
    known = {info.name for info in infos}
    root = settings.home / UPLOADS_DIR
    if root.is_dir():
        for folder in sorted(root.iterdir()):
            if folder.is_dir() and folder.name not in known and valid_name(folder.name):
                cards.append(_empty_card(folder.name, len(uploads.stored_files(folder))))
    return cards


def _card(settings: Settings, info: CollectionInfo) -> dict[str, Any]:
    card = info.to_dict()
    card.pop("folder", None)
    managed = info.name != WIKI and uploads_dir(settings, info.name).is_dir()
    card["roots"] = [] if managed else display_roots(info.roots)
    card["uploads"] = managed
    return {"id": info.name, "object": "collection", **card}


def _empty_card(name: str, files: int) -> dict[str, Any]:
    """A collection made over HTTP whose files no job has indexed yet."""
    return {
        "id": name,
        "object": "collection",
        "name": name,
        "kind": "documents",
        "built": False,
        "passages": 0,
        "files": files,
        "skipped": 0,
        "roots": [],
        "updated": None,
        "dense": [],
        "search": "bm25",
        "uploads": True,
    }


def valid_name(name: str) -> bool:
    """Whether ``name`` can name a collection (:func:`check_name` without the error)."""
    try:
        check_name(name)
    except UserError:
        return False
    return True
