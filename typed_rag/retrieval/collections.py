"""Named collections: the Wikipedia default and the document folders a user indexed.

A collection is an index folder. ``wiki`` is the default index (``settings.index_dir``);
every other name is ``<home>/collections/NAME``, built by ``typed-rag index build --docs
PATH... --name NAME`` (:mod:`indexes.documents`). Its ``manifest.json`` is the BM25 index
manifest with a ``collection`` section (the files, their hashes and what was skipped); its
passage store carries each passage's file, page and section
(:mod:`typed_rag.retrieval.passage_meta`).

Asking about a collection is asking with settings whose ``retrieval.index_dir`` points
at it: :func:`collection_settings`. Nothing else in the runtime changes.
"""

from __future__ import annotations

import os
import re
import threading
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Literal

from typed_rag.config import Settings
from typed_rag.errors import UserError
from typed_rag.retrieval.base import Reranker, Retriever
from typed_rag.retrieval.dense import dense_indexes
from typed_rag.retrieval.loader import open_retriever, served_kind
from typed_rag.retrieval.manifest import read_manifest
from typed_rag.retrieval.reranked import with_reranking

WIKI = "wiki"  # the default collection: the Wikipedia index at settings.index_dir
COLLECTIONS_DIR = "collections"
COLLECTION_KEY = "collection"  # the manifest section a documents build writes
UPLOADS_DIR = "uploads"  # <home>/uploads/NAME: the files uploaded over HTTP into NAME
# The file types a documents build reads (indexes.documents.parse.READERS; a test keeps
# the two equal): here so that the server can refuse other uploads without the indexer.
DOCUMENT_SUFFIXES = (
    ".pdf", ".docx", ".html", ".htm", ".xhtml", ".md", ".markdown", ".txt", ".text", ".rst",
)  # fmt: skip
Corpus = Literal["wikipedia", "documents"]
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")


@dataclass
class CollectionInfo:
    """What ``GET /v1/collections`` and ``typed-rag index list`` show of a collection."""

    name: str
    kind: str  # "wikipedia" | "documents"
    folder: str
    built: bool
    passages: int | None = None
    files: int | None = None
    skipped: int | None = None
    roots: list[str] = field(default_factory=list)
    updated: str | None = None
    dense: list[dict[str, Any]] = field(default_factory=list)  # see dense.dense_indexes
    search: str = "bm25"  # what answers with the settings in force (retrieval.kind resolved)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def check_name(name: str) -> str:
    """``name`` if it can name a collection folder (letters, digits, ``_ . -``; no paths)."""
    if not _NAME.match(name or "") or ".." in name:
        raise UserError(
            f"invalid collection name {name!r}: use 1-64 letters, digits, '_', '.' or '-', "
            "starting with a letter or digit"
        )
    return name


def collections_root(settings: Settings) -> Path:
    return settings.home / COLLECTIONS_DIR


def uploads_dir(settings: Settings, name: str) -> Path:
    """The folder of the files uploaded into collection ``name`` (the build's one root)."""
    return settings.home / UPLOADS_DIR / check_name(name)


def collection_dir(settings: Settings, name: str) -> Path:
    """The index folder of collection ``name`` (built or not)."""
    if name == WIKI:
        return settings.index_dir
    return collections_root(settings) / check_name(name)


def corpus_kind(folder: Path) -> Corpus:
    """``documents`` for an index built from a user's files (its manifest has the
    ``collection`` section), else ``wikipedia``: the one place that decides it, since
    typed-rag routes and guides the two differently (:data:`typed_rag.routing.ROUTES`)."""
    return "documents" if COLLECTION_KEY in (read_manifest(folder) or {}) else "wikipedia"


def _info(name: str, folder: Path, settings: Settings) -> CollectionInfo:
    manifest = read_manifest(folder)
    search = served_kind(settings, folder)
    if name == WIKI:
        counts = (manifest or {}).get("counts", {})
        return CollectionInfo(
            name=WIKI,
            kind=corpus_kind(folder),
            folder=str(folder),
            built=manifest is not None,
            passages=counts.get("passages"),
            dense=dense_indexes(folder),
            search=search,
        )
    section = (manifest or {}).get(COLLECTION_KEY) or {}
    return CollectionInfo(
        name=name,
        kind="documents",
        folder=str(folder),
        built=manifest is not None,
        passages=(manifest or {}).get("counts", {}).get("passages"),
        files=len(section.get("files", {})),
        skipped=len(section.get("skipped", [])),
        roots=list(section.get("roots", [])),
        updated=section.get("updated"),
        dense=dense_indexes(folder),
        search=search,
    )


def list_collections(settings: Settings) -> list[CollectionInfo]:
    """``wiki`` first, then every built document collection by name."""
    out = [_info(WIKI, settings.index_dir, settings)]
    root = collections_root(settings)
    if root.is_dir():
        for folder in sorted(root.iterdir()):
            if folder.is_dir() and _NAME.match(folder.name) and read_manifest(folder):
                out.append(_info(folder.name, folder, settings))
    return out


def collection_names(settings: Settings) -> list[str]:
    return [c.name for c in list_collections(settings)]


def require_collection(settings: Settings, name: str) -> Path:
    """The folder of a built collection; a :class:`UserError` naming the known ones if not."""
    if name != WIKI:
        check_name(name)
    folder = collection_dir(settings, name)
    if read_manifest(folder) is None:
        known = ", ".join(collection_names(settings))
        if name == WIKI:
            raise UserError(
                f"the {WIKI} collection has no index at {folder}; run `typed-rag index build`"
            )
        raise UserError(
            f"unknown collection {name!r} (known: {known}); build it with "
            f"`typed-rag index build --docs PATH --name {name}`"
        )
    return folder


def collection_settings(settings: Settings, name: str | None) -> Settings:
    """``settings`` whose retrieval reads collection ``name`` (None or ``wiki``: unchanged).

    Another collection's are the declared ones with its folder: what ``auto`` means there
    depends on that folder (its dense indexes), not on the default index's."""
    if name is None or name == WIKI:
        return settings
    folder = require_collection(settings, name)
    return settings.declared().with_section("retrieval", index_dir=folder)


def open_collection(settings: Settings, name: str | None) -> Retriever:
    """The retriever (``retrieval.kind``) over collection ``name``, without reranking."""
    return open_retriever(collection_settings(settings, name))


class CollectionRetrievers:
    """The retrievers of the collections that requests name, each opened once.

    A collection rebuilt since it was opened (its link points at a new version) is opened
    again; requests still running keep the version they started with.
    """

    def __init__(
        self,
        settings: Settings,
        reranker: Reranker | None,
        resolve: Callable[[Settings], Settings] | None = None,
    ) -> None:
        self.settings = settings
        self.reranker = reranker
        # ``resolve_settings``, given by the system builder: each collection's autos are
        # resolved once, for its folder, when it is opened
        self.resolve = resolve
        self._open: dict[str, tuple[str, Retriever]] = {}
        self._lock = threading.Lock()

    def get(self, name: str) -> Retriever:
        """The (reranked, as configured) retriever of collection ``name``; UserError if unknown."""
        folder = require_collection(self.settings, name)
        version = os.path.realpath(folder)
        with self._lock:
            cached = self._open.get(name)
            if cached is not None and cached[0] == version:
                return cached[1]
            settings = collection_settings(self.settings, name)
            if self.resolve is not None:
                settings = self.resolve(settings)
            retriever = with_reranking(settings, open_retriever(settings), self.reranker)
            self._open[name] = (version, retriever)
            return retriever
