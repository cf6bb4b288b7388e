"""How well the support judge (``typed-rag eval support``) tells supported from unsupported.

Issue 15's second citation bar ("at least 70% of cited sentences are judged supported by
their citation") is read by the 1.5B support judge, so its verdicts are worth knowing on
statements whose answer is known. From the passages a run showed (one per question, the
first with a sentence of 8 to 40 words), four kinds of (statement, passage) pairs:

- ``verbatim``: a sentence of the passage, against that passage: supported;
- ``reworded``: that sentence rewritten by the generator (temperature 0, "in your own words,
  keeping every fact"), kept when it still names every number and name of the original
  (:func:`typed_rag.citations.specifics`) and is not a copy, against the same passage:
  supported, and closer to a cited sentence of an answer than a copy is;
- ``altered``: the same sentence with one number or one name changed (a number moved by a
  few units, a name swapped for one of another question's passage), against the same
  passage: unsupported, and the error a draft-written sentence makes ("another year or
  person", ``docs/method-options.md``);
- ``elsewhere``: the sentence against a passage shown for another question: unsupported.

Each pair is asked exactly as ``eval support`` asks a cited sentence (same prompt, P(yes)
from the next-token probabilities, supported at 0.5), verdicts cached in ``--out``. The
summary gives the share judged supported per kind with a bootstrap interval, the accuracy
on each, and the AUC of P(yes) between verbatim and altered pairs; ``p_yes.png`` shows
P(yes) per kind.

    python -m benchmarks.support_validity results/wiki-nfqa/reranked --questions 100 \\
        --out results/judge/support-validity
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import re
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np

from cli.eval_papers import index_lookup
from eval.figures import plt
from eval.linkage_prob import p_yes
from eval.manifest import scorer_name
from eval.metrics import estimate
from eval.runner import ANSWERS
from eval.support import THRESHOLD, support_request
from typed_rag.citations import named_in, specifics
from typed_rag.config import load_settings, parse_overrides
from typed_rag.engines.base import ChatRequest
from typed_rag.engines.factory import build_engine
from typed_rag.sentences import NOT_ABBREVIATION
from typed_rag.store import JsonlStore, read_jsonl
from typed_rag.subanswers import STOPWORDS

KINDS = ("verbatim", "reworded", "altered", "elsewhere")
SUPPORTED = {"verbatim": True, "reworded": True, "altered": False, "elsewhere": False}
STRICTER = (0.6, 0.7, 0.8)
VERDICTS = "verdicts.jsonl"
REWRITES = "rewrites.jsonl"
REWRITE_PROMPT = (
    "Rewrite the sentence below in your own words. Keep every fact, name and number, and add "
    "nothing. Reply with the rewritten sentence only.\n\nSentence: {sentence}"
)

# A sentence ends at ".", "!" or "?" before a capital, not at an initial ("John F. Kennedy").
_SENTENCE = re.compile(rf"{NOT_ABBREVIATION}(?<=[.!?])\s+(?=[A-Z])")
_NUMBER = re.compile(r"\b\d{1,4}\b")
_NAME = re.compile(r"\b[A-Z][a-z]{2,}\b")


@dataclass(frozen=True)
class Pair:
    """One statement and the passage it is judged against, and whether it holds there."""

    kind: str
    question_id: str
    passage_id: str
    statement: str

    @property
    def supported(self) -> bool:
        return SUPPORTED[self.kind]


def sentence_of(text: str, rng: random.Random) -> str | None:
    """A whole sentence of ``text`` (a capital first, a full stop last) of 8 to 40 words,
    chosen by ``rng``; None when it has none (a passage is a chunk and may open mid-sentence)."""
    sentences = [s.strip() for s in _SENTENCE.split(text)]
    fit = [s for s in sentences if 8 <= len(s.split()) <= 40 and s[:1].isupper() and s[-1] in ".!?"]
    return rng.choice(fit) if fit else None


def _names(sentence: str) -> list[re.Match[str]]:
    """The capitalised words of one sentence after its first that are no stop words."""
    return [
        m for m in _NAME.finditer(sentence) if m.start() and m.group(0).lower() not in STOPWORDS
    ]


def names_in(text: str) -> set[str]:
    """The capitalised words of ``text`` that open no sentence and are no stop words: its
    names ("Mogadishu", "Tardini"), not "Because" or "Several"."""
    return {m.group(0) for sentence in _SENTENCE.split(text) for m in _names(sentence)}


def altered(sentence: str, other: str, rng: random.Random) -> str | None:
    """``sentence`` with one fact changed: a number moved by a few units, else a name (a
    capitalised word after the first) swapped for a name of ``other`` it does not contain.
    None when it has neither."""
    numbers = list(_NUMBER.finditer(sentence))
    if numbers:
        m = rng.choice(numbers)
        value = int(m.group(0)) + rng.choice((3, 7, 11))
        return f"{sentence[: m.start()]}{value}{sentence[m.end() :]}"
    own = {w.lower() for w in re.findall(r"[A-Za-z]+", sentence)}
    names = _names(sentence)
    swaps = sorted(w for w in names_in(other) if w.lower() not in own)
    if not names or not swaps:
        return None
    m = rng.choice(names)
    return f"{sentence[: m.start()]}{rng.choice(swaps)}{sentence[m.end() :]}"


def build_pairs(
    shown: Sequence[tuple[str, str]],
    texts: Mapping[str, tuple[str, str]],
    seed: int = 42,
) -> list[Pair]:
    """The verbatim, altered and elsewhere pairs of each (question id, passage id) of
    ``shown``; the ``elsewhere`` and ``altered`` material comes from the next question's
    passage (``reworded`` pairs need the generator: :func:`reworded`)."""
    pairs: list[Pair] = []
    for i, (qid, pid) in enumerate(shown):
        rng = random.Random(f"{seed}:{qid}")  # each question's pairs stand on their own
        sentence = sentence_of(texts[pid][1], rng)
        if sentence is None:
            continue
        other = shown[(i + 1) % len(shown)][1]
        pairs.append(Pair("verbatim", qid, pid, sentence))
        if (changed := altered(sentence, texts[other][1], rng)) is not None:
            pairs.append(Pair("altered", qid, pid, changed))
        if other != pid:
            pairs.append(Pair("elsewhere", qid, other, sentence))
    return pairs


def first_passages(rows: Sequence[Mapping[str, Any]], questions: int) -> list[tuple[str, str]]:
    """(question id, first shown passage id) of the first ``questions`` typed-rag rows."""
    out = []
    for row in rows:
        passages = (row.get("result") or {}).get("passages") or []
        if row.get("method") == "typed-rag" and passages:
            out.append((str(row["question_id"]), str(passages[0]["id"])))
    return out[:questions]


def auc(positive: Sequence[float], negative: Sequence[float]) -> float | None:
    """P(a positive's score > a negative's), ties half (Mann-Whitney)."""
    if not positive or not negative:
        return None
    p, n = np.asarray(positive)[:, None], np.asarray(negative)[None, :]
    return float(((p > n).sum() + 0.5 * (p == n).sum()) / (p.size * n.size))


def summarize(pairs: Sequence[Pair], probs: Sequence[float]) -> dict[str, Any]:
    """Per kind: pairs, share judged supported (95% CI), accuracy; and the AUCs."""
    by_kind: dict[str, list[float]] = {k: [] for k in KINDS}
    for pair, prob in zip(pairs, probs, strict=True):
        by_kind[pair.kind].append(prob)
    out: dict[str, Any] = {"threshold": THRESHOLD, "kinds": {}}
    for kind, values in by_kind.items():
        judged = [float(v >= THRESHOLD) for v in values]
        share = estimate(judged, n_boot=2000, seed=42).to_dict() if judged else None
        accuracy = None
        if share is not None:
            accuracy = share["mean"] if SUPPORTED[kind] else 1 - share["mean"]
        out["kinds"][kind] = {
            "pairs": len(values),
            "judged_supported": share,
            "accuracy": accuracy,
            # the same at stricter thresholds: what a stricter reading would change
            "supported_at": {f"{t:g}": float(np.mean([v >= t for v in values])) for t in STRICTER}
            if values
            else {},
        }
    out["auc_verbatim_vs_altered"] = auc(by_kind["verbatim"], by_kind["altered"])
    out["auc_reworded_vs_altered"] = auc(by_kind["reworded"], by_kind["altered"])
    out["auc_verbatim_vs_elsewhere"] = auc(by_kind["verbatim"], by_kind["elsewhere"])
    return out


def kept_rewrite(sentence: str, rewrite: str) -> str | None:
    """``rewrite`` as a ``reworded`` statement: its first line, when it names every number
    and name of ``sentence`` and is not a copy of it; else None."""
    lines = rewrite.strip().splitlines()
    text = lines[0].strip().strip('"').strip() if lines else ""
    words = re.findall(r"\w+", text.lower())
    if len(words) < 5 or words == re.findall(r"\w+", sentence.lower()):
        return None
    return text if specifics(sentence) <= named_in(text) else None


async def reworded(
    pairs: Sequence[Pair], engine: Any, model: str, out: Path, batch_size: int
) -> list[Pair]:
    """A ``reworded`` pair for each ``verbatim`` one whose rewrite keeps its facts; the
    generator's rewrites are cached in ``out``."""
    store = JsonlStore(out / REWRITES, key=lambda r: f"{r['model']}\t{r['sentence']}")
    verbatim = [p for p in pairs if p.kind == "verbatim"]
    todo = [p for p in verbatim if store.get(f"{model}\t{p.statement}") is None]
    for start in range(0, len(todo), batch_size):
        chunk = todo[start : start + batch_size]
        reqs = [
            ChatRequest(
                [{"role": "user", "content": REWRITE_PROMPT.format(sentence=p.statement)}],
                temperature=0.0,
                max_tokens=96,
                seed=42,
            )
            for p in chunk
        ]
        results = await engine.generate(reqs)
        store.append(
            {"model": model, "sentence": p.statement, "rewrite": r.text}
            for p, r in zip(chunk, results, strict=True)
        )
        print(f"\r  rewrites {start + len(chunk)}/{len(todo)}", end="", flush=True)
    out_pairs = []
    for p in verbatim:
        rewrite = store.get(f"{model}\t{p.statement}")["rewrite"]  # type: ignore[index]
        if (text := kept_rewrite(p.statement, rewrite)) is not None:
            out_pairs.append(Pair("reworded", p.question_id, p.passage_id, text))
    return out_pairs


