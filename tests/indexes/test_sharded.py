"""The sharded BM25 index: the same top-k as one unsharded index, and resumable per shard."""

from __future__ import annotations

import json
import random
from pathlib import Path

import numpy as np
import pytest

from cli.main import main
from indexes import build_index
from indexes.sharded import PASS1_FILE, build_sharded, building_folder, shard_name
from tests.conftest import write_tsv
from typed_rag.config import Settings, load_settings
from typed_rag.errors import UserError
from typed_rag.retrieval import open_retriever
from typed_rag.retrieval.bm25 import BM25Index
from typed_rag.retrieval.sharded import ShardedBM25Index, is_sharded

N_PASSAGES = 1_100
SHARD = 250  # 5 shards, the last one partial
WORDS = [f"{a}{b}{c}" for a in "bcdfgklmprst" for b in "aeiou" for c in ("n", "r", "st", "l")]


def _rows(n: int, seed: int = 7) -> list[tuple[str, str, str]]:
    """Passages of Zipf-distributed made-up words (a long tail, like real text)."""
    rng = random.Random(seed)
    weights = [1 / (r + 1) for r in range(len(WORDS))]
    rows = []
    for i in range(n):
        words = rng.choices(WORDS, weights, k=rng.randint(8, 60))
        title = " ".join(rng.choices(WORDS, weights, k=2))
        rows.append((f"d{i}", title, " ".join(words)))
    return rows


def _queries(n: int = 60, seed: int = 3) -> list[str]:
    rng = random.Random(seed)
    qs = [" ".join(rng.sample(WORDS, rng.randint(1, 5))) for _ in range(n)]
    return qs + ["zzzunknown", "", WORDS[0]]


@pytest.fixture
def corpus(tmp_path: Path) -> Path:
    return write_tsv(tmp_path / "zipf.tsv", _rows(N_PASSAGES))


@pytest.fixture
def s(tmp_path: Path, corpus: Path) -> Settings:
    return load_settings(None, **{"home": str(tmp_path / "home"), "corpus.path": str(corpus)})


def _flat(index: BM25Index | ShardedBM25Index, queries: list[str], k: int) -> list[list[tuple]]:
    return [[(p.id, p.score) for p in hits] for hits in index.search(queries, k)]


def _assert_same_top_k(a: list[list[tuple]], b: list[list[tuple]]) -> None:
    """Same scores at every rank; the same ids wherever the score is not tied at the cut."""
    assert len(a) == len(b)
    for ha, hb in zip(a, b, strict=True):
        assert [s for _, s in ha] == [s for _, s in hb]  # float32 sums, bit for bit
        if not ha:
            continue
        cut = ha[-1][1]
        assert {i for i, s in ha if s > cut} == {i for i, s in hb if s > cut}
        assert [i for i, s in ha if s > cut] == [i for i, s in hb if s > cut] or len(
            {s for _, s in ha}
        ) < len(ha)


@pytest.mark.parametrize("method", ["lucene", "bm25+"])
def test_sharded_top_k_equals_unsharded(s: Settings, tmp_path: Path, method: str) -> None:
    build_index(s, out=tmp_path / "one", method=method, show_progress=False, workers=0)
    report = build_sharded(
        s, out=tmp_path / "sh", shard_size=SHARD, method=method, show_progress=False, workers=0
    )
    assert report.shards == 5 and report.passages == N_PASSAGES and report.resumed_shards == 0
    one = BM25Index(tmp_path / "one", backend="numba")
    sharded = ShardedBM25Index(tmp_path / "sh", backend="numba")
    assert sharded.num_docs == one.num_docs == N_PASSAGES
    queries = _queries()
    for k in (1, 5, 10, 100):
        _assert_same_top_k(_flat(one, queries, k), _flat(sharded, queries, k))
    # document numbers are the unsharded index's too, and scores agree with them
    d1, s1 = one.search_docs(queries, 10)
    d2, s2 = sharded.search_docs(queries, 10)
    np.testing.assert_array_equal(s1, s2)
    for q in range(len(queries)):
        for doc in d2[q][s2[q] > 0]:
            assert sharded.get(int(doc)) == one.store.get(int(doc))
    sharded.n_threads = 3  # shards searched in threads: the same answer
    assert _flat(sharded, queries, 10) == _flat(ShardedBM25Index(tmp_path / "sh"), queries, 10)
    assert sharded.unknown_words(f"{WORDS[1]} zzzunknown") == one.unknown_words(
        f"{WORDS[1]} zzzunknown"
    )


def test_shards_score_with_the_collections_statistics(s: Settings, tmp_path: Path) -> None:
    """A shard alone would score with its own IDF; the merged result would then differ."""
    build_index(s, out=tmp_path / "one", show_progress=False, workers=0)
    build_sharded(s, out=tmp_path / "sh", shard_size=SHARD, show_progress=False, workers=0)
    manifest = json.loads((tmp_path / "sh" / "manifest.json").read_text())
    assert manifest["kind"] == "sharded" and [e["offset"] for e in manifest["shards"]] == [
        0,
        250,
        500,
        750,
        1000,
    ]
    first = BM25Index(tmp_path / "sh" / shard_name(0))
    alone = tmp_path / "alone.tsv"
    write_tsv(alone, _rows(N_PASSAGES)[:SHARD])
    build_index(s, corpus=alone, out=tmp_path / "alone", show_progress=False, workers=0)
    own = BM25Index(tmp_path / "alone")
    q = [WORDS[5]]
    assert first.search(q, 3)[0][0].score != own.search(q, 3)[0][0].score


