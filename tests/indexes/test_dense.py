"""The dense index with the real all-MiniLM-L6-v2 on the tiny corpus: build, resume, search.

One encoder load per module; every build encodes only 16 passages, so the module runs in
seconds on a CPU.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from cli.main import main
from indexes import build_index
from indexes.dense import build_dense
from tests.conftest import TINY_PASSAGES
from typed_rag.config import RetrievalSettings, Settings, load_settings
from typed_rag.encoder import encode
from typed_rag.errors import UserError
from typed_rag.retrieval import open_retriever
from typed_rag.retrieval.bm25 import BM25Index
from typed_rag.retrieval.dense import (
    EMBEDDINGS_FILE,
    FAST_QUERIES,
    DenseIndex,
    dense_folder,
    model_name,
    top_k_inner_product,
)
from typed_rag.retrieval.dense_dtype import MAX_LENGTH
from typed_rag.retrieval.fusion import HybridRetriever, reciprocal_rank_fusion
from typed_rag.retrieval.manifest import read_manifest

# No word in common with p1 ("Leaves change color in autumn because chlorophyll ...").
PARAPHRASE = "why does foliage turn orange and red when the weather cools"
AUTUMN = "p1"


@pytest.fixture(scope="module")
def minilm_path() -> Path:
    """The real all-MiniLM-L6-v2 folder from the user's model cache."""
    from typed_rag.models import ensure_model

    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("HF_HUB_OFFLINE", "1")
        return ensure_model(load_settings(), "all-MiniLM-L6-v2")


def _settings(home: Path, corpus: Path, model: Path, **extra: object) -> Settings:
    return load_settings(
        None,
        **{
            "home": str(home),
            "corpus.path": str(corpus),
            "retrieval.backend": "numpy",
            "retrieval.dense_model": str(model),
            **extra,
        },
    )


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory, minilm_path: Path) -> Settings:
    """BM25 + dense index over the tiny corpus (built once for the module)."""
    from tests.conftest import write_tsv

    root = tmp_path_factory.mktemp("dense")
    corpus = write_tsv(root / "tiny.tsv", TINY_PASSAGES)
    s = _settings(root / "home", corpus, minilm_path)
    build_index(s, show_progress=False, workers=0)
    build_dense(s, show_progress=False, chunk_size=5)
    return s


@pytest.fixture
def fresh(tmp_path: Path, tiny_corpus: Path, minilm_path: Path) -> Settings:
    """Settings with a BM25 index only (each test its own)."""
    s = _settings(tmp_path / "home", tiny_corpus, minilm_path)
    build_index(s, show_progress=False, workers=0)
    return s


def test_manifest_and_embeddings_on_disk(built: Settings) -> None:
    folder = dense_folder(built.index_dir)
    manifest = read_manifest(folder)
    assert manifest is not None
    assert manifest["complete"] is True and manifest["done"] == manifest["n"] == 16
    assert manifest["dim"] == 384 and manifest["dtype"] == "float16"
    assert manifest["max_length"] == MAX_LENGTH == 128 and manifest["text"] == "title. text"
    emb = np.load(folder / EMBEDDINGS_FILE, mmap_mode="r")
    assert isinstance(emb, np.memmap) and emb.dtype == np.float16 and emb.shape == (16, 384)
    norms = np.linalg.norm(emb.astype(np.float32), axis=1)
    np.testing.assert_allclose(norms, 1.0, atol=2e-3)


def test_dense_finds_a_paraphrase_that_bm25_misses(built: Settings) -> None:
    bm25 = open_retriever(built)
    dense = open_retriever(built.with_section("retrieval", kind="dense"))
    assert isinstance(dense, DenseIndex)
    lexical = [p.id for p in bm25.search([PARAPHRASE], 16)[0]]
    assert AUTUMN not in lexical  # no shared word: BM25 cannot score it
    hits = dense.search([PARAPHRASE], 16)[0]
    assert hits[0].id == AUTUMN
    assert len(hits) == 16  # dense ranks every passage
    scores = [p.score for p in hits]
    assert scores == sorted(scores, reverse=True)
    assert -1.0 <= scores[-1] < scores[0] <= 1.0


