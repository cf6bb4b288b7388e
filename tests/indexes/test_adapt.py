"""``index adapt`` on the tiny corpus with the real all-MiniLM-L6-v2: questions written once and
resumed, hard negatives from BM25, real training steps, selection on held-back questions."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from cli.main import main
from eval.data.devset import sample_sources
from indexes import build_index
from training.retriever_adapt import HELD_BACK, QUESTIONS, REPORT, adapt, hard_negative
from typed_rag.config import Settings
from typed_rag.engines.base import ChatRequest
from typed_rag.engines.fake import FakeEngine
from typed_rag.retrieval.bm25 import BM25Index


def _question(request: ChatRequest) -> str:
    """A question naming the passage's title, as the local model is asked to write."""
    title = re.search(r"titled '([^']+)'", request.messages[0]["content"])
    assert title is not None
    return f"Question: Why does {title[1]} matter?"


@pytest.fixture
def minilm(settings: Settings) -> str:
    from eval.settings import load_lab_settings
    from typed_rag.models import ensure_model

    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("HF_HUB_OFFLINE", "1")
        return str(ensure_model(load_lab_settings(), "all-MiniLM-L6-v2"))


def test_adapt_writes_questions_once_trains_and_reports(
    settings: Settings, minilm: str, tmp_path: Path
) -> None:
    build_index(settings, show_progress=False, workers=0)
    bm25 = BM25Index.from_settings(settings)
    sources = sample_sources(bm25.store, 16, 1, set(), min_words=5)
    engine = FakeEngine(_question)
    out = tmp_path / "adapt"
    report = adapt(
        settings, engine, bm25, sources, out, base_model=minilm, epochs=2, batch_size=4, lr=1e-4
    )
    assert len(engine.calls) == len(sources) == report.questions
    assert report.held_back == len(sources) // HELD_BACK
    assert 0 < report.trained_on <= len(sources) - report.held_back
    assert set(report.before) == {"recall_at_1", "recall_at_5", "mrr"}
    assert [e["epoch"] for e in report.epochs] == [1, 2]
    assert report.epochs[1]["loss"] < report.epochs[0]["loss"]  # the same triples, learnt
    assert (out / "model").is_dir() == report.improved
    saved = json.loads((out / REPORT).read_text())
    assert saved["questions"] == report.questions and saved["epochs"] == report.epochs
    rows = [json.loads(line) for line in (out / QUESTIONS).read_text().splitlines()]
    assert rows[0]["question"].startswith("Why does ")  # the "Question:" label is cleaned

    again = FakeEngine(_question)  # resumed: every question is already written
    adapt(settings, again, bm25, sources, out, base_model=minilm, epochs=1, batch_size=4)
    assert again.calls == []
    bm25.close()


def test_a_hard_negative_is_never_the_source_or_its_title(settings: Settings) -> None:
    build_index(settings, show_progress=False, workers=0)
    bm25 = BM25Index.from_settings(settings)
    for source in sample_sources(bm25.store, 16, 2, set(), min_words=5):
        negative = hard_negative(bm25, f"{source.title} {source.text}", source)
        assert negative is None or (
            negative.id != source.passage_id and negative.title != source.title
        )
    bm25.close()


def test_cli_refuses_too_few_passages_with_a_clear_error(
    settings: Settings, capsys: pytest.CaptureFixture[str]
) -> None:
    build_index(settings, show_progress=False, workers=0)
    home = ["--set", f"home={settings.home}", "--set", f"corpus.path={settings.corpus.path}"]
    assert main([*home, "index", "adapt", "--passages", "5"]) != 0
    assert "--passages must be at least 10" in capsys.readouterr().err