def _key(row: Mapping[str, Any]) -> str:
    return "\t".join(
        str(row[k]) for k in ("model", "kind", "question_id", "passage_id", "statement")
    )


async def judge(
    pairs: Sequence[Pair],
    texts: Mapping[str, tuple[str, str]],
    engine: Any,
    model: str,
    out: Path,
    batch_size: int,
) -> list[float]:
    """P(yes) of every pair, asking the (open) engine only for those not cached in ``out``."""
    store = JsonlStore(out / VERDICTS, key=_key)
    rows = [{"model": model, **asdict(p)} for p in pairs]
    todo = [(p, r) for p, r in zip(pairs, rows, strict=True) if store.get(_key(r)) is None]
    for start in range(0, len(todo), batch_size):
        chunk = todo[start : start + batch_size]
        reqs = [support_request(p.statement, *texts[p.passage_id]) for p, _ in chunk]
        results = await engine.score_choices(reqs)
        store.append(
            {**r, "p_yes": p_yes(x.logprobs)} for (_, r), x in zip(chunk, results, strict=True)
        )
        print(f"\r  verdicts {start + len(chunk)}/{len(todo)}", end="", flush=True)
    return [float(store.get(_key(r))["p_yes"]) for r in rows]  # type: ignore[index]


def plot(pairs: Sequence[Pair], probs: Sequence[float], judge: str, path: Path) -> Path:
    """P(yes) of each kind of pair, as histograms, with the 0.5 threshold."""
    fig, ax = plt.subplots(figsize=(5.5, 3.5))
    bins = np.linspace(0, 1, 21)
    for kind in KINDS:
        values = [p for pair, p in zip(pairs, probs, strict=True) if pair.kind == kind]
        label = f"{kind} ({'supported' if SUPPORTED[kind] else 'unsupported'}, {len(values)})"
        ax.hist(values, bins=bins, histtype="step", linewidth=1.5, label=label)
    ax.axvline(THRESHOLD, color="grey", lw=0.8, ls="--")
    ax.set_xlabel("support judge P(yes)")
    ax.set_ylabel("pairs")
    ax.set_title(f"support judge {judge.split(':')[-1]} on known pairs", fontsize=8)
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


