"""What prompt-lookup speculative decoding would save, replayed on stored answers (issue 79,
item 3), without building it.

Prompt lookup drafts the next tokens by finding the text's last n-gram earlier in the prompt
or the answer and proposing what followed it there (llama-cpp-python's
``LlamaPromptLookupDecoding``: the longest of 1..``max_ngram`` tokens that matches, its
last occurrence, up to ``draft`` tokens). The model checks a draft of d tokens in one
evaluation of d + 1 tokens, which on this CPU costs ``cost_vs_one_token[d + 1]`` decode steps
(``results/latency/draft-cost.json``, linear between the measured sizes), and keeps the
drafted tokens up to the first it would not have produced, plus one of its own.

Replayed on each stored answer's tokens with its question and shown passages as the
prompt: a step with no match costs one decode step and yields one token, a step with a
draft of d tokens of which a match yields a + 1 tokens for the check's cost. The answers
were sampled (temperature 0.8), where a sampled check accepts a drafted token with the
probability the model gives it, so an exact match is the likely case, not a bound.
Stored answers are the finished text (citations and a few sentences moved or cut), close
to what was decoded. The decode speed-up is tokens / cost; prefill is not counted.

    python benchmarks/lookup_acceptance.py results/dev/protocol --methods rag,typed-rag \
        --out results/latency/lookup-acceptance.json
"""

from __future__ import annotations

import argparse
import json
import statistics
from collections import defaultdict
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from cli.lab.eval_papers import index_lookup
from eval.grounding.run import shown_passages
from typed_rag.config import load_settings
from typed_rag.models import ensure_model

DRAFTS = (1, 3, 7)
NGRAMS = ((1, 2), (1, 3), (2, 3), (3, 4))  # (least, most) tokens of the matched n-gram


def step_cost(costs: dict[int, float]) -> Callable[[int], float]:
    """Cost of evaluating ``n`` tokens in one step, in decode steps, linear between the
    measured sizes (and beyond the largest, at the largest's rate per token)."""
    sizes = sorted(costs)

    def cost(n: int) -> float:
        if n in costs:
            return costs[n]
        hi = next((s for s in sizes if s > n), None)
        if hi is None:
            return costs[sizes[-1]] * n / sizes[-1]
        lo = max(s for s in sizes if s < n)
        return costs[lo] + (costs[hi] - costs[lo]) * (n - lo) / (hi - lo)

    return cost


class NgramIndex:
    """The text so far and where each of its n-grams (n <= ``max_ngram``) first ends."""

    def __init__(self, max_ngram: int, min_ngram: int = 1) -> None:
        self.max_ngram, self.min_ngram = max_ngram, min_ngram
        self.tokens: list[int] = []
        self.first: dict[tuple[int, ...], int] = {}

    def extend(self, tokens: Sequence[int]) -> None:
        for t in tokens:
            self.tokens.append(t)
            end = len(self.tokens)
            for n in range(1, min(self.max_ngram, end) + 1):
                self.first.setdefault(tuple(self.tokens[end - n : end]), end)

    def draft(self, size: int) -> list[int]:
        """What followed the first occurrence of the text's last n-gram, the longest n that
        occurred before (llama-cpp-python's rule, which has ``min_ngram`` 1), at most ``size``
        tokens; [] when none."""
        length = len(self.tokens)
        for n in range(min(self.max_ngram, length - 1), self.min_ngram - 1, -1):
            end = self.first.get(tuple(self.tokens[length - n :]))
            if end is not None and end < length - n:
                return self.tokens[end : min(end + size, length)]
        return []


