"""The embedding head standing in while the fine-tuned classifier trains (a fresh set-up).

The head is test_classifier's, on its stub encoder; the fine-tuned artefact is the tiny
BERT of test_classifier_finetune, untrained: what is tested is which classifier answers
and when it changes, not accuracy.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from pathlib import Path

import pytest
import torch

import typed_rag.classifier.embedding_head as embedding_head
from tests.core import test_classifier as head_tests
from tests.core import test_classifier_finetune as finetune_tests
from training.classifier.finetune import base_model
from typed_rag.classifier import build_classifier, interim
from typed_rag.classifier.embedding_head import EmbeddingHeadClassifier, HeadMeta
from typed_rag.classifier.finetune import (
    ARTEFACT_NAME,
    FineTunedClassifier,
    FineTunedMeta,
    save_artefact,
)
from typed_rag.classifier.head import MLPHead
from typed_rag.classifier.interim import InterimClassifier
from typed_rag.config import Settings, load_settings
from typed_rag.errors import UserError

tiny_bert = finetune_tests.tiny_bert  # module-scoped fixture: a tiny BERT folder
QUESTION = ["Why is the sky blue?"]


class Clock:
    """A monotonic clock the test moves by hand."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def _settings(tmp_path: Path, **more: str) -> Settings:
    return load_settings(
        None,
        **{"home": str(tmp_path / "home"), "classifier.kind": "finetuned", **more},
    )


def _save_head(settings: Settings) -> Path:
    torch.manual_seed(0)
    meta = HeadMeta(embedder="stub", dim=26, hidden=8, seed=3)
    path = embedding_head.artefact_path(settings)
    embedding_head.save_artefact(path, MLPHead(26, 8).eval(), meta)
    return path


def _save_finetuned(settings: Settings, folder: Path) -> Path:
    model, _, config = base_model(folder, dropout=0.0)
    meta = FineTunedMeta(base=str(folder), encoder_config=config, max_length=16)
    path = settings.classifier_dir / ARTEFACT_NAME
    save_artefact(path, model, meta)
    return path


def _lines(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == "typed_rag.classifier.interim"]


