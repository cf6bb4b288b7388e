"""Does the relevance gate stop paying for padding when it reads the answer without copies
of the question? (It does not; kept as a measured negative, ``docs/judge-validity.md``.)

The padding probe (``eval.judge_validity.padding``) appends a sentence quoting the question
and two empty ones to a grade-1 answer, and the default ``linkage-prob-gated`` judge then
scores it higher in 40 of 40 questions, mostly through the gate. This asks the gate again,
on the judge-validity candidates of ``results/judge/padding``, with every copied run of at
least five of the question's consecutive words removed (:func:`without_question_copies`),
then recomputes the gated judge's validity from the stored LINKAGE verdicts. Only the
candidates the removal changes are asked (the others' request is the stored one).

    python -m benchmarks.gate_copies --out results/judge/gate-without-copies
"""

from __future__ import annotations

import argparse
import asyncio
import json
import re
from collections import defaultdict
from pathlib import Path
from statistics import mean

from eval.judge_validity import build_candidates, pick_questions, validity
from eval.judges import Judgement, gated
from eval.labels import load_labels
from eval.linkage_prob import p_yes, relevance_request
from eval.wikinfqa import load_wikinfqa
from typed_rag import engines
from typed_rag.config import load_settings
from typed_rag.store import read_jsonl

WORD = re.compile(r"\w+")
MIN_RUN = 5
JUDGED = Path("results/judge/padding")
RELEVANCE = "relevance.jsonl"


def without_question_copies(question: str, answer: str, min_run: int = MIN_RUN) -> str:
    """``answer`` without every run of at least ``min_run`` consecutive words of
    ``question`` (the whole question when shorter), matched case-insensitively."""
    asked = [w.lower() for w in WORD.findall(question)]
    if not asked:
        return answer
    need = min(min_run, len(asked))
    tokens = list(WORD.finditer(answer))
    words = [m.group().lower() for m in tokens]

    def run_at(i: int) -> int:
        best = 0
        for j in range(len(asked)):
            k = 0
            while i + k < len(words) and j + k < len(asked) and words[i + k] == asked[j + k]:
                k += 1
            best = max(best, k)
        return best

    parts: list[str] = []
    pos = i = 0
    while i < len(words):
        run = run_at(i)
        if run >= need:
            parts.append(answer[pos : tokens[i].start()])
            pos = tokens[i + run - 1].end()
            i += run
        else:
            i += 1
    parts.append(answer[pos:])
    return "".join(parts)


def candidates(questions: int, seed: int = 7) -> list:
    settings = load_settings()
    records = load_wikinfqa(settings.eval.data_dir, None, "skip").records
    pool = {r["question_id"]: r["answer"] for r in read_jsonl(JUDGED / "generator_answers.jsonl")}
    picked = pick_questions(records, questions, seed, settings.eval.reference_seed)
    labels = load_labels(JUDGED / "labels.json")
    return build_candidates(picked, pool, labels, seed, settings.eval.reference_seed)


async def ask(cands: list, out: Path) -> None:
    """The gate's P(relevant) on each changed candidate, without its question copies."""
    settings = load_settings()
    settings.engine.n_threads = 2
    stripped = {c.key: without_question_copies(c.item.question, c.item.candidate) for c in cands}
    todo = [c for c in cands if stripped[c.key] != c.item.candidate]
    engine = engines.build_engine(settings)
    await engine.start()
    try:
        with (out / RELEVANCE).open("w", encoding="utf-8") as sink:
            for start in range(0, len(todo), 8):
                chunk = todo[start : start + 8]
                requests = [relevance_request(c.item.question, stripped[c.key]) for c in chunk]
                for c, res in zip(chunk, await engine.score_choices(requests), strict=True):
                    row = {"key": c.key, "kind": c.kind, "grade": c.grade, "p": p_yes(res.logprobs)}
                    sink.write(json.dumps(row) + "\n")
                print(f"{start + len(chunk)}/{len(todo)}", flush=True)
    finally:
        await engine.close()


def summarize(cands: list, out: Path) -> dict:
    """Gate P(relevant) before/after per kind, and the gated judge's validity both ways."""
    stored: dict[str, dict[str, dict]] = defaultdict(dict)
    for row in read_jsonl(JUDGED / "judgements.jsonl"):
        stored[row["protocol"]][row["key"]] = row
    new = {r["key"]: r for r in read_jsonl(out / RELEVANCE)}
    linkage, gate = stored["linkage-prob"], stored["relevance-prob"]
    keys = [c for c in cands if c.key in linkage and c.key in gate]
    by_kind: dict[str, list[tuple[float, float]]] = defaultdict(list)
    for c in keys:
        if c.key in new:
            kind = c.kind if c.grade is None or c.kind == "padded" else f"grade{c.grade}"
            by_kind[kind].append((gate[c.key]["quality"], new[c.key]["p"]))
    result: dict = {
        "changed_by_kind": {
            k: {
                "n": len(v),
                "p_before": round(mean(a for a, _ in v), 3),
                "p_after": round(mean(b for _, b in v), 3),
            }
            for k, v in sorted(by_kind.items())
        },
        "candidates": len(keys),
    }
    link = [
        Judgement(c.key, linkage[c.key]["quality"], linkage[c.key]["worst"],
                  linkage[c.key]["best"], dist=linkage[c.key].get("dist"))
        for c in keys
    ]  # fmt: skip
    for name, relevance in (
        ("gate reads the answer (default)", {c.key: gate[c.key]["quality"] for c in keys}),
        (
            "gate reads it without question copies",
            {c.key: new[c.key]["p"] if c.key in new else gate[c.key]["quality"] for c in keys},
        ),
    ):
        # the default protocol's product from stored parts, as `eval judge-validity` makes it
        judged = gated(link, [Judgement(k, p, p < 0.5, False) for k, p in relevance.items()])
        stats = validity(
            keys,
            {j.key: j.quality for j in judged},
            {j.key: j.worst for j in judged},
            {j.key: j.best for j in judged},
        )
        shown = ("acc_3v0", "acc_3v1", "acc_pairs", "acc_nogold", "acc_padding")
        result[name] = {k: stats[k] for k in (*shown, "n_padding", "mean_quality")} | {
            "ci": {k: v for k, v in stats["ci"].items() if k in shown}
        }
    (out / "summary.json").write_text(json.dumps(result, indent=1), encoding="utf-8")
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--questions", type=int, default=200)
    parser.add_argument("--summarize", action="store_true", help="only summarize stored answers")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    cands = candidates(args.questions)
    if not args.summarize:
        asyncio.run(ask(cands, args.out))
    print(json.dumps(summarize(cands, args.out), indent=1))


if __name__ == "__main__":
    main()
