"""The method options of the typed pipelines (issue 15): the profiles and the per-option overrides.

Kept apart from :mod:`typed_rag.config` because it is one self-contained vocabulary
(what ``method.profile`` turns on and how explicit values win over it).
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, Field, field_validator, model_validator

from typed_rag.types import TYPED_TYPES, parse_type_list

# What ``method.profile = "improved"`` turns on (issue 15); every field can still be
# set on its own, and an explicit value wins over the profile's.
METHOD_PROFILES: dict[str, dict[str, Any]] = {
    "paper": {},
    "improved": {
        "grounded_aggregation": True,
        "drop_uninformative": True,
        "answer_shapes": True,
        "experience_retrieval": "both",
        "core_sub_questions": "definition",
        "require_citations": True,
        "strip_invalid_citations": True,
        "post_cite": True,
        "cite_min_share": 0.7,
        "cite_floor_share": 0.4,
        "max_sub_queries": 3,
        "anchor_sub_queries": True,
        "trim_cut_off": True,
        "drop_echo": True,
    },
}
# "fast" (issue 14; the default): the improved set with extracted sub-answers, so a
# decomposed question costs two generations (plan, final answer) like the keyword pipelines,
# and a closed-book draft for REASON questions, one short round more (measured on 129 + 55
# REASON questions, docs/method-options.md), and for the factoid route (factual questions:
# measured on 66 headline questions, results/method/factoid-route).
METHOD_PROFILES["fast"] = {
    **METHOD_PROFILES["improved"],
    "sub_answers": "extract",
    "grounded_aggregation": False,
    "own_knowledge": "draft",
    "own_knowledge_types": ["REASON", "FACTOID"],
    # The user never sees the draft, so an answer's sentences about it go (measured on the
    # headline: 6 of 382 answers changed, +0.000 [-0.002, +0.003], results/method/draft-talk).
    "drop_draft_talk": True,
    # The factoid route's final prompt gets the typed pipelines' guidance and citation rule:
    # more of its answers cite, at the same quality (144 fresh factual questions and the
    # headline's 103 factoid-route ones, results/method/factoid-guidance).
    "factoid_guidance": True,
    # The passages the model copies after its answer ("[3] Malta, a Southern European ...")
    # go: the user sees the passages beside the answer (21 stored answers changed, +0.067
    # [+0.020, +0.130] MRR; results/method/passage-copies).
    "drop_passage_copies": True,
}


class MethodOptions(BaseModel):
    """The method options in force, after the profile is applied (see MethodSettings)."""

    grounded_aggregation: bool = False
    aggregation_passages: int = Field(5, ge=1, le=20)
    drop_uninformative: bool = False
    answer_shapes: bool = False
    direct_first: Literal["off", "debate", "all"] = "off"
    question_sub_query: Literal["off", "debate", "all"] = "off"
    length_hint: bool = False
    own_knowledge: Literal["off", "allow", "draft", "draft-cite"] = "off"
    own_knowledge_types: list[str] = Field(default_factory=lambda: list(TYPED_TYPES))
    draft_query: bool = False
    draft_sub_query: bool = False
    resolve_hops: bool = False
    factoid_brief: bool = False
    factoid_sentences: int | None = Field(None, ge=1, le=10)
    factoid_guidance: bool = False
    drop_echo: bool = False
    drop_draft_talk: bool = False
    drop_source_talk: bool = False
    drop_passage_copies: bool = False
    drop_repeats: bool = False
    trim_cut_off: bool = False
    experience_retrieval: Literal["question", "keywords", "both"] = "question"
    experience_rerank: Literal["keywords", "question", "both"] = "keywords"
    core_sub_questions: Literal["off", "definition", "listed"] = "off"
    require_citations: bool = False
    strip_invalid_citations: bool = False
    post_cite: bool = False
    cite_min_share: float = Field(0.3, ge=0.0, le=1.0)
    cite_floor_share: float | None = Field(None, ge=0.0, le=1.0)
    cite_specifics: bool = False
    max_sub_queries: int = Field(5, ge=2, le=5)
    sub_query_style: Literal["aspects", "paraphrase"] = "aspects"
    anchor_sub_queries: bool = False
    sub_answers: Literal["generate", "extract"] = "generate"
    mediator_labels: Literal["responses", "perspectives"] = "responses"
    debate_route: Literal["mediator", "reason"] = "mediator"

    @model_validator(mode="after")
    def _floor_below_min_share(self) -> MethodOptions:
        """A floor at or above ``cite_min_share`` cites nothing more: recorded as off, so
        a run made without one resumes under a profile that has one."""
        if self.cite_floor_share is not None and self.cite_floor_share >= self.cite_min_share:
            self.cite_floor_share = None
        return self


# The options that act on one route's answers only (the factoid route's in pipelines.plain.
# answer_factoid and finishing, DEBATE's in routing.answered_as): ``eval splice`` moves a
# run to one of them by re-answering that route.
ROUTE_ONLY: dict[str, tuple[str, ...]] = {
    "FACTOID": ("draft_query", "factoid_brief", "factoid_guidance", "factoid_sentences"),
    "DEBATE": ("debate_route",),
}


class MethodSettings(BaseModel):
    """How the typed pipelines plan, aggregate and answer (issues 14, 15).

    The default profile is ``fast`` (measured against the paper's pipeline on the
    paired Wiki-NFQA run: no loss, 5.6x the throughput); ``paper`` is the paper's.

    Each option is None until set, so a ``profile`` fills only what was not set
    explicitly: ``--set method.profile=improved --set method.answer_shapes=false``
    is the improved set without answer shapes. Read them with :meth:`options`.
    They change typed-rag answers only; the ``rag`` and ``llm`` baselines keep
    the paper's prompts.
    """

    profile: Literal["paper", "improved", "fast"] = "fast"
    # 1. The aggregator / debate mediator also see the best passages (global [n])
    #    and are told to drop sub-answer claims that no passage supports.
    grounded_aggregation: bool | None = None
    aggregation_passages: int | None = Field(None, ge=1, le=20)  # how many passages they see
    # 2. Sub-answers without information (empty, restating the query, "no
    #    information", only references) are left out of aggregation (trace: dropped).
    drop_uninformative: bool | None = None
    # 3. Per-type answer shapes in the final prompt (steps, point by point, ...).
    answer_shapes: bool | None = None
    # The final answer opens with one sentence that answers the question directly, before
    # its shape: for DEBATE ("debate") or every typed pipeline ("all"). A perspectives
    # answer to a question typed DEBATE that asks for a fact otherwise buries the fact.
    direct_first: Literal["off", "debate", "all"] | None = None
    # The question itself is searched and answered as one more perspective (DEBATE:
    # "debate") or also as one more sub-query (REASON, INSTRUCTION: "all"), first in the
    # list: sub-queries that drift off the question still leave the final step what
    # the question's own passages say.
    question_sub_query: Literal["off", "debate", "all"] | None = None
    # The final prompt states the answer's length budget (about half a word per token of
    # ``sampling.max_tokens``): a long shaped answer otherwise runs into the cap and loses
    # its ending, for a DEBATE answer its conclusion.
    length_hint: bool | None = None
    # The closed-book LLM baseline scores above plain RAG on Wiki-NFQA: off-topic passages
    # cost more than they give a small model. "allow": the final prompt says to ignore what
    # is not about the question and to answer what the passages leave open from the model's
    # own knowledge. "draft": that, plus one extra call writes a closed-book answer first
    # (the LLM baseline's prompt), which the final prompt is given to correct and complete.
    # "draft-cite": the same draft, but the final prompt is told to state what the references
    # confirm in their words with their [n] (a draft's memory content cites nothing).
    own_knowledge: Literal["off", "allow", "draft", "draft-cite"] | None = None
    # ... for the questions of these types only (default: every typed pipeline's).
    own_knowledge_types: list[str] | None = None
    # The factoid route writes its draft before retrieval and searches with the question
    # plus the draft's first words, so the passages shown are the ones that can confirm or
    # correct the draft (query2doc / RARR). No extra call: the draft is written anyway.
    draft_query: bool | None = None
    # REASON / INSTRUCTION, when their type gets a draft: the draft is written before
    # retrieval and the question plus its first words is searched as one more sub-query.
    # A multi-hop question ("Why did Roncalli leave the city where the creator of Flora
    # died?") names neither bridge (Titian, Venice); the draft from memory often does.
    draft_sub_query: bool | None = None
    # REASON and INSTRUCTION: a question that names its subject only through a chain of
    # descriptions ("the city where the creator of Flora died") is first written as a chain
    # of simple questions; each link but the last is searched and answered in a few words,
    # and the names found join the searches and the aggregator's pairs (pipelines.hops).
    resolve_hops: bool | None = None
    # The factoid route's final prompt asks for a brief answer (the answer first, in one
    # to three sentences): its answers ran to twice the closed-book draft's length, and a
    # small model that goes on to reason step by step contradicts its own first sentence.
    # Measured on 48 fresh factual questions: no gain (results/method/factoid-brief).
    factoid_brief: bool | None = None
    # ... or, after the fact, keeps only its first this many sentences (None: all): what a
    # small model adds after a factual answer is mostly unasked-for detail and meta-talk
    # about its draft ("The draft answer is correct."). Measured: it costs answer quality.
    factoid_sentences: int | None = Field(None, ge=1, le=10)
    # The factoid route's final prompt gets the guidance the typed pipelines' final prompts
    # get (core sub-questions, the citation rule, as set): a factual answer too is judged
    # on what it covers, and the factoid route's answers are the ones that cite least.
    # Measured: answer quality level, more answers citing (on in the fast profile).
    factoid_guidance: bool | None = None
    # A typed-rag answer loses the prompt sections the model copied into it: an answer that
    # opens by copying the prompt keeps what follows its "### Answer" heading, and one that
    # goes on into a copied "References" (made-up entries) or "### How to write the answer"
    # (the prompt's own instructions) ends before it (trace: ``unechoed``; not a streamed
    # answer). Issue 15 names copied headings as a fault of the answers. Measured on the 25
    # distinct stored answers it changes: +0.060 MRR [+0.023, +0.094], 21 better
    # (results/method/drop-echo).
    drop_echo: bool | None = None
    # A typed-rag answer written from a closed-book draft loses its sentences about "the
    # draft answer" ("The draft answer was incorrect."), which the user never saw (trace:
    # ``undrafted``; not a streamed answer).
    drop_draft_talk: bool | None = None
    # A typed-rag answer loses its sentences about its sources rather than its subject
    # ("This can be found in references [1] and [3].", "This answer directly addresses the
    # question."): typed_rag.finishing.source_talk (trace: ``unsourced``; not a streamed answer).
    drop_source_talk: bool | None = None
    # A typed-rag answer loses the paragraphs after its first that copy a shown passage the
    # way the prompt lists it ("[3] Malta, a Southern European island ..."), and the "...
    # the following references:" line before them (trace: ``uncopied``; not streamed).
    drop_passage_copies: bool | None = None
    # A typed-rag answer says each repeated sentence once: a long one written again, or a
    # short one written three times or more, as a small model's loops do ("- [1] 6 days",
    # "- [2] 6 days", ...) (trace: ``unrepeated``; not streamed).
    drop_repeats: bool | None = None
    # A typed-rag answer that ``sampling.max_tokens`` cut off ends at its last complete
    # sentence (trace: ``trimmed``) instead of mid-word (not a streamed answer).
    trim_cut_off: bool | None = None
    # 4. EXPERIENCE retrieves with the question (current), the keywords (paper 3.3) or both.
    experience_retrieval: Literal["question", "keywords", "both"] | None = None
    # ... and reranks that pool against the keywords (paper 3.3), the question, or the
    # question followed by the keywords: a keyword string alone drops what the question
    # asks about the entities ("Why I Write" + "English novelist" finds Jane Austen).
    # Measured on the development pool: no gain over the keywords (docs/method-options.md).
    experience_rerank: Literal["keywords", "question", "both"] | None = None
    # 5. Core sub-questions in the final prompt: "definition" (Xie et al. M1: the
    #    generator is told to work out and cover them; no extra call) or "listed"
    #    (M2: one extra plan call lists them and the prompt names them).
    core_sub_questions: Literal["off", "definition", "listed"] | None = None
    # 6. The final prompt requires [n] citations of shown passages; invalid numbers
    #    are always recorded in the trace, and removed from the answer when set
    #    (not from a streamed answer, which is already sent).
    require_citations: bool | None = None
    strip_invalid_citations: bool | None = None
    # After the fact, an uncited sentence of a typed-rag answer gets the [n] of the
    # shown passage sharing most of its words (ALCE's post-hoc citing; not streamed),
    # when that passage shares at least ``cite_min_share`` of them; a cited sentence
    # whose passages all share less loses those numbers.
    post_cite: bool | None = None
    cite_min_share: float | None = Field(None, ge=0.0, le=1.0)
    # ... and an answer that leaves post-citing with no citation cites its single best
    # sentence-passage match when that passage shares at least this much (None: off).
    cite_floor_share: float | None = Field(None, ge=0.0, le=1.0)
    # ... and a passage is cited for a sentence only if it also names the sentence's
    # numbers and names (typed_rag.finishing.citations.specifics).
    cite_specifics: bool | None = None
    # 7. At most this many sub-queries / debate perspectives (2-5), and their wording:
    #    single "aspects" of the question, or the paper's "paraphrase"s of it.
    max_sub_queries: int | None = Field(None, ge=2, le=5)
    sub_query_style: Literal["aspects", "paraphrase"] | None = None
    # A sub-query that shares almost no words with the question ("what was the bill
    # about?") is searched and answered with the question attached.
    anchor_sub_queries: bool | None = None
    # 8. Sub-answers (reason/instruction sub-queries, debate perspectives): "generate"
    #    one RAG answer each (the paper), or "extract" the sentences of each one's
    #    passages that best match it, with their [n] (no engine call; see
    #    typed_rag.finishing.subanswers.extract_evidence).
    sub_answers: Literal["generate", "extract"] | None = None
    # How the DEBATE mediator's prompt lists the perspectives' answers: numbered
    # "Response 1 (perspective: X)" lines (the paper's "responses"), or each under its
    # perspective's name ("perspectives"). The 1.5B model copies the numbered labels into
    # its answer ("Response 1 (perspective: lettuce cultivation) states ..." in 29 of 41
    # headline DEBATE answers), labels the user never saw. Measured on those 41 questions:
    # -0.069 MRR [-0.121, -0.020] (it copies the prompt's layout instead), so not kept.
    mediator_labels: Literal["responses", "perspectives"] | None = None
    # Which pipeline answers a DEBATE question: the paper's perspectives and mediator, or
    # REASON's (sub-queries, the closed-book draft where REASON gets one, the aggregator),
    # the question then answered as REASON throughout (trace: ``routed_type``). Wiki-NFQA's
    # DEBATE questions mostly ask for a fact or an explanation ("what are the main
    # objectives of labor unions"), which a 1.5B mediator splits into sides ("Main
    # Perspective 1: Friendship"). Measured (results/method/debate-as-reason): +0.085
    # [+0.037, +0.129] on 28 fresh questions, +0.000 [-0.064, +0.064] on the headline's 28
    # DEBATE-route ones, at 1.8x the time: not kept.
    debate_route: Literal["mediator", "reason"] | None = None

    @field_validator("own_knowledge_types", mode="before")
    @classmethod
    def _known_types(cls, value: object) -> object:
        return parse_type_list(value)

    def options(self) -> MethodOptions:
        """Explicit values, else the profile's, else the paper's defaults."""
        chosen = dict(METHOD_PROFILES[self.profile])
        chosen.update(
            {k: v for k, v in self.model_dump(exclude={"profile"}).items() if v is not None}
        )
        return MethodOptions.model_validate(chosen)
