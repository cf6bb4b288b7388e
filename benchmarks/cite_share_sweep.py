"""How much of a sentence a cited passage must share (``method.cite_min_share``), measured.

``method.post_cite`` cites, after generation, the shown passage sharing most of a
sentence's content words, and drops a citation whose passage shares too few. This
re-cites the typed-rag answers of an ``eval run`` directory at each variant (the same
function the pipeline runs; applying it to an answer already re-cited at a lower
threshold gives what the pipeline would have written at the higher one), asks the
support judge of ``typed-rag eval support`` about every cited sentence (verdicts cached
in ``--out``, so variants share them and the command resumes), and reports per
variant the share of answers citing a shown passage and the share of cited sentences
the judge calls supported (bootstrap 95% CI over questions), issue 15's two targets,
with the paired difference from the first variant. Each variant's per-question counts are
kept in ``sweep.json``, so ``--against`` an earlier sweep of the same answers gives the
paired difference a change of the post-citing code made (the earlier sweep run before it).

A variant is a ``cite_min_share`` (``0.5``) or one with a ``cite_floor_share``
(``0.7/0.3``: an answer left citing nothing cites its best match at 0.3).

    python -m benchmarks.cite_share_sweep results/method/cite-calibration/run \\
        --shares 0.3,0.4,0.5,0.6,0.7 --out results/method/cite-calibration
"""

from __future__ import annotations

import argparse
import asyncio
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from cli.eval_papers import index_lookup
from eval.figures import plt
from eval.manifest import scorer_name
from eval.runner import ANSWERS
from eval.support import (
    SupportRun,
    counts_by_question,
    pooled_difference,
    sentences_of,
    summarize,
)
from typed_rag.citations import attach_citations
from typed_rag.config import Settings, load_settings, parse_overrides
from typed_rag.engines.factory import build_engine
from typed_rag.result import CitedPassage
from typed_rag.store import JsonlStore

METHOD = "typed-rag"


def recite(
    row: Mapping[str, Any],
    texts: Mapping[str, tuple[str, str]],
    share: float,
    floor: float | None = None,
    specifics: bool = False,
) -> dict:
    """``row`` (an ``answers.jsonl`` row) with its answer re-cited at ``share`` (and ``floor``,
    and the specifics check)."""
    passages = [
        CitedPassage(
            citation=int(p["citation"]),
            id=str(p["id"]),
            title=texts[str(p["id"])][0],
            text=texts[str(p["id"])][1],
            score=0.0,
        )
        for p in row["result"]["passages"]
    ]
    recited = attach_citations(str(row["answer"]), passages, share, floor, specifics)
    return {**row, "answer": recited.answer}


@dataclass(frozen=True)
class Variant:
    """One post-citing setting: ``cite_min_share`` and, optionally, ``cite_floor_share``
    and ``cite_specifics`` (``0.7/0.4+specifics``)."""

    share: float
    floor: float | None = None
    specifics: bool = False

    @classmethod
    def parse(cls, text: str) -> Variant:
        text, plus, flag = text.strip().partition("+")
        if plus and flag != "specifics":
            raise ValueError(f"unknown variant flag {flag!r} (expected +specifics)")
        share, _, floor = text.partition("/")
        return cls(float(share), float(floor) if floor else None, bool(plus))

    def __str__(self) -> str:
        floor = f"/{self.floor:g}" if self.floor is not None else ""
        return f"{self.share:g}{floor}" + ("+specifics" if self.specifics else "")


