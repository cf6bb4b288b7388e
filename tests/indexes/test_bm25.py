"""Build, load and search real bm25s indexes on the tiny corpus."""

from __future__ import annotations

import json
import os
import random
from pathlib import Path

import bm25s
import numpy as np
import pytest

from indexes import build_index
from tests.conftest import TINY_PASSAGES, write_tsv
from typed_rag.config import Settings, load_settings
from typed_rag.errors import UserError
from typed_rag.retrieval import BM25Index, open_retriever
from typed_rag.retrieval.analyzer import Analyzer, bm25s_tokenizer
from typed_rag.retrieval.bm25 import numba_available
from typed_rag.retrieval.store import PassageStore

AUTUMN = "why do leaves change color in autumn"


@pytest.fixture
def index_dir(settings: Settings) -> Path:
    build_index(settings, show_progress=False)
    return settings.index_dir


def _numpy(settings: Settings) -> Settings:
    return load_settings(None, **{**_flat(settings), "retrieval.backend": "numpy"})


def _flat(settings: Settings) -> dict[str, str]:
    return {"home": str(settings.home), "corpus.path": settings.corpus.path}


def test_build_load_search_tiny(settings: Settings, index_dir: Path) -> None:
    index = open_retriever(_numpy(settings))
    (hits,) = index.search([AUTUMN], 5)
    assert hits[0].id == "p1"
    assert hits[0].title == "Autumn leaf color"
    assert hits[0].text == TINY_PASSAGES[0][2]
    assert all(a.score >= b.score > 0 for a, b in zip(hits, hits[1:], strict=False))


def test_batched_search_matches_single_queries(settings: Settings, index_dir: Path) -> None:
    index = open_retriever(_numpy(settings))
    queries = [AUTUMN, "how to bake sourdough bread", "sleep deprivation memory", "coffee vs tea"]
    batched = index.search(queries, 3)
    assert [hits[0].id for hits in batched] == ["p1", "p7", "p13", "p6"]
    assert {p.id for p in batched[1]} == {"p7", "p8"}
    for query, hits in zip(queries, batched, strict=True):
        assert [(p.id, p.score) for p in index.search([query], 3)[0]] == [
            (p.id, p.score) for p in hits
        ]


def test_unknown_or_empty_query_returns_nothing(settings: Settings, index_dir: Path) -> None:
    index = open_retriever(_numpy(settings))
    assert index.search(["qwertyuiop zxcvb", "", "the of and"], 5) == [[], [], []]
    assert index.search([], 5) == []
    with pytest.raises(TypeError):
        index.search(AUTUMN, 5)  # type: ignore[arg-type]


def test_k_larger_than_corpus_and_k_zero(settings: Settings, index_dir: Path) -> None:
    index = open_retriever(_numpy(settings))
    (hits,) = index.search(["programming language"], 100)
    assert {p.id for p in hits} == {"p3", "p4"}  # only passages that match at all
    assert index.search([AUTUMN], 0) == [[]]


def test_index_is_memory_mapped(settings: Settings, index_dir: Path) -> None:
    index = open_retriever(_numpy(settings))
    for name in ("data", "indices", "indptr"):
        assert isinstance(index.bm25.scores[name], np.memmap), name
    assert index.bm25.vocab_dict[""] == len(index.bm25.vocab_dict) - 1


def test_index_folder_loads_with_plain_bm25s(settings: Settings, index_dir: Path) -> None:
    """The folder is a regular bm25s index: bm25s.BM25.load gives the same ranking."""
    plain = bm25s.BM25.load(index_dir, mmap=True)
    ids = Analyzer(vocab=plain.vocab_dict, grow=False).ids([AUTUMN])
    docs, scores = plain.retrieve(ids, k=3, show_progress=False)
    ours_docs, ours_scores = open_retriever(_numpy(settings)).search_docs([AUTUMN], 3)
    assert docs.tolist() == ours_docs.tolist()
    np.testing.assert_allclose(scores, ours_scores)


def test_store_returns_each_passage(settings: Settings, index_dir: Path) -> None:
    store = PassageStore(index_dir)
    assert len(store) == len(TINY_PASSAGES)
    for doc, (pid, title, text) in enumerate(TINY_PASSAGES):
        assert store.get(doc) == (pid, title, text)
        assert store.get_id(doc) == pid
    with pytest.raises(IndexError):
        store.get(len(TINY_PASSAGES))


def test_store_round_trips_unicode_and_empty_title(tmp_path: Path) -> None:
    from typed_rag.retrieval.store import PassageStoreWriter

    rows = [
        ("α-1", "", "naïve café — ünïcödé"),
        ("2", 'T"q"', "x" * 100_000),
        ("3", "日本", "テキスト"),
    ]
    with PassageStoreWriter(tmp_path, flush_every=2) as w:
        for row in rows:
            w.add(*row)
    assert PassageStore(tmp_path).get_many([2, 0, 1]) == [rows[2], rows[0], rows[1]]


