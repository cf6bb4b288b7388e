"""The method options of the typed pipelines: one declaration each, and the two profiles.

``paper`` is the paper's pipeline (every option at its field default); ``fast``, the
default, turns on what was measured to help on the paired Wiki-NFQA runs
(``docs/experiments.md`` records every option tried, kept or not). An explicit value wins
over the profile's: ``--set method.answer_shapes=false`` is ``fast`` without answer shapes.
They change typed-rag answers only; the ``rag`` and ``llm`` baselines keep the paper's
prompts.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, Field, create_model, field_validator, model_validator

from typed_rag.types import TYPED_TYPES, parse_type_list


class MethodOptions(BaseModel):
    """The method options in force, after the profile is applied. Field defaults are the
    paper's pipeline; each description says what the option changes."""

    drop_uninformative: bool = Field(
        False,
        description="Sub-answers that say nothing (empty, restating the query, 'no "
        "information') are left out of aggregation (trace: dropped).",
    )
    answer_shapes: bool = Field(
        False, description="Per-type answer shapes in the final prompt (steps, point by point)."
    )
    own_knowledge: Literal["off", "draft"] = Field(
        "off",
        description="'draft': one extra call writes a closed-book answer first, which the "
        "final prompt is given to correct and complete from the passages.",
    )
    own_knowledge_types: list[str] = Field(
        default_factory=lambda: list(TYPED_TYPES),
        description="The question types own_knowledge applies to.",
    )
    rag_types: list[str] = Field(
        default_factory=list,
        description="Typed types that typed-rag answers with plain RAG over Wikipedia: their "
        "own pipeline lost to RAG on the paired development runs (docs/method.md).",
    )
    factoid_guidance: bool = Field(
        False,
        description="The factoid route's final prompt gets the typed pipelines' guidance "
        "and citation rule.",
    )
    drop_echo: bool = Field(
        False,
        description="Prompt sections the model copied into its answer are cut "
        "(trace: unechoed; not a streamed answer).",
    )
    drop_draft_talk: bool = Field(
        False,
        description="Sentences about 'the draft answer', which the user never saw, are cut "
        "(trace: undrafted; not streamed).",
    )
    drop_passage_copies: bool = Field(
        False,
        description="Paragraphs that copy a shown passage as the prompt lists it are cut "
        "(trace: uncopied; not streamed).",
    )
    drop_scaffolding: bool = Field(
        False,
        description="Talk about the pipeline ('Perspective 1', 'the references provided') is "
        "rewritten away or dropped (typed_rag.finishing.scaffolding; trace: unscaffolded; not "
        "streamed): leak share 11.0% -> 0.3% (typed-rag), 8.1% -> 0.3% (RAG); the judge's "
        "small loss on the changed answers is what it pays for such talk on graded answers "
        "(results/method/scaffolding).",
    )
    drop_unshown_spans: bool = Field(
        False,
        description="Over a user's documents, sentences stating a command, option, file "
        "name, identifier or number that no shown passage holds are removed "
        "(typed_rag.finishing.verify; trace: unverified, recorded in every mode; a streamed "
        "answer is checked after it is sent: typed_rag.checked_answer).",
    )
    support_check: bool = Field(
        False,
        description="Over a user's documents, every cited sentence is asked against the "
        "passages it cites (one forward pass each, typed_rag.pipelines.support) and removed "
        "when none supports it, or re-cited when another shown passage does (trace: "
        "unverified, kind support; a streamed answer is checked after it is sent: "
        "typed_rag.checked_answer).",
    )
    trim_cut_off: bool = Field(
        False,
        description="An answer cut by max_tokens ends at its last complete sentence "
        "(trace: trimmed; not streamed).",
    )
    experience_retrieval: Literal["question", "both"] = Field(
        "question",
        description="EXPERIENCE retrieves with the question, or with the question and its "
        "keywords.",
    )
    core_sub_questions: Literal["off", "definition"] = Field(
        "off",
        description="'definition': the final prompt tells the generator to work out and "
        "cover the question's core sub-questions (Xie et al. M1).",
    )
    require_citations: bool = Field(
        False, description="The final prompt requires [n] citations of shown passages."
    )
    strip_invalid_citations: bool = Field(
        False, description="Citation numbers of passages not shown are removed (not streamed)."
    )
    post_cite: bool = Field(
        False,
        description="An uncited sentence gets the [n] of the shown passage sharing most of "
        "its words (ALCE's post-hoc citing; not streamed).",
    )
    cite_min_share: float = Field(
        0.3, ge=0.0, le=1.0, description="post_cite: share of words a cited passage must share."
    )
    cite_floor_share: float | None = Field(
        None,
        ge=0.0,
        le=1.0,
        description="post_cite: an answer left uncited cites its best sentence-passage match "
        "above this share (None: off).",
    )
    max_sub_queries: int = Field(
        5, ge=2, le=5, description="At most this many sub-queries or debate perspectives."
    )
    anchor_sub_queries: bool = Field(
        False,
        description="A sub-query sharing almost no words with the question is searched and "
        "answered with the question attached.",
    )
    sub_answers: Literal["generate", "extract"] = Field(
        "generate",
        description="Sub-answers: one RAG answer each (the paper), or the sentences of each "
        "one's passages that best match it (no engine call).",
    )

    @field_validator("own_knowledge_types", "rag_types", mode="before")
    @classmethod
    def _known_types(cls, value: object) -> object:
        return parse_type_list(value)

    @model_validator(mode="after")
    def _floor_below_min_share(self) -> MethodOptions:
        """A floor at or above ``cite_min_share`` cites nothing more: recorded as off, so
        a run made without one resumes under a profile that has one."""
        if self.cite_floor_share is not None and self.cite_floor_share >= self.cite_min_share:
            self.cite_floor_share = None
        return self


