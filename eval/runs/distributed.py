"""The Wiki-NFQA evaluation spread over Ray actors; the driver keeps the run directory.

``typed-rag eval run ... --ray ADDRESS`` runs the same phases as
:class:`eval.runs.runner.EvalRunner` with the same batches, selection, record
building and scoring functions, but each batch goes to one of N Ray actors.
An actor holds its own generator (a :class:`~typed_rag.system.TypedRAG` built
from the run's settings), and for the scoring phase closes it and loads the
scorer engine in its place, so two models never share one actor's memory.

Only the driver writes: actors return finished records, and the driver
appends each batch to the run's JSONL stores the moment ``ray.wait`` hands it
back. The run directory is therefore the same resumable directory a local
run makes (records may be in a different order), ``eval report`` works on it,
and a rerun, local or distributed, skips what is stored. The coverage phase,
when asked for, runs on the driver after the distributed phases.

Placement: one actor per GPU (``num_gpus`` = the vLLM tensor-parallel size)
when the generator or the scorer is vLLM and the cluster has GPUs; otherwise
one per ``engine.n_threads`` CPUs (one CPU when unset). ``--ray-workers N``
asks for N actors; more than the cluster can place is an error, not a hang.
"""

from __future__ import annotations

import logging
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from eval.data.labels import QuestionLabel
from eval.data.wikinfqa import WikiNFQARecord
from eval.judging.linkage import REFERENCE_SEED
from eval.judging.linkage_prob import build_scorer as build_linkage_scorer
from eval.judging.view import JudgeView
from eval.runs.batches import ChunkAnswers, answer_chunk, score_chunk
from eval.runs.manifest import scorer_name
from eval.runs.ray_cluster import LOCAL, WorkerPlan, connect, plan_workers
from eval.runs.resume import EvalAborted, Lazy, PhaseCounts
from eval.runs.runner import EvalRunner, RunStats
from typed_rag.config import Settings
from typed_rag.engines import build_engine
from typed_rag.errors import UserError
from typed_rag.system import TypedRAG

log = logging.getLogger(__name__)

Factory = Callable[[Settings], Any]


def build_answerer(settings: Settings) -> Any:
    """The default generator of an actor: every component built from the settings."""
    return TypedRAG.from_settings(settings)


def build_scorer(settings: Settings) -> Any:
    """The default scorer engine of an actor."""
    return build_engine(settings)


# ---------------------------------------------------------------------- the actor


class EvalWorker:
    """One Ray actor: answers batches with its generator, then scores with its scorer.

    Plain class; :class:`DistributedEvalRunner` wraps it with ``ray.remote``
    so that importing this module does not need Ray. Its methods are
    coroutines, so Ray runs them on the actor's one event loop (engines bind
    their state to the loop they start on), one call at a time.
    """

    def __init__(
        self,
        settings: Settings,
        generator_settings: Settings,
        scorer_settings: Settings,
        labels: Mapping[str, QuestionLabel],
        answerer_factory: Factory,
        scorer_factory: Factory,
    ) -> None:
        self.settings = settings
        self.scorer_settings = scorer_settings
        self.labels = dict(labels)
        self._answerer = Lazy(lambda: answerer_factory(generator_settings), is_factory=True)
        self._engine = Lazy(lambda: scorer_factory(scorer_settings), is_factory=True)
        self._scorer: Any = None

    async def answer(self, method: str, chunk: Sequence[WikiNFQARecord]) -> ChunkAnswers:
        return await answer_chunk(
            await self._answerer.get(),
            chunk,
            method,
            self.labels,
            self.settings.eval.store_passage_text,
            self.settings.eval.route,
        )

    async def score(
        self, chunk: Sequence[tuple[str, WikiNFQARecord, Mapping[str, Any]]]
    ) -> list[dict]:
        if self._scorer is None:
            await self._answerer.close()  # the generator leaves before the scorer loads
            engine = await self._engine.get()
            self._scorer = build_linkage_scorer(engine, self.settings, self.scorer_settings)
        seed = REFERENCE_SEED
        return await score_chunk(
            self._scorer,
            chunk,
            seed,
            scorer_name(self.scorer_settings),
            self.labels,
            JudgeView.from_settings(self.settings.eval),
        )

    async def close(self) -> None:
        await self._answerer.close()
        await self._engine.close()


