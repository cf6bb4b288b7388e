"""The ANN index beside a dense index: recall against the exact scan, resume, ``auto``, and
a clear error without faiss."""

from __future__ import annotations

import builtins
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import typed_rag.retrieval.ann as ann_mod
from indexes.ann import build_ann
from typed_rag.errors import UserError
from typed_rag.retrieval.ann import (
    ANN_FILE,
    ANN_MANIFEST,
    EXACT_BELOW,
    HNSW_UP_TO,
    AnnIndex,
    choose_kind,
    read_ann_manifest,
)
from typed_rag.retrieval.dense import top_k_inner_product

needs_faiss = pytest.mark.skipif(
    not ann_mod.faiss_available(), reason="faiss-cpu not installed (the 'ann' extra)"
)

N, DIM = 6_000, 64  # small: PQ training is the slow part on a shared 2-core machine


def _clustered(
    n: int, q: int, dim: int, seed: int, centers: int = 60
) -> tuple[np.ndarray, np.ndarray]:
    """Normalised points around random centres (float16, like a dense index's rows) and
    ``q`` float32 queries drawn around the same centres."""
    rng = np.random.default_rng(seed)
    c = rng.standard_normal((centers, dim)).astype(np.float32)

    def draw(m: int) -> np.ndarray:
        x = c[rng.integers(0, centers, m)] + 0.3 * rng.standard_normal((m, dim)).astype(np.float32)
        return x / np.linalg.norm(x, axis=1, keepdims=True)

    return draw(n).astype(np.float16), draw(q)


@pytest.fixture(scope="module")
def vectors() -> tuple[np.ndarray, np.ndarray]:
    return _clustered(N, 100, DIM, 1)


def _recall(approx: np.ndarray, exact: np.ndarray) -> float:
    return float(
        np.mean([len(set(a) & set(e)) / len(e) for a, e in zip(approx, exact, strict=True)])
    )


@needs_faiss
@pytest.mark.parametrize(
    ("kind", "params"),
    [
        ("hnsw", {"M": 16, "ef_construction": 40, "ef_search": 64, "refine": 30}),
        ("ivfpq", {"nlist": 32, "pq_m": 8, "pq_bits": 6, "nprobe": 8, "refine": 100}),
    ],
)
def test_recall_against_the_exact_scan(
    tmp_path: Path, vectors: tuple[np.ndarray, np.ndarray], kind: str, params: dict[str, int]
) -> None:
    data, queries = vectors
    report = build_ann(tmp_path, data, kind, params=params, show_progress=False)  # type: ignore[arg-type]
    assert report.kind == kind and report.rows == N
    index = AnnIndex.open(tmp_path, data)
    assert index is not None
    rows, scores = index.search(queries, 10)
    exact_rows, exact_scores = top_k_inner_product(data, queries, 10)
    recall = _recall(rows, exact_rows)
    assert recall >= 0.9, recall
    # scores are the exact float32 cosines of the returned rows, best first
    mine = np.einsum("qkd,qd->qk", data[rows].astype(np.float32), queries)
    np.testing.assert_allclose(scores, mine, rtol=1e-5, atol=1e-6)
    assert (np.diff(scores, axis=1) <= 0).all()
    # a starved search finds less: the bound above is a real one
    index.set_search(
        **({"ef_search": 10, "refine": 10} if kind == "hnsw" else {"nprobe": 1, "refine": 10})
    )
    assert _recall(index.search(queries, 10)[0], exact_rows) < recall


@needs_faiss
def test_interrupted_build_resumes_from_its_checkpoint(
    tmp_path: Path, vectors: tuple[np.ndarray, np.ndarray]
) -> None:
    data, queries = vectors
    params = {"nlist": 32, "pq_m": 8, "pq_bits": 6, "nprobe": 8, "refine": 100}

    class Stop(Exception):
        pass

    def stop(done: int) -> None:
        raise Stop(done)

    a = tmp_path / "a"
    a.mkdir()
    with pytest.raises(Stop):
        build_ann(
            a, data, "ivfpq", params=params, checkpoint=2_000, show_progress=False, on_chunk=stop
        )
    manifest = read_ann_manifest(a)
    assert manifest is not None and manifest["added"] == 2_000 and not manifest["complete"]
    with pytest.raises(UserError, match="unfinished"):
        AnnIndex.open(a, data)
    seen: list[int] = []
    report = build_ann(
        a, data, "ivfpq", params=params, checkpoint=2_000, show_progress=False, on_chunk=seen.append
    )
    assert report.resumed_from == 2_000 and report.added == N - 2_000 and seen == [4_000, N]
    b = tmp_path / "b"
    b.mkdir()
    build_ann(b, data, "ivfpq", params=params, show_progress=False)
    ia, ib = AnnIndex.open(a, data), AnnIndex.open(b, data)
    assert ia is not None and ib is not None
    for x, y in zip(ia.search(queries, 10), ib.search(queries, 10), strict=True):
        np.testing.assert_array_equal(x, y)  # seeded training, same rows: the same index
    again = build_ann(a, data, "ivfpq", params=params, show_progress=False)
    assert again.reason == "up to date"
    other = build_ann(a, data, "ivfpq", params={**params, "nlist": 16}, show_progress=False)
    assert other.resumed_from == 0 and other.added == N  # other build parameters: from scratch