METHOD_PROFILES: dict[str, dict[str, Any]] = {
    "paper": {},
    # Each value measured paired against the paper's pipeline (docs/experiments.md).
    "fast": {
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
        "sub_answers": "extract",
        "own_knowledge": "draft",
        # REASON answers copied their closed-book draft, wrong facts included (issue 79;
        # results/method/reason-draft-off/): only the factoid route drafts.
        "own_knowledge_types": ["FACTOID"],
        "drop_draft_talk": True,
        "factoid_guidance": True,
        "drop_passage_copies": True,
        "drop_scaffolding": True,
        "drop_unshown_spans": True,
        "rag_types": ["DEBATE"],
        "support_check": True,
    },
}

# Options that left the code after they were measured not to help, at the value every run
# made with the current code had (an old run's fingerprint may record them at that value).
RETIRED_OPTIONS: dict[str, Any] = {
    "grounded_aggregation": False,
    "aggregation_passages": 5,
    "direct_first": "off",
    "question_sub_query": "off",
    "length_hint": False,
    "draft_query": False,
    "draft_sub_query": False,
    "resolve_hops": False,
    "factoid_brief": False,
    "factoid_sentences": None,
    "drop_source_talk": False,
    "drop_repeats": False,
    "experience_rerank": "keywords",
    "cite_specifics": False,
    "sub_query_style": "aspects",
    "mediator_labels": "responses",
    "debate_route": "mediator",
}

# The options that act on one route's answers only (the factoid route's in
# pipelines.plain.answer_factoid): ``eval splice`` moves a run to one of them by
# re-answering that route.
ROUTE_ONLY: dict[str, tuple[str, ...]] = {"FACTOID": ("factoid_guidance",)}


class _MethodSettingsBase(BaseModel):
    profile: Literal["paper", "fast"] = Field(
        "fast",
        description="The method options' starting values: 'fast' (the default: what was measured "
        "to help) or 'paper' (the paper's pipeline); an explicit option overrides its value.",
    )

    @field_validator("own_knowledge_types", "rag_types", mode="before", check_fields=False)
    @classmethod
    def _known_types(cls, value: object) -> object:
        return parse_type_list(value)

    @model_validator(mode="after")
    def _valid_options(self) -> _MethodSettingsBase:
        """Check the options in force now, so a bad value fails where it is set."""
        self.options()
        return self

    def options(self) -> MethodOptions:
        """Explicit values, else the profile's, else the paper's defaults."""
        chosen = dict(METHOD_PROFILES[self.profile])
        chosen.update(
            {k: v for k, v in self.model_dump(exclude={"profile"}).items() if v is not None}
        )
        return MethodOptions.model_validate(chosen)


# ``method.*`` as a user sets it: the profile, and each option of MethodOptions (the one
# declaration) unset (None) until given, so the profile fills what was not set explicitly.
MethodSettings = create_model(  # type: ignore[call-overload]
    "MethodSettings",
    __base__=_MethodSettingsBase,
    __doc__="How the typed pipelines plan, aggregate and answer: a profile plus overrides.",
    **{
        name: (field.annotation | None, Field(None, description=field.description))
        for name, field in MethodOptions.model_fields.items()
    },
)