# ---------------------------------------------------------------------- the driver


class DistributedEvalRunner(EvalRunner):
    """:class:`EvalRunner` whose answer and score batches run on Ray actors.

    ``answerer_factory(generator_settings)`` and ``scorer_factory(scorer_settings)``
    run inside the actors (they must be importable functions, which Ray ships
    by reference); the defaults build everything from the settings.
    """

    def __init__(
        self,
        settings: Settings,
        run_dir: Path,
        *,
        address: str = LOCAL,
        workers: int | None = None,
        generator_settings: Settings | None = None,
        scorer_settings: Settings | None = None,
        labels: Mapping[str, QuestionLabel] | None = None,
        progress: bool = True,
        answerer_factory: Factory = build_answerer,
        scorer_factory: Factory = build_scorer,
    ) -> None:
        if workers is not None and workers < 1:
            raise UserError(f"--ray-workers must be at least 1, got {workers}")
        scorer = scorer_settings or settings
        super().__init__(
            settings,
            run_dir,
            answerer=lambda: answerer_factory(self.generator_settings),
            scorer_engine=lambda: scorer_factory(scorer),  # coverage phase, on the driver
            scorer_settings=scorer,
            labels=labels,
            progress=progress,
        )
        self.address = address
        self.requested_workers = workers
        self.generator_settings = generator_settings or settings
        self.answerer_factory = answerer_factory
        self.scorer_factory = scorer_factory
        self.plan: WorkerPlan | None = None
        self.workers_started = 0
        self._actors: list[Any] = []
        self._started_ray = False

    async def run(
        self,
        records: Sequence[WikiNFQARecord],
        methods: Sequence[str],
        coverage: bool = False,
    ) -> RunStats:
        stats = RunStats()
        try:
            stats.answers = self._answer_all(records, methods)
            stats.scores = self._score_all(records, methods)
        finally:
            self._stop()
        if coverage:
            try:
                stats.decompositions = await self._decompose(records)
                stats.coverage = await self._judge_coverage(records, methods)
            finally:
                await self._scorer.close()
        return stats

    # ------------------------------------------------------------------ phases

    def _answer_all(
        self, records: Sequence[WikiNFQARecord], methods: Sequence[str]
    ) -> dict[str, PhaseCounts]:
        """Every method's pending batches, as the local runner cuts them, in one queue."""
        counts: dict[str, PhaseCounts] = {}
        tasks: list[tuple[str, list[WikiNFQARecord]]] = []
        size = max(1, self.batch_size)
        for method in methods:
            pending, counts[method] = self._pending_answers(records, method)
            tasks += [(method, pending[i : i + size]) for i in range(0, len(pending), size)]
        if not tasks:
            return counts
        with self._bar(sum(len(c) for _, c in tasks), "answer") as bar:

            def stored(task: tuple[str, list[WikiNFQARecord]], done: ChunkAnswers) -> None:
                method, chunk = task
                self._store_answers(method, done, len(chunk), counts[method])
                bar.update(len(chunk))

            self._dispatch(tasks, lambda actor, t: actor.answer.remote(*t), stored)
        return counts

    def _score_all(self, records: Sequence[WikiNFQARecord], methods: Sequence[str]) -> PhaseCounts:
        todo, counts = self._pending_scores(records, methods)
        if not todo:
            return counts
        size = max(1, self.score_batch_size)
        # An actor needs only the candidate text of a stored answer, not its trace.
        slim = [(m, rec, {"answer": ans.get("answer")}) for m, rec, ans in todo]
        tasks = [slim[i : i + size] for i in range(0, len(slim), size)]
        with self._bar(len(todo), "score") as bar:

            def stored(task: list[Any], rows: list[dict[str, Any]]) -> None:
                self._store_scores(rows, counts)
                bar.update(len(task))

            self._dispatch(tasks, lambda actor, t: actor.score.remote(t), stored)
        return counts

    # ------------------------------------------------------------------ Ray

    def _workers(self) -> list[Any]:
        """Connect and start the actors on first need (a finished run starts none)."""
        if self._actors:
            return self._actors
        import ray  # heavy: ray

        self._started_ray = connect(self.address) or self._started_ray
        self.plan = plan_workers(
            self.generator_settings,
            self.scorer_settings,
            ray.cluster_resources(),
            self.requested_workers,
        )
        log.info("starting %s", self.plan.describe())
        remote = ray.remote(EvalWorker).options(
            num_cpus=self.plan.num_cpus,
            num_gpus=self.plan.num_gpus,
            max_restarts=0,
            max_concurrency=1,
        )
        self._actors = [
            remote.remote(
                self.settings,
                self.generator_settings,
                self.scorer_settings,
                self.labels,
                self.answerer_factory,
                self.scorer_factory,
            )
            for _ in range(self.plan.workers)
        ]
        self.workers_started += len(self._actors)
        return self._actors

    def _dispatch(
        self,
        tasks: Sequence[Any],
        submit: Callable[[Any, Any], Any],
        on_result: Callable[[Any, Any], None],
    ) -> None:
        """Keep every actor busy with one task; hand each result to ``on_result`` as it lands.

        A task whose actor died goes back to the queue for the others. On the
        first failure nothing new is sent, the tasks in flight are still
        collected (their work is stored), and then the failure is raised.
        """
        import ray  # heavy: ray
        from ray.exceptions import RayActorError, RayTaskError  # heavy: ray

        idle = deque(self._workers())
        queue = deque(tasks)
        in_flight: dict[Any, tuple[Any, Any]] = {}
        failure: BaseException | None = None
        while in_flight or (queue and failure is None):
            while queue and idle and failure is None:
                actor, task = idle.popleft(), queue.popleft()
                in_flight[submit(actor, task)] = (actor, task)
            if not in_flight:
                failure = EvalAborted(
                    f"every Ray worker died; {len(queue)} batch(es) left undone "
                    "(finished work is stored; rerun to resume)"
                )
                break
            ready, _ = ray.wait(list(in_flight), num_returns=1)
            for ref in ready:
                actor, task = in_flight.pop(ref)
                try:
                    result = ray.get(ref)
                except RayTaskError as exc:  # the work itself failed: same as a local run
                    failure = failure or _cause(exc)
                    continue
                except RayActorError as exc:  # the actor (process or node) is gone
                    log.warning("a Ray worker died (%s); its batch goes to another", exc)
                    queue.appendleft(task)
                    self._actors = [a for a in self._actors if a is not actor]
                    continue
                idle.append(actor)
                if failure is None:
                    try:
                        on_result(task, result)
                    except Exception as exc:  # e.g. EvalAborted: a batch failed entirely
                        failure = exc
        if failure is not None:
            raise failure

    def _stop(self) -> None:
        """Close the actors' engines, end the actors, and Ray itself if this run started it."""
        if not self._actors and not self._started_ray:
            return
        import ray  # heavy: ray

        try:
            if self._actors:
                closing = [a.close.remote() for a in self._actors]
                try:
                    ray.get(closing, timeout=120)
                except Exception as exc:  # best effort: the actors are killed next anyway
                    log.warning("closing Ray workers: %s", exc)
                for actor in self._actors:
                    ray.kill(actor)
        finally:
            self._actors = []
            if self._started_ray:
                ray.shutdown()
                self._started_ray = False


def _cause(exc: BaseException) -> BaseException:
    """The exception an actor raised (a UserError stays a UserError for the CLI)."""
    cause = getattr(exc, "cause", None)
    return cause if isinstance(cause, BaseException) else exc