def sweep(
    rows: Sequence[Mapping[str, Any]],
    variants: Sequence[Variant],
    settings: Settings,
    out: Path,
    batch_size: int,
    against: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """Judge what is missing and summarise each variant against the first (and against
    the same variant of ``against``, an earlier sweep's report, where it has one)."""
    lookup = index_lookup(settings)
    ids = sorted({str(p["id"]) for r in rows for p in r["result"]["passages"]})
    texts = lookup(ids)
    recited = {v: [recite(r, texts, v.share, v.floor, v.specifics) for r in rows] for v in variants}
    engine = build_engine(settings)  # the judge: the engine of ``settings`` (as eval support)
    model = scorer_name(settings)
    run = SupportRun(out / "support", engine, model, batch_size)

    async def judge() -> None:
        async with engine:
            for answers in recited.values():
                sentences = [s for a in answers for s in sentences_of(a)]
                await run.judge_missing(sentences, {}, lookup, _progress)

    asyncio.run(judge())
    report: dict[str, Any] = {"run_answers": len(rows), "judge": model, "shares": {}}
    counts: dict[Variant, dict[str, tuple[int, int]]] = {}
    for variant, answers in recited.items():
        sentence_rows = run.sentence_rows([s for a in answers for s in sentences_of(a)])
        summary = summarize(answers, sentence_rows, [METHOD])["methods"][METHOD]
        counts[variant] = counts_by_question(sentence_rows)
        summary["vs_first"] = pooled_difference(counts[variant], counts[variants[0]])
        summary["by_question"] = {q: list(c) for q, c in counts[variant].items()}
        if against and (vs := versus(against, variant, counts[variant])):
            summary["vs_against"] = vs
        report["shares"][str(variant)] = summary
    return report


def versus(
    earlier: Mapping[str, Any], variant: Variant, counts: Mapping[str, tuple[int, int]]
) -> dict[str, Any] | None:
    """``counts`` (question -> supported, judged) minus the same variant's in ``earlier``, a
    sweep report of the same answers; None when it lacks that variant or its counts."""
    by_question = earlier.get("shares", {}).get(str(variant), {}).get("by_question")
    if by_question is None:
        return None
    return pooled_difference(counts, {q: (int(c[0]), int(c[1])) for q, c in by_question.items()})


def _progress(done: int, total: int) -> None:
    print(f"\r  support verdicts {done}/{total}", end="", flush=True)


def render(report: Mapping[str, Any]) -> str:
    lines = [
        f"typed-rag answers: {report['run_answers']}; judge {report['judge']}",
        "share[/floor]  answers citing  cited sentences  supported [95% CI]"
        "  minus the first (paired over questions) [95% CI]",
    ]
    for share, m in report["shares"].items():
        s, d = m["share"], m["vs_first"]
        lines.append(
            f"{share:>13}  {m['answers_citing']:>6}/{m['answers']:<7} {m['sentences']:>15}"
            f"  {100 * s['mean']:.1f}% [{100 * s['low']:.1f}, {100 * s['high']:.1f}]"
            f"  {100 * d['diff']:+.1f} points [{100 * d['ci'][0]:+.1f}, {100 * d['ci'][1]:+.1f}]"
            f" (n={d['n']})"
        )
        if a := m.get("vs_against"):
            lines.append(
                f"{'':>13}  minus the same variant of --against: {100 * a['diff']:+.1f} points"
                f" [{100 * a['ci'][0]:+.1f}, {100 * a['ci'][1]:+.1f}] (n={a['n']})"
            )
    return "\n".join(lines)


def plot(report: Mapping[str, Any], path: Path) -> Path:
    """Supported share of cited sentences (95% CI) and share of answers citing, per variant."""
    labels = list(report["shares"])
    x = np.arange(len(labels))
    rows = list(report["shares"].values())
    mean = np.array([m["share"]["mean"] for m in rows]) * 100
    err = (
        np.array(
            [
                [m["share"]["mean"] - m["share"]["low"], m["share"]["high"] - m["share"]["mean"]]
                for m in rows
            ]
        ).T
        * 100
    )
    citing = [100 * m["answers_citing"] / m["answers"] for m in rows]
    fig, ax = plt.subplots(figsize=(5.5, 3.5))
    ax.errorbar(x, mean, yerr=err, marker="o", capsize=3, label="cited sentences supported")
    ax.plot(x, citing, marker="s", label="answers citing a shown passage")
    ax.axhline(70, color="grey", lw=0.8, ls="--")
    ax.axhline(80, color="grey", lw=0.8, ls=":")
    ax.set_xticks(x, labels)
    ax.set_xlabel("method.cite_min_share[/cite_floor_share]")
    ax.set_ylabel("%")
    ax.set_title(
        f"typed-rag, {report['run_answers']} answers; judge {report['judge'].split(':')[-1]}",
        fontsize=8,
    )
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("run_dir", type=Path, help="a directory made by `eval run` with typed-rag")
    ap.add_argument(
        "--shares",
        default="0.3,0.4,0.5,0.6,0.7",
        help="variants, SHARE, SHARE/FLOOR, either with +specifics (comma list; the first is "
        "the paired baseline)",
    )
    ap.add_argument("--out", type=Path, required=True, help="verdict cache and sweep.json")
    ap.add_argument("--batch-size", type=int, default=16)
    ap.add_argument("--first", type=int, help="only the run's first N typed-rag answers")
    ap.add_argument("--types", help="only answers of these question types (comma list)")
    ap.add_argument("--set", action="append", default=[], help="KEY=VALUE settings override")
    ap.add_argument(
        "--against",
        type=Path,
        help="an earlier sweep.json of the same answers: each variant's paired difference "
        "from it (a change of the post-citing code, measured)",
    )
    args = ap.parse_args(argv)
    settings = load_settings(None, **parse_overrides(args.set))
    try:
        variants = [Variant.parse(v) for v in args.shares.split(",") if v.strip()]
    except ValueError as e:
        ap.error(f"--shares: {e}")
    rows = [r for r in JsonlStore(args.run_dir / ANSWERS, readonly=True) if r["method"] == METHOD]
    rows = rows[: args.first] if args.first else rows
    if args.types:
        types = {t.strip().upper() for t in args.types.split(",")}
        rows = [r for r in rows if r.get("type") in types]
    try:
        against = json.loads(args.against.read_text()) if args.against else None
    except (OSError, json.JSONDecodeError) as e:
        ap.error(f"--against: cannot read {args.against}: {e}")
    report = sweep(rows, variants, settings, args.out, args.batch_size, against)
    report["run_dir"] = str(args.run_dir)
    print("\n" + render(report))
    (args.out / "sweep.json").write_text(json.dumps(report, indent=1) + "\n")
    print(f"wrote {args.out / 'sweep.json'}, {plot(report, args.out / 'sweep.png')}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