def test_manifest_records_build(settings: Settings, index_dir: Path, tiny_corpus: Path) -> None:
    manifest = json.loads((index_dir / "manifest.json").read_text())
    assert manifest["corpus"]["size"] == tiny_corpus.stat().st_size
    assert manifest["corpus"]["path"] == str(tiny_corpus.resolve())
    assert manifest["params"] == {"k1": 0.9, "b": 0.4, "method": "lucene", "delta": 0.5}
    assert manifest["analyzer"]["stemmer"] == "english"
    assert manifest["counts"]["passages"] == 16 and manifest["counts"]["skipped_rows"] == 0
    assert manifest["build"]["seconds"] > 0


def test_if_missing_skips_up_to_date_and_rebuilds_stale(
    settings: Settings, index_dir: Path, tiny_corpus: Path
) -> None:
    report = build_index(settings, if_missing=True, show_progress=False)
    assert report.skipped and report.reason == "index is up to date"
    # other parameters: rebuilt
    report = build_index(settings, if_missing=True, k1=1.2, show_progress=False)
    assert not report.skipped
    assert json.loads((index_dir / "manifest.json").read_text())["params"]["k1"] == 1.2
    # changed corpus: rebuilt, and the new passage is searchable
    write_tsv(
        tiny_corpus, [*TINY_PASSAGES, ("p17", "Zebra", "Zebras have black and white stripes.")]
    )
    os.utime(tiny_corpus, ns=(1, 1))
    report = build_index(settings, if_missing=True, k1=1.2, show_progress=False)
    assert not report.skipped and report.passages == 17
    assert open_retriever(_numpy(settings)).search(["zebra stripes"], 1)[0][0].id == "p17"
    # no stale temp folders left next to the index
    assert sorted(p.name for p in index_dir.parent.iterdir()) == [index_dir.name]


def test_missing_index_is_a_user_error(settings: Settings) -> None:
    with pytest.raises(UserError, match=r"no index at .*; run `typed-rag index build`"):
        open_retriever(settings)


def test_out_folder_that_is_not_an_index_is_refused(settings: Settings, tmp_path: Path) -> None:
    other = tmp_path / "precious"
    other.mkdir()
    (other / "notes.txt").write_text("keep me")
    with pytest.raises(UserError, match="holds no typed-rag index"):
        build_index(settings, out=other, show_progress=False)
    assert (other / "notes.txt").read_text() == "keep me"


def test_failed_build_keeps_old_index(settings: Settings, index_dir: Path, tmp_path: Path) -> None:
    empty = write_tsv(tmp_path / "empty.tsv", [])
    before = (index_dir / "manifest.json").read_text()
    with pytest.raises(UserError, match="no passages to index"):
        build_index(settings, corpus=empty, show_progress=False)
    assert (index_dir / "manifest.json").read_text() == before


def test_limit_and_bad_params(settings: Settings) -> None:
    report = build_index(settings, limit=5, show_progress=False)
    assert report.passages == 5
    with pytest.raises(UserError, match="b must be between 0 and 1"):
        build_index(settings, b=1.5, show_progress=False)


def test_analyzer_matches_bm25s_tokenizer() -> None:
    """Our fast analyzer gives exactly bm25s's Tokenizer ids (same splitter, stop words, stemmer)."""
    rng = random.Random(3)
    words = " ".join(t + " " + x for _, t, x in TINY_PASSAGES).split()
    texts = [" ".join(rng.choices(words, k=rng.randint(0, 40))) for _ in range(300)]
    texts += ["Ünïcode STRASSE straße ÉCOLE x1 _a __ 12 a", "The THE the", "running runs ran"]
    ref = bm25s_tokenizer()
    expected = list(ref.streaming_tokenize(texts, update_vocab=True, allow_empty=False))
    analyzer = Analyzer()
    assert analyzer.ids(texts) == expected
    assert analyzer.vocab == ref.stem_to_sid