def replay(
    prompt: Sequence[int],
    answer: Sequence[int],
    ngrams: tuple[int, int],
    draft: int,
    cost: Callable[[int], float],
) -> dict[str, float]:
    """Decode steps, their cost and the drafted and accepted tokens of one answer, drafting
    from matches of ``ngrams`` (least, most) tokens."""
    i = steps = drafted = accepted = 0
    paid = 0.0
    seen = NgramIndex(ngrams[1], ngrams[0])
    seen.extend(prompt)
    while i < len(answer):
        proposal = seen.draft(draft)
        a = 0
        while a < len(proposal) and i + a < len(answer) and proposal[a] == answer[i + a]:
            a += 1
        got = min(a + 1, len(answer) - i)
        paid += cost(len(proposal) + 1) if proposal else 1.0
        steps += 1
        drafted += len(proposal)
        accepted += a
        seen.extend(answer[i : i + got])
        i += got
    return {"tokens": len(answer), "steps": steps, "cost": paid, "drafted": drafted,
            "accepted": accepted}  # fmt: skip


def load_answers(run: Path, methods: Sequence[str]) -> list[dict[str, Any]]:
    rows = [json.loads(line) for line in (run / "answers.jsonl").open(encoding="utf-8")]
    return [r for r in rows if r["method"] in methods and (r.get("answer") or "").strip()]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("run", type=Path, help="a run directory with answers.jsonl")
    parser.add_argument("--methods", default="rag,typed-rag")
    parser.add_argument("--costs", type=Path, default=Path("results/latency/draft-cost.json"))
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()

    from llama_cpp import Llama

    settings = load_settings()
    answers = load_answers(args.run, args.methods.split(","))
    texts = shown_passages(answers, index_lookup(settings))
    model = Llama(model_path=str(ensure_model(settings, settings.engine.model)), vocab_only=True,
                  verbose=False)  # fmt: skip

    def tokens(text: str) -> list[int]:
        return model.tokenize(text.encode("utf-8"), add_bos=False, special=False)

    costs = json.loads(args.costs.read_text())["cost_vs_one_token"]
    cost = step_cost({int(k): float(v) for k, v in costs.items()})
    groups: dict[tuple[str, str, tuple[int, int], int], list[dict[str, float]]]
    groups = defaultdict(list)
    for row in answers:
        shown = [texts.get(str(p["id"])) for p in row["result"].get("passages") or []]
        prompt = tokens(
            row["question"] + "\n" + "\n\n".join(f"{p['title']}\n{p['text']}" for p in shown if p)
        )
        answer = tokens(row["answer"])
        route = row["route"] if row["method"] == "typed-rag" else "all"
        for n in NGRAMS:
            for d in DRAFTS:
                r = replay(prompt, answer, n, d, cost)  # n: (least, most)
                groups[(row["method"], route, n, d)].append(r)
                if route != "all":
                    groups[(row["method"], "all", n, d)].append(r)
    out = []
    for (method, route, n, d), rs in sorted(groups.items()):
        speedups = [r["tokens"] / r["cost"] for r in rs]
        drafted = sum(r["drafted"] for r in rs)
        out.append({
            "method": method, "route": route, "ngram": f"{n[0]}-{n[1]}", "draft": d, "answers": len(rs),
            "tokens_median": statistics.median(r["tokens"] for r in rs),
            "accepted_of_drafted": sum(r["accepted"] for r in rs) / drafted if drafted else 0.0,
            "tokens_per_step": sum(r["tokens"] for r in rs) / sum(r["steps"] for r in rs),
            "decode_speedup_median": statistics.median(speedups),
            "decode_speedup_total": sum(r["tokens"] for r in rs) / sum(r["cost"] for r in rs),
        })  # fmt: skip
    print(f"{'method':10} {'route':15} n    d answers accepted tok/step speed-up (median, all)")
    for r in out:
        print(
            f"{r['method']:10} {r['route']:15} {r['ngram']}  {r['draft']} {r['answers']:7d}"
            f" {r['accepted_of_drafted']:8.2f} {r['tokens_per_step']:8.2f}"
            f" {r['decode_speedup_median']:.2f}, {r['decode_speedup_total']:.2f}"
        )
    report = {"run": str(args.run), "costs": str(args.costs), "rows": out}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=1) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
