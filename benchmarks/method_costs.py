"""Every method change tried for issue 15: its paired MRR difference and what it costs.

One row per change: the development measurement (the variant minus the configuration it
was tried against, on the same questions, judge and seed), the check on the headline run
where one was made, and the cost of the variant's answers against the base's on the same
questions (engine calls, prompt and completion tokens per question, median seconds and the
median per-question ratio of seconds). Differences come from the committed ``eval
compare`` files where the measurement was made against answers that have since been
replaced (the headline run) or copied elsewhere (the marker-blind verdicts), and are
recomputed from the committed run directories otherwise. Writes ``results/method/costs.json``
and the table ``results/method/costs.md``.

    python -m benchmarks.method_costs
"""

from __future__ import annotations

import argparse
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from eval.compare import compare_runs, last_answers, paired_costs, parse_pool

M = "results/method"
RUN = "results/wiki-nfqa/run"


@dataclass(frozen=True)
class Change:
    """One change tried: ``a`` (variant) and ``b`` (base) as ``RUN_DIR:METHOD``."""

    name: str
    setting: str
    verdict: str
    a: str
    b: str
    dev: str | None = None  # committed ``eval compare`` JSON; None: recompute a minus b
    check: tuple[str, str] | None = None  # (committed compare JSON or "A|B", group)