@pytest.mark.parametrize("method", ["lucene", "robertson", "atire", "bm25l", "bm25+"])
def test_streamed_matrix_equals_bm25s_index(tmp_path: Path, method: str) -> None:
    """The chunked two-pass build writes the same CSC score matrix bm25s.BM25.index does."""
    rng = random.Random(7)
    words = " ".join(x for _, _, x in TINY_PASSAGES).split()
    rows = [
        (f"d{i}", "", " ".join(rng.choices(words, k=rng.randint(3, 60))) + " a") for i in range(500)
    ]
    rows[-1] = ("d499", "", "repeated " * 5_000)  # one long passage
    corpus = write_tsv(tmp_path / "gen.tsv", rows)
    settings = load_settings(None, home=str(tmp_path / "home"))
    build_index(settings, corpus=corpus, method=method, show_progress=False, chunk_docs=37)

    analyzer = Analyzer()
    ids = analyzer.ids([text for _, _, text in rows])
    vocab = {**analyzer.vocab, "": len(analyzer.vocab)}
    ref = bm25s.BM25(k1=0.9, b=0.4, method=method)
    ref.index((ids, vocab), show_progress=False)

    folder = settings.index_dir
    np.testing.assert_array_equal(np.load(folder / "indptr.csc.index.npy"), ref.scores["indptr"])
    np.testing.assert_array_equal(np.load(folder / "indices.csc.index.npy"), ref.scores["indices"])
    np.testing.assert_allclose(
        np.load(folder / "data.csc.index.npy"), ref.scores["data"], rtol=1e-5, atol=1e-6
    )
    assert json.loads((folder / "vocab.index.json").read_text()) == vocab


@pytest.mark.skipif(not numba_available(), reason="numba not installed")
def test_numba_backend_gives_numpy_results(settings: Settings, index_dir: Path) -> None:
    queries = [AUTUMN, "bread yeast", "roman empire fall", "qwertyuiop", "caffeine"]
    a = BM25Index(index_dir, backend="numpy")
    for threads in (1, 2):
        b = BM25Index(index_dir, backend="numba", n_threads=threads)
        b.warmup()
        for hits_a, hits_b in zip(a.search(queries, 4), b.search(queries, 4), strict=True):
            assert [p.id for p in hits_a] == [p.id for p in hits_b]
            np.testing.assert_allclose(
                [p.score for p in hits_a], [p.score for p in hits_b], rtol=1e-6
            )


def test_parallel_build_is_identical_to_in_process(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Stemming in worker processes must not change a byte: same vocabulary order, same
    matrix, same store."""
    import indexes.build as build_module

    pools = []
    start_pool = build_module.start_pool

    def spy(workers: int, config: dict) -> object:
        pool = start_pool(workers, config)
        pools.append(pool)
        return pool

    monkeypatch.setattr(build_module, "start_pool", spy)
    rng = random.Random(2)
    words = " ".join(x for _, _, x in TINY_PASSAGES).split()
    rows = [(f"d{i}", f"T{i % 7}", " ".join(rng.choices(words, k=30))) for i in range(300)]
    corpus = write_tsv(tmp_path / "gen.tsv", rows)
    settings = load_settings(None, home=str(tmp_path / "home"))
    for workers in (0, 2):
        build_index(
            settings,
            corpus=corpus,
            out=tmp_path / f"w{workers}",
            workers=workers,
            chunk_docs=16,
            show_progress=False,
        )
    assert len(pools) == 1 and pools[0] is not None  # the workers=2 build used a pool
    for name in (
        "data.csc.index.npy",
        "indices.csc.index.npy",
        "indptr.csc.index.npy",
        "vocab.index.json",
        "passages.bin",
        "passages.offsets",
    ):
        assert (tmp_path / "w0" / name).read_bytes() == (tmp_path / "w2" / name).read_bytes(), name


def test_stems_then_ids_equals_ids() -> None:
    texts = [t + " " + x for _, t, x in TINY_PASSAGES] + ["", "the and of", "Leaves LEAVES"]
    direct = Analyzer().ids(texts)
    split = Analyzer()
    assert split.ids_from_stems(Analyzer().stems(texts)) == direct
    frozen = Analyzer(vocab=dict(split.vocab), grow=False)
    assert frozen.ids_from_stems(["leav unknownterm autumn"]) == [
        [split.vocab["leav"], split.vocab["autumn"]]
    ]


def test_hashed_vocab_matches_json_vocab(settings: Settings, index_dir: Path) -> None:
    from typed_rag.retrieval.vocab import HashedVocab

    vocab = json.loads((index_dir / "vocab.index.json").read_text())
    hashed = HashedVocab(index_dir)
    assert len(hashed) == len(vocab)
    assert all(hashed[term] == tid for term, tid in vocab.items())
    assert hashed.get("notaterm") is None and "notaterm" not in hashed and "" in hashed
    index = open_retriever(_numpy(settings))
    assert isinstance(index.bm25.vocab_dict, HashedVocab)
    expected = [[(p.id, p.score) for p in hits] for hits in index.search([AUTUMN, "bread"], 3)]
    # an index without the hash files (e.g. a hash collision at build) loads the JSON
    for name in ("vocab.hashes.npy", "vocab.ids.npy"):
        (index_dir / name).unlink()
    fallback = open_retriever(_numpy(settings))
    assert isinstance(fallback.bm25.vocab_dict, dict)
    got = [[(p.id, p.score) for p in hits] for hits in fallback.search([AUTUMN, "bread"], 3)]
    assert got == expected