def test_scores_are_cosines_of_the_model_embeddings(built: Settings) -> None:
    dense = DenseIndex.from_settings(built)
    query = "how is bread made"
    hits = dense.search([query, "caffeine in drinks"], 3)
    assert [p.id for p in hits[0]][0] == "p7"
    assert {p.id for p in hits[1]} >= {"p5", "p6"}
    q = encode(dense.model, [query], 8)[0]
    p7 = encode(dense.model, ["Bread. " + TINY_PASSAGES[6][2]], 8)[0]
    assert hits[0][0].score == pytest.approx(float(q @ p7), abs=2e-3)


def test_hybrid_keeps_passages_only_one_retriever_found(built: Settings) -> None:
    hybrid = open_retriever(built.with_section("retrieval", kind="hybrid"))
    assert isinstance(hybrid, HybridRetriever)
    query = PARAPHRASE + " python"  # lexical hit: p3 (Python); semantic hit: p1
    bm25_ids = [p.id for p in hybrid.bm25.search([query], 16)[0]]
    assert bm25_ids[0] == "p3" and AUTUMN not in bm25_ids
    fused = hybrid.search([query], 5)[0]
    ids = [p.id for p in fused]
    assert "p3" in ids and AUTUMN in ids
    dense_ids = [p.id for p in hybrid.dense[0].search([query], 16)[0]]
    expected = reciprocal_rank_fusion([bm25_ids, dense_ids], 60)[:5]
    assert [(p.id, p.score) for p in fused] == expected


def test_interrupted_build_resumes_to_the_same_embeddings(
    fresh: Settings, tmp_path: Path, tiny_corpus: Path, minilm_path: Path
) -> None:
    class Stop(Exception):
        pass

    def stop_after_first(done: int) -> None:
        raise Stop(done)

    with pytest.raises(Stop):
        build_dense(fresh, show_progress=False, chunk_size=5, on_chunk=stop_after_first)
    folder = dense_folder(fresh.index_dir)
    partial = read_manifest(folder)
    assert partial is not None and partial["done"] == 5 and partial["complete"] is False
    with pytest.raises(UserError, match="unfinished .*5 of 16.*index build --dense"):
        DenseIndex.from_settings(fresh)

    seen: list[int] = []
    report = build_dense(fresh, show_progress=False, chunk_size=5, on_chunk=seen.append)
    assert report.resumed_from == 5 and report.encoded == 11 and not report.skipped
    assert seen == [10, 15, 16]  # the first chunk was not encoded again
    resumed = np.load(folder / EMBEDDINGS_FILE)

    other = _settings(tmp_path / "home2", tiny_corpus, minilm_path)
    build_index(other, show_progress=False, workers=0)
    build_dense(other, show_progress=False, chunk_size=5)
    straight = np.load(dense_folder(other.index_dir) / EMBEDDINGS_FILE)
    np.testing.assert_array_equal(resumed, straight)
    build_dense(other, show_progress=False, chunk_size=16)  # different batches: same vectors
    one_chunk = np.load(dense_folder(other.index_dir) / EMBEDDINGS_FILE)
    np.testing.assert_allclose(one_chunk.astype(np.float32), straight.astype(np.float32), atol=2e-3)


def test_if_missing_keeps_a_complete_index_and_changes_rebuild(fresh: Settings) -> None:
    first = build_dense(fresh, show_progress=False)
    assert first.encoded == 16
    again = build_dense(fresh, show_progress=False, if_missing=True)
    assert again.skipped and again.encoded == 0
    # an index encoded at another max length (an older build) is rebuilt at today's
    path = dense_folder(fresh.index_dir) / "manifest.json"
    path.write_text(json.dumps({**json.loads(path.read_text()), "max_length": 32}))
    changed = build_dense(fresh, show_progress=False, if_missing=True)
    assert not changed.skipped and changed.encoded == 16 and changed.resumed_from == 0
    assert "max_length changed" in changed.reason
    manifest = read_manifest(dense_folder(fresh.index_dir))
    assert manifest is not None and manifest["max_length"] == MAX_LENGTH


def test_missing_dense_index_is_a_user_error_naming_folder_and_command(fresh: Settings) -> None:
    for kind in ("dense", "hybrid"):
        s = fresh.with_section("retrieval", kind=kind)
        with pytest.raises(UserError) as exc:
            open_retriever(s)
        msg = str(exc.value)
        assert str(dense_folder(fresh.index_dir)) in msg
        assert "typed-rag index build --dense" in msg