def test_interrupted_build_resumes_per_shard(s: Settings, tmp_path: Path) -> None:
    class Stop(Exception):
        pass

    def stop_at(phase: str, index: int) -> object:
        def hook(p: str, i: int) -> None:
            if (p, i) == (phase, index):
                raise Stop

        return hook

    out = tmp_path / "sh"
    with pytest.raises(Stop):
        build_sharded(
            s,
            out=out,
            shard_size=SHARD,
            show_progress=False,
            workers=0,
            on_shard=stop_at("pass1", 1),
        )
    work = building_folder(out)
    assert not out.exists() and (work / shard_name(1) / PASS1_FILE).is_file()
    # a killed process leaves a half-written shard behind: it is started again
    (work / shard_name(2)).mkdir()
    (work / shard_name(2) / "passages.bin").write_bytes(b"half")
    seen: list[tuple[str, int]] = []
    with pytest.raises(Stop):
        build_sharded(
            s,
            out=out,
            shard_size=SHARD,
            show_progress=False,
            workers=0,
            on_shard=lambda p, i: (seen.append((p, i)), stop_at("pass2", 2)(p, i)),
        )
    assert seen[:3] == [("pass1", 2), ("pass1", 3), ("pass1", 4)]  # 0 and 1 not redone
    assert seen[3:] == [("pass2", 0), ("pass2", 1), ("pass2", 2)]
    seen.clear()
    report = build_sharded(
        s,
        out=out,
        shard_size=SHARD,
        show_progress=False,
        workers=0,
        on_shard=lambda p, i: seen.append((p, i)),
    )
    assert seen == [("pass2", 3), ("pass2", 4)] and report.resumed_shards == 5
    assert not work.exists() and is_sharded(out)

    build_sharded(s, out=tmp_path / "straight", shard_size=SHARD, show_progress=False, workers=0)
    for i in range(5):
        for name in ("data.csc.index.npy", "indices.csc.index.npy", "indptr.csc.index.npy"):
            np.testing.assert_array_equal(
                np.load(out / shard_name(i) / name),
                np.load(tmp_path / "straight" / shard_name(i) / name),
            )
    queries = _queries()
    assert _flat(ShardedBM25Index(out), queries, 10) == _flat(
        ShardedBM25Index(tmp_path / "straight"), queries, 10
    )


def test_other_inputs_start_over_and_if_missing_keeps(s: Settings, tmp_path: Path) -> None:
    out = tmp_path / "sh"

    def stop(p: str, i: int) -> None:
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        build_sharded(s, out=out, shard_size=SHARD, show_progress=False, workers=0, on_shard=stop)
    report = build_sharded(s, out=out, shard_size=400, show_progress=False, workers=0)
    assert report.resumed_shards == 0 and report.shards == 3
    again = build_sharded(
        s, out=out, shard_size=400, show_progress=False, workers=0, if_missing=True
    )
    assert again.skipped
    with pytest.raises(UserError, match="shard-size"):
        build_sharded(s, out=out, shard_size=0, show_progress=False)


def test_parallel_stemming_gives_the_same_shards(s: Settings, tmp_path: Path) -> None:
    build_sharded(s, out=tmp_path / "a", shard_size=SHARD, show_progress=False, workers=0)
    build_sharded(s, out=tmp_path / "b", shard_size=SHARD, show_progress=False, workers=2)
    for i in range(5):
        name = "data.csc.index.npy"
        np.testing.assert_array_equal(
            np.load(tmp_path / "a" / shard_name(i) / name),
            np.load(tmp_path / "b" / shard_name(i) / name),
        )


def test_cli_builds_and_retrieves_a_sharded_index(
    s: Settings, tmp_path: Path, corpus: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "cli-sh"
    home = ["--set", f"home={tmp_path / 'home'}"]
    assert (
        main(
            [
                *home,
                "index",
                "build",
                "--corpus",
                str(corpus),
                "--out",
                str(out),
                "--shard-size",
                "300",
                "--quiet",
            ]
        )
        == 0
    )
    assert "4 shards" in capsys.readouterr().out
    assert main([*home, "retrieve", "--index", str(out), "--json", "-k", "3", WORDS[2]]) == 0
    hits = json.loads(capsys.readouterr().out)["passages"]
    one = tmp_path / "one"
    build_index(s, out=one, show_progress=False, workers=0)
    expected = BM25Index(one).search([WORDS[2]], 3)[0]
    assert [round(p.score, 4) for p in expected] == [h["score"] for h in hits]
    retriever = open_retriever(s.with_section("retrieval", index_dir=out))
    assert isinstance(retriever, ShardedBM25Index)
