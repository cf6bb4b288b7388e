"""Does the answer follow the asker's system message? 20 requests with one checkable instruction.

Each request is a ``rag`` question with a system message that asks for a language, a length
or a format; a deterministic check says whether the answer (citation markers removed)
follows it. Run it against a server (``--url``) once per variant to compare, e.g. the
server of the commit before the change (``--label before``) and after it (``--label
after``); each run adds ``system_followed_share[label]`` and its per-request records to
``results/serving/summary.json`` (other keys of the file are kept).

    python benchmarks/instructions_bench.py --url http://127.0.0.1:8000 --label after
"""

from __future__ import annotations

import argparse
import asyncio
import json
import re
import sys
import time
from collections.abc import Callable
from pathlib import Path

import httpx

# Small function-word lists: enough to tell which of four languages a paragraph is in.
WORDS = {
    "en": "the and is are of to in that it for with was as on this by be which".split(),
    "fr": "le la les des est et une un du pour dans que qui sont au aux pas sur avec".split(),
    "es": "el la los las es y una un del para en que por con se son al lo".split(),
    "de": "der die das und ist ein eine nicht mit den dem zu von sind auch sich im".split(),
}


def language(text: str) -> str:
    """The language of ``WORDS`` whose function words ``text`` uses most."""
    tokens = re.findall(r"[a-zà-ÿß]+", text.lower())
    return max(WORDS, key=lambda lang: sum(t in WORDS[lang] for t in tokens))


def sentences(text: str) -> list[str]:
    return [s for s in re.split(r"(?<=[.!?])\s+", text.strip()) if re.search(r"\w", s)]


def bullets(text: str) -> list[str]:
    return [line for line in text.splitlines() if re.match(r"\s*(?:[-*•]|\d+[.)])\s+\S", line)]


def upper_share(text: str) -> float:
    letters = [c for c in text if c.isalpha()]
    return sum(c.isupper() for c in letters) / len(letters) if letters else 0.0


Check = Callable[[str], bool]
CHECKS: dict[str, tuple[str, Check]] = {
    "french": ("Answer only in French.", lambda a: language(a) == "fr"),
    "spanish": ("Answer only in Spanish.", lambda a: language(a) == "es"),
    "german": ("Answer only in German.", lambda a: language(a) == "de"),
    "one-sentence": ("Answer in exactly one sentence.", lambda a: len(sentences(a)) == 1),
    "30-words": ("Answer in at most 30 words.", lambda a: len(a.split()) <= 30),
    "three-bullets": (
        "Answer as a bulleted list of exactly three items, nothing else.",
        lambda a: len(bullets(a)) == 3,
    ),
    "uppercase": ("Write the whole answer in capital letters.", lambda a: upper_share(a) >= 0.9),
    "in-short": (
        "Begin your answer with the words 'In short:'.",
        lambda a: a.lstrip("*# ").lower().startswith("in short:"),
    ),
}
REQUESTS: list[tuple[str, str]] = [
    ("Why do leaves change color in autumn?", "french"),
    ("How does a vaccine train the immune system?", "spanish"),
    ("Why did the Western Roman Empire fall?", "german"),
    ("What causes the seasons on Earth?", "french"),
    ("Why is the sky blue?", "spanish"),
    ("How do I bake sourdough bread at home?", "one-sentence"),
    ("What are the health effects of regular exercise?", "one-sentence"),
    ("Why did the Titanic sink?", "one-sentence"),
    ("Is nuclear power a good idea for fighting climate change?", "30-words"),
    ("What is the difference between coffee and tea?", "30-words"),
    ("Why do cats purr?", "30-words"),
    ("How do I start learning to play the guitar?", "three-bullets"),
    ("What are the benefits of learning a second language?", "three-bullets"),
    ("Why do people get jet lag?", "three-bullets"),
    ("Should programmers learn Python or Java first?", "uppercase"),
    ("Why do we dream?", "uppercase"),
    ("How does a refrigerator keep food cold?", "in-short"),
    ("Why did the dinosaurs go extinct?", "in-short"),
    ("What was it like to go backpacking in Europe?", "german"),
    ("How do bees make honey?", "in-short"),
]


def plain(answer: str) -> str:
    """The answer without ``[n]`` citation markers."""
    return re.sub(r"\s*\[\d+(?:,\s*\d+)*\]", "", answer).strip()


async def run(url: str, model: str, max_tokens: int, seed: int) -> list[dict]:
    records = []
    async with httpx.AsyncClient(timeout=httpx.Timeout(1800, connect=10)) as http:
        for question, check in REQUESTS:
            instruction, follows = CHECKS[check]
            body = {
                "model": model,
                "messages": [
                    {"role": "system", "content": instruction},
                    {"role": "user", "content": question},
                ],
                "max_tokens": max_tokens,
                "seed": seed,
            }
            start = time.perf_counter()
            r = await http.post(url.rstrip("/") + "/v1/chat/completions", json=body)
            r.raise_for_status()
            answer = plain(r.json()["choices"][0]["message"]["content"] or "")
            rec = {"question": question, "check": check, "followed": follows(answer)}
            rec |= {"answer": answer, "seconds": round(time.perf_counter() - start, 1)}
            print(f"{rec['followed']!s:5} {check:13} {rec['seconds']:6} s  {question}", flush=True)
            records.append(rec)
    return records


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--url", required=True, help="the server to ask")
    p.add_argument("--label", required=True, help="the variant's name in the summary")
    p.add_argument("--model", default="rag", choices=["typed-rag", "rag", "llm"])
    p.add_argument("--max-tokens", type=int, default=160)
    p.add_argument("--seed", type=int, default=42)
    p.add_argument("--out", default="results/serving/summary.json")
    args = p.parse_args(argv)
    records = asyncio.run(run(args.url, args.model, args.max_tokens, args.seed))
    share = sum(r["followed"] for r in records) / len(records)
    out = Path(args.out)
    summary = json.loads(out.read_text()) if out.exists() else {}
    summary.setdefault("system_followed_share", {})[args.label] = share
    summary.setdefault("system_followed", {})[args.label] = {
        "model": args.model,
        "max_tokens": args.max_tokens,
        "records": records,
    }
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(summary, indent=1, ensure_ascii=False) + "\n")
    print(f"{args.label}: followed {share:.2f} of {len(records)}; wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
