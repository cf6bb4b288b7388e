"""Ask a judge LLM for a batch of verdicts, and resample only the ones that did not parse.

Every round is one ``engine.generate`` call over all still-unparsed requests,
each round with a new seed (``seed + round``), for at most ``max_resamples``
extra rounds. A greedy request (temperature 0) would only repeat itself, so
its resamples use :data:`RESAMPLE_TEMPERATURE`. What never parses is returned with its last failure reason, so
reports can count it instead of guessing a value.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

from typed_rag.config import Settings
from typed_rag.engines.base import ChatRequest, Engine

T = TypeVar("T")

OK = "ok"
RESAMPLE_TEMPERATURE = 0.7
# Judges (LINKAGE, coverage, compliance) decode greedily, so the same answer always gets the
# same verdict (docs/evaluation.md); a run's fingerprint records it.
JUDGE_TEMPERATURE = 0.0
# Extra rounds, each with a new seed, for judge replies that do not parse; what still fails
# is counted and reported, never guessed.
MAX_RESAMPLES = 3


@dataclass(frozen=True)
class Parsed(Generic[T]):
    """A parse result: ``value`` when ``status == "ok"``, else the reason it failed."""

    value: T | None
    status: str = OK

    @property
    def ok(self) -> bool:
        return self.status == OK


@dataclass
class Outcome(Generic[T]):
    """The verdict of one request after all its attempts, with what it cost."""

    value: T | None
    status: str
    attempts: int
    outputs: list[str] = field(default_factory=list)
    prompt_tokens: int = 0
    completion_tokens: int = 0
    latency_s: float = 0.0

    @property
    def ok(self) -> bool:
        return self.status == OK


Parser = Callable[[int, str], Parsed[T]]


async def generate_until_parsed(
    engine: Engine,
    requests: Sequence[ChatRequest],
    parse: Parser[T],
    max_resamples: int,
    seed: int,
) -> list[Outcome[T]]:
    """Run ``requests`` as one batch, then re-ask the unparsed ones with new seeds.

    ``parse(i, text)`` judges the output of request ``i``.
    """
    if max_resamples < 0:
        raise ValueError("max_resamples must be >= 0")
    outcomes: list[Outcome[T]] = [Outcome(None, "not-run", 0) for _ in requests]
    pending = list(range(len(requests)))
    for round_no in range(max_resamples + 1):
        if not pending:
            break
        batch = [
            dataclasses.replace(
                requests[i],
                seed=seed + round_no,
                temperature=requests[i].temperature
                if round_no == 0
                else max(requests[i].temperature, RESAMPLE_TEMPERATURE),
            )
            for i in pending
        ]
        results = await engine.generate(batch)
        if len(results) != len(batch):
            raise RuntimeError(
                f"engine {engine.name} returned {len(results)} results for {len(batch)} requests"
            )
        still: list[int] = []
        for i, res in zip(pending, results, strict=True):
            out = outcomes[i]
            out.attempts += 1
            out.outputs.append(res.text)
            out.prompt_tokens += res.prompt_tokens
            out.completion_tokens += res.completion_tokens
            out.latency_s += res.latency_s
            parsed = parse(i, res.text)
            out.status = parsed.status
            if parsed.ok:
                out.value = parsed.value
            else:
                still.append(i)
        pending = still
    return outcomes


class Judge:
    """A judge LLM on one engine, with the sampling every judge shares.

    LINKAGE, sub-question coverage and constraint compliance all sample the
    same way: the judge temperature (0 by default), top-p and seed, an output budget of
    their own, and at most ``max_resamples`` extra rounds for what does not
    parse.
    """

    def __init__(
        self,
        engine: Engine,
        *,
        max_resamples: int = 3,
        seed: int = 42,
        temperature: float = 0.8,
        top_p: float = 0.95,
        max_tokens: int = 64,
    ) -> None:
        self.engine = engine
        self.max_resamples = max_resamples
        self.seed = seed
        self.temperature = temperature
        self.top_p = top_p
        self.max_tokens = max_tokens

    @staticmethod
    def sampling_from(settings: Settings, scorer_settings: Settings | None) -> dict[str, Any]:
        """Resampling (:data:`MAX_RESAMPLES`) and the judge temperature (0: deterministic);
        seed and top-p from the scorer's settings (default ``settings``)."""
        sampling = (scorer_settings or settings).sampling
        return {
            "max_resamples": MAX_RESAMPLES,
            "seed": sampling.seed,
            "temperature": JUDGE_TEMPERATURE,
            "top_p": sampling.top_p,
        }

    def chat(
        self, messages: list[dict[str, str]], json_schema: dict[str, Any] | None = None
    ) -> ChatRequest:
        return ChatRequest(
            messages=messages,
            temperature=self.temperature,
            top_p=self.top_p,
            max_tokens=self.max_tokens,
            seed=self.seed,
            json_schema=json_schema,
        )
