"""Passage vectors kept on disk by passage id, so a passage is embedded once per model.

On this CPU a retrieval-tuned embedder costs seconds per passage pool, while a
passage's vector never depends on the query: a store filled once (by an earlier
run, or built elsewhere and copied in) turns reranking into one query encode and
a few dot products. Append-only: ``keys.txt`` (one id a line) and ``vectors.f16``
(float16 rows), under a folder named for the embedder's fingerprint, so vectors of
another model, prefix or truncation are never mixed in. A row cut short by a crash
is dropped on load.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping
from pathlib import Path

import numpy as np


class VectorStore:
    """``get(key)`` / ``add({key: vector})`` over an append-only folder."""

    def __init__(self, root: Path, fingerprint: str, dim: int) -> None:
        digest = hashlib.sha256(fingerprint.encode()).hexdigest()[:12]
        self.folder = Path(root) / digest
        self.folder.mkdir(parents=True, exist_ok=True)
        self.dim = dim
        meta = self.folder / "meta.json"
        if not meta.exists():
            meta.write_text(json.dumps({"fingerprint": fingerprint, "dim": dim}) + "\n")
        self._keys = self.folder / "keys.txt"
        self._vecs = self.folder / "vectors.f16"
        self._rows: dict[str, int] = {}
        self._mat = np.zeros((0, dim), np.float16)
        self._load()

    def _load(self) -> None:
        keys = self._keys.read_text(encoding="utf-8").splitlines() if self._keys.exists() else []
        flat = np.fromfile(self._vecs, dtype=np.float16) if self._vecs.exists() else np.zeros(0)
        n = min(len(keys), flat.size // self.dim)
        self._mat = flat[: n * self.dim].reshape(n, self.dim).astype(np.float16)
        self._rows = {k: i for i, k in enumerate(keys[:n])}
        if n < len(keys):  # an interrupted append: cut both files to the whole rows
            self._keys.write_text("".join(k + "\n" for k in keys[:n]), encoding="utf-8")
        if n * self.dim < flat.size:
            with self._vecs.open("r+b") as fh:
                fh.truncate(n * self.dim * 2)

    def __len__(self) -> int:
        return len(self._rows)

    def __contains__(self, key: str) -> bool:
        return key in self._rows

    def get(self, key: str) -> np.ndarray | None:
        row = self._rows.get(key)
        return None if row is None else self._mat[row].astype(np.float32)

    def add(self, vectors: Mapping[str, np.ndarray]) -> None:
        """Append vectors of keys not stored yet (keys with a newline are not storable)."""
        fresh = [(k, v) for k, v in vectors.items() if k not in self._rows and _storable(k)]
        if not fresh:
            return
        mat = np.stack([np.asarray(v, np.float16) for _, v in fresh])
        if mat.shape[1] != self.dim:
            raise ValueError(f"vector dim {mat.shape[1]} != store dim {self.dim}")
        with self._vecs.open("ab") as fh:  # vectors first: a crash leaves extra rows, cut on load
            fh.write(mat.tobytes())
        with self._keys.open("a", encoding="utf-8") as fh:
            fh.write("".join(k + "\n" for k, _ in fresh))
        base = len(self._mat)
        self._mat = np.concatenate([self._mat, mat])
        self._rows.update({k: base + i for i, (k, _) in enumerate(fresh)})

    def keys(self) -> Iterable[str]:
        return self._rows.keys()


def _storable(key: str) -> bool:
    return bool(key) and not key.startswith("\0") and "\n" not in key and "\r" not in key