CHANGES: tuple[Change, ...] = (
    Change("the `fast` profile against the paper's pipeline", "method.profile=fast",
           "default", f"{RUN}:typed-rag", f"{RUN}:typed-rag@paper"),
    Change("the `improved` profile against the paper's pipeline", "method.profile=improved",
           "option", f"{RUN}:typed-rag@improved", f"{RUN}:typed-rag@paper"),
    Change("end a cut-off answer at its last sentence", "method.trim_cut_off=true", "default",
           f"{M}/trim/dev:typed-rag", f"{M}/direct-first/base:typed-rag",
           f"{M}/trim/dev-vs-typed-rag.json", (f"{M}/trim/vs-typed-rag.json", "all")),
    Change("drop prompt sections copied into the answer", "method.drop_echo=true", "default",
           f"{M}/drop-echo/runs/method__factoid-brief__second-base:typed-rag",
           f"{M}/factoid-brief/second-base:typed-rag"),
    Change("state the answer's length budget", "method.length_hint=true", "off",
           f"{M}/length-hint/dev:typed-rag", f"{M}/trim/dev:typed-rag",
           f"{M}/length-hint/dev-vs-default.json"),
    Change("a direct answer first", "method.direct_first=all", "off",
           f"{M}/direct-first/direct:typed-rag", f"{M}/direct-first/base:typed-rag",
           f"{M}/direct-first/direct-vs-base.json",
           (f"{M}/direct-first/heldout/vs-typed-rag.json", "DEBATE")),
    Change("a direct answer first (DEBATE; fresh questions)", "method.direct_first=debate",
           "off", f"{M}/debate-direct/fresh-direct:typed-rag",
           f"{M}/debate-direct/fresh-base:typed-rag"),
    Change("two perspectives instead of three (DEBATE; fresh questions)",
           "method.max_sub_queries=2", "off", f"{M}/debate-direct/fresh-two:typed-rag",
           f"{M}/debate-direct/fresh-base:typed-rag"),
    Change("the closed-book draft for DEBATE too (fresh questions)",
           "method.own_knowledge_types=REASON,FACTOID,DEBATE", "off",
           f"{M}/debate-direct/fresh-draft:typed-rag",
           f"{M}/debate-direct/fresh-base:typed-rag"),
    Change("the own-knowledge line without a draft (DEBATE; fresh questions)",
           "method.own_knowledge=allow, own_knowledge_types=DEBATE", "off",
           f"{M}/debate-direct/fresh-allow:typed-rag",
           f"{M}/debate-direct/fresh-base:typed-rag"),
    Change("DEBATE answered by REASON's pipeline (fresh questions)",
           "method.debate_route=reason", "off", f"{M}/debate-as-reason/fresh-reason:typed-rag",
           f"{M}/debate-as-reason/fresh-base:typed-rag", None,
           (f"{M}/debate-as-reason/headline-vs-typed-rag.json", "all")),
    Change("the question as one more sub-query", "method.question_sub_query=all", "off",
           f"{M}/question-query/dev-all:typed-rag", f"{M}/direct-first/base:typed-rag",
           f"{M}/question-query/dev-all-vs-base.json"),
    Change("both DEBATE options (DEBATE questions)",
           "method.direct_first=debate, method.question_sub_query=debate", "off",
           f"{M}/debate-direct/dev-both:typed-rag", f"{M}/debate-direct/dev-base:typed-rag",
           f"{M}/debate-direct/both-vs-base.json"),
    Change("the paper's paraphrased sub-queries (REASON; fresh questions)",
           "method.sub_query_style=paraphrase", "off",
           f"{M}/sub-query-style/fresh-paraphrase:typed-rag",
           f"{M}/sub-query-style/fresh-base:typed-rag", None,
           (f"{M}/sub-query-style/headline-vs-typed-rag.json", "all")),
    Change("two sub-queries instead of three (REASON; fresh questions)",
           "method.max_sub_queries=2", "off", f"{M}/sub-query-style/fresh-two:typed-rag",
           f"{M}/sub-query-style/fresh-base:typed-rag"),
    Change("EXPERIENCE reranks against the question (EXPERIENCE questions)",
           "method.experience_rerank=question", "off",
           f"{M}/experience-rerank/dev-question:typed-rag",
           f"{M}/experience-rerank/dev-keywords:typed-rag",
           f"{M}/experience-rerank/question-vs-keywords.json"),
    Change("EXPERIENCE reranks against question and keywords (EXPERIENCE questions)",
           "method.experience_rerank=both", "off",
           f"{M}/experience-rerank/dev-both:typed-rag",
           f"{M}/experience-rerank/dev-keywords:typed-rag",
           f"{M}/experience-rerank/both-vs-keywords.json"),
    Change("the closed-book draft for INSTRUCTION too (fresh questions, two pools)",
           "method.own_knowledge_types=REASON,FACTOID,INSTRUCTION", "off",
           f"{M}/instruction-draft/fresh-draft,{M}/multi-hop/fresh-instr-draft:typed-rag",
           f"{M}/instruction-draft/fresh-base,{M}/multi-hop/fresh-base:typed-rag",
           check=(f"{M}/instruction-draft/guided-headline-changed.json", "all")),
    Change("INSTRUCTION's draft restated in the references' words (fresh questions, two pools)",
           "method.own_knowledge=draft-cite, own_knowledge_types=REASON,FACTOID,INSTRUCTION",
           "off (citations)",
           f"{M}/instruction-draft/fresh-draft-cite,{M}/multi-hop/fresh-instr-draft-cite:typed-rag",
           f"{M}/instruction-draft/fresh-base,{M}/multi-hop/fresh-base:typed-rag"),
    Change("a closed-book draft (every type on dev; REASON on the headline)",
           "method.own_knowledge=draft", "default for REASON",
           f"{M}/own-knowledge/dev-draft:typed-rag", f"{M}/own-knowledge/dev-base:typed-rag",
           f"{M}/own-knowledge/draft-vs-base.json",
           (f"{M}/own-knowledge/headline-draft-vs-typed-rag.json", "all")),
    Change("the draft, restated in the references' words (REASON questions)",
           "method.own_knowledge=draft-cite", "off",
           f"{M}/own-knowledge/dev-draft-cite:typed-rag", f"{M}/own-knowledge/dev-draft:typed-rag",
           f"{M}/own-knowledge/draft-cite-vs-draft.json"),
    Change("confident FACTOIDs take the factoid route with a draft",
           "eval.route=labels-factoid, own_knowledge_types=REASON,FACTOID", "default",
           f"{M}/factoid-route/dev:typed-rag", f"{M}/own-knowledge/dev-base:typed-rag",
           f"{M}/factoid-route/dev-vs-base.json",
           (f"{M}/factoid-route/headline-vs-typed-rag.json", "all")),
    Change("the factoid route searches with its draft", "method.draft_query=true", "off",
           f"{M}/draft-query/dev:typed-rag", f"{M}/factoid-route/dev:typed-rag", None,
           (f"{M}/draft-query/headline:typed-rag|{M}/factoid-route/headline:typed-rag", "all")),
    Change("the factoid route asked for a brief answer (fresh questions)",
           "method.factoid_brief=true", "off", f"{M}/factoid-brief/fresh-brief:typed-rag",
           f"{M}/factoid-brief/fresh-base:typed-rag"),
    *(Change(f"the factoid route's answer cut to {n} sentence{'s' * (n > 1)} (fresh questions)",
             f"method.factoid_sentences={n}", "off",
             f"{M}/factoid-brief/fresh-cap{n}:typed-rag",
             f"{M}/factoid-brief/fresh-base:typed-rag") for n in (1, 2, 3)),
    Change("the typed pipelines' guidance on the factoid route (fresh questions, two pools)",
           "method.factoid_guidance=true", "default",
           f"{M}/factoid-brief/fresh-guidance,{M}/factoid-brief/second-guidance:typed-rag",
           f"{M}/factoid-brief/fresh-base,{M}/factoid-brief/second-base:typed-rag",
           check=(f"{M}/factoid-guidance/headline-vs-typed-rag.json", "all")),
    Change("core sub-questions named (Xie et al.'s M2)", "method.core_sub_questions=listed",
           "off", f"{M}/core-sub-questions/m2:typed-rag", f"{M}/core-sub-questions/base:typed-rag"),
    Change("no core sub-question instruction (against M1, the default)",
           "method.core_sub_questions=off", "off",
           f"{M}/core-sub-questions/m1-off:typed-rag", f"{M}/core-sub-questions/base:typed-rag"),
    Change("core sub-questions answered end to end (Xie et al.'s M4)", "augment.end_to_end=true",
           "off", f"{M}/core-sub-questions/m4:typed-rag", f"{M}/core-sub-questions/base:typed-rag",
           f"{M}/core-sub-questions/compare/m4-vs-base.json"),
    Change("the mediator's perspectives by name, not numbered (headline DEBATE route)",
           "method.mediator_labels=perspectives", "off",
           f"{M}/mediator-labels/debate:typed-rag", f"{M}/mediator-labels/base:typed-rag",
           f"{M}/mediator-labels/vs-typed-rag.json"),
    Change("the draft as one more REASON sub-query (fresh questions)",
           "method.draft_sub_query=true", "off", f"{M}/draft-sub-query/fresh:typed-rag",
           f"{M}/sub-query-style/fresh-base:typed-rag", f"{M}/draft-sub-query/fresh-vs-base.json"),
    Change("multi-hop chains answered link by link first (fresh multi-hop questions)",
           "method.resolve_hops=true", "off", f"{M}/multi-hop/fresh-hops:typed-rag",
           f"{M}/multi-hop/fresh-base:typed-rag", f"{M}/multi-hop/fresh-hops-vs-base.json"),
    Change("hybrid retrieval, BM25 and dense fused (37 fresh multi-hop questions)",
           "retrieval.kind=hybrid", "off", f"{M}/hybrid-retrieval/hybrid:typed-rag",
           f"{M}/hybrid-retrieval/base:typed-rag", f"{M}/hybrid-retrieval/hybrid-vs-base.json"),
    Change("the classifier's confident typed route over the label (headline, 20 rerouted)",
           "eval.route=labels-classifier", "headline route",
           f"{M}/classifier-route/headline:typed-rag",
           f"{M}/classifier-route/labels-factoid:typed-rag",
           f"{M}/classifier-route/headline-vs-typed-rag.json",
           (f"{M}/classifier-route/all-vs-labels-factoid.json", "all")),
)  # fmt: skip


