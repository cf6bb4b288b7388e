"""Is an index folder up to date with its corpus and build settings?

``index build --if-missing`` compares the manifest with the current corpus (size, mtime
and a hash of its first and last MiB), the BM25 parameters, the analyzer and the row
limit; only when all match is the existing index reused.
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

from typed_rag.retrieval.manifest import FORMAT_VERSION, INDEX_FILES, read_manifest

_SAMPLE = 1 << 20


def corpus_fingerprint(path: Path, source: str | None = None) -> dict[str, Any]:
    """Identify a corpus file cheaply: size, mtime and a hash of its first and last MiB."""
    st = path.stat()
    h = hashlib.blake2b(digest_size=16)
    with path.open("rb") as f:
        h.update(f.read(_SAMPLE))
        if st.st_size > 2 * _SAMPLE:
            f.seek(st.st_size - _SAMPLE)
            h.update(f.read(_SAMPLE))
    return {
        "source": source or str(path.resolve()),
        "path": str(path.resolve()),
        "size": st.st_size,
        "mtime_ns": st.st_mtime_ns,
        "sample_blake2b": h.hexdigest(),
    }


def stale_reason(
    folder: Path,
    *,
    corpus: dict[str, Any],
    params: dict[str, Any],
    analyzer: dict[str, Any],
    limit: int | None,
) -> str | None:
    """Why the index in ``folder`` does not match these inputs; None when it is up to date."""
    manifest = read_manifest(folder)
    if manifest is None:
        return f"no index manifest in {folder}"
    if manifest.get("format_version") != FORMAT_VERSION:
        return f"index format {manifest.get('format_version')} != {FORMAT_VERSION}"
    missing = [name for name in INDEX_FILES if not (folder / name).is_file()]
    if missing:
        return f"index files missing: {', '.join(missing)}"
    old = manifest.get("corpus", {})
    for key in ("size", "mtime_ns", "sample_blake2b"):
        if old.get(key) != corpus.get(key):
            return f"corpus changed ({key}: {old.get(key)} -> {corpus.get(key)})"
    if manifest.get("params") != params:
        return f"BM25 parameters changed ({manifest.get('params')} -> {params})"
    if manifest.get("analyzer") != analyzer:
        return "analyzer changed"
    if manifest.get("limit") != limit:
        return f"row limit changed ({manifest.get('limit')} -> {limit})"
    return None
