"""Rewrites of the rare NF-CATS types' questions by the default generator (issue 16).

Why: EXPERIENCE has 119 examples in train + valid and COMPARISON 68; the
fine-tuned classifier's CV F1 on them (0.63, 0.80) is limited by how few
ways of asking it has seen. Each question of the chosen types is rewritten
``--n`` times, keeping what kind of question it is; ``classifier_bench.py
--augment FILE`` then adds the rewrites of a fold's *fit* questions to its
fit part only (select and test parts stay original), so the CV stays honest.

Resumable JSONL, one row per source question:
``{"question", "category", "rewrites": [...], "status"}``.

    python benchmarks/classifier_augment.py --types EXPERIENCE COMPARISON \
        --out results/classifier/rewrites.jsonl
"""

from __future__ import annotations

import argparse
import asyncio
import json
import time
from pathlib import Path
from typing import Any

from typed_rag.classifier.data import read_nfcats_csv, split_path
from typed_rag.config import load_settings
from typed_rag.engines import ChatRequest, build_engine
from typed_rag.json_reply import clean_strings, extract_json
from typed_rag.types import LABELS, QuestionType

# What each type asks for, in the NF-CATS taxonomy's terms (Bolotova et al., 2022).
KIND = {
    "EXPERIENCE": "asks the reader for their own experience, opinion, rating or recommendation",
    "COMPARISON": "asks how two or more things compare: their differences, similarities or "
    "which is better",
}

PROMPT = """A person asked this question on a question-answering site:

"{question}"

It {kind}. Write {n} different questions that another person could ask, of the same kind. \
Keep the style of a real user (short, informal wording is fine) and about the length of the \
question above; each may change the wording and the subject. Reply with a JSON list of {n} strings and nothing else."""


def read_done(path: Path) -> dict[str, dict[str, Any]]:
    if not path.is_file():
        return {}
    rows = (json.loads(line) for line in path.read_text().splitlines() if line.strip())
    return {r["question"]: r for r in rows if r.get("status") == "ok"}


async def rewrite_all(args: argparse.Namespace) -> None:
    settings = load_settings(args.config)
    data_dir = settings.classifier.data_dir
    wanted = {QuestionType.parse(t).value for t in args.types}
    sources = []
    for split in ("train", "valid"):
        data = read_nfcats_csv(split_path(data_dir, split))
        for q, y in zip(data.questions, data.labels, strict=True):
            if LABELS[y].value in wanted:
                sources.append((q, LABELS[y].value))
    done = read_done(args.out)
    todo = [(q, t) for q, t in sources if q not in done]
    print(f"{len(sources)} questions of {sorted(wanted)}; {len(done)} done, {len(todo)} to go")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    async with build_engine(settings) as engine:
        t0 = time.perf_counter()
        for i, (question, label) in enumerate(todo, 1):
            prompt = PROMPT.format(question=question, kind=KIND[label], n=args.n)
            request = ChatRequest(
                messages=[{"role": "user", "content": prompt}],
                temperature=0.8,
                max_tokens=48 * args.n,
                seed=args.seed + i,
            )
            (reply,) = await engine.generate([request])
            try:
                found = extract_json(reply.text)
            except ValueError:
                found = None
            items = found if isinstance(found, list) else []
            rewrites = [r for r in clean_strings(items, args.n) if r.lower() != question.lower()]
            row = {
                "question": question,
                "category": label,
                "rewrites": rewrites,
                "status": "ok" if rewrites else "unparsed",
            }
            with args.out.open("a") as fh:
                fh.write(json.dumps(row) + "\n")
            rate = i / (time.perf_counter() - t0)
            print(f"[{i}/{len(todo)}] {label} {len(rewrites)} rewrites ({rate * 60:.1f}/min)")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--types", nargs="+", default=["EXPERIENCE", "COMPARISON"])
    p.add_argument("--n", type=int, default=3, help="rewrites per question")
    p.add_argument("--seed", type=int, default=42)
    p.add_argument("--config", type=Path, default=None)
    p.add_argument("--out", type=Path, default=Path("results/classifier/rewrites.jsonl"))
    asyncio.run(rewrite_all(p.parse_args()))


if __name__ == "__main__":
    main()