def test_auto_serves_hybrid_only_over_a_finished_index_of_the_configured_model(
    fresh: Settings,
) -> None:
    from eval.retrieval.spec import settings_spec
    from typed_rag.retrieval.loader import dense_missing, served_kind

    auto = fresh.with_section("retrieval", kind="auto")
    assert isinstance(open_retriever(auto), BM25Index)
    assert str(dense_folder(fresh.index_dir)) in (dense_missing(auto) or "")
    build_dense(fresh, show_progress=False)
    hybrid = open_retriever(auto)
    assert isinstance(hybrid, HybridRetriever) and served_kind(auto) == "hybrid"
    assert settings_spec(auto).startswith("hybrid")
    path = dense_folder(fresh.index_dir) / "manifest.json"
    good = json.loads(path.read_text())
    for broken, why in (({"complete": False}, "unfinished"), ({"model": "other"}, "'other'")):
        path.write_text(json.dumps({**good, **broken}))
        assert why in (dense_missing(auto) or "")
        assert isinstance(open_retriever(auto), BM25Index) and served_kind(auto) == "bm25"
        assert settings_spec(auto).startswith("bm25")


def test_each_encoder_builds_its_own_folder_and_leaves_the_others(
    fresh: Settings, minilm_path: Path, tmp_path: Path
) -> None:
    from typed_rag.retrieval.collections import list_collections
    from typed_rag.retrieval.loader import served_kind

    other_model = tmp_path / "minilm-copy"
    other_model.symlink_to(minilm_path, target_is_directory=True)
    other = fresh.with_section("retrieval", dense_model=str(other_model), kind="auto")
    build_dense(fresh, show_progress=False)
    first = dense_folder(fresh.index_dir)
    before = (first / "manifest.json").read_bytes()
    with pytest.raises(UserError) as exc:
        DenseIndex.from_settings(other)
    assert f"--set retrieval.dense_model={other_model}" in str(exc.value)
    assert served_kind(other) == "bm25"

    class Interrupted(Exception):
        pass

    def interrupt(done: int) -> None:
        raise Interrupted

    with pytest.raises(Interrupted):  # a build stopped after its first chunk of 5
        build_dense(other, show_progress=False, chunk_size=5, on_chunk=interrupt)
    wiki = list_collections(other)[0]
    assert wiki.search == "bm25"
    assert sorted((d["model"], d["done"], d["complete"]) for d in wiki.dense) == [
        (model_name(str(minilm_path)), 16, True),
        ("minilm-copy", 5, False),
    ]
    build_dense(other, show_progress=False, chunk_size=5)
    assert list_collections(other)[0].search == "hybrid"
    assert all(d["complete"] for d in list_collections(other)[0].dense)
    second = dense_folder(fresh.index_dir, str(other_model))
    assert second.name == "dense-minilm-copy" and second != first
    assert (first / "manifest.json").read_bytes() == before
    assert read_manifest(second)["model"] == str(other_model)
    assert served_kind(other) == "hybrid"
    assert len(DenseIndex.from_settings(fresh)) == len(DenseIndex.from_settings(other)) == 16


def test_fuse_models_serve_hybrid_only_when_every_index_is_complete(
    fresh: Settings, minilm_path: Path, tmp_path: Path
) -> None:
    from eval.retrieval.spec import Spec, row_name
    from typed_rag.retrieval.fusion import HybridRetriever
    from typed_rag.retrieval.loader import dense_missing, dense_models, open_retriever, served_kind

    other_model = tmp_path / "minilm-copy"
    other_model.symlink_to(minilm_path, target_is_directory=True)
    build_dense(fresh, show_progress=False)
    fused = fresh.with_section("retrieval", fuse_models=[str(other_model)], kind="auto")
    assert served_kind(fused) == "bm25"  # the second encoder has no index yet
    assert "dense-minilm-copy" in str(dense_missing(fused))
    second = fresh.with_section("retrieval", dense_model=str(other_model))
    build_dense(second, show_progress=False)
    assert served_kind(fused) == "hybrid"
    retriever = open_retriever(fused)
    try:
        assert isinstance(retriever, HybridRetriever) and len(retriever.dense) == 2
        assert [d.manifest["model"] for d in retriever.dense] == [
            fresh.retrieval.dense_model,
            str(other_model),
        ]
        hits = retriever.search(["the first passage"], 5)[0]
        assert len(hits) == 5
    finally:
        retriever.close()
    assert row_name(Spec.parse("hybrid"), fused).endswith("+minilm-copy]")
    assert RetrievalSettings(fuse_models="a, b").fuse_models == ["a", "b"]  # --set a,b
    assert row_name(Spec.parse("dense"), fused) == row_name(Spec.parse("dense"), fresh)
    # dense search uses dense_model alone; every other kind fuses fuse_models too
    both = [fresh.retrieval.dense_model, str(other_model)]
    assert dense_models(fused.with_section("retrieval", kind="dense")) == both[:1]
    assert dense_models(fused, "dense") == both[:1] and dense_models(fused) == both


