"""The one entry point: judge an evaluation run's answers for sub-question coverage, then report."""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from eval.subcoverage.decompose import Decomposer
from eval.subcoverage.inputs import AnswerItem, Lookup, answer_items
from eval.subcoverage.judge import CoverageJudge
from eval.subcoverage.report import render
from eval.subcoverage.run import Progress, SubCoverageRun
from eval.subcoverage.summary import judge_validity, reference_pairs, summarise
from typed_rag.engines.base import Engine

SUMMARY = "summary.json"
REPORT = "report.md"
# A text covers a sub-question when the judge's P(yes) is above this. Chosen on the graded
# references of the first 30 questions (results/coverage/threshold.json): the 1.5B judge's
# P(yes) is rarely below 0.5 for an answer, so at 0.5 a grade-0 reference "covers" nearly as
# much as a grade-3 one; held out, 0.7 orders references right 0.75 of the time (0.60 at 0.5).
COVERAGE_THRESHOLD = 0.7


async def evaluate_subcoverage(
    engine: Engine,
    answers: Iterable[Mapping[str, Any]],
    out_dir: Path,
    *,
    judge_model: str | None = None,
    methods: Sequence[str] | None = None,
    lookup: Lookup | None = None,
    references: Sequence[AnswerItem] = (),
    threshold: float = COVERAGE_THRESHOLD,
    fragments: bool = True,
    batch_size: int = 32,
    max_resamples: int = 3,
    seed: int = 42,
    temperature: float = 0.0,
    n_boot: int = 1000,
    on_progress: Progress | None = None,
) -> dict[str, Any]:
    """Judge what ``out_dir`` lacks for ``answers`` (rows of answers.jsonl), write
    ``out_dir/summary.json`` (and its table, ``report.md``) and return it.

    The judge runs on ``engine``: generation for the decomposition and the answer
    fragments (at ``temperature``, 0: deterministic; unparsed replies are resampled
    at most ``max_resamples`` times), next-token choice scoring for the yes/no
    verdicts (the engine must support :meth:`Engine.score_choices`); a cell is covered
    when the judge's P(yes) is above ``threshold``. ``fragments=False`` skips the
    fragment extraction (no Metric #6; for comparing answers quickly). ``judge_model``
    is named in the report (default: ``engine.model``). ``lookup`` supplies passage
    texts a run did not store. ``references`` (graded Wiki-NFQA answers,
    :func:`~eval.subcoverage.inputs.reference_items`) get verdicts too, for the summary's
    ``judge_validity``.
    """
    items = answer_items(answers, lookup, methods)
    sampling = {"max_resamples": max_resamples, "seed": seed, "temperature": temperature}
    run = SubCoverageRun(
        out_dir,
        Decomposer(engine, max_tokens=512, **sampling),
        CoverageJudge(engine, max_tokens=256, **sampling),
        threshold=threshold,
        batch_size=batch_size,
    )
    await run.judge_missing(items, on_progress, fragments)
    await run.judge_verdicts(references, on_progress)
    summary = summarise(items, run, judge_model or engine.model, n_boot=n_boot, seed=seed)
    summary["judge_validity"] = judge_validity(
        reference_pairs(references, run), threshold, n_boot, seed
    )
    path = Path(out_dir) / SUMMARY
    path.write_text(json.dumps(summary, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    (Path(out_dir) / REPORT).write_text(render(summary), encoding="utf-8")
    return summary
