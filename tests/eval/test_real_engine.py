"""LINKAGE scoring and coverage judging against a real engine (llama.cpp, SmolLM2-135M): slow."""

from __future__ import annotations

from pathlib import Path

import pytest
import pytest_asyncio

import eval.answer_coverage.judge as coverage_judge
import eval.judging.linkage as linkage
import eval.judging.resample as resample
from eval.answer_coverage.judge import CoverageJudge
from eval.answer_coverage.parse import KINDS
from eval.data.wikinfqa import load_wikinfqa
from eval.judging.linkage import (
    AMBIGUOUS,
    NO_MATCH,
    OUT_OF_RANGE,
    LinkageItem,
    LinkageScorer,
    Reference,
    build_references,
)
from eval.reports.report import write_report
from eval.runs.manifest import write_manifest
from eval.runs.runner import EvalRunner
from eval.settings import load_lab_settings
from tests.eval.conftest import StandInAnswerer
from typed_rag.config import Settings

pytestmark = [pytest.mark.slow, pytest.mark.asyncio(loop_scope="module")]

TINY = "smollm2-135m-instruct-q4_1"


@pytest.fixture(scope="module", autouse=True)
def short_judges():
    """A 135M judge: one resample at most, short outputs."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(resample, "MAX_RESAMPLES", 1)
        mp.setattr(coverage_judge, "COVERAGE_MAX_TOKENS", 160)
        mp.setattr(linkage, "SCORER_MAX_TOKENS", 24)
        yield


@pytest.fixture(scope="module")
def real_settings(tmp_path_factory: pytest.TempPathFactory) -> Settings:
    settings = load_lab_settings(
        None,
        **{
            "engine.backend": "llamacpp",
            "engine.model": TINY,
            "engine.n_ctx": 4096,
        },
    )
    if not settings.eval.data_dir.is_dir():
        pytest.skip("Wiki-NFQA data not present")
    return settings


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def engine(real_settings: Settings):
    from typed_rag.engines import build_engine

    eng = build_engine(real_settings)
    await eng.start()
    yield eng
    await eng.close()


async def test_real_scorer_verdicts_parse_or_are_counted(engine, real_settings: Settings) -> None:
    real = load_wikinfqa(real_settings.eval.data_dir, "nq").records[0]
    short = [Reference("Leaves turn because chlorophyll breaks down.", 3), Reference("No idea.", 0)]
    items = [
        LinkageItem(real.question_id, real.question, build_references(real, 42), real.answers[0]),
        LinkageItem("short", "why do leaves change color", short, "Because of the weather."),
    ]
    scores = await LinkageScorer.from_settings(engine, real_settings).score(items)
    for s in scores:
        assert 1 <= s.attempts <= 2 and len(s.outputs) == s.attempts
        if s.rank is not None:
            assert 1 <= s.rank <= s.n + 1
        else:
            assert s.status in {NO_MATCH, OUT_OF_RANGE, AMBIGUOUS}
        assert s.prompt_tokens > 0


async def test_real_judge_decomposes_under_a_schema(engine, real_settings: Settings) -> None:
    judge = CoverageJudge.from_settings(engine, real_settings)
    (out,) = await judge.decompose(["why do leaves change color in autumn"])
    # the grammar makes JSON of the right shape; a tiny model may still leave core empty
    assert out.attempts <= 2
    if out.ok:
        assert out.value is not None and out.value.core
        assert set(out.value.to_dict()) == set(KINDS)


@pytest.mark.timeout(1200)
async def test_real_run_end_to_end(
    engine, real_settings: Settings, nfqa_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Stand-in generator, real scorer and judge: answers, scores, coverage and the report."""
    records = load_wikinfqa(nfqa_dir, "squad").records[:1]
    # one question, one attempt per request: a handful of short generations
    monkeypatch.setattr(resample, "MAX_RESAMPLES", 0)
    run_dir = tmp_path / "run"
    write_manifest(
        run_dir,
        real_settings,
        real_settings,
        methods=["rag"],
        subsets=["squad"],
        question_ids=[r.question_id for r in records],
        options={},
    )
    runner = EvalRunner(
        real_settings, run_dir, answerer=StandInAnswerer(), scorer_engine=engine, progress=False
    )
    stats = await runner.run(records, ["rag"], coverage=True)
    assert stats.scores.computed == 1 and stats.coverage.computed == 1
    files = write_report(run_dir, real_settings)
    assert "SQuAD" in files.markdown.read_text()
    assert files.figure is not None and files.figure.stat().st_size > 0