@needs_faiss
def test_auto_keeps_the_exact_scan_below_the_threshold(
    tmp_path: Path, vectors: tuple[np.ndarray, np.ndarray], monkeypatch: pytest.MonkeyPatch
) -> None:
    assert choose_kind("auto", EXACT_BELOW - 1) == "none"
    assert choose_kind("auto", EXACT_BELOW) == "hnsw"
    assert choose_kind("auto", HNSW_UP_TO) == "hnsw"
    assert choose_kind("auto", HNSW_UP_TO + 1) == "ivfpq"  # HNSW fell short of 0.95 at 3.7M
    assert choose_kind("auto", 10**9) == "ivfpq"
    assert choose_kind("hnsw", 10) == "hnsw"
    data, _ = vectors
    assert N < EXACT_BELOW
    (tmp_path / ANN_FILE).write_bytes(b"old")  # an earlier build's index is removed
    (tmp_path / ANN_MANIFEST).write_text("{}")
    report = build_ann(tmp_path, data, "auto", show_progress=False)
    assert report.kind == "none" and "auto" in report.reason
    assert not (tmp_path / ANN_FILE).exists() and AnnIndex.open(tmp_path, data) is None
    monkeypatch.setattr(ann_mod, "EXACT_BELOW", 1_000)
    report = build_ann(
        tmp_path, data, "auto", params={"M": 8, "ef_construction": 16}, show_progress=False
    )
    assert report.kind == "hnsw" and (tmp_path / ANN_FILE).is_file()


@pytest.fixture
def no_faiss(monkeypatch: pytest.MonkeyPatch) -> None:
    real = builtins.__import__

    def fake(name: str, *args: Any, **kwargs: Any) -> Any:
        if name == "faiss" or name.startswith("faiss."):
            raise ImportError("No module named 'faiss'")
        return real(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", fake)


def test_a_clear_error_when_faiss_is_missing(
    tmp_path: Path,
    vectors: tuple[np.ndarray, np.ndarray],
    no_faiss: None,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    data, _ = vectors
    for kind in ("hnsw", "ivfpq"):
        with pytest.raises(UserError, match=r"needs FAISS.*pip install 'typed-rag\[ann\]'"):
            build_ann(tmp_path, data, kind, show_progress=False)  # type: ignore[arg-type]
    monkeypatch.setattr(ann_mod, "EXACT_BELOW", 1_000)
    report = build_ann(tmp_path, data, "auto", show_progress=False)  # never required
    assert report.kind == "none" and "faiss-cpu" in report.reason


@needs_faiss
def test_opening_an_index_without_faiss_names_the_package(
    tmp_path: Path, vectors: tuple[np.ndarray, np.ndarray], monkeypatch: pytest.MonkeyPatch
) -> None:
    data, _ = vectors
    build_ann(tmp_path, data, "hnsw", params={"M": 8, "ef_construction": 16}, show_progress=False)
    real = builtins.__import__

    def fake(name: str, *args: Any, **kwargs: Any) -> Any:
        if name == "faiss":
            raise ImportError("No module named 'faiss'")
        return real(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", fake)
    with pytest.raises(UserError, match="faiss-cpu"):
        AnnIndex.open(tmp_path, data)


@needs_faiss
def test_dense_index_searches_through_its_ann_index(tmp_path: Path, tiny_corpus: Path) -> None:
    """The real MiniLM over the 16-passage corpus: ``build_dense(ann=...)`` adds the index,
    ``DenseIndex`` searches it, and its hits equal the exact scan's here (all rows fit)."""
    from indexes import build_index
    from indexes.dense import build_dense
    from typed_rag.config import load_settings
    from typed_rag.models import ensure_model
    from typed_rag.retrieval.dense import DenseIndex, dense_folder

    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("HF_HUB_OFFLINE", "1")
        model = ensure_model(load_settings(), "all-MiniLM-L6-v2")
    s = load_settings(
        None,
        **{
            "home": str(tmp_path / "home"),
            "corpus.path": str(tiny_corpus),
            "retrieval.dense_model": str(model),
            "retrieval.dense_dtype": "float32",  # no dtype probe
        },
    )
    build_index(s, show_progress=False, workers=0)
    report = build_dense(s, show_progress=False, ann="hnsw")
    assert report.ann is not None and report.ann.kind == "hnsw" and report.ann.rows == 16
    dense = DenseIndex.from_settings(s)
    assert dense.ann is not None
    queries = ["why do leaves change color in autumn", "how to bake bread"]
    vectors = dense.encode_queries(queries)
    for a, b in zip(
        dense.search_vectors(vectors, 5), dense.search_vectors(vectors, 5, exact=True), strict=True
    ):
        np.testing.assert_allclose(a, b, rtol=1e-6)
    kept = build_dense(s, show_progress=False, if_missing=True, ann="hnsw")
    assert kept.skipped and kept.ann is not None and kept.ann.reason == "up to date"
    build_dense(s, show_progress=False, if_missing=True, ann="none")
    assert not (dense_folder(s.index_dir) / ANN_FILE).exists()
    assert DenseIndex.from_settings(s).ann is None
