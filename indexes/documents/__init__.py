"""Collections of one's own documents: PDF, Word, HTML, Markdown and text files.

``build_collection(settings, name, paths)`` (:mod:`~indexes.documents.build`) reads the
files (:mod:`~indexes.documents.discover`, :mod:`~indexes.documents.parse` and the
``read_*`` modules), cuts passages (:mod:`~indexes.documents.chunk`) and writes the
collection's index, updating an existing one incrementally
(:mod:`~indexes.documents.manifest`, :mod:`~indexes.documents.versions`). Opening and
listing collections is runtime work: :mod:`typed_rag.retrieval.collections`.
"""

from __future__ import annotations

from indexes.documents.build import DocumentsReport, build_collection

__all__ = ["DocumentsReport", "build_collection"]
