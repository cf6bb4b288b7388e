"""A model's declared prompts reach queries and passages through ``encode`` alone.

e5 wants "query: " before a query and "passage: " before a passage; a model without
prompts (all-MiniLM-L6-v2) must encode exactly as before. The dense index is built and
searched with the tiny converted e5 (tests/models/conftest.py) to check both paths.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from tests.conftest import write_tsv
from typed_rag.config import load_settings
from typed_rag.encoder import encode, load_sentence_model, prompt_of


@pytest.fixture(scope="module")
def e5(tiny_e5_folder: Path):  # noqa: ANN201 (a SentenceTransformer)
    return load_sentence_model(load_settings(), str(tiny_e5_folder))


def test_e5_gets_its_prefix_for_each_role(e5) -> None:  # noqa: ANN001
    texts = ["hello world", "world"]
    plain = encode(e5, texts, 4)
    query = encode(e5, texts, 4, "query")
    passage = encode(e5, texts, 4, "document")
    np.testing.assert_allclose(query, encode(e5, [f"query: {t}" for t in texts], 4), atol=1e-6)
    np.testing.assert_allclose(passage, encode(e5, [f"passage: {t}" for t in texts], 4), atol=1e-6)
    assert not np.allclose(plain, query, atol=1e-3) and not np.allclose(query, passage, atol=1e-3)
    assert prompt_of(e5, "document") == "passage: " and prompt_of(e5, None) == ""


def test_a_model_without_prompts_encodes_as_before(tiny_e5_folder: Path, tmp_path: Path) -> None:
    folder = shutil.copytree(tiny_e5_folder, tmp_path / "no-prompts")
    config = folder / "config_sentence_transformers.json"
    config.write_text(json.dumps({**json.loads(config.read_text()), "prompts": {}}))
    model = load_sentence_model(load_settings(), str(folder))
    texts = ["hello world", "passage: hello"]
    for role in ("query", "document"):
        np.testing.assert_array_equal(encode(model, texts, 4, role), encode(model, texts, 4))


def test_minilm_encodes_as_before() -> None:
    from typed_rag.models import get_spec, model_path

    settings = load_settings()
    if not model_path(settings, get_spec("all-MiniLM-L6-v2")).is_dir():
        pytest.skip("all-MiniLM-L6-v2 is not in the model cache")
    model = load_sentence_model(settings, "all-MiniLM-L6-v2")
    assert prompt_of(model, "query") == "" and prompt_of(model, "document") == ""
    texts = ["why do leaves turn red", "Bread. Bread is made from flour and water."]
    plain = encode(model, texts, 8)
    np.testing.assert_array_equal(encode(model, texts, 8, "query"), plain)
    np.testing.assert_array_equal(encode(model, texts, 8, "document"), plain)


def test_the_dense_index_prefixes_passages_and_queries(
    tiny_e5_folder: Path, tmp_path: Path, e5
) -> None:  # noqa: ANN001
    from indexes import build_index
    from indexes.dense import build_dense
    from typed_rag.retrieval.dense import EMBEDDINGS_FILE, DenseIndex, dense_folder
    from typed_rag.retrieval.manifest import read_manifest
    from typed_rag.retrieval.text import encoder_text

    # short texts: the tiny vocabulary spells most words letter by letter, and the index
    # cuts passages at 128 tokens
    rows = [("p1", "Hello", "hello world"), ("p2", "World", "world hello"), ("p3", "", "hello")]
    settings = load_settings(
        None,
        **{
            "home": str(tmp_path / "home"),
            "corpus.path": str(write_tsv(tmp_path / "tiny.tsv", rows)),
            "retrieval.backend": "numpy",
            "retrieval.dense_model": str(tiny_e5_folder),
            "retrieval.dense_dtype": "float32",
        },
    )
    build_index(settings, show_progress=False, workers=0)
    build_dense(settings, show_progress=False)
    folder = dense_folder(settings.index_dir, settings.retrieval.dense_model)
    assert read_manifest(folder)["text"] == "passage: title. text"
    stored = np.load(folder / EMBEDDINGS_FILE).astype(np.float32)
    texts = ["passage: " + encoder_text(r) for r in rows]
    np.testing.assert_allclose(stored, encode(e5, texts, 8), atol=2e-3)
    dense = DenseIndex.from_settings(settings)
    try:
        got = dense.encode_queries(["hello world"])
    finally:
        dense.close()
    np.testing.assert_allclose(got, encode(e5, ["query: hello world"], 8), atol=1e-6)
