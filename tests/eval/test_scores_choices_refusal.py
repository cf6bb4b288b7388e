"""Every command whose judge reads token probabilities refuses an engine that cannot give
them (``Engine.scores_choices`` False) before it builds, loads or answers anything, naming
the engine and the setting to change (issue 81: not after an hour of answers)."""

from __future__ import annotations

from pathlib import Path

import pytest

import typed_rag.engines
import typed_rag.system
from cli.main import main
from typed_rag.engines import backend_scores_choices, scoring_backends
from typed_rag.engines.fake import FakeEngine


@pytest.fixture
def unable(monkeypatch: pytest.MonkeyPatch) -> list[object]:
    """The fake engine flagged as unable to score; anything built or answered is recorded."""
    made: list[object] = []

    def build_engine(settings: object) -> FakeEngine:
        made.append(settings)
        return FakeEngine()

    class NoTypedRAG:
        @classmethod
        def from_settings(cls, settings: object) -> None:
            made.append(settings)

    monkeypatch.setattr(FakeEngine, "scores_choices", False)
    monkeypatch.setattr(typed_rag.engines, "build_engine", build_engine)
    monkeypatch.setattr(typed_rag.system, "TypedRAG", NoTypedRAG)
    return made


def commands(tmp: Path) -> dict[str, list[str]]:
    run, out, data = str(tmp / "run"), str(tmp / "out"), str(tmp / "devset.jsonl")
    return {
        "eval run": ["eval", "run", "--out", out],  # the default protocol, linkage-prob-gated
        "eval coverage": ["eval", "coverage", run, "--out", out],
        "eval context": ["eval", "context", run, "--out", out],
        "eval support": ["eval", "support", run, "--out", out],
        "eval grounding": ["eval", "grounding", run, "--data", data, "--when", "before"],
        "eval grounding-validity": [
            "eval",
            "grounding-validity",
            "--data",
            data,
            "--collection",
            "docs",
        ],
        "eval judge-validity": ["eval", "judge-validity", "--protocols", "linkage,rubric-prob"],
        "eval constraints-run --linkage": [
            *("eval", "constraints-run", "--set", str(tmp / "set.jsonl"), "--out", out),
            "--linkage",
        ],
        "eval refinish-check": ["eval", "refinish-check", run, "--copy", run, "--out", out],
        "qtree build": ["qtree", "build", "--out", out, "--first", "2"],
    }


@pytest.mark.parametrize("command", list(commands(Path("."))))
def test_a_judge_that_cannot_score_is_refused_up_front(
    command: str, tmp_path: Path, unable: list[object], capsys: pytest.CaptureFixture[str]
) -> None:
    home = ["--set", f"home={tmp_path / 'home'}", "--set", "engine.backend=fake"]
    argv = [*home, *commands(tmp_path)[command]]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "reads token probabilities" in err, err
    # the engine and the setting to change are named
    assert "the fake engine (engine.backend=fake) does not expose" in err, err
    assert "--scorer-backend llamacpp or --scorer-backend vllm" in err, err
    assert "Traceback" not in err
    assert made_nothing(unable, tmp_path)


def made_nothing(made: list[object], tmp: Path) -> bool:
    """No engine built, no answerer made, no run folder written."""
    return not made and not (tmp / "out").exists()


def test_sampled_protocol_is_not_refused(
    tmp_path: Path, unable: list[object], capsys: pytest.CaptureFixture[str]
) -> None:
    """``eval run`` with a sampled verdict needs no probabilities: the check lets it past
    (it then stops for want of questions, not of probabilities)."""
    argv = [
        *("--set", f"home={tmp_path / 'home'}", "--set", "engine.backend=fake"),
        *("--set", f"eval.data_dir={tmp_path / 'none'}", "--set", "eval.judge_protocol=linkage"),
        *("eval", "run", "--out", str(tmp_path / "out")),
    ]
    main(argv)
    assert "token probabilities" not in capsys.readouterr().err


def test_the_capability_flags() -> None:
    assert scoring_backends() == ("llamacpp", "vllm")
    assert backend_scores_choices("fake")
    assert not backend_scores_choices("openai") and not backend_scores_choices("llama-server")
