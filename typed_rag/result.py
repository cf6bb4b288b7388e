"""The answer and its trace: what was decided, retrieved and generated, and at what cost.

It is a pydantic model so the server can send it as the ``typed_rag`` object
and the evaluation can store it as one JSON line.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, Field, computed_field


class CitedPassage(BaseModel):
    """A passage shown to the model, with the number the answer cites it by."""

    citation: int
    id: str
    title: str
    text: str
    score: float
    rerank_score: float | None = None
    query: str | None = None  # the (sub-)query that retrieved it
    # A document collection's passage: its file, page (1-based, PDF) and section heading;
    # None for the Wikipedia default.
    source: str | None = None
    page: int | None = None
    section: str | None = None

    @property
    def snippet(self) -> str:
        return self.text[:240]


class LLMCall(BaseModel):
    """One engine call: which step made it, in which round, what it cost and what it said.

    ``text`` is the engine's raw output (the closed-book draft's too), so an answer that
    drifts from its passages can be traced to the call that brought the drift in.
    """

    step: str  # e.g. "plan", "sub-answer", "aggregate", "answer"
    round: int
    prompt_tokens: int = 0
    completion_tokens: int = 0
    latency_s: float = 0.0
    ok: bool = True
    text: str = ""


class SubAnswer(BaseModel):
    """An intermediate answer: to a sub-query (reason/instruction) or a perspective (debate)."""

    query: str
    answer: str
    perspective: str | None = None
    citations: list[int] = Field(default_factory=list)
    passages: list[int] = Field(default_factory=list)  # citation numbers shown to it
    # Why it was left out of aggregation (``method.drop_uninformative``), e.g.
    # "restates-query"; None when it was used.
    dropped: str | None = None


UnverifiedKind = Literal["spans", "words", "instruction", "support"]


class Unverified(BaseModel):
    """An answer sentence stating spans (commands, options, file names, numbers) that no
    shown passage holds, or an uncited one whose words none holds (``kind`` "words"), or one
    copying a prompt instruction (``kind`` "instruction", ``missing`` the copied words;
    typed_rag.finishing.verify), or a cited one the passages it cites do not support
    (``kind`` "support", with the model's best P(supported); typed_rag.pipelines.support)."""

    sentence: str
    missing: list[str]
    kind: UnverifiedKind = "spans"
    p_supported: float | None = None
    removed: bool = False  # method.drop_unshown_spans took it out of the answer
    recited: int | None = None  # support: the shown passage that supports it, now cited


class Result(BaseModel):
    """Everything Typed-RAG did for one question."""

    question: str
    mode: str  # "typed-rag" | "rag" | "llm"
    answer: str = ""
    # "stop", or "length" when max_tokens cut the final answer.
    finish_reason: str = "stop"
    # The cut-off answer was ended at its last complete sentence (method.trim_cut_off).
    trimmed: bool = False
    # Prompt sections copied into the answer were dropped (method.drop_echo).
    unechoed: bool = False
    # Sentences about "the draft answer" were dropped (method.drop_draft_talk).
    undrafted: bool = False
    # Paragraphs copying a shown passage were dropped (method.drop_passage_copies).
    uncopied: bool = False
    # Talk about the pipeline ("Perspective 1", "the references provided") was rewritten or
    # dropped (typed_rag.finishing.scaffolding; method.drop_scaffolding, every mode, streamed
    # answers a sentence at a time). ``scaffolding`` names the kinds found, also when off.
    unscaffolded: bool = False
    scaffolding: list[str] = Field(default_factory=list)
    # Sentences whose spans no shown passage holds: recorded in every mode, streamed answers
    # too; removed from a typed-rag answer under method.drop_unshown_spans.
    unverified: list[Unverified] = Field(default_factory=list)
    # A streamed answer over documents, as it was sent, when its checks (finished as the
    # same request unstreamed would be) changed it; ``answer`` is then the checked text.
    streamed_answer: str | None = None
    # What the passages were searched in: "wikipedia", or "documents" (a user's collection),
    # which typed-rag routes and guides differently (typed_rag.routing.ROUTES).
    corpus: str = "wikipedia"
    # A follow-up rewritten from its conversation: {"question": the standalone
    # question, "rewritten": bool, ...}. None: the request had no earlier turns.
    rewrite: dict[str, Any] | None = None
    type: str | None = None  # QuestionType value used to pick the pipeline
    predicted_type: str | None = None  # what the classifier said (may differ if unsure/forced)
    probabilities: dict[str, float] = Field(default_factory=dict)
    type_source: str = "classifier"  # "classifier" | "forced" | "low-confidence-default" | "none"
    plan: dict[str, Any] = Field(default_factory=dict)
    # Coverage constraints found in the question: core question, include,
    # exclude, and what they dropped from or added to the plan. None: not asked.
    constraints: dict[str, Any] | None = None
    sub_answers: list[SubAnswer] = Field(default_factory=list)
    passages: list[CitedPassage] = Field(default_factory=list)
    calls: list[LLMCall] = Field(default_factory=list)
    fallbacks: list[str] = Field(default_factory=list)
    # The final answer's citation numbers that point at a shown passage (in
    # ``passages``), and those that do not (removed from ``answer`` when
    # ``method.strip_invalid_citations`` is set); see typed_rag.finishing.citations.
    citations: list[int] = Field(default_factory=list)
    invalid_citations: list[int] = Field(default_factory=list)
    # Numbers ``method.post_cite`` added to uncited sentences, and removed from
    # sentences whose passage shares too few of their words.
    added_citations: list[int] = Field(default_factory=list)
    dropped_citations: list[int] = Field(default_factory=list)
    timings: dict[str, float] = Field(default_factory=dict)

    @computed_field  # type: ignore[prop-decorator]
    @property
    def rounds(self) -> int:
        return max((c.round for c in self.calls), default=0)

    @computed_field  # type: ignore[prop-decorator]
    @property
    def prompt_tokens(self) -> int:
        return sum(c.prompt_tokens for c in self.calls)

    @computed_field  # type: ignore[prop-decorator]
    @property
    def completion_tokens(self) -> int:
        return sum(c.completion_tokens for c in self.calls)