def group_row(result: dict[str, Any], group: str) -> dict[str, Any]:
    """The ``group`` row of an ``eval compare`` result (``all``, a type or a subset)."""
    for row in result["rows"]:
        if row["subset"] == group:
            return {"n": row["n"], "mrr_diff": row["mrr_diff"], "mrr_ci": row["mrr_ci"]}
    raise KeyError(f"{result['a']} minus {result['b']}: no {group!r} row")


def measured(source: str | None, a: str, b: str, group: str, n_boot: int) -> dict[str, Any]:
    if source is None:
        return group_row(compare_runs(a, b, n_boot=n_boot), group)
    if "|" in source:
        left, right = source.split("|")
        return group_row(compare_runs(left, right, n_boot=n_boot), group)
    return group_row(json.loads(Path(source).read_text(encoding="utf-8")), group)


def cost(a: str, b: str) -> dict[str, Any] | None:
    (runs_a, m_a), (runs_b, m_b) = parse_pool(a), parse_pool(b)
    return paired_costs(last_answers(runs_a, m_a), last_answers(runs_b, m_b))


def table(rows: list[dict[str, Any]]) -> str:
    def diff(m: dict[str, Any] | None) -> str:
        if not m:
            return ""
        lo, hi = m["mrr_ci"]
        return f"{m['mrr_diff']:+.3f} [{lo:+.3f}, {hi:+.3f}] ({m['n']})"

    lines = [
        "| change | setting | where chosen: MRR diff [95% CI] (n) | headline check (n) | engine calls "
        "/ question | prompt + completion tokens / question | median s / question "
        "(ratio) | kept |",
        "|---|---|---:|---:|---:|---:|---:|---|",
    ]
    for r in rows:
        c = r["cost"]
        a, b = c["a"], c["b"]
        tokens = (
            f"{a['prompt_tokens'] + a['completion_tokens']:.0f} vs "
            f"{b['prompt_tokens'] + b['completion_tokens']:.0f}"
        )
        lines.append(
            f"| {r['name']} | `{r['setting']}` | {diff(r['dev'])} | {diff(r['check'])} | "
            f"{a['calls']:.1f} vs {b['calls']:.1f} | {tokens} | "
            f"{a['seconds']:.0f} vs {b['seconds']:.0f} ({c['seconds_ratio']:.2f}x) | "
            f"{r['verdict']} |"
        )
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path(M) / "costs.json")
    parser.add_argument("--boot", type=int, default=1000)
    args = parser.parse_args()
    rows = []
    for ch in CHANGES:
        check = None
        if ch.check:
            check = {**measured(ch.check[0], ch.a, ch.b, ch.check[1], args.boot),
                     "group": ch.check[1]}  # fmt: skip
        rows.append({
            "name": ch.name, "setting": ch.setting, "verdict": ch.verdict, "a": ch.a, "b": ch.b,
            "dev": measured(ch.dev, ch.a, ch.b, "all", args.boot), "check": check,
            "cost": cost(ch.a, ch.b),
        })  # fmt: skip
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(rows, indent=1) + "\n", encoding="utf-8")
    md = table(rows)
    args.out.with_suffix(".md").write_text(md, encoding="utf-8")
    print(md)


if __name__ == "__main__":
    main()
