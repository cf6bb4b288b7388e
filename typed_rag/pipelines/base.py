"""What every pipeline shares: the question's :class:`Context` and the pipeline interface.

A pipeline is a module that owns its plan model (a :class:`Plan`), the plan's
JSON schema, parser and prompts, and an async ``prepare(ctx) -> Final``: it
runs the plan round, retrieval and any batched sub-answer round, and returns
the messages of the final generation. :class:`~typed_rag.system.TypedRAG` runs
that last call itself, whole or streamed, so the server can stream exactly the
answer. The module's :class:`Pipeline` goes into the type table
(:data:`typed_rag.pipelines.TYPED`).

The context is a composition of one part per job, each in its own module:
:class:`~typed_rag.pipelines.rounds.Rounds` (engine rounds and token budgets),
:class:`~typed_rag.pipelines.search.Search` (retrieval and pool reranking),
:class:`~typed_rag.pipelines.citing.Citations` (citation numbers) and
:class:`~typed_rag.pipelines.trace.Trace` (progress events, timings, fallbacks).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar, Protocol, TypeVar

from typed_rag import plan_examples
from typed_rag.config import Settings
from typed_rag.constraints import Constraints, enforce
from typed_rag.messages import Messages
from typed_rag.method_settings import MethodOptions
from typed_rag.pipelines.citing import Citations
from typed_rag.pipelines.rounds import Final, Rounds
from typed_rag.pipelines.search import Search
from typed_rag.pipelines.trace import STAGES, Trace
from typed_rag.result import Result
from typed_rag.retrieval import Passage

__all__ = ["STAGES", "Context", "Final", "Pipeline", "Plan", "Prepare", "plan_or_fallback"]

P = TypeVar("P")


@dataclass
class Context:
    """One question's run as its pipeline sees it: what is asked, and the parts that work.

    ``question`` and ``constraints`` (include/exclude subtopics detected in the question;
    ``question`` is then its core) may change during routing, so they live here, read by
    the parts when they need them. ``corpus`` is what the retriever searches:
    ``"documents"`` (a user's collection) or ``"wikipedia"``. ``top_k``: passages per
    query, the resolved request's.
    """

    question: str
    settings: Settings
    top_k: int
    trace: Trace
    rounds: Rounds
    search: Search
    citations: Citations
    corpus: str = "wikipedia"
    constraints: Constraints | None = None

    def __post_init__(self) -> None:
        self.trace.about = lambda: self.question  # fallbacks name the question as it is now

    @property
    def result(self) -> Result:
        """The Result being written (the trace's)."""
        return self.trace.result

    async def retrieve(self, queries: Sequence[str], k: int) -> list[list[Passage]]:
        """Top-``k`` per query (:meth:`Search.retrieve`), the excluded subtopics last."""
        exclude = self.constraints.exclude if self.constraints else []
        return await self.search.retrieve(queries, k, exclude)

    def enforce(self, what: str, items: list[str], add_missing: bool = True) -> list[str]:
        """Plan items after the coverage constraints (see :func:`constraints.enforce`).

        What was dropped or added is recorded under ``result.constraints[what]``.
        """
        if self.constraints is None or self.constraints.empty:
            return items
        done = enforce(items, self.constraints, add_missing)
        if done.dropped or done.added:
            trace = self.result.constraints if self.result.constraints is not None else {}
            trace[what] = {"dropped": done.dropped, "added": done.added}
        return done.items


Prepare = Callable[[Context], Awaitable[Final]]


class Plan(Protocol):
    """What a pipeline's plan model tells the rest of the system."""

    # The title of its JSON schema; the fake engine replies ``example`` to a request
    # under that schema, so tests drive the pipeline down its planned path.
    title: ClassVar[str]
    example: ClassVar[str]

    def to_trace(self) -> dict[str, Any]:
        """The plan as recorded in ``Result.plan``."""
        ...

    @classmethod
    def describe(cls, trace: Mapping[str, Any]) -> list[str]:
        """Lines for people (``typed-rag ask``) about the parts of ``trace`` this plan wrote."""
        ...


@dataclass(frozen=True)
class Pipeline:
    """A route of the type table: how a question is prepared, and the plan model it makes."""

    prepare: Prepare
    plan: type[Plan] | None = None  # None: the route makes no plan (plain RAG, the LLM)
    # The plan prompt for a question: its fixed part (everything before the question)
    # is prefilled at server start so that engines with a prompt cache skip it later.
    plan_prompt: Callable[[str, MethodOptions], Messages] | None = None

    def __post_init__(self) -> None:
        if self.plan is not None:
            plan_examples.register(self.plan.title, self.plan.example)


async def plan_or_fallback(
    ctx: Context,
    label: str,
    messages: Messages,
    schema: dict[str, Any],
    parser: Callable[[str], P],
    what: str = "plan",
) -> P | None:
    """The pipeline's plan; None after recording the fallback, and the caller answers with
    plain RAG. The attempts are :meth:`Rounds.plan`'s, per-request sampling included."""
    plan = await ctx.rounds.plan("plan", messages, schema, parser, constraints=ctx.constraints)
    if plan is None:
        attempts = ctx.result.plan.get("attempts")
        ctx.trace.fallback(f"{label}: {what} unparseable after {attempts} attempts -> rag")
    return plan