@pytest.fixture
def fresh(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Settings:
    """A fresh set-up's state: the embedding head trained, the fine-tuned one not yet."""
    settings = _settings(tmp_path)
    _save_head(settings)
    monkeypatch.setattr(
        embedding_head, "load_sentence_model", lambda *a, **k: head_tests.StubEncoder()
    )
    return settings


def _interim(settings: Settings, clock: Clock, load=None) -> InterimClassifier:
    head = EmbeddingHeadClassifier.load(settings)
    load = load or (lambda: FineTunedClassifier.load(settings))
    return InterimClassifier(head, interim.finetuned_artefact_path(settings), load, clock=clock)


def _wait_until(condition, timeout: float = 60.0) -> None:
    end = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < end, "timed out"
        time.sleep(0.05)


def test_the_head_stands_in_while_the_finetuned_artefact_is_missing(
    fresh: Settings, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.WARNING, logger="typed_rag.classifier.interim"):
        clf = build_classifier(fresh, interim=True)
    assert isinstance(clf, InterimClassifier) and not clf.switched
    assert isinstance(clf.current, EmbeddingHeadClassifier) and clf.name == "embedding-head"
    [line] = _lines(caplog)
    assert str(interim.finetuned_artefact_path(fresh)) in line
    assert "typed-rag classifier train --kind finetuned" in line
    [pred] = clf.predict(QUESTION)
    assert abs(sum(pred.probabilities.values()) - 1.0) < 1e-5
    # Evaluation and `classifier eval` ask for the configured classifier itself.
    with pytest.raises(UserError, match="no fine-tuned question-type classifier"):
        build_classifier(fresh)


def test_the_warning_names_the_log_while_the_setup_trains_in_the_background(
    fresh: Settings, caplog: pytest.LogCaptureFixture
) -> None:
    pid = interim.finetune_pid_path(fresh)
    pid.parent.mkdir(parents=True)
    pid.write_text(f"{os.getpid()}\n")  # a live process
    with caplog.at_level(logging.WARNING, logger="typed_rag.classifier.interim"):
        build_classifier(fresh, interim=True)
    [line] = _lines(caplog)
    assert f"training in the background (log: {interim.finetune_log_path(fresh)})" in line


def test_without_either_artefact_unforced_questions_get_plain_rag_as_before(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    from typed_rag.system import TypedRAG

    settings = _settings(
        tmp_path, **{"engine.backend": "fake", "mode": "llm", "reranker.kind": "none"}
    )
    with pytest.raises(UserError, match="typed-rag classifier train"):
        build_classifier(settings, interim=True)
    with caplog.at_level(logging.WARNING, logger="typed_rag.system"):
        assert TypedRAG.from_settings(settings).classifier is None
    assert "unforced questions get plain RAG" in caplog.text


def test_the_server_gets_the_stand_in(fresh: Settings, tmp_path: Path) -> None:
    from typed_rag.system import TypedRAG

    settings = fresh.model_copy(
        update={
            "mode": "llm",
            "engine": fresh.engine.model_copy(update={"backend": "fake"}),
            "reranker": fresh.reranker.model_copy(update={"kind": "none"}),
        }
    )
    assert isinstance(TypedRAG.from_settings(settings).classifier, InterimClassifier)


def test_it_switches_once_the_finetuned_artefact_appears(fresh: Settings, tiny_bert: Path) -> None:
    clock = Clock()
    release = threading.Event()

    def slow_load() -> FineTunedClassifier:
        release.wait(60)
        return FineTunedClassifier.load(fresh)

    clf = _interim(fresh, clock, slow_load)
    clock.now = 31
    assert clf.look() is None  # looked: nothing there yet; the next look at 61
    _save_finetuned(fresh, tiny_bert)
    clock.now = 60
    assert clf.look() is None and clf.predict_proba(QUESTION)  # no look before 61
    clock.now = 61
    # The request that finds the file starts the loading and is answered by the head
    # meanwhile; so are the requests after it until the fine-tuned classifier is loaded.
    assert len(clf.predict_proba(QUESTION)[0]) == 8
    assert not clf.switched and clf.look() is None  # one loading at a time
    release.set()
    _wait_until(lambda: clf.switched)
    assert isinstance(clf.current, FineTunedClassifier) and clf.name == "finetuned"
    assert len(clf.predict_proba(QUESTION)[0]) == 8
    clock.now = 1000
    assert clf.look() is None  # switched: no more looks
    # A server started from now on loads the fine-tuned classifier itself.
    assert isinstance(build_classifier(fresh, interim=True), FineTunedClassifier)


def test_a_corrupt_finetuned_file_keeps_the_head_until_another_replaces_it(
    fresh: Settings, tiny_bert: Path, caplog: pytest.LogCaptureFixture
) -> None:
    clock = Clock()
    clf = _interim(fresh, clock)
    head = clf.current
    path = interim.finetuned_artefact_path(fresh)
    path.write_bytes(b"not a safetensors file")
    clock.now = 31
    with caplog.at_level(logging.WARNING, logger="typed_rag.classifier.interim"):
        loader = clf.look()
        assert loader is not None
        loader.join(60)
    assert not clf.switched and clf.current is head and clf.name == "embedding-head"
    assert "did not load" in caplog.text and "not a readable classifier artefact" in caplog.text
    assert len(clf.predict_proba(QUESTION)[0]) == 8
    clock.now = 62
    assert clf.look() is None  # the same file is not loaded again
    _save_finetuned(fresh, tiny_bert)  # the training's atomic rename: another file
    clock.now = 93
    loader = clf.look()
    assert loader is not None
    loader.join(60)
    assert clf.switched and isinstance(clf.current, FineTunedClassifier)


def test_paths_for_the_setup_script(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from typed_rag.classifier import finetune

    assert interim.FINETUNED_ARTEFACT == finetune.ARTEFACT_NAME
    monkeypatch.delenv("TYPED_RAG_CONFIG", raising=False)
    monkeypatch.setenv("TYPED_RAG_HOME", str(tmp_path / "h"))
    monkeypatch.setenv("TYPED_RAG_CLASSIFIER__PATH", str(tmp_path / "c"))
    interim.main()
    lines = dict(line.split("=", 1) for line in capsys.readouterr().out.splitlines())
    assert lines == {
        "kind": "finetuned",
        "finetuned": str(tmp_path / "c" / ARTEFACT_NAME),
        "log": str(tmp_path / "h" / "logs" / "classifier-finetune.log"),
        "pid": str(tmp_path / "h" / "logs" / "classifier-finetune.pid"),
    }
