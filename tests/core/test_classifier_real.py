"""End to end with the real MiniLM: ``classifier train``, ``eval`` and ``predict`` through the CLI.

Trains on a stratified slice of NF-CATS (30 questions per type, 10 per type
for selection) so the module stays fast; the full run is the CLI command
recorded in the README.
"""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest
from safetensors.torch import load_file

from cli.main import main
from training.classifier.data import NFCATS_DIR
from typed_rag.config import load_settings
from typed_rag.types import LABELS

DATA_DIR = NFCATS_DIR
# These tests are about the embedding head; the fine-tuned kind (the default) has its own below.
HEAD = ["--set", "classifier.kind=embedding-head"]


def _slice(src: Path, dest: Path, per_type: int) -> Path:
    taken: dict[str, int] = {}
    with (
        src.open(newline="", encoding="utf-8") as f,
        dest.open("w", newline="", encoding="utf-8") as g,
    ):
        reader = csv.DictReader(f)
        writer = csv.DictWriter(g, fieldnames=reader.fieldnames or [])
        writer.writeheader()
        for row in reader:
            if taken.get(row["category"], 0) < per_type:
                taken[row["category"]] = taken.get(row["category"], 0) + 1
                writer.writerow(row)
    return dest


@pytest.fixture(scope="module")
def data(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    if not (DATA_DIR / "train.csv").is_file():
        pytest.skip(f"NF-CATS data not at {DATA_DIR}")
    d = tmp_path_factory.mktemp("nfcats")
    return _slice(DATA_DIR / "train.csv", d / "train.csv", 30), _slice(
        DATA_DIR / "valid.csv", d / "valid.csv", 10
    )


@pytest.fixture(scope="module")
def minilm() -> Path:
    from typed_rag.models import ensure_model

    return ensure_model(load_settings(), "all-MiniLM-L6-v2")


def _train(home: Path, minilm: Path, data: tuple[Path, Path], seed: int = 3) -> int:
    return main(
        [
            "--set", f"home={home}", *HEAD,
            "classifier", "train", "--embedder", str(minilm),
            "--train", str(data[0]), "--valid", str(data[1]), "--seed", str(seed),
        ]
    )  # fmt: skip


@pytest.fixture(scope="module")
def trained(
    tmp_path_factory: pytest.TempPathFactory, minilm: Path, data: tuple[Path, Path]
) -> Path:
    home = tmp_path_factory.mktemp("home")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("HF_HUB_OFFLINE", "1")
        assert _train(home, minilm, data) == 0
    return home


def test_train_writes_artefact_and_report(trained: Path, capsys: pytest.CaptureFixture) -> None:
    metrics = json.loads((trained / "classifier" / "metrics.json").read_text())
    assert (trained / "classifier" / "type_head.safetensors").is_file()
    assert metrics["valid"]["n"] == 80
    assert metrics["valid"]["accuracy"] > 0.45  # 8 types: chance is 0.125
    assert len(metrics["grid"]) == 4
    assert 0.05 < metrics["temperature"] < 20
    assert metrics["calibration"]["nll_after"] <= metrics["calibration"]["nll_before"] + 1e-9


def test_eval_agrees_with_training_report(
    trained: Path, minilm: Path, data: tuple[Path, Path], tmp_path: Path, capsys
) -> None:
    out = tmp_path / "eval.json"
    rc = main(
        [
            "--set",
            f"home={trained}",
            *HEAD,
            "classifier",
            "eval",
            "--data",
            str(data[1]),
            "--json",
            str(out),
        ]
    )
    assert rc == 0
    printed = capsys.readouterr().out
    assert "macro-F1=" in printed and "confusion" in printed and "min_confidence=0.4" in printed
    report = json.loads(out.read_text())["report"]
    metrics = json.loads((trained / "classifier" / "metrics.json").read_text())
    assert report["accuracy"] == pytest.approx(metrics["valid"]["accuracy"])
    assert report["macro_f1"] == pytest.approx(metrics["valid"]["macro_f1"])


def test_predict_prints_types(trained: Path, capsys: pytest.CaptureFixture) -> None:
    rc = main(
        ["--set", f"home={trained}", *HEAD, "classifier", "predict", "How do I bake bread?", "x"]
    )
    assert rc == 0
    lines = capsys.readouterr().out.strip().splitlines()
    assert len(lines) == 2
    assert lines[0].split()[0] in {t.value for t in LABELS}


def test_same_seed_same_weights(
    trained: Path, minilm: Path, data: tuple[Path, Path], tmp_path: Path
) -> None:
    assert _train(tmp_path / "again", minilm, data) == 0
    a = load_file(str(trained / "classifier" / "type_head.safetensors"))
    b = load_file(str(tmp_path / "again" / "classifier" / "type_head.safetensors"))
    assert a.keys() == b.keys()
    assert all((a[k] == b[k]).all() for k in a)


def test_missing_artefact_is_a_clean_cli_error(tmp_path: Path, capsys) -> None:
    rc = main(["--set", f"home={tmp_path}", "classifier", "predict", "why?"])
    assert rc == 2
    assert "run `typed-rag classifier train`" in capsys.readouterr().err


@pytest.mark.slow
def test_finetuned_kind_trains_evaluates_and_predicts_through_the_cli(
    tmp_path: Path, minilm: Path, data: tuple[Path, Path], capsys: pytest.CaptureFixture
) -> None:
    """The fine-tuned MiniLM (the default kind) end to end: train, eval agrees with the
    training report, predict prints a type."""
    home = tmp_path / "home"
    kind = ["--set", f"home={home}", "--set", "classifier.kind=finetuned"]
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("HF_HUB_OFFLINE", "1")
        rc = main(
            [
                *kind, "classifier", "train", "--embedder", str(minilm),
                "--train", str(data[0]), "--valid", str(data[1]), "--seed", "3",
            ]
        )  # fmt: skip
    assert rc == 0
    metrics = json.loads((home / "classifier" / "metrics-finetuned.json").read_text())
    assert metrics["valid"]["n"] == 80 and metrics["valid"]["accuracy"] > 0.45
    assert metrics["calibration"]["nll_after"] <= metrics["calibration"]["nll_before"] + 1e-9
    out = tmp_path / "eval.json"
    assert main([*kind, "classifier", "eval", "--data", str(data[1]), "--json", str(out)]) == 0
    report = json.loads(out.read_text())["report"]
    assert report["macro_f1"] == pytest.approx(metrics["valid"]["macro_f1"])
    capsys.readouterr()
    assert main([*kind, "classifier", "predict", "How do I bake bread?"]) == 0
    assert capsys.readouterr().out.split()[0] in {t.value for t in LABELS}