def test_a_collection_keeps_every_fused_encoders_index_current(
    fresh: Settings, minilm_path: Path, tmp_path: Path
) -> None:
    """`--dense` over own documents encodes for each encoder hybrid search fuses, and a
    later update under `auto` re-encodes each of them, so hybrid keeps answering."""
    from indexes.documents import build_collection
    from typed_rag.retrieval.collections import collection_dir, list_collections

    other_model = tmp_path / "minilm-copy"
    other_model.symlink_to(minilm_path, target_is_directory=True)
    fused = fresh.with_section("retrieval", fuse_models=[str(other_model)], kind="auto")
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "autumn.txt").write_text("Leaves change colour in autumn as chlorophyll fades.\n")
    (docs / "tides.md").write_text("# Tides\n\nThe moon's gravity pulls the oceans.\n")

    def dense_counts() -> list[tuple[str, int, bool]]:
        info = next(c for c in list_collections(fused) if c.name == "notes")
        assert info.search == "hybrid"
        return sorted((d["model"], d["done"], d["complete"]) for d in info.dense)

    build_collection(fused, "notes", [docs], dense=True, show_progress=False)
    two = dense_counts()
    assert [m for m, _, _ in two] == sorted([model_name(str(minilm_path)), "minilm-copy"])
    assert all(complete and done == two[0][1] for _, done, complete in two)

    (docs / "bread.txt").write_text("Yeast makes dough rise by releasing carbon dioxide.\n")
    report = build_collection(fused, "notes", show_progress=False)  # auto: keep both
    assert not report.up_to_date and report.dense_s > 0
    three = dense_counts()
    assert all(complete and done == two[0][1] + 1 for _, done, complete in three)
    assert build_collection(fused, "notes", show_progress=False).up_to_date
    retriever = open_retriever(
        fused.with_section("retrieval", index_dir=collection_dir(fused, "notes"))
    )
    try:
        assert isinstance(retriever, HybridRetriever) and len(retriever.dense) == 2
        top = retriever.search(["why does bread puff up in the oven"], 1)[0][0]
        assert "Yeast" in top.text
    finally:
        retriever.close()


def test_an_index_from_other_weights_or_another_store_is_refused(fresh: Settings) -> None:
    build_dense(fresh, show_progress=False)
    path = dense_folder(fresh.index_dir) / "manifest.json"
    good = json.loads(path.read_text())
    path.write_text(json.dumps({**good, "model_fingerprint": "0" * 32}))
    with pytest.raises(UserError, match="other weights than retrieval.dense_model"):
        DenseIndex.from_settings(fresh)
    path.write_text(json.dumps({**good, "store": {**good["store"], "bytes": 1}}))
    with pytest.raises(UserError, match="does not match the passage store"):
        DenseIndex.from_settings(fresh)
    path.write_text(json.dumps(good))
    assert len(DenseIndex.from_settings(fresh)) == 16


def test_cli_build_dense_and_retrieve(
    tmp_path: Path, tiny_corpus: Path, minilm_path: Path, capsys: pytest.CaptureFixture
) -> None:
    base = [
        "--set", f"home={tmp_path / 'home'}",
        "--set", f"corpus.path={tiny_corpus}",
        "--set", "retrieval.backend=numpy",
        "--set", f"retrieval.dense_model={minilm_path}",
    ]  # fmt: skip
    assert main([*base, "retrieve", "--kind", "dense", "bread"]) == 2  # no index at all
    assert "typed-rag: error:" in capsys.readouterr().err
    assert main([*base, "index", "build", "--dense", "--quiet"]) == 0
    out = capsys.readouterr().out
    assert "indexed 16 passages" in out and "encoded 16 of 16 passages (dim 384)" in out
    assert main([*base, "index", "build", "--dense", "--if-missing", "--quiet"]) == 0
    out = capsys.readouterr().out
    assert "using the BM25 index" in out and "dense index" in out and "up to date" in out
    assert main([*base, "retrieve", "--kind", "dense", "--json", PARAPHRASE, "-k", "2"]) == 0
    payload = json.loads(capsys.readouterr().out)
    assert payload["passages"][0]["id"] == AUTUMN
    assert main([*base, "retrieve", "--kind", "hybrid", PARAPHRASE, "-k", "3"]) == 0
    assert AUTUMN in capsys.readouterr().out


