"""Every-query reranking, answer recall and the ``index eval`` command."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from cli.main import main
from eval.retrieval.answer_recall import HitFinder, ground_truth, normalize, recall_at
from eval.retrieval.spec import Spec, row_name, settings_spec
from eval.settings import load_lab_settings
from indexes import build_index
from tests.eval.conftest import make_record, write_subset
from typed_rag.config import REPO_ROOT, Settings
from typed_rag.errors import UserError
from typed_rag.rerank.biencoder import BiEncoderReranker
from typed_rag.retrieval import Passage, RerankedRetriever, Reranker, open_retriever, with_reranking
from typed_rag.retrieval.bm25 import BM25Index


def _with(settings: Settings, **extra: object) -> Settings:
    flat = {
        "home": str(settings.home),
        "corpus.path": settings.corpus.path,
        "engine.backend": "fake",
        "retrieval.backend": "numpy",
        "retrieval.rerank_depth": 0,  # plain BM25 unless a test asks for reranking
    }
    return load_lab_settings(None, **{**flat, **extra})


@pytest.fixture
def index(settings: Settings) -> BM25Index:
    build_index(settings, show_progress=False)
    bm25 = open_retriever(_with(settings))
    assert isinstance(bm25, BM25Index)
    return bm25


class OverlapReranker(Reranker):
    """Counts query words in the passage text: a real scorer, small enough to reason about."""

    name = "overlap"

    def __init__(self) -> None:
        self.calls: list[int] = []

    def score(self, query: str, passages: Sequence[Passage]) -> list[float]:
        words = set(query.lower().split())
        return [float(len(words & set(p.text.lower().split()))) for p in passages]

    def score_many(
        self, queries: Sequence[str], pools: Sequence[Sequence[Passage]]
    ) -> list[list[float]]:
        self.calls.append(len(queries))
        return super().score_many(queries, pools)


# ---------------------------------------------------------------- reranking every query


def test_reranked_retriever_orders_floors_and_batches(index: BM25Index) -> None:
    reranker = OverlapReranker()
    rr = RerankedRetriever(index, reranker, depth=10, order="rerank")
    queries = ["coffee caffeine", "bread yeast dough"]
    hits = rr.search(queries, 2)
    assert reranker.calls == [2]  # one batched call for the whole round
    assert [len(h) for h in hits] == [2, 2]
    for q, h in zip(queries, hits, strict=True):
        scores = [p.rerank_score for p in h]
        assert scores == sorted(scores, reverse=True)
        assert scores[0] == reranker.score(q, h[:1])[0]
    floored = RerankedRetriever(index, reranker, depth=10, order="rerank", floor=2.0)
    (only,) = floored.search(["bread yeast dough"], 5)
    assert only and all((p.rerank_score or 0) >= 2.0 for p in only)
    assert floored.search(["coffee zzz"], 5) == [[]]  # nothing reaches the floor


def test_rrf_order_keeps_first_stage_evidence(index: BM25Index) -> None:
    class Reverse(Reranker):
        def score(self, query: str, passages: Sequence[Passage]) -> list[float]:
            return [float(i) for i in range(len(passages))]  # prefers BM25's last

    first = [p.id for p in index.search(["nuclear power waste"], 4)[0]]
    rrf = RerankedRetriever(index, Reverse(), depth=4, order="rrf", rrf_k=60)
    got = [p.id for p in rrf.search(["nuclear power waste"], 4)[0]]
    assert sorted(got) == sorted(first)  # same candidates; ties go to BM25's order
    assert got[0] == first[0]
    plain = RerankedRetriever(index, Reverse(), depth=4, order="rerank")
    assert [p.id for p in plain.search(["nuclear power waste"], 4)[0]] == first[::-1]


def test_with_reranking_follows_settings(settings: Settings, index: BM25Index) -> None:
    assert with_reranking(_with(settings), index, OverlapReranker()) is index
    s = _with(settings, **{"retrieval.rerank_depth": 20, "retrieval.rerank_floor": 0.3})
    wrapped = with_reranking(s, index, OverlapReranker())
    assert isinstance(wrapped, RerankedRetriever)
    assert (wrapped.depth, wrapped.floor, wrapped.order) == (20, 0.3, "rrf")
    assert with_reranking(s, index, None) is index
    # "auto" (the default): 20 deep over BM25, none over a hybrid or dense first stage
    auto = {"retrieval.rerank_depth": "auto"}
    assert with_reranking(_with(settings, **auto), index, OverlapReranker()).depth == 20
    for kind in ("hybrid", "dense"):
        first = _with(settings, **auto, **{"retrieval.kind": kind})
        assert with_reranking(first, index, OverlapReranker()) is index
        assert settings_spec(first) == kind
    forced = _with(settings, **{"retrieval.kind": "hybrid", "retrieval.rerank_depth": 20})
    assert with_reranking(forced, index, OverlapReranker()).depth == 20


class CountingModel:
    """A sentence model stand-in: bag-of-letters vectors, counting what it encodes."""

    def __init__(self) -> None:
        self.encoded: list[str] = []

    prompts = {"query": "q ", "document": "d "}  # prompts by role, as e5 declares them

    def get_sentence_embedding_dimension(self) -> int:
        return 26

    def encode(self, texts: list[str], prompt_name: str | None = None, **_: object) -> Any:
        import torch

        texts = [self.prompts[prompt_name] + t if prompt_name else t for t in texts]
        self.encoded.extend(texts)
        out = np.zeros((len(texts), 26), np.float32)
        for i, t in enumerate(texts):
            for ch in t.lower():
                if "a" <= ch <= "z":
                    out[i, ord(ch) - 97] += 1
        return torch.from_numpy(out)


def test_biencoder_batches_a_round_and_caches_passages() -> None:
    model = CountingModel()
    reranker = BiEncoderReranker(model, cache_size=10)  # type: ignore[arg-type]
    a = Passage(id="a", title="A", text="apples and pears")
    b = Passage(id="b", title="B", text="zebra crossing")
    scores = reranker.score_many(["apple", "zebra", "apple"], [[a, b], [b], [a]])
    assert len(model.encoded) == 4  # two distinct queries + two distinct passages
    assert sorted(model.encoded) == [
        "d A. apples and pears",
        "d B. zebra crossing",
        "q apple",
        "q zebra",
    ]
    assert scores[0][0] > scores[0][1]
    assert scores[2] == [scores[0][0]]
    reranker.score("pear", [a, b])
    assert len(model.encoded) == 5  # passages came from the cache
    with reranker.cold():
        reranker.score("pear", [a])
        assert len(model.encoded) == 7  # nothing cached inside
    reranker.score("pear", [a])
    assert len(model.encoded) == 8  # the cache is back: only the query is new


# ---------------------------------------------------------------- answer recall, specs


def test_normalize_and_recall() -> None:
    assert normalize("The  U.S.A.'s Flag!") == "usas flag"
    finder = HitFinder()
    ps = [Passage("x", "", "nothing here"), Passage("y", "", "It was the Eiffel Tower.")]
    assert finder.first_hit_rank(ps, ["eiffel tower"]) == 2
    assert finder.first_hit_rank(ps, []) is None
    assert recall_at([1, 2, None, 7], (1, 5)) == {"1": 0.25, "5": 0.5}


def test_spec_parse_and_settings_spec(settings: Settings) -> None:
    s = Spec.parse("bm25/t0.2+mpnet-rrf@30")
    assert (s.base, s.title) == ("bm25", 0.2)
    assert (s.model, s.order, s.depth) == ("mpnet", "rrf", 30)
    assert Spec.parse("bm25").model is None and Spec.parse("bm25").floor is None
    assert Spec.parse("bm25+minilm-rrf@20>0.35").floor == 0.35
    h = Spec.parse("hybrid+minilm-rrf@20>0.3")
    assert (h.base, h.model, h.depth, h.floor) == ("hybrid", "minilm", 20, 0.3)
    assert Spec.parse("dense").base == "dense"
    # rows of another dense encoder are named for it, so they never replace MiniLM's
    e5 = settings.with_section("retrieval", dense_model="x/e5-small")
    assert row_name(h, settings) == h.name and row_name(s, e5) == s.name
    assert row_name(h, e5) == "hybrid+minilm-rrf@20>0.3[e5-small]"
    bad_specs = (
        "bm26",
        "bm25+mpnet@30",
        "bm25+mpnet-rrf@0",
        "rm3",  # RM3 expansion was measured and removed
        "bm25>0.3",
        "dense/t0.2",
    )
    for bad in bad_specs:
        with pytest.raises(UserError):
            Spec.parse(bad)
    assert settings_spec(_with(settings)) == "bm25"
    hybrid = _with(settings, **{"retrieval.kind": "hybrid", "retrieval.rerank_depth": 20})
    assert settings_spec(hybrid) == "hybrid+minilm-rrf@20>0.32"
    assert settings_spec(_with(settings, **{"retrieval.kind": "dense"})) == "dense"
    s2 = _with(
        settings,
        **{
            "retrieval.rerank_depth": 30,
            "reranker.biencoder_model": "all-mpnet-base-v2",
        },
    )
    assert settings_spec(s2) == "bm25+mpnet-rrf@30"
    floored = _with(settings, **{"retrieval.rerank_depth": 20, "retrieval.rerank_floor": 0.25})
    assert settings_spec(floored) == "bm25+minilm-rrf@20>0.25"
    assert Spec.parse(settings_spec(floored)).floor == 0.25
    # the default reranks every query with the calibrated floor; the paper's profile does not
    assert settings_spec(load_lab_settings(None)) == "bm25+minilm-rrf@20>0.32"
    assert settings_spec(load_lab_settings(REPO_ROOT / "configs" / "paper.toml")) == "bm25"
    # "auto" floors only the MiniLM cosine it was calibrated on; an explicit floor always applies
    r = load_lab_settings(None).retrieval
    bge = load_lab_settings(None, **{"reranker.bge_model": "/models/bge"}).reranker
    assert r.floor_for(load_lab_settings(None).reranker) == 0.32 and r.floor_for(bge) is None
    assert settings_spec(s2) == "bm25+mpnet-rrf@30"  # no floor for mpnet's scores
    explicit = load_lab_settings(None, **{"retrieval.rerank_floor": 0.5}).retrieval
    assert explicit.floor_for(bge) == 0.5
    off = load_lab_settings(None, **{"retrieval.rerank_floor": "none"})
    assert off.retrieval.floor_for(off.reranker) is None
    assert settings_spec(off) == "bm25+minilm-rrf@20"


def _nfqa(root: Path) -> Path:
    rows = [
        make_record("nq", 0, "why do leaves change color in autumn"),
        make_record("nq", 1, "how do you bake bread at home"),
        make_record("squad", 0, "what are the arguments against nuclear power"),
    ]
    golds = ["chlorophyll breaks down", "knead the dough", "['waste storage', 'accident risk']"]
    for row, gold in zip(rows, golds, strict=True):
        row["answer_dict"]["ground_truth"] = {"answer1": gold}
        row["answer_list"][0] = gold
    write_subset(root, "nq", rows[:2])
    write_subset(root, "squad", rows[2:])
    return root


def test_ground_truth_expands_alias_lists(tmp_path: Path) -> None:
    gt = ground_truth(_nfqa(tmp_path / "nfqa"))
    assert gt["squad_0"] == ["waste storage", "accident risk"]


def test_index_eval_command(
    settings: Settings, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    build_index(settings, show_progress=False)
    data = _nfqa(tmp_path / "nfqa")
    out = tmp_path / "out"
    base = [
        "--set", f"home={settings.home}", "--set", f"corpus.path={settings.corpus.path}",
        "--set", "retrieval.backend=numpy", "--set", f"eval.data_dir={data}",
        "--set", "retrieval.rerank_depth=0",
    ]  # fmt: skip
    assert (
        main([*base, "index", "eval", "bm25/t0.3", "--subsets", "nq,squad", "--out", str(out)]) == 0
    )
    rows = json.loads((out / "summary.json").read_text())
    assert [r["config"] for r in rows] == ["bm25", "bm25/t0.3"]
    assert [r["default"] for r in rows] == [True, False]
    bm25 = rows[0]
    assert bm25["n"] == 3
    assert set(bm25["recall"]) == {"1", "5", "10", "20", "100"}
    assert bm25["recall"]["1"] == 1.0  # each answer sits in the top passage
    assert bm25["subsets"]["nq"]["n"] == 2
    assert bm25["ms_per_query_p50"] > 0
    assert "Answer recall on Wiki-NFQA (3 questions)" in capsys.readouterr().out
    # a later run adds its configs to the table and replaces the ones it evaluated again
    again = ["index", "eval", "bm25/t0.2", "--subsets", "nq,squad", "--limit", "2"]
    assert main([*base, *again, "--out", str(out)]) == 0
    rows = json.loads((out / "summary.json").read_text())
    assert [(r["config"], r["n"]) for r in rows] == [
        ("bm25", 2),
        ("bm25/t0.3", 3),
        ("bm25/t0.2", 2),
    ]
    assert [r["default"] for r in rows] == [True, False, False]
    assert main([*base, "index", "eval", "bm25+x-sort@3", "--out", str(out)]) == 2
    assert "bad retrieval config" in capsys.readouterr().err


def test_rescore_title_and_article(index: BM25Index) -> None:
    from typed_rag.retrieval.rescore import RescoredRetriever

    query = "programming language"
    plain = [p.id for p in index.search([query], 5)[0]]
    same = RescoredRetriever(index, index, title=0.0, article=0.0)
    assert [p.id for p in same.search([query], 5)[0]] == plain
    # "Tea" has no query term in its title; a heavy title weight moves the two
    # "(programming language)" titles ahead of everything else
    titled = RescoredRetriever(index, index, title=5.0)
    top = titled.search(["caffeine programming language"], 3)[0]
    assert {p.title for p in top[:2]} == {
        "Python (programming language)",
        "Java (programming language)",
    }
    assert top[0].score >= top[1].score >= top[2].score
    with pytest.raises(ValueError):
        RescoredRetriever(index, index, title=-1.0)


# ---------------------------------------------------------------- judged relevance


def _answers(path: Path) -> Path:
    def result(question: str, queries: list[str]) -> dict[str, object]:
        passages = [{"citation": i + 1, "id": f"x{i}", "query": q} for i, q in enumerate(queries)]
        return {"question": question, "passages": passages}

    rows = [
        {"method": "typed-rag", "question_id": "q1",
         "result": result("why autumn", ["why autumn", "chlorophyll autumn", "leaf pigments"])},
        {"method": "rag", "question_id": "q1", "result": result("why autumn", ["rag only"])},
        {"method": "typed-rag", "question_id": "q2",
         "result": result("bread?", ["bake bread yeast", "chlorophyll autumn"])},
    ]  # fmt: skip
    path.write_text("\n".join(json.dumps(r) for r in rows) + "\n", encoding="utf-8")
    return path


def test_pipeline_queries_and_parse(tmp_path: Path) -> None:
    from eval.retrieval.relevance import fixed_sample, parse_relevance, pipeline_queries

    pairs = pipeline_queries(_answers(tmp_path / "answers.jsonl"))
    assert pairs == [
        ("q1", "chlorophyll autumn"),
        ("q1", "leaf pigments"),
        ("q2", "bake bread yeast"),
        ("q2", "chlorophyll autumn"),
    ]  # the question itself and other methods are left out
    assert fixed_sample(pairs, 2, 1) == fixed_sample(pairs, 2, 1)
    assert len(fixed_sample(pairs, 9, 1)) == 4
    assert parse_relevance('{"relevant": true}') is True
    assert parse_relevance("No, it is not.") is False
    assert parse_relevance("{}") is None
    with pytest.raises(UserError, match="not found"):
        pipeline_queries(tmp_path / "missing.jsonl")


def test_judged_rows_count_the_judge_verdicts(index: BM25Index) -> None:
    from eval.retrieval.relevance import judged_rows
    from typed_rag.engines.base import ChatRequest
    from typed_rag.engines.fake import FakeEngine

    def judge(req: ChatRequest) -> str:  # relevant when the passage title names a query word
        user = req.messages[-1]["content"]
        query = user.split("\n")[0].removeprefix("Query: ").lower().split()
        title = user.split("(title: ")[1].split(")")[0].lower()
        assert req.temperature == 0.0 and req.json_schema is not None
        return json.dumps({"relevant": any(w in title for w in query)})

    engine = FakeEngine(judge)
    rows = judged_rows(engine, {"bm25": index}, ["bread yeast", "coffee caffeine"], 2, 7)
    (row,) = rows
    assert row["passages"] == 4 and row["unparsed"] == 0
    assert row["relevant"] + row["irrelevant"] == 4
    assert row["relevant"] >= 2  # "Bread"/"Sourdough" ... and "Coffee" titles
    assert len(engine.calls) == 4
    # a second config showing the same passages costs no further verdicts
    engine = FakeEngine(judge)
    rows = judged_rows(engine, {"a": index, "b": index}, ["bread yeast", "coffee caffeine"], 2, 7)
    assert [r["passages"] for r in rows] == [4, 4] and len(engine.calls) == 4
    assert rows[0]["relevant"] == rows[1]["relevant"] == row["relevant"]


def test_index_judge_command(settings: Settings, tmp_path: Path) -> None:
    build_index(settings, show_progress=False)
    out = tmp_path / "out"
    (out).mkdir()
    (out / "summary.json").write_text(json.dumps([{"config": "bm25", "default": True}]))
    code = main(
        [
            "--set", f"home={settings.home}", "--set", f"corpus.path={settings.corpus.path}",
            "--set", "retrieval.backend=numpy", "--set", "engine.backend=fake",
            "index", "judge", str(_answers(tmp_path / "a.jsonl")), "bm25", "bm25/t0.3",
            "--sample", "3", "--out", str(out),
        ]
    )  # fmt: skip
    assert code == 0
    judged = json.loads((out / "judged.json").read_text())
    assert [r["config"] for r in judged] == ["bm25", "bm25/t0.3"]
    assert all(r["queries"] == 3 for r in judged)
    # the default fake engine answers "{}" to a JSON request: counted as unparsed
    assert all(r["unparsed"] == r["passages"] > 0 for r in judged)
    summary = json.loads((out / "summary.json").read_text())
    assert summary[0]["judged_relevance"]["config"] == "bm25"
    # evaluating the config again replaces its recall, not the judged relevance
    from eval.retrieval.evaluate import write_summary

    write_summary(out, [{"config": "bm25", "default": True, "recall": {"5": 0.5}}])
    again = json.loads((out / "summary.json").read_text())
    assert again[0]["recall"] == {"5": 0.5}
    assert again[0]["judged_relevance"] == summary[0]["judged_relevance"]


def test_floor_calibration_keeps_answer_passages() -> None:
    from eval.retrieval.evaluate import floor_calibration

    def p(pid: str, text: str, score: float) -> Passage:
        return Passage(id=pid, title="", text=text, rerank_score=score)

    hits = [
        [p("a", "the answer is honey", 0.8), p("b", "nothing", 0.1)],
        [p("c", "more honey here", 0.6), p("d", "unrelated", 0.7), p("e", "other", 0.05)],
    ]
    cal = floor_calibration(hits, [["honey"], ["honey"]], HitFinder(), keep=1.0)
    assert cal["floor"] == 0.6  # the lowest answer-bearing score is kept
    assert cal["answer_passages"] == 2 and cal["other_passages"] == 3
    assert cal["other_removed"] == pytest.approx(2 / 3, abs=1e-4)  # 0.1 and 0.05 go, 0.7 stays
    assert floor_calibration([[Passage("x", "", "t")]], [["honey"]], HitFinder()) == {
        "answer_passages": 0
    }


def test_index_eval_reports_types_and_the_typed_subset(settings: Settings, tmp_path: Path) -> None:
    from eval.data.labels import QuestionLabel, save_labels
    from eval.retrieval.evaluate import evaluate

    build_index(settings, show_progress=False)
    data = _nfqa(tmp_path / "nfqa")
    labels = {
        "nq_0": QuestionLabel("nq_0", "nq", "REASON", 0.9, True),
        "nq_1": QuestionLabel("nq_1", "nq", "INSTRUCTION", 0.9, True),
        "squad_0": QuestionLabel("squad_0", "squad", "EVIDENCE-BASED", 0.9, True),
    }
    path = save_labels(labels, tmp_path / "labels.json")
    s = _with(settings, **{"eval.data_dir": str(data)})
    (row,) = evaluate(s, [], subsets="nq,squad", labels_path=path, echo=lambda _: None)
    assert row["types"]["typed"]["n"] == 2  # REASON + INSTRUCTION
    assert row["types"]["EVIDENCE-BASED"]["n"] == 1
    assert row["types"]["typed"]["recall"]["5"] == 1.0


def test_index_paired_command(
    settings: Settings, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "out"
    out.mkdir()
    # a finds the answer at rank 1 on questions 0-5, b only at rank 7 on 0-2 and never after
    a = [1] * 6 + [None] * 4
    b = [7, 7, 7] + [None] * 7
    (out / "ranks.json").write_text(json.dumps({"a": a, "b": b, "short": [1, 2]}))
    home = ["--set", f"home={settings.home}"]
    assert main([*home, "index", "paired", "a", "b", "--out", str(out)]) == 0
    rows = json.loads((out / "paired.json").read_text())["rows"]
    by_k = {r["k"]: r for r in rows}
    assert sorted(by_k) == [1, 5, 10, 20, 100]
    assert (by_k[1]["diff"], by_k[1]["won"], by_k[1]["lost"]) == (0.6, 6, 0)
    assert (by_k[10]["diff"], by_k[10]["won"], by_k[10]["lost"]) == (0.3, 3, 0)
    lo, hi = by_k[10]["ci"]
    assert 0.0 <= lo < 0.3 < hi <= 0.6
    assert "R@1    +0.600" in capsys.readouterr().out
    # the reverse pair is another row set; the same pair again replaces its rows
    assert main([*home, "index", "paired", "b", "a", "--out", str(out)]) == 0
    assert main([*home, "index", "paired", "a", "b", "--out", str(out)]) == 0
    rows = json.loads((out / "paired.json").read_text())["rows"]
    assert [(r["a"], r["k"]) for r in rows][::5] == [("b", 1), ("a", 1)]
    assert len(rows) == 10
    capsys.readouterr()
    assert main([*home, "index", "paired", "a", "c", "--out", str(out)]) == 2
    assert "'c' has no ranks to compare (measured: a, b, short)" in capsys.readouterr().err
    assert main([*home, "index", "paired", "a", "short", "--out", str(out)]) == 2
    assert "measured on different questions (10 against 2)" in capsys.readouterr().err
    (out / "ranks.json").write_text('{"a": [1, 2')
    assert main([*home, "index", "paired", "a", "b", "--out", str(out)]) == 2
    assert "ranks.json is not valid JSON" in capsys.readouterr().err