def render(summary: Mapping[str, Any]) -> str:
    lines = [f"support judge {summary['judge']}, {summary['questions']} passages"]
    for kind, m in summary["kinds"].items():
        s = m["judged_supported"]
        if s is None:
            continue
        lines.append(
            f"{kind:>10}: {m['pairs']:>4} pairs, judged supported {100 * s['mean']:.1f}% "
            f"[{100 * s['low']:.1f}, {100 * s['high']:.1f}], accuracy {100 * m['accuracy']:.1f}%"
        )
    for name in ("auc_verbatim_vs_altered", "auc_reworded_vs_altered", "auc_verbatim_vs_elsewhere"):
        if summary[name] is not None:
            lines.append(f"{name}: {summary[name]:.3f}")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("run_dir", type=Path, help="a directory made by `eval run` with typed-rag")
    ap.add_argument("--questions", type=int, default=100, help="passages (one per question)")
    ap.add_argument("--out", type=Path, required=True, help="verdict cache and summary.json")
    ap.add_argument("--seed", type=int, default=42)
    ap.add_argument("--batch-size", type=int, default=8)
    ap.add_argument("--set", action="append", default=[], help="KEY=VALUE settings override")
    args = ap.parse_args(argv)
    if args.questions < 1:
        ap.error(f"--questions must be 1 or more, got {args.questions}")
    if not (args.run_dir / ANSWERS).exists():
        ap.error(f"{args.run_dir} has no {ANSWERS}")
    settings = load_settings(None, **parse_overrides(args.set))
    shown = first_passages(read_jsonl(args.run_dir / ANSWERS), args.questions)
    if len(shown) < 2:
        ap.error(f"{args.run_dir} shows passages for fewer than 2 typed-rag answers")
    texts = index_lookup(settings)(sorted({pid for _, pid in shown}))
    pairs = build_pairs(shown, texts, args.seed)
    model = scorer_name(settings)
    engine = build_engine(settings)

    async def run() -> list[float]:
        async with engine:
            pairs.extend(await reworded(pairs, engine, model, args.out, args.batch_size))
            return await judge(pairs, texts, engine, model, args.out, args.batch_size)

    probs = asyncio.run(run())
    summary = {"judge": model, "questions": len(shown), "run_dir": str(args.run_dir)}
    summary |= summarize(pairs, probs)
    print("\n" + render(summary))
    (args.out / "summary.json").write_text(json.dumps(summary, indent=1) + "\n")
    figure = plot(pairs, probs, model, args.out / "p_yes.png")
    print(f"wrote {args.out / 'summary.json'}, {figure}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