@pytest.mark.parametrize(
    ("n_queries", "fast"), [(4, True), (4, False), (FAST_QUERIES + 4, True)]
)  # float16 candidate pass, and block conversion (forced, and for a large batch)
def test_top_k_matches_brute_force_across_blocks(n_queries: int, fast: bool) -> None:
    rng = np.random.default_rng(0)
    unit = rng.standard_normal((1003, 8))
    matrix = (unit / np.linalg.norm(unit, axis=1, keepdims=True)).astype(np.float16)
    matrix[500] = matrix[7]  # a tie: the lower row number comes first
    queries = rng.standard_normal((n_queries, 8)).astype(np.float32)
    queries[3] = matrix[7].astype(np.float32)
    rows, scores = top_k_inner_product(matrix, queries, 10, block=64, fast=fast)
    full = matrix.astype(np.float32) @ queries.T
    for qi in range(n_queries):
        expected = sorted(range(1003), key=lambda r: (-full[r, qi], r))[:10]
        assert rows[qi].tolist() == expected
        np.testing.assert_allclose(scores[qi], full[expected, qi], rtol=1e-5)
    assert rows[3][:2].tolist() == [7, 500]
    everything = top_k_inner_product(matrix, queries, 5000, fast=fast)[0]
    assert everything.shape == (n_queries, 1003)
    assert top_k_inner_product(matrix, queries[:0], 5)[0].shape == (0, 0)


def test_dtype_check_times_both_dtypes_and_compares_their_rankings(built: Settings) -> None:
    """The benchmark's bfloat16-vs-float32 check on a built index: alternating rounds, a
    median speed per dtype, and rankings that agree (the tiny corpus has 16 passages)."""
    from eval.retrieval.dtype_agreement import dtype_check

    queries = [PARAPHRASE, "how do vaccines train the immune system", "what is the capital"]
    out = dtype_check(built, built.index_dir, queries, n=16, seed=0, rounds=2)
    assert out["passages"] == 16 and out["queries"] == 3
    for dt in ("bfloat16", "float32"):
        assert len(out[f"{dt}_rounds"]) == 2 and out[f"{dt}_passages_per_s"] > 0
    assert out["bfloat16_speedup"] == pytest.approx(
        out["bfloat16_passages_per_s"] / out["float32_passages_per_s"], abs=0.01
    )
    assert out["cosine_min"] > 0.99 and out["top1_same"] == 1.0


def test_auto_keeps_a_built_index_in_its_dtype_without_probing(
    fresh: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An index encoded in bfloat16 is neither rebuilt by `--if-missing` nor re-probed when
    `auto` would now choose float32 (a new version of the rule, or another machine)."""
    import typed_rag.retrieval.dense_dtype as dd

    pinned = fresh.with_section("retrieval", dense_dtype="bfloat16")
    build_dense(pinned, show_progress=False)

    def no_probe(settings: Settings) -> str:
        raise AssertionError("probed although the index has a dtype")

    monkeypatch.setattr(dd, "faster_cpu_dtype", no_probe)
    monkeypatch.setattr(dd, "cpu_has_bf16", lambda: True)
    assert fresh.retrieval.dense_dtype == "auto"
    assert build_dense(fresh, show_progress=False, if_missing=True).skipped
    index = DenseIndex.from_settings(fresh)
    assert index.manifest["compute_dtype"] == "bfloat16"
    assert str(next(index.model.parameters()).dtype) == "torch.bfloat16"


def test_probe_times_the_real_encoder_in_both_dtypes(fresh: Settings) -> None:
    from typed_rag.retrieval.dense_dtype import probe_speeds

    speeds = probe_speeds(fresh, passages=8)
    assert set(speeds) == {"float32", "bfloat16"} and min(speeds.values()) > 0
